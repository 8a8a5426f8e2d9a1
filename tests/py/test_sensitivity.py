"""mcutorch.compare.sensitivity: each quantized layer against the float model (SQNR, max error),
as a table and a PNG; checked against SQNR computed by hand on the model's input and output."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

import mcutorch
from mcutorch import compare
from mcutorch.errors import UsageError
from mcutorch.ui.tables import text


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 6, 3, padding=1)
        self.fc = nn.Linear(6 * 4 * 4, 5)

    def forward(self, x):
        y = nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)
        return self.fc(torch.flatten(y, 1))


def _sqnr(f: np.ndarray, q: np.ndarray) -> float:
    f, q = f.astype(np.float64), q.astype(np.float64)
    return 10 * math.log10((f ** 2).sum() / ((q - f) ** 2).sum())


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    model = Net().eval()
    x = torch.randn(24, 1, 8, 8)
    batches = list(x.split(8))
    qmodel = mcutorch.quantize(model, (x[:1],), calibration=batches)
    return model, qmodel, x, batches


def test_input_and_output_layers_match_a_hand_computation(setup):
    model, qmodel, x, batches = setup
    rows = {r["layer"]: r for r in compare.sensitivity(model, qmodel, batches)}
    assert {"x", "relu", "max_pool2d", "linear"} <= set(rows)
    q = next(n for n in qmodel.graph.nodes if n.op == "call_function"
             and n.args[0].op == "placeholder")  # the input's quantize node
    scale, zp = float(q.args[1]), int(q.args[2])
    fq = torch.fake_quantize_per_tensor_affine(x, scale, zp, -128, 127).numpy()
    xin = rows["x"]
    assert xin["elements"] == x.numel()
    assert xin["sqnr_db"] == pytest.approx(_sqnr(x.numpy(), fq), abs=1e-6)
    assert xin["max_abs"] == pytest.approx(np.abs(fq - x.numpy()).max(), rel=1e-5)
    assert xin["max_lsb"] <= 0.5 + 1e-6  # in range: round to nearest
    with torch.no_grad():
        f, qo = model(x).numpy(), qmodel(x).numpy()
    out = rows["linear"]
    assert out["sqnr_db"] == pytest.approx(_sqnr(f, qo), abs=1e-4)
    assert out["max_abs"] == pytest.approx(np.abs(qo - f).max(), rel=1e-4)
    assert out["elements"] == f.size
    assert all(15 < r["sqnr_db"] < 80 for r in rows.values()), rows  # int8: tens of dB


def test_one_user_batch_and_a_qat_module(setup):
    model, qmodel, x, _ = setup
    one = compare.sensitivity(model, qmodel, x[:4])
    assert {r["elements"] for r in one if r["layer"] == "x"} == {4 * 64}
    qat = mcutorch.quantize(model, (x[:1],), calibration=[x[:8]], qat=True)
    rows = compare.sensitivity(model, qat, [x[:8]])  # converted first
    assert {"x", "linear"} <= {r["layer"] for r in rows}
    with pytest.raises(UsageError, match="no batches"):
        compare.sensitivity(model, qmodel, [])


def test_table_and_png(setup, tmp_path):
    model, qmodel, _, batches = setup
    rows = compare.sensitivity(model, qmodel, batches)
    out = text(compare.sensitivity_parts(rows))
    lines = out.splitlines()
    assert "SQNR dB" in lines[1] and "max |err|" in lines[1]
    assert len(lines) == 3 + len(rows)
    worst = min(rows, key=lambda r: r["sqnr_db"])
    assert any(worst["layer"] in ln and ln.rstrip().endswith("worst") for ln in lines)
    assert f"{worst['sqnr_db']:.1f}" in out
    png = tmp_path / "sens.png"
    compare.plot_sensitivity(rows, png)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
