"""Numpy broadcasting of the binary element-wise ops (add, sub, mul, maximum, minimum), and sub.

The reference (the definition) against numpy on the dequantized-free integer formula; the C
kernels bit-exact against the reference on every broadcast pattern (per-channel, column, scalar,
either or both operands broadcasting, ranks 1..6, odd dims and vector tails, in place) on the
host (ASan + UBSan) and on every emulated board; the shape triples both executors refuse.
"""
from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
import torch
from test_kernels_c import (BAD_ARGUMENT, BOARD_PARAMS, Case, add_case, any_pair, minmax_case,
                            mul_case, pick_act, pick_zp, rng_for, run_board, run_host, s8)

from torch import nn

import mcutorch
from mcutorch import quant
from mcutorch.compare import layer_by_layer
from mcutorch.compiler import build_graph
from mcutorch.ref import KERNELS
from mcutorch.ref.elementwise import broadcast_shape

OPS = ("add", "sub", "mul", "div", "maximum", "minimum")

# (a shape, b shape): the patterns the kernels' inner loops take
PAIRS = [
    ((1, 8, 8, 17), (1, 1, 1, 17)),  # per-channel (squeeze-and-excite in NHWC)
    ((1, 1, 1, 17), (1, 8, 8, 17)),  # the same, a broadcasting
    ((1, 8, 8, 17), (17,)),  # per-channel of lower rank
    ((1, 8, 8, 17), (1, 8, 8, 1)),  # column: constant along the innermost dim
    ((1, 6, 5, 1), (1, 6, 5, 19)),  # column, a broadcasting
    ((1, 8, 8, 17), (1,)),  # scalar
    ((), (2, 3, 5)),  # rank-0 scalar a
    ((1, 1, 1, 1), (3, 1, 7, 33)),  # scalar of equal rank
    ((3, 1, 5), (1, 4, 1)),  # both broadcasting (outer product)
    ((3, 1), (1, 1000)),  # both, a long run
    ((5, 7, 3), (5, 1, 3)),  # a middle dim
    ((2, 1, 3, 1, 5, 1), (1, 4, 1, 2, 1, 3)),  # rank 6, alternating
    ((2, 3, 4, 5, 6, 7), (1, 3, 1, 5, 1, 7)),  # rank 6
    ((4, 1, 1, 1, 1, 9), (9,)),  # rank 6 against 1
    ((1, 1, 1, 1), (1, 1, 1, 1)),
    ((2, 0, 3), (1, 1, 3)),  # empty
    ((7, 1, 5), (7, 1, 5)),  # same shapes, a size-1 dim
    ((4, 5, 6), (4, 1, 6)),  # per-channel rows packed, refilled at each outer step
    ((3, 1, 33), (3, 9, 33)),  # the same, a repeated
    ((2, 70, 5), (2, 1, 5)),  # more rows than one pack holds, a partial last group
    ((1, 3, 200), (200,)),  # runs too long to pack
    ((1, 3, 128), (128,)),  # the longest packed run (2 rows per pack)
]
TAILS = list(range(1, 18)) + [31, 33, 64, 100]  # DSP words, MVE vectors, tails


def make(op, name, a_shape, b_shape, alias=None, extreme=False):
    """A case of `op` with operands of these shapes (the attributes of the same-shape makers)."""
    if op in ("maximum", "minimum"):
        base = minmax_case(name, op, (1,))
    elif op == "div":
        base = div_case(name, extreme)
    else:  # sub: add's attributes (their domain check covers the difference too)
        base = (mul_case if op == "mul" else add_case)(name, (1,), extreme=extreme)
        base = replace(base, op=op)
    rng = rng_for(name + "/operands")
    return replace(base, inputs=(s8(rng, a_shape), s8(rng, b_shape)), alias=alias)


def div_case(name, extreme=False):
    """div with M = s_a / (s_b * s_out) around 1/16..2 (extreme: any encoding of it)."""
    rng = rng_for(name)
    mult, shift = any_pair(rng, float(np.exp(rng.uniform(-3, 0.7))), 255, 1.0 if extreme else 0.0)
    out_zp = pick_zp(rng)
    act_min, act_max = pick_act(rng, out_zp)
    return Case(name, "div", (), dict(a_zp=pick_zp(rng), b_zp=pick_zp(rng), out_zp=out_zp,
                                      mult=mult, shift=shift, act_min=act_min, act_max=act_max))


def bcast_cases():
    cases = []
    for op in OPS:
        for i, (sa, sb) in enumerate(PAIRS):
            cases.append(make(op, f"bc_{op}_{i:02d}", sa, sb))
            if op in ("add", "sub", "mul", "div"):  # unusual scale encodings: general paths
                cases.append(make(op, f"bc_{op}_{i:02d}_extreme", sa, sb, extreme=True))
        for n in TAILS:
            cases += [make(op, f"bc_{op}_scalar_n{n}", (3, n), (1,)),
                      make(op, f"bc_{op}_ascalar_n{n}", (1, 1), (2, n)),
                      make(op, f"bc_{op}_chan_n{n}", (1, 3, 2, n), (n,)),
                      make(op, f"bc_{op}_col_n{n}", (2, 3, n), (2, 3, 1))]
        cases += [make(op, f"bc_{op}_inplace_a", (4, 5, 6), (6,), alias=0),
                  make(op, f"bc_{op}_inplace_b", (5, 1), (3, 5, 7), alias=1),
                  make(op, f"bc_{op}_inplace_lower", (6,), (1, 1, 6), alias=0)]
        rng = rng_for(f"bc_{op}_random")
        for i in range(24):
            r = int(rng.integers(1, 7))
            y = rng.integers(1, 6, size=r)
            sa = tuple(int(d) if rng.random() < 0.6 else 1 for d in y)
            sb = tuple(int(d) if rng.random() < 0.6 else 1 for d in y)
            sa, sb = sa[int(rng.integers(0, r + 1)):], sb[int(rng.integers(0, r)):]
            cases.append(make(op, f"bc_{op}_random_{i:02d}", sa, sb,
                              extreme=bool(rng.random() < 0.3)))
    return cases + bad_bcast_cases() + sub_edge_cases() + div_cases()


def div_cases():
    """div on every int8 pair (four quarters, the board runner's arena), zero divisors with
    every sign of a - a_zp, and the attribute domain's edges (shift 62 / 63, mult 2^31 - 1 / -1,
    zero points 127 / 128)."""
    x = np.arange(-128, 128, dtype=np.int64)
    a, b = np.repeat(x, 256).astype(np.int8), np.tile(x, 256).astype(np.int8)
    cases = []
    for k in range(4):
        base = div_case(f"div_all_pairs_{k}", extreme=k == 3)
        part = slice(k * 16384, (k + 1) * 16384)
        cases.append(replace(base, inputs=(a[part], b[part])))
    base = div_case("div_zero_divisor")
    zb = base.attrs["b_zp"]
    zero = replace(base, inputs=(x.astype(np.int8), np.full(256, zb, np.int8)))
    top = dict(mult=(1 << 31) - 1, shift=62, a_zp=127, b_zp=-128, out_zp=127)
    cases += [zero, replace(zero, name="div_zero_divisor_mult0", attrs={**base.attrs, "mult": 0}),
              replace(base, name="div_edge_max", attrs={**base.attrs, **top},
                      inputs=(a[::7], b[::7])),
              replace(base, name="div_edge_shift2", attrs={**base.attrs, "shift": 2,
                                                           "mult": (1 << 31) - 1},
                      inputs=(a[::5], b[::5]))]
    edge = replace(base, inputs=(a[:64], b[:64]))
    for suffix, attrs in (("shift63", dict(shift=63)), ("shift1", dict(shift=1)),
                          ("mult_int32_min", dict(mult=-(1 << 31))), ("mult_neg", dict(mult=-1)),
                          ("a_zp128", dict(a_zp=128)), ("b_zp_m129", dict(b_zp=-129)),
                          ("out_zp128", dict(out_zp=128)), ("act", dict(act_min=5, act_max=4))):
        cases.append(replace(edge, name=f"div_bad_{suffix}", status=BAD_ARGUMENT,
                             attrs={**edge.attrs, **attrs}, out_shape=(64,)))
    return cases


SUB_EDGE = dict(a_zp=127, a_shift=8, b_zp=-128, b_shift=8, out_zp=0, out_mult=1 << 30,
                out_shift=62, act_min=-128, act_max=127)
SUB_EDGE_MULT = 1077952576  # rq(-255) - rq(255) = -2^31 exactly; one more: -2^31 - 2


def sub_edge_cases():
    """sub's static domain at its edge: the difference a32 - b32 (not the sum) reaches INT32_MIN
    (accepted by both executors) or passes it (refused), with each a32, b32 inside int32."""
    rng = rng_for("sub_edge")
    x = (s8(rng, (3, 7)), s8(rng, (7,)))
    x[0][0, 0], x[1][0] = -128, 127
    m = SUB_EDGE_MULT
    ok = Case("sub_edge_int32_min", "sub", x, {**SUB_EDGE, "a_mult": m, "b_mult": m})
    bad = replace(ok, name="sub_edge_int32_min_bad", status=BAD_ARGUMENT, out_shape=(3, 7),
                  attrs={**ok.attrs, "a_mult": m + 1, "b_mult": m + 1})
    return [ok, bad, replace(ok, name="sub_edge_as_add", op="add")]  # the sum is far inside


def bad_bcast_cases():
    """Shape triples both executors refuse: operands that do not broadcast, and a y that is not
    their broadcast (larger, smaller, other rank)."""
    cases = []
    for op in OPS:
        base = make(op, f"bc_{op}_base", (2, 5), (5,))
        rng = rng_for(f"bc_{op}_bad")

        def bad(suffix, a_shape, b_shape, out_shape, ref_raises=True):
            return replace(base, name=f"bc_{op}_bad_{suffix}", status=BAD_ARGUMENT,
                           inputs=(s8(rng, a_shape), s8(rng, b_shape)), out_shape=out_shape,
                           ref_raises=ref_raises)
        cases += [bad("2_vs_3", (2, 5), (3, 5), (2, 5)), bad("inner", (2, 5), (2, 4), (2, 5)),
                  bad("zero_vs_3", (0, 5), (3, 5), (0, 5)),
                  bad("y_rank_up", (2, 5), (5,), (1, 2, 5), ref_raises=False),
                  bad("y_rank_down", (1, 2, 5), (5,), (2, 5), ref_raises=False),
                  bad("y_stretched", (2, 5), (5,), (4, 5), ref_raises=False),
                  bad("y_broadcast_dim", (2, 1), (1, 5), (2, 1), ref_raises=False),
                  bad("y_is_a", (2, 1), (2, 5), (2, 1), ref_raises=False),
                  bad("y_unit", (1,), (1,), (1, 1), ref_raises=False)]
    return cases


# ----------------------------------------------------------------------------- the definition

def _formula(op, a, b, at):
    """The integer formula of each op on numpy-broadcast int64 operands."""
    a, b = np.broadcast_arrays(a.astype(np.int64), b.astype(np.int64))
    if op == "maximum":
        return np.clip(np.maximum(a, b), at["act_min"], at["act_max"])
    if op == "minimum":
        return np.clip(np.minimum(a, b), at["act_min"], at["act_max"])
    if op == "div":
        return _div_formula(a, b, at)
    if op in ("add", "sub"):
        acc = (quant.rq(a - at["a_zp"], at["a_mult"], at["a_shift"])
               + (-1 if op == "sub" else 1) * quant.rq(b - at["b_zp"], at["b_mult"], at["b_shift"]))
        v = quant.rq(acc, at["out_mult"], at["out_shift"]) + at["out_zp"]
    else:
        v = quant.rq((a - at["a_zp"]) * (b - at["b_zp"]), at["mult"], at["shift"]) + at["out_zp"]
    return np.clip(v, at["act_min"], at["act_max"])


def _div_formula(a, b, at):
    """div from exact rationals: round half away from zero of (a - a_zp) * mult / (b - b_zp),
    then the shift, rounding half up; a zero divisor by the sign of a - a_zp."""
    out = []
    for u, v in zip(a.ravel().tolist(), b.ravel().tolist()):
        na, nb = u - at["a_zp"], v - at["b_zp"]
        if nb == 0:
            y = 127 if na > 0 else -128 if na < 0 else at["out_zp"]
        else:
            f = Fraction(na * at["mult"], nb)
            q = math.floor(abs(f) + Fraction(1, 2)) * (1 if f >= 0 else -1)
            y = min(max(math.floor(Fraction(q, 1 << at["shift"]) + Fraction(1, 2))
                        + at["out_zp"], -128), 127)
        out.append(min(max(y, at["act_min"]), at["act_max"]))
    return np.asarray(out, np.int64).reshape(a.shape)


@pytest.mark.parametrize("op", OPS)
def test_reference_is_numpy_broadcasting(op):
    for case in bcast_cases():
        if case.op != op or case.status != 0:
            continue
        a, b = case.inputs
        y = KERNELS[op](a, b, **case.attrs)
        assert y.dtype == np.int8 and y.shape == np.broadcast_shapes(a.shape, b.shape), case.name
        np.testing.assert_array_equal(y, _formula(op, a, b, case.attrs), err_msg=case.name)


def test_broadcast_shape_domain():
    assert broadcast_shape((3, 1, 5), (4, 1), "add") == (3, 4, 5)
    assert broadcast_shape((), (2,), "add") == (2,)
    assert broadcast_shape((0, 1), (1, 3), "add") == (0, 3)
    assert broadcast_shape((1,) * 6, (2,), "add") == (1,) * 5 + (2,)  # rank 6: the last accepted
    for sa, sb, what in (((2,), (3,), "do not broadcast"), ((1,) * 7, (1,), "at most 6"),
                         ((0,), (2,), "do not broadcast")):
        with pytest.raises(ValueError, match=what):
            broadcast_shape(sa, sb, "mul")
        if len(sa) <= 6:  # the kernels too
            for op in OPS:
                case = make(op, f"domain_{op}", sa, sb)
                with pytest.raises(ValueError, match=what):
                    KERNELS[op](*case.inputs, **case.attrs)
    with pytest.raises(ValueError, match="at most 6"):  # rank 7 operand
        case = make("add", "domain_rank7", (1,) * 7, (1,))
        KERNELS["add"](*case.inputs, **case.attrs)


# ----------------------------------------------------------------------------- the C kernels

@pytest.fixture(scope="module")
def cases():
    return bcast_cases()


def test_bcast_kernels_host(cases, tmp_path):
    run_host(cases, tmp_path)


@pytest.mark.qemu
@pytest.mark.parametrize("board,cpu", BOARD_PARAMS)
def test_bcast_kernels_qemu(cases, tmp_path, board, cpu):
    run_board(cases, tmp_path, board, cpu)


def test_case_table_covers_every_mode():
    """Every run mode of mt_bcast.h appears for every op: same-shape runs repeated (per-channel),
    a constant b (scalar, column), a constant a, and both operands broadcasting."""
    for op in OPS:
        shapes = [tuple(map(np.shape, c.inputs)) for c in bcast_cases() if c.op == op]
        assert ((1, 8, 8, 17), (17,)) in shapes and ((1, 8, 8, 17), (1, 8, 8, 1)) in shapes
        assert ((1, 1), (2, 5)) in shapes and ((3, 1, 5), (1, 4, 1)) in shapes
        assert any(len(s) == 6 for s, _ in shapes)


# ----------------------------------------------------------------------------- TOSA

TOSA_PAIRS = [((1, 8, 8, 17), (1, 1, 1, 17)), ((1, 8, 8, 17), (17,)),
              ((1, 1, 1, 17), (1, 8, 8, 17)), ((1, 8, 8, 17), (1, 8, 8, 1)),
              ((1, 8, 8, 17), (1,)), ((3, 1, 5), (1, 4, 1)), ((1,), (2, 3)),
              ((2, 1, 3, 1, 5, 1), (1, 4, 1, 2, 1, 3)), ((5, 7, 3), (5, 1, 3))]


@pytest.mark.parametrize("op", [op for op in OPS if op != "div"])
@pytest.mark.parametrize("pair", TOSA_PAIRS, ids=lambda p: f"{p[0]}x{p[1]}")
def test_tosa_broadcast(op, pair):
    """Operands of lower rank are reshaped to y's rank; TOSA broadcasts size-1 dims: bit-exact on
    the TOSA reference model (extremes and random inputs)."""
    from test_tosa import check_op

    case = make(op, f"tosa_{op}_{pair}", *pair)
    check_op(op, list(pair), (), None, **case.attrs)


def test_div_stays_on_the_cpu():
    """TOSA 1.0 INTDIV (int32, truncating) cannot express div's rounded 40-bit quotient."""
    from test_tosa import single_op

    from mcutorch.backends import tosa

    case = make("div", "tosa_div", (2, 3), (3,))
    ok, why = tosa.tosa_support(single_op("div", [(2, 3), (3,)], **case.attrs).nodes[0])
    assert not ok and "INTDIV" in why, why


# ----------------------------------------------------------------------------- end to end

class SqueezeExcite(nn.Module):
    """x * se(x) with [1, C, H, W] x [1, C, 1, 1], a bias parameter of rank 3, a row vector."""

    def __init__(self, c=12):
        super().__init__()
        self.conv = nn.Conv2d(3, c, 3, padding=1)
        self.fc1, self.fc2 = nn.Conv2d(c, 4, 1), nn.Conv2d(4, c, 1)
        self.col = nn.Conv2d(c, 1, 1)
        self.bias = nn.Parameter(torch.randn(c, 1, 1))
        self.row = nn.Parameter(torch.randn(7))

    def forward(self, x):
        y = torch.relu(self.conv(x))
        s = torch.sigmoid(self.fc2(torch.relu(self.fc1(y.mean((2, 3), keepdim=True)))))
        y = y * s + self.bias  # per channel, twice
        col = self.col(y)
        y = torch.maximum(y, col)  # a column: [1, 1, H, W]
        return torch.minimum(y, self.row) + nn.functional.max_pool2d(col, (9, 1))  # [7], [1,1,1,W]


class Vectors(nn.Module):
    """Broadcasts of rank 2 and 3 (no layout change): rows, columns, a scalar tensor."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 1)

    def forward(self, x, v, s):
        y = x * v + self.fc(x)  # [N, K] x [K], [N, K] + [N, 1]
        return torch.maximum(y.unsqueeze(0), s) * x.mean()  # rank 3, a [1], a [] scalar


def _agreement(ours, theirs):
    diff = np.abs(ours - theirs)
    return diff.max(), float(np.mean(diff <= 1))


def test_squeeze_excite_end_to_end():
    """Within 1 LSB of PyTorch's fake-quant model on >= 99 % of the elements (end to end and
    layer by layer), exact on the TOSA reference model; the broadcast operands stay small."""
    from test_pipeline import compile_and_compare

    from mcutorch.backends import tosa

    torch.manual_seed(5)
    model = SqueezeExcite().eval()
    cal = [torch.randn(1, 3, 9, 7) for _ in range(8)]
    program, ours, theirs = compile_and_compare(model, cal[0], cal)
    worst, within = _agreement(ours, theirs)
    print(f"squeeze-excite: {within:.2%} within 1 LSB, worst {worst}")
    assert within >= 0.99 and worst <= 2
    p = program.program
    names = [op.name for op in p.ops]
    assert {"mul", "add", "maximum", "minimum"} <= set(names), names
    small = {tuple(p.tensors[t].shape) for op in p.ops if op.name in OPS for t in op.inputs}
    assert {(1, 1, 1, 12), (1, 9, 7, 1), (1, 1, 7, 1)} <= small, small  # NHWC: [C], [H, W], [W]
    qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal)
    for r in layer_by_layer(qmodel, (cal[1],)):
        assert r["within_1lsb"] >= 0.99, r
    tosa.verify_program_graph(build_graph(qmodel))


def test_vectors_end_to_end():
    from mcutorch.backends import tosa

    torch.manual_seed(6)
    model = Vectors().eval()
    cal = [(torch.randn(5, 16), torch.randn(16), torch.randn(1)) for _ in range(8)]
    qmodel = mcutorch.quantize(model, cal[0], calibration=cal)
    program = mcutorch.compile(qmodel, cal[0])
    out = program.program.tensors[program.program.outputs[0]]
    q = lambda v: np.round(v / out.scale).astype(np.int64) + out.zero_point  # noqa: E731
    ours, theirs = q(program.run(*cal[1]).numpy()), q(qmodel(*cal[1]).detach().numpy())
    worst, within = _agreement(ours, theirs)
    print(f"vectors: {within:.2%} within 1 LSB, worst {worst}")
    assert within >= 0.99 and worst <= 2
    tosa.verify_program_graph(build_graph(qmodel))


class Differences(nn.Module):
    """x - y (broadcast both ways), torch.sub with alpha, rsub, add with a negative alpha."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.proj = nn.Conv2d(6, 1, 1)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        m = y.mean((2, 3), keepdim=True)
        d = y - m  # [1, C, H, W] - [1, C, 1, 1]
        d = torch.sub(d, self.proj(y), alpha=0.5)  # a column, alpha
        d = torch.rsub(m, d, alpha=2)  # d - 2 * m
        return torch.add(d, y, alpha=-1.5), 1 - m  # d - 1.5 * y; a table


def test_sub_end_to_end():
    """sub of two tensors within 1 LSB of fake-quant, layer by layer too, exact on TOSA; each
    alpha folds into b's rescale (no extra op), `1 - m` stays a table."""
    from mcutorch.backends import tosa

    torch.manual_seed(7)
    model = Differences().eval()
    cal = [torch.randn(1, 3, 8, 5) for _ in range(8)]
    qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal)
    program = mcutorch.compile(qmodel, (cal[0],))
    names = [op.name for op in program.program.ops]
    assert names.count("sub") == 4 and "lut" in names, names
    ours, theirs = program.run(cal[1]), qmodel(cal[1])
    for k, (o, t) in enumerate(zip(ours, theirs)):
        out = program.program.tensors[program.program.outputs[k]]
        q = lambda v: np.round(v / out.scale).astype(np.int64) + out.zero_point  # noqa: E731
        worst, within = _agreement(q(o.numpy()), q(t.detach().numpy()))
        print(f"differences output {k}: {within:.2%} within 1 LSB, worst {worst}")
        assert within >= 0.99 and worst <= 2
    for r in layer_by_layer(qmodel, (cal[1],)):
        assert r["within_1lsb"] >= 0.99, r
    tosa.verify_program_graph(build_graph(qmodel))


class Ratios(nn.Module):
    """x / y of activations: a per-channel divisor kept away from 0, and torch.div of equal
    shapes."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        scale = torch.sigmoid(y.mean((2, 3), keepdim=True)) + 0.5  # in [0.5, 1.5]
        return y / scale, torch.div(y, torch.sigmoid(y) + 0.25)


def test_div_end_to_end():
    """div within 1 LSB of PyTorch's fake-quant model on >= 99 % of the elements; on the CPU."""
    torch.manual_seed(8)
    model = Ratios().eval()
    cal = [torch.randn(1, 3, 7, 6) for _ in range(8)]
    qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal)
    program = mcutorch.compile(qmodel, (cal[0],))
    assert [op.name for op in program.program.ops].count("div") == 2
    for x in cal[1:3]:
        for k, (o, t) in enumerate(zip(program.run(x), qmodel(x))):
            out = program.program.tensors[program.program.outputs[k]]
            q = lambda v: np.round(v / out.scale).astype(np.int64) + out.zero_point  # noqa: E731
            worst, within = _agreement(q(o.numpy()), q(t.detach().numpy()))
            print(f"ratios output {k}: {within:.2%} within 1 LSB, worst {worst}")
            assert within >= 0.99 and worst <= 2
    for r in layer_by_layer(qmodel, (cal[1],)):
        assert r["within_1lsb"] >= 0.99, r


@pytest.mark.parametrize("target", ["cortex-m55+ethos-u55-128", "cortex-m55+ethos-u85-256"])
def test_broadcasts_go_to_the_npu(target):
    """Vela 5.2 takes the broadcasting ADD/SUB/MUL/MAXIMUM/MINIMUM sequences (squeeze-and-excite,
    the differences): every op in delegates, outputs equal to the CPU-only program's."""
    for model, shape in ((SqueezeExcite(), (1, 3, 9, 7)), (Differences(), (1, 3, 8, 5))):
        torch.manual_seed(9)
        cal = [torch.randn(*shape) for _ in range(4)]
        qmodel = mcutorch.quantize(model.eval(), (cal[0],), calibration=cal)
        npu = mcutorch.compile(qmodel, (cal[0],), target=target, board="mps3-an547")
        rows = [r for r in npu.program.metadata["placement"]
                if r["on"] != "host" and r["op"] != "copy"]
        assert {r["on"] for r in rows} == {"NPU"}, rows
        assert {r["op"] for r in rows} & {"add", "sub", "mul", "maximum", "minimum"}
        cpu = mcutorch.compile(qmodel, (cal[0],))
        for o, c in zip(npu.run(cal[1]), cpu.run(cal[1])):
            assert torch.equal(o, c)


MODELS = {"squeeze_excite": (SqueezeExcite, ((1, 3, 9, 7),)),
          "differences": (Differences, ((1, 3, 8, 5),)), "ratios": (Ratios, ((1, 3, 7, 6),)),
          "vectors": (Vectors, ((5, 16), (16,), (1,)))}


def _program(name, target="cortex-m55"):
    cls, shapes = MODELS[name]
    torch.manual_seed(10)
    cal = [tuple(torch.randn(*s) for s in shapes) for _ in range(4)]
    qmodel = mcutorch.quantize(cls().eval(), cal[0], calibration=cal)
    program = mcutorch.compile(qmodel, cal[0], target=target)
    return program, program.quantize_inputs(list(cal[1]))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_c_runtime_runs_the_programs(name):
    """The whole program (loader, validator, interpreter, kernels) in the host C runtime under
    ASan + UBSan equals the Python reference bit for bit."""
    from mcutorch.device import crt

    program, x = _program(name)
    want = program.run_int8(x)
    got = crt.run_host(program.program, x)
    assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))


@pytest.mark.qemu
@pytest.mark.parametrize("target,board", [("cortex-m55", "mps3-an547"),
                                          ("cortex-m0plus", "mps2-an385")])
def test_boards_run_the_programs(target, board):
    """The same programs as firmware on an emulated M55 (MVE) and M0+ (Armv6-M, no divide)."""
    from mcutorch.device import firmware

    for name in sorted(MODELS):
        program, x = _program(name, target)
        run = firmware.run(program.program, x, board)
        assert all(np.array_equal(a, b) for a, b in zip(run.outputs, program.run_int8(x))), name


def test_unsupported_broadcasts_name_the_op():
    """A 4-D operand (stored NHWC) of a 5-D broadcast would be read in the wrong order: refused,
    naming the source line; torch itself refuses shapes that do not broadcast."""
    from mcutorch.errors import UnsupportedOpError

    class Up(nn.Module):
        def forward(self, x, y):
            return x + y

    qmodel = mcutorch.quantize(Up(), (torch.randn(1, 3, 4, 5), torch.randn(2, 1, 3, 4, 5)))
    with pytest.raises(UnsupportedOpError, match=r"test_bcast.py:\d+.*4-D operand .* 5-D"):
        build_graph(qmodel)
