"""Calibration data and model parameters: every wrong input is one clear error naming it."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import mcutorch
from mcutorch.cli import main
from mcutorch.errors import QuantizeError

X = torch.zeros(1, 1, 6, 6)


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(2 * 4 * 4, 3)).eval()


def test_empty_calibration_is_an_error():
    with pytest.raises(QuantizeError, match="calibration is empty"):
        mcutorch.quantize(model(), (X,), calibration=[])


def test_nan_and_inf_calibration_are_errors():
    for bad in (float("nan"), float("inf")):
        x = torch.randn(1, 1, 6, 6)
        x[0, 0, 2, 3] = bad
        with pytest.raises(QuantizeError, match="calibration batch 1 has 1 NaN/Inf"):
            mcutorch.quantize(model(), (X,), calibration=[torch.randn(1, 1, 6, 6), x])


def test_wrong_shape_batch_names_index_shape_and_example():
    with pytest.raises(QuantizeError) as err:
        mcutorch.quantize(model(), (X,), calibration=[torch.randn(1, 1, 6, 6),
                                                      torch.randn(1, 1, 5, 5)])
    msg = str(err.value)
    assert "calibration batch 1" in msg and "[1, 1, 5, 5]" in msg and "[1, 1, 6, 6]" in msg
    with pytest.raises(QuantizeError, match="batch 0 has 2 tensors, the model takes 1"):
        mcutorch.quantize(model(), (X,), calibration=[(X, X)])
    with pytest.raises(QuantizeError, match=r"\[1, 6, 6\].*a single tensor iterates over its rows"):
        mcutorch.quantize(model(), (X,), calibration=torch.randn(4, 1, 6, 6))


def test_other_batch_sizes_calibrate():
    qmodel = mcutorch.quantize(model(), (X,), calibration=torch.randn(16, 1, 6, 6).split(8))
    assert mcutorch.compile(qmodel, (X,)).run(torch.randn(1, 1, 6, 6)).shape == (1, 3)


def test_a_batch_the_model_cannot_run_names_it():
    class Fixed(nn.Module):  # view(1, -1): batch 1 only
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(36, 2)

        def forward(self, x):
            return self.fc(x.view(1, -1))

    with pytest.raises(QuantizeError) as err:
        mcutorch.quantize(Fixed().eval(), (X,), calibration=[X, torch.randn(4, 1, 6, 6)])
    msg = str(err.value)
    assert "calibration batch 1 ([4, 1, 6, 6])" in msg and "example inputs [1, 1, 6, 6]" in msg


def test_nan_parameter_is_named():
    m = model()
    with torch.no_grad():
        m[0].weight[1, 0, 2, 2] = float("nan")
    with pytest.raises(QuantizeError, match=r"parameter 0.weight \[2, 1, 3, 3\] has 1 NaN"):
        mcutorch.quantize(m, (X,))
    bn = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2)).eval()
    bn[1].running_var[0] = float("inf")
    with pytest.raises(QuantizeError, match="parameter 1.running_var"):
        mcutorch.quantize(bn, (X,))


MODEL_FILE = '''
import torch
from torch import nn

def model():
    return nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(32, 3)).eval()

def example_inputs():
    return (torch.zeros(1, 1, 6, 6),)
'''


@pytest.mark.parametrize("arrays, words", [
    ({"x": np.zeros((0, 1, 6, 6), np.float32)}, ["x is float32[0, 1, 6, 6]", "non-empty"]),
    ({}, ["has no inputs"]),
    ({"x0": np.zeros((3, 1, 6, 6), np.float32), "x1": np.zeros((2, 1, 6, 6), np.float32)},
     ["different numbers of samples (x0: 3, x1: 2)"]),
    ({"batch": np.zeros((3, 1, 6, 6), np.float32)}, ["unknown key(s) batch"]),
    ({"x": np.zeros((2, 1, 5, 5), np.float32)}, ["calibration batch 0", "[1, 1, 5, 5]"]),
])
def test_cli_calibration_file_errors(tmp_path, capsys, arrays, words):
    src = tmp_path / "m.py"
    src.write_text(MODEL_FILE)
    np.savez(tmp_path / "cal.npz", **arrays)
    assert main(["compile", str(src), "--calibration", str(tmp_path / "cal.npz"),
                 "-o", str(tmp_path / "m.mtp")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mcutorch: error:") and len(err.strip().splitlines()) == 1, err
    for w in words:
        assert w in err, (w, err)
