"""Quantization-aware training: mcutorch.quantize(..., qat=True) -> a training loop ->
mcutorch.compile (or mcutorch.convert). The QAT module trains (its loss falls), its program is
bit-exact between the Python reference and the host C runtime, and agrees with the converted
model layer by layer and end to end; misuse is a named error."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import mcutorch
from mcutorch.compare import layer_by_layer
from mcutorch.errors import QuantizeError, UnsupportedOpError
from mcutorch.frontend._torchao import pt2e

pt2e()
from torchao.quantization.pt2e import (  # noqa: E402
    FakeQuantize,
    FixedQParamsFakeQuantize,
    move_exported_model_to_eval,
    move_exported_model_to_train,
)


class Tiny(nn.Module):
    """conv + BatchNorm + ReLU (PT2E's QAT fusion), a depthwise conv + BatchNorm, dropout,
    pooling, a linear and a sigmoid (fixed qparams)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.bn2 = nn.BatchNorm2d(8)
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        y = nn.functional.max_pool2d(self.bn2(self.dw(y)), 2)
        return torch.sigmoid(self.fc(self.drop(torch.flatten(y, 1))))


def data(n: int = 64, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, 8, 8, generator=g)
    y = (x[:, 0, :4].mean((1, 2)) * 20).long().clamp(0, 9)
    return x, y


def train(qat, x, y, steps: int = 8) -> list[float]:
    opt = torch.optim.Adam(qat.parameters(), lr=1e-2)
    move_exported_model_to_train(qat)
    losses = []
    for i in range(steps):
        idx = torch.arange(i * 8, i * 8 + 8) % len(x)
        opt.zero_grad()
        loss = nn.functional.mse_loss(qat(x[idx]), nn.functional.one_hot(y[idx], 10).float())
        loss.backward()
        opt.step()
        losses.append(loss.item())
    move_exported_model_to_eval(qat)
    return losses


@pytest.fixture(scope="module")
def trained():
    torch.manual_seed(0)
    x, y = data()
    model = Tiny()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    qat = mcutorch.quantize(model, (x[:1],), calibration=x[:32].split(8), qat=True)
    losses = train(qat, x, y, steps=24)
    for k, v in model.state_dict().items():  # the QAT module trains its own copy
        assert torch.equal(v, before[k]), k
    return qat, x, losses, mcutorch.compile(qat, (x[:1],)), mcutorch.convert(qat)


def test_qat_module_has_fake_quant_forms_of_the_specs():
    x, _ = data(8)
    qat = mcutorch.quantize(Tiny(), (x[:1],), calibration=[x], qat=True)
    assert qat.training
    fqs = [m for m in qat.modules() if isinstance(m, FakeQuantize)]
    schemes = {m.qscheme for m in fqs}
    assert torch.per_channel_symmetric in schemes and torch.per_tensor_affine in schemes
    weights = [m for m in fqs if m.qscheme == torch.per_channel_symmetric]
    assert all((m.quant_min, m.quant_max) == (-127, 127) for m in weights)
    assert all(m.activation_post_process.min_val.numel() == 8 or
               m.activation_post_process.min_val.numel() == 10 for m in weights)
    acts = [m for m in fqs if m.qscheme == torch.per_tensor_affine]
    assert all((m.quant_min, m.quant_max, m.dtype) == (-128, 127, torch.int8) for m in acts)
    assert any(isinstance(m, FixedQParamsFakeQuantize) for m in qat.modules())  # the sigmoid
    names = {n.target for n in qat.graph.nodes if n.op == "call_function"}
    assert torch.ops.aten.dropout.default not in names  # dropped for QAT


def test_qat_trains_and_compiles_bit_exact(trained):
    from mcutorch.device import crt

    qat, x, losses, program, qmodel = trained
    assert np.mean(losses[-6:]) < np.mean(losses[:6])
    assert any(isinstance(m, FakeQuantize) for m in qat.modules())  # compile left it trainable
    ops = [n.target for n in qmodel.graph.nodes if n.op == "call_function"]
    assert torch.ops.aten.batch_norm.default not in ops  # folded into the convs at convert
    for k in range(4):
        xs = program.quantize_inputs([x[k:k + 1].numpy()])
        want = program.run_int8(xs)
        for got, w in zip(crt.run_host(program.program, xs), want):
            np.testing.assert_array_equal(got, w)
    rows = layer_by_layer(qmodel, (x[:1],))
    assert rows and min(r["within_1lsb"] for r in rows) >= 0.99, rows
    out = program.program.tensors[program.program.outputs[0]]
    with torch.no_grad():
        fq = qmodel(x[:16]).numpy()
    ours = np.concatenate([np.asarray(program.run(x[k:k + 1].numpy())) for k in range(16)])
    lsb = np.abs(np.round(ours / out.scale) - np.round(fq / out.scale))
    assert lsb.max() <= 1 and (lsb == 0).mean() >= 0.95, lsb


def test_compile_equals_convert_then_compile(trained):
    _, x, _, program, qmodel = trained
    converted = mcutorch.compile(qmodel, (x[:1],))
    assert program.program.to_bytes() == converted.program.to_bytes()


def test_untrained_qat_module_is_refused():
    x, _ = data(8)
    qat = mcutorch.quantize(Tiny(), (x[:1],), qat=True)  # no calibration, never trained
    with pytest.raises(QuantizeError, match="never observed"):
        mcutorch.compile(qat, (x[:1],))
    with pytest.raises(QuantizeError, match="never observed"):
        mcutorch.convert(qat)


def test_convert_refuses_what_is_not_a_qat_module():
    x, _ = data(8)
    qmodel = mcutorch.quantize(Tiny(), (x[:1],), calibration=[x])
    with pytest.raises(QuantizeError, match="converted already"):
        mcutorch.convert(qmodel)
    with pytest.raises(QuantizeError, match="qat=True"):
        mcutorch.convert(Tiny())


def test_batch_norm_qat_cannot_fuse_is_refused():
    model = nn.Sequential(nn.Flatten(), nn.Linear(16, 8), nn.BatchNorm1d(8), nn.ReLU())
    with pytest.raises(UnsupportedOpError, match="BatchNorm right after a conv1d/conv2d"):
        mcutorch.quantize(model, (torch.rand(2, 1, 4, 4),), qat=True)


@pytest.mark.slow
def test_qat_digits_tcn_bit_exact_on_boards_and_agrees_with_convert():
    """A conv1d + BatchNorm temporal conv net on the digits read pixel by pixel: QAT from a
    trained float model; the program equals the reference on the host C runtime and the M55
    and M33 boards, and its held-out predictions agree with the converted model's."""
    import sys
    from pathlib import Path

    from mcutorch.device import crt, firmware

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from bench.digits import fit_float, fit_qat
    from mcutorch.models.digits import digits_split, digits_tcn

    xtr, ytr, xte, yte = digits_split("pixels", seed=0)
    model = fit_float(digits_tcn("pixels", 8, 3, seed=0), xtr[:512], ytr[:512], 0)
    qat = mcutorch.quantize(model, (xtr[:1],), calibration=list(xtr[:256].split(64)), qat=True)
    fit_qat(qat, xtr[:512], ytr[:512], 0)
    program = mcutorch.compile(qat, (xtr[:1],), target="cortex-m55")
    sets = [program.quantize_inputs([xte[k:k + 1].numpy()]) for k in range(3)]
    wants = [program.run_int8(xs) for xs in sets]
    for xs, want in zip(sets, wants):
        for g, w in zip(crt.run_host(program.program, xs), want):
            np.testing.assert_array_equal(g, w)
    for board in ("mps3-an547", "mps2-an505"):
        p = program if board == "mps3-an547" else mcutorch.compile(qat, (xtr[:1],),
                                                                    target="cortex-m33")
        run = firmware.run(p.program, sets, board)
        for got, want in zip(run.outputs, wants):
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)
    with torch.no_grad():
        fq = mcutorch.convert(qat)(xte[:100]).argmax(1).numpy()
    ours = np.asarray(program.run(xte[:100].numpy())).argmax(1)
    assert (ours == fq).mean() >= 0.98, (ours != fq).sum()


def test_int16_qat_mlp_trains_and_compiles_to_an_int16_program_bit_exact():
    """QAT with int16 activations (a16w8): the fake quants are int16 symmetric, training runs,
    and the compiled program has int16 I/O and equals the host C runtime bit for bit."""
    from mcutorch.device import crt
    from mcutorch.models.digits import digits_split
    from mcutorch.ref.interpreter import Interpreter

    xtr, ytr, xte, yte = digits_split("rows", 0)
    xtr, xte = xtr.reshape(len(xtr), -1), xte.reshape(len(xte), -1)
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    qat = mcutorch.quantize(m, (xtr[:1],), calibration=list(xtr[:256].split(64)), qat=True,
                            quantizer=mcutorch.Quantizer(activations="int16"))
    fqs = [mod for mod in qat.modules() if isinstance(mod, FakeQuantize)]
    acts = [f for f in fqs if f.qscheme == torch.per_tensor_symmetric]
    assert acts and all((f.quant_min, f.quant_max) == (-32767, 32767) for f in acts)
    opt = torch.optim.Adam(qat.parameters(), 3e-3)
    losses = []
    for _ in range(3):
        for i in range(0, len(xtr), 64):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(qat(xtr[i:i + 64]), ytr[i:i + 64])
            loss.backward()
            opt.step()
            losses.append(loss.item())
    assert np.mean(losses[-5:]) < np.mean(losses[:5])
    p = mcutorch.compile(qat, (xtr[:1],), target="cortex-m55")
    assert [p.program.tensors[i].dtype for i in p.program.inputs] == ["int16"]
    for x in xte[:3]:
        xs = p._quantize([x[None].numpy()])
        np.testing.assert_array_equal(crt.run_host(p.program, xs)[0],
                                      Interpreter(p.program).invoke(xs)[0])
    conv = mcutorch.convert(qat)
    agree = (np.asarray(p.run(xte.numpy())).argmax(1) == conv(xte).argmax(1).numpy()).mean()
    assert agree >= 0.99
