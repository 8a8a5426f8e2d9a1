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


def test_cli_build_and_run_on_board_with_profiles(tmp_path, capsys):
    import numpy as np

    torch.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
    x = torch.randn(1, 1, 6, 6)
    program = mcutorch.compile(mcutorch.quantize(model.eval(), (x,), calibration=[x]), (x,),
                               target="cortex-m33")
    mtp = program.save(tmp_path / "m.mtp")
    assert main(["build", str(mtp), "--board", "mps2-an505", "-o", str(tmp_path / "m.elf")]) == 0
    assert "runtime core" in capsys.readouterr().out
    np.save(tmp_path / "x.npy", x.numpy())
    args = ["run", str(mtp), "--input", str(tmp_path / "x.npy"), "--board", "mps2-an505",
            "--output", str(tmp_path / "y.npy"), "--profile"]
    assert main(args) == 0
    coarse = capsys.readouterr().out
    assert main(args + ["--exact"]) == 0
    exact = capsys.readouterr().out
    assert "SysTick" in coarse and "exact" in exact and "fully_connected" in exact
    assert np.array_equal(np.load(tmp_path / "y.npy"), program.run(x).numpy())
