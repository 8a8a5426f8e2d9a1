"""Worst-case stack from gcc's call graph (mcutorch.device.stack), reported by build/export-c."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import mcutorch
from mcutorch.cli import main
from mcutorch.device.stack import program_stack, stack_usage
from mcutorch.errors import ToolchainError

pytestmark = pytest.mark.qemu


def tiny(target: str):
    torch.manual_seed(4)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(),
                          nn.Linear(8 * 6 * 6, 4), nn.Softmax(-1)).eval()
    x = torch.randn(1, 3, 6, 6)
    return mcutorch.compile(mcutorch.quantize(model, (x,), calibration=[x]), (x,), target=target)


@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m4", "cortex-m0plus"])
def test_program_stack_follows_the_kernel_table(target):
    report = program_stack(tiny(target).program)
    assert report.chain[0] == "mt_invoke"  # the kernel through the table, from the op loop
    assert report.chain[1] in {"mt_conv2d_s8", "mt_fully_connected_folded_s8", "mt_softmax_s8"}
    assert set(report.per_entry) == {"mt_load", "mt_bind_state", "mt_bind_static", "mt_invoke"}
    assert report.bytes == max(report.per_entry.values()) > 1000  # conv2d keeps ~1 KiB on stack


def test_build_and_export_c_report_it(tmp_path, capsys):
    cm = tiny("cortex-m55")
    cm.save(tmp_path / "m.mtp")
    report = program_stack(cm.program)
    assert main(["build", str(tmp_path / "m.mtp"), "--board", "mps3-an547",
                 "-o", str(tmp_path / "m.elf")]) == 0
    assert f"at most {report.bytes:,} B (mt_invoke -> mt_" in capsys.readouterr().out
    assert main(["export-c", str(tmp_path / "m.mtp"), "-o", str(tmp_path / "out")]) == 0
    config = (tmp_path / "out" / "m_config.h").read_text()  # named after m.mtp
    assert f"#define M_STACK_BYTES {report.bytes}u" in config


def test_recursion_and_dynamic_frames_are_refused(tmp_path):
    rec = tmp_path / "rec.c"
    rec.write_text("int mt_invoke(int n) { return n ? mt_invoke(n - 1) + 1 : 0; }\n")
    with pytest.raises(ToolchainError, match="recursion through mt_invoke"):
        stack_usage([rec], "cortex-m4", [], opt="-O0", entry_points=["mt_invoke"])
    vla = tmp_path / "vla.c"
    vla.write_text("int g(char *); int mt_invoke(int n) { char b[n]; return g(b); }\n")
    with pytest.raises(ToolchainError, match="dynamic"):
        stack_usage([vla], "cortex-m4", [], entry_points=["mt_invoke"])
