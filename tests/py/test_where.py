"""Comparisons feeding torch.where / masked_fill, end to end: real torch modules through
torch.export + PT2E, compiled to `compare` + `where`, against PyTorch's fake-quant model (and
layer by layer), the whole program in the host C runtime (ASan + UBSan) and as firmware on the
emulated boards equal to the Python reference, and what stays refused.

The kernels themselves (every int8 pair, ties, extreme scales, every broadcast pattern, in place,
bad arguments) are tested in test_kernels_c.py (select_cases) and test_ref_kernels.py.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import mcutorch
from mcutorch.compare import layer_by_layer
from mcutorch.errors import UnsupportedOpError

T = 8  # sequence length of the attention-style models


class Leaky(nn.Module):
    """where(x > 0, x, 0.1 x): a leaky ReLU written with where (the 0.1 x is a lut)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return torch.where(y > 0, y, 0.1 * y)


class CausalAttention(nn.Module):
    """Attention-style scores [T, T] (a linear map of the tokens: mcutorch has no matmul of two
    activations), a causal mask (a constant: torch.ones(T, T).triu(1)) filled with -inf, softmax,
    a linear map of the weights: the masked softmax of a decoder."""

    def __init__(self, d=16):
        super().__init__()
        self.scores, self.out = nn.Linear(d, T), nn.Linear(T, d)

    def forward(self, x):
        mask = torch.ones(T, T).triu(1).bool()
        return self.out(torch.softmax(self.scores(x).masked_fill(mask, float("-inf")), dim=-1))


class PaddingMask(nn.Module):
    """A mask computed from the activations (keys whose value is below a threshold), filled with
    a large negative number, broadcast over the query rows."""

    def __init__(self, d=16):
        super().__init__()
        self.scores, self.gate = nn.Linear(d, T), nn.Linear(d, 1)

    def forward(self, x):
        scores = self.scores(x)
        keep = self.gate(x).transpose(0, 1)  # [1, T]: one value per key
        return torch.softmax(scores.masked_fill(keep <= -0.2, -1e9), dim=-1)


class Selects(nn.Module):
    """Every comparison kind, tensor and number operands, the function and method forms, where
    with two tensors, with a number on either side, masked_fill with a computed mask, and
    broadcasting of all three where operands."""

    def __init__(self):
        super().__init__()
        self.t = nn.Parameter(torch.randn(5))
        self.register_buffer("col", torch.randn(4, 1))

    def forward(self, x, y):
        a = torch.where(x > y, x, y)  # gt.Tensor
        b = torch.where(torch.ge(x, 0.25), x, -1.0)  # ge.Scalar
        c = torch.where(x <= self.t, x, 0.0)  # le against a parameter (broadcast)
        d = torch.where(x.lt(y[:1]), 2.0, y)  # lt with a broadcast row; number on the a side
        e = torch.where(torch.eq(x, y), y, x) + torch.where(x.ne(0.0), x, 3.0)
        f = x.masked_fill(x < 0, 0.0)  # a computed mask
        g = torch.where(self.col > 0, x[:1], y)  # mask [4, 1], a [1, 5], b [4, 5]
        return a + b + c + d + e + f + g


MODELS = {
    "leaky": (Leaky, ((1, 3, 6, 5),)),
    "causal_attention": (CausalAttention, ((T, 16),)),
    "padding_mask": (PaddingMask, ((T, 16),)),
    "selects": (Selects, ((4, 5), (4, 5))),
}


def _compiled(name, target="cortex-m55", batches=8):
    cls, shapes = MODELS[name]
    torch.manual_seed(7)
    model = cls().eval()
    cal = [tuple(torch.randn(*s) for s in shapes) for _ in range(batches)]
    qmodel = mcutorch.quantize(model, cal[0], calibration=cal)
    return qmodel, mcutorch.compile(qmodel, cal[0], target=target), cal


def _lsb(program, qmodel, inputs):
    out = program.program.tensors[program.program.outputs[0]]
    ours, theirs = program.run(*inputs).numpy(), qmodel(*inputs).detach().numpy()
    return np.abs(ours - theirs) / out.scale


@pytest.mark.parametrize("name", sorted(MODELS))
def test_end_to_end_matches_fake_quant(name):
    """Within 1 LSB of PyTorch's fake-quant model on >= 99 % of the elements (measured: every
    element, max 0 or 1 LSB), layer by layer too; compare and where are in the program."""
    qmodel, program, cal = _compiled(name)
    names = [op.name for op in program.program.ops]
    assert "compare" in names or name == "causal_attention", names
    assert "where" in names, names
    lsb = np.concatenate([_lsb(program, qmodel, batch).ravel() for batch in cal[1:]])
    within = float(np.mean(lsb <= 1 + 1e-6))
    print(f"{name}: {within:.4%} within 1 LSB, max {lsb.max():.2f} LSB over {lsb.size} values")
    assert within >= 0.99, within
    report = layer_by_layer(qmodel, cal[1])
    ours = [r for r in report if r["op"] in ("compare", "where")]
    assert ours and all(r["within_1lsb"] >= 0.99 for r in report), report


def test_masked_fill_saturates_minus_inf_to_the_lowest_code():
    """The causal mask is a constant uint8 tensor; masked_fill's output keeps the scores'
    qparams and its masked elements are -128 (-inf saturated); the softmax then gives them the
    lowest probability code, as the fake-quant model does."""
    qmodel, program, cal = _compiled("causal_attention")
    p = program.program
    (op,) = [o for o in p.ops if o.name == "where"]
    mask, a, b = (p.tensors[t] for t in op.inputs)
    y = p.tensors[op.outputs[0]]
    assert mask.dtype == "uint8" and mask.storage == "const"
    assert np.array_equal(p.const_array(op.inputs[0]).reshape(T, T),
                          np.triu(np.ones((T, T), np.uint8), 1))
    assert (b.scale, b.zero_point) == (y.scale, y.zero_point)
    assert p.const_array(op.inputs[1]).ravel().tolist() == [-128]
    assert (op.attrs["a_mult"], op.attrs["a_shift"]) == (1 << 30, 30)


def test_threshold_is_fake_quants_decision_on_every_code():
    """x > c, x >= c, ..., x == c with a number: a threshold on x's codes that decides every one
    of the 256 codes as the fake-quant model does (0 disagreements by construction)."""

    class Cmp(nn.Module):
        def __init__(self, kind, c):
            super().__init__()
            self.kind, self.c = kind, c

        def forward(self, x):
            return torch.where(getattr(torch, self.kind)(x, self.c), x, -4.0)

    x = torch.linspace(-3, 3, 256).reshape(1, 256)
    for kind in ("gt", "ge", "lt", "le", "eq", "ne"):
        for c in (0.5, -0.013, 0.0, 10.0, -10.0):
            qmodel = mcutorch.quantize(Cmp(kind, c).eval(), (x,))
            program = mcutorch.compile(qmodel, (x,))
            assert np.array_equal(program.run(x).numpy(), qmodel(x).detach().numpy()), (kind, c)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_c_runtime_runs_the_programs(name):
    """The whole program in the host C runtime under ASan + UBSan equals the Python reference."""
    from mcutorch.device import crt

    _, program, cal = _compiled(name)
    x = program.quantize_inputs(list(cal[1]))
    want = program.run_int8(x)
    got = crt.run_host(program.program, x)
    assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))


@pytest.mark.qemu
@pytest.mark.parametrize("target,board", [("cortex-m55", "mps3-an547"),
                                          ("cortex-m0plus", "mps2-an385")])
def test_boards_run_the_programs(target, board):
    """The same programs as firmware on an emulated M55 (MVE) and M0+ (Armv6-M)."""
    from mcutorch.device import firmware

    for name in sorted(MODELS):
        _, program, cal = _compiled(name, target)
        x = program.quantize_inputs(list(cal[1]))
        run = firmware.run(program.program, x, board)
        assert all(np.array_equal(a, b) for a, b in zip(run.outputs, program.run_int8(x))), name


REFUSED = {
    "mask_output": (lambda x: x > 0,
                    r"test_where.py:\d+.*torch\.bool mask used by the model output"),
    "mask_of_two": (lambda x: torch.where((x > 0) & (x < 1), x, 0.0),
                    r"test_where.py:\d+.*\(aten\.gt\.Scalar\).*mask used by.*and"),
    "tensor_fill": (lambda x: x.masked_fill(x > 0, x.mean()),
                    r"test_where.py:\d+.*masked_fill"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_stays_refused_names_op_and_line(case):
    fn, pattern = REFUSED[case]

    class M(nn.Module):
        def forward(self, x):
            return fn(x)

    with pytest.raises(UnsupportedOpError, match=pattern):
        mcutorch.quantize(M(), (torch.randn(2, 6),))


# ----------------------------------------------------------------------------- TOSA

def _graph(op, acts, consts, attrs):
    """One-node IR graph: activations (name, shape, dtype), constant arrays, the attributes."""
    from mcutorch.ir import Graph, Node, Tensor
    from mcutorch.ref import KERNELS

    xs = [Tensor(n, s, dtype=d) for n, s, d in acts]
    cs = [Tensor(f"c{i}", a.shape, dtype=str(a.dtype), data=a) for i, a in enumerate(consts)]
    y = KERNELS[op](*(np.zeros(s, d) for _, s, d in acts), *consts, **attrs)
    out = Tensor("y", y.shape, dtype=str(y.dtype))
    return Graph([Node(op, xs + cs, [out], dict(attrs))], xs, [out])


def _feeds(acts, rng):
    return [rng.integers(0, 2, s, dtype=np.uint8) if d == "uint8" else
            rng.integers(-128, 128, s, dtype=np.int8) for _, s, d in acts]


TOSA_COMPARE = [((2, 8, 5), (2, 8, 5), (0.5, 0.25)), ((3, 7), (7,), (3.0, 7.0)),
                ((1, 4, 4, 6), (1, 1, 1, 6), (0.02, 0.02)), ((), (5,), (1.0, 1e-9)),
                ((2, 1, 3, 1, 2, 5), (1, 2, 1, 4, 1, 5), (0.1, 0.1))]


@pytest.mark.parametrize("kind", range(6))
@pytest.mark.parametrize("case", range(len(TOSA_COMPARE)))
def test_tosa_compare_matches_the_reference(kind, case):
    """RESCALE, GREATER / GREATER_EQUAL / EQUAL (LOGICAL_NOT), CAST on the TOSA reference model
    = the reference, every kind, broadcasting, ties and a dominated ratio."""
    from mcutorch.backends import tosa
    from mcutorch.ref.elementwise import compare_attrs

    sa, sb, (fa, fb) = *TOSA_COMPARE[case][:2], TOSA_COMPARE[case][2]
    rng = np.random.default_rng(kind * 10 + case)
    attrs = dict(kind=kind, a_zp=int(rng.integers(-128, 128)), b_zp=int(rng.integers(-128, 128)),
                 **compare_attrs(fa, fb))
    acts = [("a", sa, "int8"), ("b", sb, "int8")]
    graph = _graph("compare", acts, [], attrs)
    assert tosa.tosa_support(graph.nodes[0]) == (True, "")
    for _ in range(3):
        tosa.verify(graph, None, _feeds(acts, rng))
    tosa.verify(graph, None, [np.full(s, 3, np.int8) for _, s, _ in acts])  # ties


def test_tosa_compare_of_24_bit_ratios_stays_on_the_cpu():
    """Scales whose exact ratio needs a factor >= 2^21 (two float32 mantissas of 24 bits) have
    no exact int32 TOSA sequence: the node stays on the CPU, with the reason."""
    from mcutorch.backends import tosa
    from mcutorch.ref.elementwise import compare_attrs

    attrs = dict(kind=2, a_zp=0, b_zp=0, **compare_attrs(0.1, 0.30000001))
    graph = _graph("compare", [("a", (4,), "int8"), ("b", (4,), "int8")], [], attrs)
    ok, why = tosa.tosa_support(graph.nodes[0])
    assert not ok and "2^21" in why, why


WHERE_SHAPES = [((5, 7), (5, 7), (5, 7)), ((1, 8, 8), (2, 8, 8), (1,)), ((8, 1), (1, 9), (8, 9)),
                ((3, 1, 5), (1,), (2, 3, 4, 5)), ((4, 4), (2, 3, 4, 4), (3, 1, 1))]


@pytest.mark.parametrize("ident", [True, False])
@pytest.mark.parametrize("case", range(len(WHERE_SHAPES)))
def test_tosa_where_matches_the_reference(case, ident):
    """CAST mask -> bool, RESCALE each value (unless it has y's qparams), SELECT; a constant
    mask and a constant value too."""
    from mcutorch import quant
    from mcutorch.backends import tosa

    rng = np.random.default_rng(case)
    ms, as_, bs = WHERE_SHAPES[case]
    out_zp = int(rng.integers(-128, 128))
    attrs = dict(out_zp=out_zp)
    for k in "ab":
        m, sh = (1 << 30, 30) if ident else quant.quantize_multiplier(
            float(np.exp(rng.uniform(-3, 2))))
        attrs.update({f"{k}_zp": out_zp if ident else int(rng.integers(-128, 128)),
                      f"{k}_mult": m, f"{k}_shift": sh})
    acts = [("m", ms, "uint8"), ("a", as_, "int8"), ("b", bs, "int8")]
    graph = _graph("where", acts, [], attrs)
    assert tosa.tosa_support(graph.nodes[0]) == (True, "")
    for _ in range(3):
        tosa.verify(graph, None, _feeds(acts, rng))
    const_mask = rng.integers(0, 2, ms, dtype=np.uint8)
    from mcutorch.ir import Graph, Node, Tensor
    xa, xb = Tensor("a", as_), Tensor("b", bs)
    node = graph.nodes[0]
    mask_t = Tensor("mask", ms, dtype="uint8", data=const_mask)
    y = Tensor("y", node.outputs[0].shape)
    cgraph = Graph([Node("where", [mask_t, xa, xb], [y], dict(attrs))], [xa, xb], [y])
    tosa.verify(cgraph, None, _feeds(acts[1:], rng))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_tosa_lowers_the_models(name):
    """Every compare and where of the end-to-end models lowers and equals the reference on the
    TOSA reference model (the softmax of the attention models stays on the CPU)."""
    from mcutorch.backends import tosa
    from mcutorch.compiler import build_graph

    qmodel, _, cal = _compiled(name)
    graph = build_graph(qmodel)
    lowered = tosa.verify_program_graph(graph)
    ops_done = {n.op for tg in lowered for n in tg.nodes}
    assert "where" in ops_done, ops_done


@pytest.mark.parametrize("target", ["cortex-m55+ethos-u55-128", "cortex-m55+ethos-u85-256"])
def test_ethos_u_placement(target):
    """Vela 5.2 takes compare and where on Ethos-U85 (delegated, outputs equal to the CPU-only
    program); on Ethos-U55 constraints.py keeps them on the CPU with the reason (Vela refuses
    GREATER_EQUAL, EQUAL and the CAST it makes a NotEqual)."""
    for name in ("leaky", "padding_mask"):
        qmodel, cpu, cal = _compiled(name)
        npu = mcutorch.compile(qmodel, cal[0], target=target, board="mps3-an547")
        rows = [r for r in npu.program.metadata["placement"] if r["op"] in ("compare", "where")]
        assert {r["op"] for r in rows} == {"compare", "where"}, rows
        want = "NPU" if "u85" in target else "CPU"
        assert {r["on"] for r in rows} == {want}, rows
        if want == "CPU":
            assert all("Ethos-U55/U65" in r["why"] for r in rows), rows
        for o, c in zip(npu.run(*cal[1]), cpu.run(*cal[1])):
            assert torch.equal(o, c)
