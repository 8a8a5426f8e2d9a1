"""End to end: torch.export -> PT2E -> lift -> passes -> plan -> program -> reference runtime."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import mcutorch
from mcutorch.compare import layer_by_layer
from mcutorch.compiler import build_graph
from mcutorch.errors import ExportError, QuantizeError, UnsupportedOpError
from mcutorch.frontend.lift import lift
from mcutorch.passes import PIPELINE


def compile_and_compare(model, x, calibration=None, **kw):
    """Quantize + compile; return (program, program output, fake-quant output) as int8 arrays."""
    qmodel = mcutorch.quantize(model, (x,), calibration=calibration or [x])
    program = mcutorch.compile(qmodel, (x,), **kw)
    out = program.program.tensors[program.program.outputs[0]]
    ours = program.run(x).numpy()
    theirs = qmodel(x).detach().numpy()
    q = lambda v: np.round(v / out.scale).astype(np.int64) + out.zero_point  # noqa: E731
    return program, q(ours), q(theirs)


class AllOps(nn.Module):
    """One model that exercises every lowering rule at least once."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=2)
        self.dw = nn.Conv2d(8, 16, 3, padding=1, groups=8)  # depth multiplier 2
        self.c3 = nn.Conv2d(16, 8, 1)
        self.fc = nn.Linear(16 * 3 * 3, 10)

    def forward(self, x):
        y = torch.relu(self.c1(nn.functional.pad(x, (0, 1, 0, 1))))  # asymmetric pad -> conv
        y = nn.functional.hardtanh(self.c2(y), -1.0, 2.0)
        y = nn.functional.relu6(self.dw(y))
        z = self.c3(y)
        z = z + torch.sigmoid(z) * torch.tanh(z)
        z = nn.functional.hardswish(z)
        z = nn.functional.avg_pool2d(z, 3, stride=1, padding=1, count_include_pad=True)
        z = nn.functional.max_pool2d(z, 3, stride=2, padding=1, ceil_mode=True)
        z = torch.cat([z, torch.clamp(z, -0.5, 0.5)], dim=1)
        z = nn.functional.pad(z.permute(0, 1, 3, 2), (2, 0, 0, 2))
        z = nn.functional.adaptive_avg_pool2d(z, (3, 3))
        return torch.softmax(self.fc(torch.flatten(z, 1)), dim=-1)


@pytest.fixture(scope="module")
def all_ops():
    torch.manual_seed(0)
    model = AllOps().eval()
    cal = [torch.randn(1, 3, 11, 13) for _ in range(6)]
    return model, cal


def test_every_lowering_matches_fake_quant(all_ops):
    model, cal = all_ops
    _, ours, theirs = compile_and_compare(model, cal[0], cal)
    assert np.abs(ours - theirs).max() <= 1, (ours, theirs)


def test_every_lowering_layer_by_layer(all_ops):
    model, cal = all_ops
    qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal)
    rows = layer_by_layer(qmodel, (cal[1],))
    ops = {r["op"] for r in rows}
    assert {"conv2d", "depthwise_conv2d", "add", "mul", "lut", "avg_pool2d", "max_pool2d",
            "concat", "softmax", "fully_connected"} <= ops
    for r in rows:
        assert r["within_1lsb"] >= 0.99, r


def test_passes_do_what_they_say(all_ops):
    model, cal = all_ops
    qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal)
    graph = lift(qmodel)
    counts = lambda g: {op: sum(n.op == op for n in g.nodes) for op in  # noqa: E731
                        ("pad", "rescale", "clamp", "conv2d", "depthwise_conv2d", "transpose")}
    before = counts(graph)
    stages = {}
    for name, fn in PIPELINE:
        graph = fn(graph)
        stages[name] = counts(graph)
    assert before["pad"] == 2 and stages["fold_padding"]["pad"] == 1  # the zero pad folded
    assert stages["to_nhwc"]["depthwise_conv2d"] == 1 and stages["to_nhwc"]["conv2d"] == 3
    first_conv = next(n for n in graph.nodes if n.op == "conv2d")
    assert (first_conv.attrs["pad_top"], first_conv.attrs["pad_left"],
            first_conv.attrs["pad_bottom"], first_conv.attrs["pad_right"]) == (1, 1, 2, 2)
    assert all(t.layout in (None, "NHWC") for t in graph.tensors())


def test_flatten_order_folds_into_linear_weights():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                          nn.Linear(4 * 5 * 6, 7)).eval()
    x = torch.randn(1, 2, 5, 6)
    program, ours, theirs = compile_and_compare(model, x, [torch.randn(1, 2, 5, 6)
                                                           for _ in range(4)])
    assert "transpose" not in [op.name for op in program.program.ops]
    assert np.abs(ours - theirs).max() <= 1


def test_reshape_that_cannot_alias_gets_transposes():
    model = nn.Sequential(nn.Conv2d(2, 3, 1), nn.Flatten(), nn.Unflatten(1, (3, 4, 2))).eval()
    x = torch.randn(1, 2, 2, 4)
    program, ours, theirs = compile_and_compare(model, x, [torch.randn(1, 2, 2, 4)
                                                           for _ in range(4)])
    assert [op.name for op in program.program.ops].count("transpose") == 2
    assert np.array_equal(ours, theirs)


def test_compile_is_deterministic(all_ops):
    model, cal = all_ops
    qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal)
    a = mcutorch.compile(qmodel, (cal[0],)).to_bytes()
    b = mcutorch.compile(qmodel, (cal[0],)).to_bytes()
    assert a == b


def test_save_load_run_inspect(tmp_path, all_ops):
    model, cal = all_ops
    qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal)
    program = mcutorch.compile(qmodel, (cal[0],), target="cortex-m33", memory="DTCM:4K,SRAM:1M")
    path = program.save(tmp_path / "m.mtp")
    loaded = mcutorch.load(path)
    assert torch.equal(loaded.run(cal[2]), program.run(cal[2]))
    batch = torch.cat(cal[:3])
    assert loaded.run(batch).shape == (3, 10)
    s = loaded.summary()
    assert set(s["regions"]) <= {"DTCM", "SRAM"} and s["regions"].get("DTCM", 0) <= 4096
    assert loaded.program.target.cpu == "cortex-m33" and loaded.program.target.isa == "dsp"


def test_memory_that_does_not_fit_is_a_compile_error(all_ops):
    model, cal = all_ops
    qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal)
    with pytest.raises(mcutorch.McutorchError) as err:
        mcutorch.compile(qmodel, (cal[0],), memory="DTCM:256")
    assert "DTCM" in str(err.value)


def test_unsupported_op_names_op_and_source_line():
    class M(nn.Module):
        def forward(self, x):
            return torch.cumsum(x, dim=1)  # the line the error must point at

    with pytest.raises(UnsupportedOpError) as err:
        mcutorch.quantize(M(), (torch.randn(1, 4),))
    msg = str(err.value)
    assert "cumsum" in msg and "test_pipeline.py:" in msg


def test_data_dependent_control_flow_is_an_export_error():
    class M(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x * 2
            return x

    with pytest.raises(ExportError) as err:
        mcutorch.quantize(M(), (torch.randn(1, 4),))
    assert "torch.export could not capture" in str(err.value)


def test_nan_in_calibration_is_rejected():
    model = nn.Sequential(nn.Linear(4, 2)).eval()
    bad = torch.tensor([[0.0, float("nan"), 1.0, 2.0]])
    with pytest.raises(QuantizeError, match="NaN/Inf"):
        mcutorch.quantize(model, (torch.randn(1, 4),), calibration=[torch.randn(1, 4), bad])


def test_batchnorm_after_linear_is_folded():
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(6, 5), nn.BatchNorm1d(5), nn.ReLU()).eval()
    model[1].running_mean.uniform_(-1, 1)
    model[1].running_var.uniform_(0.5, 2)
    x = torch.randn(1, 6)
    program, ours, theirs = compile_and_compare(model, x, [torch.randn(1, 6) for _ in range(8)])
    assert [op.name for op in program.program.ops] == ["fully_connected"]
    assert np.abs(ours - theirs).max() <= 1


def test_boundary_quantization_rounds_half_to_even():
    from mcutorch.quant import quantize

    q = quantize(np.array([0.5, 1.5, 2.5, -0.5, 1000.0, -1000.0]), 1.0, 0)
    assert q.tolist() == [0, 2, 2, 0, 127, -128]


def test_quantizer_can_be_subclassed():
    from torchao.quantization.pt2e import HistogramObserver
    from torchao.quantization.pt2e.quantizer import QuantizationSpec

    class HistogramQuantizer(mcutorch.Quantizer):
        def activation_spec(self):
            return QuantizationSpec(dtype=torch.int8, quant_min=-128, quant_max=127,
                                    qscheme=torch.per_tensor_affine,
                                    observer_or_fake_quant_ctr=HistogramObserver)

    torch.manual_seed(3)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(36, 3)).eval()
    cal = [torch.randn(1, 1, 5, 5) for _ in range(4)]
    default = mcutorch.quantize(model, (cal[0],), calibration=cal)
    custom = mcutorch.quantize(model, (cal[0],), calibration=cal, quantizer=HistogramQuantizer())
    scales = lambda g: [n.args[1] for n in g.graph.nodes  # noqa: E731
                        if "quantize_per_tensor" in str(n.target)]
    assert scales(default) != scales(custom)
    program = mcutorch.compile(custom, (cal[0],))
    out = program.program.tensors[program.program.outputs[0]]
    ours = np.round(program.run(cal[1]).numpy() / out.scale)
    theirs = np.round(custom(cal[1]).detach().numpy() / out.scale)
    assert np.abs(ours - theirs).max() <= 1


def test_per_tensor_weights_option():
    torch.manual_seed(4)
    model = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3)).eval()
    cal = [torch.randn(1, 6) for _ in range(6)]
    qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal,
                               quantizer=mcutorch.Quantizer(per_channel=False))
    program = mcutorch.compile(qmodel, (cal[0],))
    graph = build_graph(qmodel)
    fc = [n for n in graph.nodes if n.op == "fully_connected"]
    assert all(len(set(n.inputs[3].data.tolist())) == 1 for n in fc)  # one multiplier per layer
    out = program.program.tensors[program.program.outputs[0]]
    ours = np.round(program.run(cal[1]).numpy() / out.scale)
    theirs = np.round(qmodel(cal[1]).detach().numpy() / out.scale)
    assert np.abs(ours - theirs).max() <= 1


class MinMax(nn.Module):
    """maximum/minimum of activations, then a ReLU (its own qparams: a rescale)."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 6, 3, padding=1), nn.Conv2d(3, 6, 1)
        self.c = nn.Conv2d(3, 6, 3, padding=1)

    def forward(self, x):
        a, b = self.a(x), self.b(x)
        return torch.relu(torch.minimum(torch.maximum(a, b), self.c(x) + b))


def test_maximum_minimum_end_to_end():
    """torch.maximum / torch.minimum: one int8 op each, their operands and output sharing
    qparams; within 1 LSB of PyTorch's fake-quant model, layer by layer too, and exact on the TOSA
    reference model."""
    torch.manual_seed(3)
    model = MinMax().eval()
    cal = [torch.randn(1, 3, 6, 5) for _ in range(8)]
    program, ours, theirs = compile_and_compare(model, cal[0], cal)
    names = [op.name for op in program.program.ops]
    assert names.count("maximum") == 1 and names.count("minimum") == 1
    p = program.program
    for op in (o for o in p.ops if o.name in ("maximum", "minimum")):
        qps = {(p.tensors[t].scale, p.tensors[t].zero_point) for t in (*op.inputs, *op.outputs)}
        assert len(qps) == 1, qps
    assert np.abs(ours - theirs).max() <= 1
    qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal)
    report = layer_by_layer(qmodel, (cal[1],))
    assert {r["op"] for r in report} >= {"maximum", "minimum"}
    assert all(r["within_1lsb"] >= 0.99 for r in report), report
    from mcutorch.backends import tosa

    tosa.verify_program_graph(build_graph(qmodel))


class Attention(nn.Module):
    """Single-head self-attention on [1, T, C]: Linear q/k/v, q @ k^T * scale, softmax, @ v,
    Linear out."""

    def __init__(self, c=24, d=16):
        super().__init__()
        self.q, self.k, self.v, self.out = (nn.Linear(c, d), nn.Linear(c, d), nn.Linear(c, d),
                                            nn.Linear(d, c))
        self.scale = d ** -0.5

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        return self.out(torch.softmax(q @ k.transpose(-1, -2) * self.scale, dim=-1) @ v)


def _within_1lsb(ours, theirs) -> float:
    return float((np.abs(ours - theirs) <= 1).mean())


@pytest.mark.parametrize("t", [16, 37])
def test_attention_end_to_end(t):
    """Q @ K^T reads K in place (transpose_b, no transpose op), P @ V; within 1 LSB of
    fake-quant on >= 99 % of the outputs, layer by layer too, and exact on the TOSA reference
    model."""
    torch.manual_seed(t)
    model = Attention().eval()
    cal = [torch.randn(1, t, 24) for _ in range(8)]
    program, ours, theirs = compile_and_compare(model, cal[1], cal)
    names = [op.name for op in program.program.ops]
    assert names.count("matmul") == 2 and "transpose" not in names, names
    assert [op.attrs["transpose_b"] for op in program.program.ops if op.name == "matmul"] == [1, 0]
    assert _within_1lsb(ours, theirs) >= 0.99 and np.abs(ours - theirs).max() <= 2
    qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal)
    rows = [r for r in layer_by_layer(qmodel, (cal[2],)) if r["op"] == "matmul"]
    assert len(rows) == 2 and all(r["within_1lsb"] >= 0.99 for r in rows), rows
    from mcutorch.backends import tosa

    tosa.verify_program_graph(build_graph(qmodel))


class Products(nn.Module):
    """Every spelling of a matrix product: two activations, constant operands, addmm/baddbmm,
    einsum, 1-D operands, broadcast batch dims."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 5))
        self.b = nn.Parameter(torch.randn(5))
        self.v = nn.Parameter(torch.randn(4, 3))

    def forward(self, x, c):
        return (x @ self.w, torch.mm(x[0], self.w), torch.addmm(self.b, x[0], self.w),
                self.v @ x[:, :3, :], torch.bmm(x, x.transpose(1, 2)),
                torch.einsum("bij,bjk->bik", x, x.transpose(1, 2)),
                torch.einsum("bhqd,bhkd->bhqk", c, c), torch.einsum("bnd,dc->bnc", x, self.w),
                torch.einsum("ij,jk->ik", x[0], x[1].t()),
                torch.baddbmm(x[:, :, :3], x, x.transpose(1, 2)[:, :, :3], alpha=0.5),
                torch.matmul(x[0, 0], x[1].t()), torch.matmul(x[:1, :, :4], c[0, 0].t()[None]),
                torch.matmul(c, c[0, :1].transpose(-1, -2)))


def test_matrix_products_end_to_end():
    torch.manual_seed(5)
    model = Products().eval()
    ex = (torch.randn(2, 3, 8), torch.randn(1, 2, 5, 4))
    cal = [tuple(torch.randn_like(t) for t in ex) for _ in range(6)]
    qmodel = mcutorch.quantize(model, ex, calibration=cal)
    program = mcutorch.compile(qmodel, ex)
    names = [op.name for op in program.program.ops]
    assert names.count("fully_connected") == 5 and names.count("matmul") == 8, names
    for i, (o, t) in enumerate(zip(program.run(*cal[1]), qmodel(*cal[1]))):
        out = program.program.tensors[program.program.outputs[i]]
        q = lambda v: np.round(np.asarray(v) / out.scale).astype(np.int64)  # noqa: E731
        assert tuple(o.shape) == tuple(t.shape)
        assert _within_1lsb(q(o.numpy()), q(t.detach().numpy())) >= 0.99, i
    rows = layer_by_layer(qmodel, cal[2])
    assert {"matmul", "fully_connected"} <= {r["op"] for r in rows}
    assert all(r["within_1lsb"] >= 0.99 for r in rows), rows


class Lin(nn.Module):
    def __init__(self, c, o):
        super().__init__()
        self.fc = nn.Linear(c, o)

    def forward(self, x):
        return self.fc(x)


@pytest.mark.parametrize("shape", [(4, 9), (2, 5, 7), (1, 3, 5, 6), (2, 4, 3, 5), (9,)])
def test_linear_on_any_rank(shape):
    """nn.Linear over the last dim of [T, C], [B, T, C], [N, H, W, C] (non-square, so an
    NCHW/NHWC mix-up cannot pass) and [C]: one fully_connected over the folded leading dims."""
    torch.manual_seed(len(shape))
    model = Lin(shape[-1], 11).eval()
    cal = [torch.randn(*shape) for _ in range(6)]
    program, ours, theirs = compile_and_compare(model, cal[1], cal)
    fc = [op for op in program.program.ops if op.name == "fully_connected"]
    assert len(fc) == 1
    assert program.program.tensors[fc[0].inputs[0]].shape == (int(np.prod(shape[:-1])), shape[-1])
    assert ours.shape == (*shape[:-1], 11) and _within_1lsb(ours, theirs) >= 0.99


@pytest.mark.parametrize("expr,match", [
    (lambda x: torch.einsum("bii->bi", x), "einsum 'bii->bi'"),
    (lambda x: torch.einsum("bij->j", x), "einsum 'bij->j'"),
    (lambda x: torch.einsum("bij,bjk,bkl->bil", x, x, x), "einsum 'bij,bjk,bkl->bil'"),
    (lambda x: x @ torch.ones(2, 3, 3), "3-D constant"),
])
def test_unsupported_products_fail_before_calibration(expr, match):
    class M(nn.Module):
        def forward(self, x):
            return expr(x)

    with pytest.raises(UnsupportedOpError, match=match) as err:
        mcutorch.quantize(M(), (torch.randn(2, 3, 3),))
    assert "test_pipeline.py:" in str(err.value)
