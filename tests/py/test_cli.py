"""The `mcutorch` command and the demo, as a user runs them."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

from mcutorch.cli import main

MODEL_FILE = '''
import torch
from torch import nn

def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(4, 3)).eval()

def example_inputs():
    return (torch.zeros(1, 1, 6, 6),)

def calibration():
    g = torch.Generator().manual_seed(1)
    return [torch.randn(1, 1, 6, 6, generator=g) for _ in range(4)]
'''


def test_compile_run_inspect(tmp_path, capsys):
    src = tmp_path / "tiny.py"
    src.write_text(MODEL_FILE)
    mtp = tmp_path / "tiny.mtp"
    assert main(["compile", str(src), "--target", "cortex-m4", "-o", str(mtp)]) == 0
    assert "ops" in capsys.readouterr().out
    x = np.random.default_rng(0).standard_normal((1, 1, 6, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(mtp), "--input", str(tmp_path / "x.npy"),
                 "--output", str(tmp_path / "y.npy")]) == 0
    y = np.load(tmp_path / "y.npy")
    assert y.shape == (1, 3)
    import mcutorch

    assert np.array_equal(y, mcutorch.load(mtp).run(torch.from_numpy(x)).numpy())
    capsys.readouterr()
    assert main(["inspect", str(mtp), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert [op["op"] for op in info["ops"]] == ["conv2d", "avg_pool2d", "fully_connected"]
    assert info["total_macs"] == 6 * 6 * 4 * 9 + 4 * 3 and info["target"]["isa"] == "dsp"
    assert main(["inspect", str(mtp)]) == 0
    assert "memory plan" in capsys.readouterr().out


def test_calibration_npz_overrides(tmp_path, capsys):
    src = tmp_path / "tiny.py"
    src.write_text(MODEL_FILE)
    np.savez(tmp_path / "cal.npz", x=np.ones((3, 1, 6, 6), np.float32))
    mtp = tmp_path / "a.mtp"
    assert main(["compile", str(src), "--calibration", str(tmp_path / "cal.npz"),
                 "-o", str(mtp)]) == 0


def test_errors_are_one_line_not_tracebacks(tmp_path, capsys):
    assert main(["compile", str(tmp_path / "missing.py")]) == 2
    assert "does not exist" in capsys.readouterr().err
    bad = tmp_path / "bad.mtp"
    bad.write_bytes(b"MCUT" + bytes(60))
    assert main(["inspect", str(bad)]) == 2
    assert "mcutorch: error:" in capsys.readouterr().err
    assert main(["compile", str(tmp_path / "x.py"), "--target", "cortex-m99"]) == 2


def test_demo_int8_accuracy_within_one_point(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    try:
        import digits_demo
    finally:
        sys.path.pop(0)
    result = digits_demo.main(["--out", str(tmp_path / "digits.mtp")])
    assert result["float_acc"] > 0.9
    assert abs(result["float_acc"] - result["int8_acc"]) <= 0.01
