"""`mcutorch export-c` writes a project that builds standalone with arm-none-eabi-gcc."""
from __future__ import annotations

import subprocess

import pytest
import torch
from torch import nn

import mcutorch
from mcutorch.cli import main

pytestmark = pytest.mark.qemu


def test_export_c_builds_standalone(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(8 * 4 * 4, 5), nn.Softmax(-1)).eval()
    x = torch.randn(1, 3, 8, 8)
    program = mcutorch.compile(mcutorch.quantize(model, (x,), calibration=[x]), (x,),
                               target="cortex-m55", board="mps3-an547")
    mtp = program.save(tmp_path / "m.mtp")
    out = tmp_path / "out"
    assert main(["export-c", str(mtp), "-o", str(out)]) == 0
    kernels = sorted(p.name for p in (out / "mcutorch" / "kernels").glob("mt_*_s8.c"))
    assert kernels == ["mt_conv2d_s8.c", "mt_fully_connected_s8.c", "mt_max_pool2d_s8.c",
                       "mt_softmax_s8.c"]  # only what the model uses
    config = (out / "model_config.h").read_text()
    assert "MODEL_ARENA0_SIZE" in config and "DTCM" in config
    r = subprocess.run(["make", "-C", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (out / "model.elf").stat().st_size > 0
    r = subprocess.run(["make", "-C", str(out), "clean", "model.elf",
                        "CPU_FLAGS=-mcpu=cortex-m0plus -mthumb"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
