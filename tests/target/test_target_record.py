"""The target flows one way: the compile's CPU, feature switches and NPU are in the program's
TARGET record, and firmware builds and export-c take them from there (a stripped program has no
metadata to help), never from the board's CPU or a guess."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
import torch
from torch import nn

import mcutorch
from mcutorch.cli import main
from mcutorch.device import firmware
from mcutorch.device.export_c import export_c
from mcutorch.errors import TargetError
from mcutorch.program import Program

pytestmark = pytest.mark.qemu


def tiny(target: str, board: str | None = None):
    """conv -> relu -> max pool -> linear, compiled for `target`; returns (model, int8 input)."""
    torch.manual_seed(3)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(8 * 4 * 4, 5)).eval()
    x = torch.randn(1, 3, 8, 8)
    cm = mcutorch.compile(mcutorch.quantize(model, (x,), calibration=[x]), (x,), target=target,
                          board=board)
    return cm, cm.quantize_inputs([x])


def stripped(cm) -> Program:
    """The program as a device gets it: METADATA keeps only the model boundary (io), so no
    options.target to guess from; read back."""
    p = Program.from_bytes(cm.program.stripped().to_bytes())
    assert set(p.metadata or {}) <= {"io"}
    return p


def arm_attributes(path) -> str:
    tool = shutil.which("arm-none-eabi-readelf")
    if tool is None:
        pytest.fail("arm-none-eabi-readelf not found: run `make toolchain`")
    return subprocess.run([tool, "-A", str(path)], capture_output=True, text=True,
                          check=True).stdout


def test_stripped_nofp_program_builds_soft_float_firmware_and_runs_bit_exact(tmp_path):
    cm, q = tiny("cortex-m4+nofp", board="mps2-an386")
    p = stripped(cm)
    assert p.target.name == "cortex-m4+nofp" and p.target.as_target().float_abi == "soft"
    soft = arm_attributes(firmware.build(p, "mps2-an386", out=tmp_path / "nofp.elf"))
    assert "Tag_ABI_VFP_args" not in soft and "Tag_FP_arch" not in soft, soft  # soft-float ABI
    hard = arm_attributes(firmware.build(stripped(tiny("cortex-m4", board="mps2-an386")[0]),
                                         "mps2-an386", out=tmp_path / "fp.elf"))
    assert "Tag_ABI_VFP_args: VFP registers" in hard, hard  # the same CPU with its FPU
    want = cm.run_int8(q)
    run = firmware.run(p, q, "mps2-an386")
    assert all(np.array_equal(a, b) for a, b in zip(run.outputs, want))
    run = firmware.run(p, q, "mps2-an386", elf=tmp_path / "nofp.elf")  # a given ELF: checked too
    assert all(np.array_equal(a, b) for a, b in zip(run.outputs, want))


def test_the_record_not_the_metadata_decides_the_firmware(tmp_path):
    """A program whose metadata names another target is still built for its TARGET record."""
    cm, q = tiny("cortex-m55+nomve", board="mps3-an547")
    p = Program.from_bytes(cm.program.to_bytes())
    p.metadata["options"]["target"] = "cortex-m55"  # stale or edited: not what is read
    attrs = arm_attributes(firmware.build(p, "mps3-an547", out=tmp_path / "nomve.elf"))
    assert "Tag_MVE_arch" not in attrs and "Tag_DSP_extension: Allowed" in attrs, attrs
    run = firmware.run(p, q, "mps3-an547", elf=tmp_path / "nomve.elf")
    assert all(np.array_equal(a, b) for a, b in zip(run.outputs, cm.run_int8(q)))


def test_a_board_that_cannot_run_the_recorded_target_is_refused():
    cm, q = tiny("cortex-m55+nomve")
    p = stripped(cm)
    with pytest.raises(TargetError, match="mps2-an505 .* cannot run cortex-m55\\+nomve"):
        firmware.build(p, "mps2-an505")
    with pytest.raises(TargetError, match="cannot run"):
        firmware.run(p, q, "mps2-an386")
    with pytest.raises(TargetError, match="cannot run cortex-m4\\+nofp"):
        mcutorch.compile(nn.Linear(4, 2).eval(), (torch.randn(1, 4),), target="cortex-m4+nofp",
                         board="mps2-an385")


def test_export_c_of_a_nomve_program_uses_no_mve_flags(tmp_path):
    cm, _ = tiny("cortex-m55+nomve", board="mps3-an547")
    mtp = tmp_path / "m.mtp"
    mtp.write_bytes(cm.program.stripped().to_bytes())
    out = tmp_path / "out"
    assert main(["export-c", str(mtp), "-o", str(out)]) == 0  # no --target
    flags = "-mcpu=cortex-m55+nomve -mthumb -mfloat-abi=hard"
    assert f"CPU_FLAGS ?= {flags}\n" in (out / "Makefile").read_text()
    assert f'set(MCUTORCH_CPU_FLAGS "{flags}"' in (out / "CMakeLists.txt").read_text()
    r = subprocess.run(["make", "-C", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    attrs = arm_attributes(out / "model.elf")
    assert "Tag_MVE_arch" not in attrs and "Tag_ABI_VFP_args: VFP registers" in attrs, attrs
    # what the same model for the plain M55 gets: MVE
    cm55, _ = tiny("cortex-m55")
    export_c(cm55.program, tmp_path / "mve")
    assert "CPU_FLAGS ?= -mcpu=cortex-m55 -mthumb" in (tmp_path / "mve" / "Makefile").read_text()


def test_export_c_target_must_be_the_programs(tmp_path, capsys):
    cm, _ = tiny("cortex-m55+nomve")
    mtp = cm.save(tmp_path / "m.mtp")
    for ok in ("cortex-m55+nomve", "m55+nomve", "CM55+NOMVE"):
        assert main(["export-c", str(mtp), "--target", ok, "-o", str(tmp_path / ok)]) == 0
    for wrong in ("cortex-m55", "cortex-m85+nomve", "cortex-m55+nomve+ethos-u55-128"):
        out = tmp_path / f"x-{wrong}"
        assert main(["export-c", str(mtp), "--target", wrong, "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert "compiled for cortex-m55+nomve, not" in err and "recompile" in err, err
        assert not out.exists()  # refused before anything is written
    npu, _ = tiny("cortex-m55+ethos-u55-128")
    export_c(npu.program, tmp_path / "npu", target="cortex-m55")  # the NPU adds no gcc flag
    with pytest.raises(TargetError, match="not cortex-m55\\+ethos-u55-256"):
        export_c(npu.program, tmp_path / "npu2", target="cortex-m55+ethos-u55-256")
    cm4, _ = tiny("cortex-m4+nofp")
    export_c(cm4.program, tmp_path / "m4", target="m4+nofp")
    assert "-mfloat-abi=soft" in (tmp_path / "m4" / "Makefile").read_text()
    with pytest.raises(TargetError, match="compiled for cortex-m4\\+nofp, not cortex-m4:"):
        export_c(cm4.program, tmp_path / "m4b", target="cortex-m4")


def test_firmware_builds_are_reproducible(tmp_path):
    """The same program, board and options give byte-identical firmware, wherever it is built
    (the temporary folder of the generated kernel table stays out of the debug info)."""
    cm, _ = tiny("cortex-m55")
    elfs = [firmware.build(cm.program, "mps3-an547", out=tmp_path / name / "model.elf")
            for name in ("a", "b")]
    assert elfs[0].read_bytes() == elfs[1].read_bytes()
