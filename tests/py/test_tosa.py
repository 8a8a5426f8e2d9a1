"""TOSA 1.0 lowering (mcutorch.backends.tosa): the TOSA reference model must equal mcutorch.ref
bit for bit, op by op (random shapes and qparams, edge cases) and on whole models; Vela must accept
the lowered graphs. Needs the `npu` extra (tosa-tools, ethos-u-vela)."""
from __future__ import annotations

import math

import numpy as np
import needs
import pytest
import torch

needs.module("tosa_serializer")
needs.module("tosa_reference_model")

import mcutorch  # noqa: E402
from mcutorch import quant  # noqa: E402
from mcutorch.backends import tosa  # noqa: E402
from mcutorch.backends.tosa import lower as tosa_lower  # noqa: E402
from mcutorch.backends.tosa import rules as tosa_rules  # noqa: E402
from mcutorch.compiler import build_graph  # noqa: E402
from mcutorch.errors import McutorchError, UnsupportedOpError  # noqa: E402
from mcutorch.ir import Graph, Node, Tensor  # noqa: E402
from mcutorch.ref import KERNELS, concat_attrs, pad_attrs, transpose_attrs  # noqa: E402

FULL = dict(act_min=-128, act_max=127)


# ----------------------------------------------------------------------------- helpers

def single_op(op: str, shapes, consts=(), **attrs) -> Graph:
    """A one-node graph: activations of `shapes` (int8), then constant operands."""
    xs = [Tensor(f"x{i}", tuple(s)) for i, s in enumerate(shapes)]
    cs = [Tensor(f"c{i}", a.shape, dtype=str(a.dtype), data=a) for i, a in enumerate(consts)]
    y = KERNELS[op](*(np.zeros(s, np.int8) for s in shapes), *consts, **attrs)
    out = Tensor("y", y.shape)
    return Graph([Node(op, xs + cs, [out], dict(attrs))], xs, [out])


def input_sets(shapes, rng, n_random=3):
    """Extremes (all -128, all 127) and random int8 inputs."""
    sets = [[np.full(s, v, np.int8) for s in shapes] for v in (-128, 127)]
    return sets + [[rng.integers(-128, 128, s, dtype=np.int8) for s in shapes]
                   for _ in range(n_random)]


def check_op(op, shapes, consts=(), rng=None, **attrs):
    """Lower one op and compare with the reference on extreme and random inputs."""
    rng = rng or np.random.default_rng(0)
    graph = single_op(op, shapes, consts, **attrs)
    ok, why = tosa.tosa_support(graph.nodes[0])
    assert ok, why
    for arrays in input_sets(shapes, rng):
        tosa.verify(graph, None, arrays)
    return graph


def mac_consts(rng, w_shape, cout, fan_in, zero_channel=False):
    """int8 weights, int32 bias and per-channel (mult, shift) giving outputs of a useful size."""
    w = rng.integers(-127, 128, w_shape, dtype=np.int8)
    bias = rng.integers(-4000, 4000, cout).astype(np.int32)
    real = rng.uniform(0.5, 2.0, cout) * 60 / (math.sqrt(fan_in) * 74 * 74)
    if zero_channel:
        real[0] = 0.0  # stored as (0, 2): the lowering must keep it exact
    mult, shift = quant.quantize_multipliers(real)
    return [w, bias, mult, shift]


def conv_attrs(stride, dilation, pads, in_zp, out_zp, act):
    return dict(stride_h=stride[0], stride_w=stride[1], dilation_h=dilation[0],
                dilation_w=dilation[1], pad_top=pads[0], pad_left=pads[1], pad_bottom=pads[2],
                pad_right=pads[3], in_zp=in_zp, out_zp=out_zp, act_min=act[0], act_max=act[1])


# ----------------------------------------------------------------------------- MAC ops

CONV_CASES = [  # (N, H, W, Cin, Cout, (KH, KW), stride, dilation, (t, l, b, r), groups, zp, act)
    (1, 9, 9, 3, 17, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 1, (-5, 3), (-128, 127)),  # odd, s2
    (1, 8, 8, 17, 3, (3, 3), (2, 2), (1, 1), (0, 0, 1, 1), 1, (127, -128), (0, 127)),  # even
    (1, 10, 7, 1, 1, (3, 2), (1, 2), (2, 1), (2, 0, 1, 3), 1, (-128, 127), (-128, -40)),
    (2, 7, 7, 4, 6, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 2, (10, -10), (-20, 90)),  # grouped
    (1, 6, 6, 3, 6, (3, 3), (2, 1), (1, 1), (1, 0, 1, 2), 3, (0, 0), (-128, 127)),  # Cg = 1, x2
    (1, 5, 5, 8, 4, (5, 5), (7, 7), (1, 1), (0, 0, 0, 0), 1, (-128, -128), (-128, 127)),  # global
    (1, 11, 9, 5, 7, (2, 4), (4, 3), (1, 2), (0, 3, 1, 0), 1, (33, 77), (-100, 100)),  # stride 4
    (1, 32, 32, 3, 16, (1, 1), (2, 2), (1, 1), (0, 0, 0, 0), 1, (-3, 4), (-128, 127)),  # 1x1 s2
]


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{c[1]}x{c[2]}x{c[3]}-{c[4]}g{c[9]}")
def test_conv2d(case):
    n, h, w, cin, cout, k, stride, dil, pads, groups, (izp, ozp), act = case
    rng = np.random.default_rng(h * 100 + cout)
    consts = mac_consts(rng, (cout, *k, cin // groups), cout, k[0] * k[1] * cin // groups,
                        zero_channel=cout > 3)
    check_op("conv2d", [(n, h, w, cin)], consts, rng, groups=groups,
             **conv_attrs(stride, dil, pads, izp, ozp, act))


CONVT_CASES = [  # (N, H, W, Cin, Cout, (KH, KW), stride, (t, l, b, r), groups, zp, act)
    (1, 8, 8, 32, 16, (4, 4), (2, 2), (1, 1, 1, 1), 1, (-5, 3), (-128, 127)),  # decoder k4 s2
    (1, 5, 7, 3, 4, (3, 3), (2, 2), (1, 1, 0, 0), 1, (127, -128), (0, 127)),  # output_padding
    (1, 4, 5, 2, 3, (3, 3), (3, 3), (0, 0, -2, -2), 1, (-128, 127), (-128, -40)),  # op = s - 1
    (2, 4, 4, 3, 5, (2, 2), (4, 3), (0, 0, 0, 0), 1, (10, -10), (-20, 90)),  # stride > kernel
    (1, 4, 4, 6, 4, (3, 3), (2, 2), (1, 1, 1, 1), 2, (0, 0), (-128, 127)),  # groups
    (1, 5, 5, 4, 8, (4, 4), (2, 2), (1, 1, 1, 1), 4, (33, 77), (-100, 100)),  # depthwise, M 2
    (1, 1, 9, 5, 4, (1, 3), (1, 2), (0, 1, 0, 0), 1, (-3, 4), (-128, 127)),  # 1-D
]


@pytest.mark.parametrize("case", CONVT_CASES, ids=lambda c: f"{c[1]}x{c[2]}x{c[3]}-{c[4]}g{c[8]}")
def test_conv_transpose2d(case):
    n, h, w, cin, cout, k, stride, pads, groups, (izp, ozp), act = case
    rng = np.random.default_rng(h * 100 + cout)
    consts = mac_consts(rng, (cout, *k, cin // groups), cout, k[0] * k[1] * cin // groups,
                        zero_channel=cout > 3)
    check_op("conv_transpose2d", [(n, h, w, cin)], consts, rng, groups=groups,
             **conv_attrs(stride, (1, 1), pads, izp, ozp, act))


def test_conv_transpose2d_reasons():
    """Dilation and padding >= kernel stay on the CPU, with the reason `inspect` shows."""
    rng = np.random.default_rng(1)
    consts = mac_consts(rng, (3, 3, 3, 2), 3, 18)
    for dil, pads, why in (((2, 1), (0, 0, 0, 0), "dilation"),
                           ((1, 1), (3, 0, 0, 0), "padding >= kernel")):
        graph = single_op("conv_transpose2d", [(1, 4, 4, 2)], consts, groups=1,
                          **conv_attrs((2, 2), dil, pads, 0, 0, (-128, 127)))
        ok, reason = tosa.tosa_support(graph.nodes[0])
        assert not ok and why in reason, reason


DW_CASES = [  # (H, W, C, M, (KH, KW), stride, dilation, pads, zp, act)
    (9, 9, 1, 1, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), (-128, 0), (-128, 127)),
    (8, 8, 3, 2, (3, 3), (2, 2), (1, 1), (0, 0, 1, 1), (127, 5), (0, 127)),
    (7, 10, 17, 1, (3, 3), (1, 1), (2, 2), (2, 2, 2, 2), (4, -128), (-128, 127)),
    (6, 5, 3, 2, (2, 3), (1, 2), (1, 1), (1, 0, 0, 2), (-7, 9), (-50, 50)),
    (30, 1, 4, 1, (3, 1), (1, 1), (1, 1), (0, 0, 0, 0), (5, 5), (-128, 127)),
]


@pytest.mark.parametrize("case", DW_CASES, ids=lambda c: f"{c[0]}x{c[1]}x{c[2]}m{c[3]}")
def test_depthwise_conv2d(case):
    h, w, c, m, k, stride, dil, pads, (izp, ozp), act = case
    rng = np.random.default_rng(h * 10 + c)
    consts = mac_consts(rng, (*k, c * m), c * m, k[0] * k[1], zero_channel=True)
    check_op("depthwise_conv2d", [(1, h, w, c)], consts, rng, depth_multiplier=m,
             **conv_attrs(stride, dil, pads, izp, ozp, act))


@pytest.mark.parametrize("n,cin,cout,zp,act", [(1, 64, 12, (-128, 11), (-128, 127)),
                                               (2, 17, 3, (127, -128), (0, 127)),
                                               (1, 1, 1, (0, 0), (-128, 127)),
                                               (3, 40, 17, (-1, 100), (-60, 60))])
def test_fully_connected(n, cin, cout, zp, act):
    rng = np.random.default_rng(cin)
    consts = mac_consts(rng, (cout, cin), cout, cin)
    check_op("fully_connected", [(n, cin)], consts, rng, in_zp=zp[0], out_zp=zp[1],
             act_min=act[0], act_max=act[1])


# ----------------------------------------------------------------------------- element-wise

def add_attrs(s_a, s_b, s_out, a_zp, b_zp, out_zp, act=(-128, 127)):
    """The left-shift scheme of docs/numerics.md."""
    big = 2 * max(s_a, s_b)
    am, ash = quant.quantize_multiplier((1 << 20) * s_a / big)
    bm, bsh = quant.quantize_multiplier((1 << 20) * s_b / big)
    om, osh = quant.quantize_multiplier(big / ((1 << 20) * s_out))
    return dict(a_zp=a_zp, a_mult=am, a_shift=ash, b_zp=b_zp, b_mult=bm, b_shift=bsh,
                out_zp=out_zp, out_mult=om, out_shift=osh, act_min=act[0], act_max=act[1])


@pytest.mark.parametrize("scales,zps,act", [((0.1, 0.1, 0.2), (0, 0, 0), (-128, 127)),
                                            ((0.02, 0.5, 0.3), (-128, 127, -128), (0, 127)),
                                            ((1.0, 0.01, 0.004), (127, -128, 127), (-90, 30))])
def test_add(scales, zps, act):
    check_op("add", [(1, 5, 7, 3)] * 2, (), None, **add_attrs(*scales, *zps, act))


@pytest.mark.parametrize("zps,real,act", [((0, 0, 0), 1 / 128, (-128, 127)),  # direct int8 MUL
                                          ((-128, 127, 5), 1 / 300, (-128, 127)),
                                          ((127, -128, -128), 0.004, (0, 127)),
                                          ((3, 0, 60), 0.02, (-30, 30))])
def test_mul(zps, real, act):
    mult, shift = quant.quantize_multiplier(real)
    check_op("mul", [(2, 3, 4, 5)] * 2, (), None, a_zp=zps[0], b_zp=zps[1], out_zp=zps[2],
             mult=mult, shift=shift, act_min=act[0], act_max=act[1])


@pytest.mark.parametrize("a,b,tb,zps,act", [
    ((16, 16), (16, 16), 1, (-128, 127, 3), (-128, 127)),  # attention's Q @ K^T
    ((16, 16), (16, 20), 0, (127, -128, -128), (0, 127)),  # P @ V
    ((1, 1), (1, 5), 0, (0, 0, 0), (-128, 127)),  # K = 1
    ((2, 3, 17), (2, 5, 17), 1, (5, -7, 60), (-30, 30)),
    ((1, 4, 9), (3, 9, 6), 0, (-3, 2, 1), (-128, 127)),  # broadcast batch (TILE)
    ((2, 1, 3, 8), (1, 3, 5, 8), 1, (11, -128, 0), (-128, 127)),
])
def test_matmul(a, b, tb, zps, act):
    mult, shift = quant.quantize_multiplier(30 / (math.sqrt(a[-1]) * 74 * 74))
    check_op("matmul", [a, b], (), None, transpose_b=tb, a_zp=zps[0], b_zp=zps[1],
             out_zp=zps[2], mult=mult, shift=shift, act_min=act[0], act_max=act[1])


@pytest.mark.parametrize("real,zps,act", [(0.37, (-128, 127), (-128, 127)),
                                          (3.9, (127, -128), (-128, 127)),
                                          (1e-3, (0, 0), (-128, 127)),
                                          (1.0, (17, -17), (-5, 5)),
                                          (200.0, (0, 0), (-128, 127))])
def test_rescale(real, zps, act):
    mult, shift = quant.quantize_multiplier(real)
    check_op("rescale", [(4, 9)], (), None, in_zp=zps[0], out_zp=zps[1], mult=mult, shift=shift,
             act_min=act[0], act_max=act[1])


@pytest.mark.parametrize("lo,hi", [(-128, 127), (0, 127), (-128, -128), (-3, 6)])
def test_clamp(lo, hi):
    check_op("clamp", [(1, 3, 3, 8)], act_min=lo, act_max=hi)


@pytest.mark.parametrize("op", ["maximum", "minimum"])
@pytest.mark.parametrize("lo,hi", [(-128, 127), (0, 127), (-9, 20)])
def test_minmax(op, lo, hi):
    check_op(op, [(1, 5, 3, 7), (1, 5, 3, 7)], act_min=lo, act_max=hi)


def test_lut():
    table = np.random.default_rng(7).integers(-128, 128, 256, dtype=np.int8)
    check_op("lut", [(1, 4, 4, 16)], (table,))
    ramp = np.arange(256, dtype=np.int64)
    check_op("lut", [(2, 256)], (((ramp * 37) % 256 - 128).astype(np.int8),))


# ----------------------------------------------------------------------------- pooling

def pool_attrs(k, s, pads):
    return dict(kernel_h=k[0], kernel_w=k[1], stride_h=s[0], stride_w=s[1], pad_top=pads[0],
                pad_left=pads[1], pad_bottom=pads[2], pad_right=pads[3])


@pytest.mark.parametrize("hw,k,s,pads,act", [((9, 9), (3, 3), (2, 2), (1, 1, 1, 1), (-128, 127)),
                                             ((8, 8), (2, 2), (2, 2), (0, 0, 0, 0), (0, 127)),
                                             ((7, 6), (3, 2), (2, 1), (0, 1, 2, 0), (-128, 127)),
                                             ((5, 5), (5, 5), (4, 4), (0, 0, 0, 0), (-10, 10)),
                                             ((6, 7), (3, 3), (2, 2), (1, 1, 2, 2), (-128, 127)),
                                             ((21, 10), (3, 1), (3, 1), (0, 0, 0, 0), (-128, 127)),
                                             ((7, 21), (1, 3), (1, 3), (0, 0, 0, 0), (0, 127)),
                                             ((1, 13), (1, 3), (1, 2), (0, 1, 0, 2), (-128, 127))])
def test_max_pool2d(hw, k, s, pads, act):
    check_op("max_pool2d", [(1, *hw, 5)], act_min=act[0], act_max=act[1],
             **pool_attrs(k, s, pads))


AVG_CASES = [  # (H, W), kernel, stride, pads, count_include_pad, divisor, (in_zp, out_zp), act
    ((9, 9), (3, 3), (2, 2), (1, 1, 1, 1), 0, 0, (-128, -128), (-128, 127)),
    ((9, 9), (3, 3), (2, 2), (1, 1, 1, 1), 1, 0, (5, 5), (-128, 127)),
    ((8, 8), (3, 3), (2, 2), (0, 1, 2, 0), 1, 0, (127, 127), (0, 127)),
    ((8, 8), (3, 3), (2, 2), (0, 1, 2, 0), 0, 0, (-3, 60), (-128, 127)),
    ((8, 8), (2, 2), (2, 2), (0, 0, 0, 0), 0, 0, (10, 10), (-128, 127)),
    ((25, 5), (25, 5), (25, 5), (0, 0, 0, 0), 1, 0, (-128, -128), (-128, 127)),  # KWS global
    ((7, 7), (3, 3), (1, 1), (1, 1, 1, 1), 0, 5, (0, 0), (-128, 127)),  # divisor != count
    ((7, 7), (3, 3), (2, 2), (1, 1, 1, 1), 0, 9, (-7, -7), (-40, 40)),  # divisor = KH*KW
    ((6, 6), (2, 3), (2, 2), (1, 0, 1, 2), 1, 7, (127, -128), (-128, 127)),
]


@pytest.mark.parametrize("case", AVG_CASES, ids=lambda c: f"{c[0]}-k{c[1]}-cip{c[4]}-d{c[5]}")
def test_avg_pool2d(case):
    hw, k, s, pads, cip, divisor, (izp, ozp), act = case
    check_op("avg_pool2d", [(1, *hw, 3)], count_include_pad=cip, divisor=divisor, in_zp=izp,
             out_zp=ozp, act_min=act[0], act_max=act[1], **pool_attrs(k, s, pads))


# ----------------------------------------------------------------------------- data movement

@pytest.mark.parametrize("shape,perm", [((1, 4, 5, 3), (0, 3, 1, 2)), ((2, 3, 4, 5), (3, 2, 1, 0)),
                                        ((4, 7), (1, 0)), ((2, 3, 5), (2, 0, 1)), ((6,), (0,))])
def test_transpose(shape, perm):
    check_op("transpose", [shape], **transpose_attrs(perm))


@pytest.mark.parametrize("shapes,axis", [([(1, 3, 3, 2), (1, 3, 3, 5), (1, 3, 3, 1)], 3),
                                         ([(1, 2, 4, 3), (1, 5, 4, 3)], 1),
                                         ([(2, 3), (2, 4)], 1), ([(3, 2, 2)], 0)])
def test_concat(shapes, axis):
    check_op("concat", shapes, **concat_attrs(axis, len(shapes[0])))


@pytest.mark.parametrize("shape,pads,value", [((1, 4, 4, 3), [(0, 0), (1, 2), (0, 3), (0, 0)], -7),
                                              ((3, 5), [(1, 0), (2, 2)], 127),
                                              ((2, 3, 4), [(0, 1), (0, 0), (3, 0)], -128)])
def test_pad(shape, pads, value):
    check_op("pad", [shape], **pad_attrs(pads, value))


def test_copy_and_reshape():
    check_op("copy", [(1, 2, 3, 4)])
    x, y = Tensor("x", (1, 1, 1, 24)), Tensor("y", (1, 24))
    graph = Graph([Node("reshape", [x], [y])], [x], [y])
    tosa.verify(graph, None, [np.arange(-12, 12, dtype=np.int8).reshape(1, 1, 1, 24)])


# ----------------------------------------------------------------------------- refusals, errors

def test_softmax_stays_on_the_cpu():
    table = np.full(256, 1, np.int32)
    table[0] = 65536
    graph = single_op("softmax", [(1, 10)], (table,))
    ok, why = tosa.tosa_support(graph.nodes[0])
    assert not ok and why.startswith("softmax:") and "no softmax" in why
    with pytest.raises(UnsupportedOpError, match="softmax"):
        tosa.lower_graph(graph)


def test_rescale_value_bound_is_refused_and_real(monkeypatch):
    """TOSA apply_scale_32 needs -2^(shift-1) <= value < 2^(shift-1); our rq only needs the
    result in int32. With shift 8 (M = 2^22) x - in_zp reaches 255 >= 2^7: refused, and TOSA
    really reports UNPREDICTABLE where the reference returns a value."""
    graph = single_op("rescale", [(1, 4)], in_zp=-128, out_zp=0, mult=1 << 30, shift=28,
                      **FULL)
    assert tosa.tosa_support(graph.nodes[0])[0]  # M = 4, shift 28: |255| < 2^27, fine
    graph = single_op("rescale", [(1, 4)], in_zp=-128, out_zp=0, mult=1 << 30, shift=8, **FULL)
    ok, why = tosa.tosa_support(graph.nodes[0])
    assert not ok and "apply_scale_32" in why and "rescale" in why
    x = np.array([[127, 0, -128, -100]], np.int8)
    KERNELS["rescale"](x, **graph.nodes[0].attrs)  # the reference defines it
    monkeypatch.setattr(tosa_lower, "tosa_support", lambda node: (True, ""))
    with pytest.raises(McutorchError, match="UNPREDICTABLE"):
        tosa.verify(graph, None, [x])


def test_conv_accumulator_bound_is_refused():
    rng = np.random.default_rng(1)
    w, bias, _, _ = mac_consts(rng, (2, 3, 3, 64), 2, 576)
    mult, shift = np.array([1 << 30, 1 << 30], np.int32), np.array([40, 12], np.int32)
    graph = single_op("conv2d", [(1, 3, 3, 64)], (w, bias, mult, shift), groups=1,
                      **conv_attrs((1, 1), (1, 1), (0, 0, 0, 0), 0, 0, (-128, 127)))
    ok, why = tosa.tosa_support(graph.nodes[0])
    assert not ok and "channel 1" in why and "shift 12" in why


def test_windows_only_in_padding_are_refused():
    """Our conv defines outputs whose windows read only padding (bias alone); TOSA would need an
    empty SLICE (the reference model crashes on one), so the op stays on the CPU."""
    rng = np.random.default_rng(2)
    consts = mac_consts(rng, (1, 2, 4), 4, 2)
    graph = single_op("depthwise_conv2d", [(1, 1, 6, 2)], consts, depth_multiplier=2,
                      **conv_attrs((4, 1), (1, 1), (1, 0, 0, 0), 0, 0, (-128, 127)))
    ok, why = tosa.tosa_support(graph.nodes[0])
    assert not ok and "all padding" in why


def test_mismatch_names_the_op(monkeypatch):
    """A wrong lowering is caught and located: op, tensor, number of differing elements."""
    mult, shift = quant.quantize_multiplier(0.5)
    x, mid, y = Tensor("x", (1, 8)), Tensor("mid", (1, 8)), Tensor("y", (1, 8))
    nodes = [Node("rescale", [x], [mid], dict(in_zp=0, out_zp=0, mult=mult, shift=shift, **FULL)),
             Node("clamp", [mid], [y], dict(act_min=-10, act_max=10))]
    graph = Graph(nodes, [x], [y])
    wrong = lambda b, node, ins, out, notes: b.clamp(ins[0], -10, 9, out)  # noqa: E731
    monkeypatch.setitem(tosa_rules.RULES, "clamp", (tosa_rules.S.exact, wrong))
    where = r"at clamp .*y: 4 of 8 elements differ; first at \[0, 4\]: TOSA 9, reference 10"
    with pytest.raises(McutorchError, match=where):
        tosa.verify(graph, None, [np.arange(0, 40, 5, dtype=np.int8).reshape(1, 8)])


# ----------------------------------------------------------------------------- models

class EveryLowering(torch.nn.Module):
    """One small network that reaches every TOSA lowering rule through the real compiler, with a
    softmax in the middle (two TOSA runs)."""

    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.grouped = nn.Conv2d(8, 8, 3, padding=1, groups=4)
        self.dw = nn.Conv2d(8, 16, 3, padding=2, dilation=2, groups=8)
        self.pw = nn.Conv2d(16, 8, 1)
        self.fc = nn.Linear(16 * 1 * 3, 12)
        self.head = nn.Linear(12, 5)

    def forward(self, x):
        F = torch.nn.functional
        y = F.relu6(self.stem(F.pad(x, (1, 0, 0, 1))))
        y = F.hardtanh(self.grouped(y), -0.5, 1.5)
        z = self.pw(F.relu(self.dw(y)))
        z = z * torch.sigmoid(z) + F.hardswish(torch.tanh(z))
        z = F.avg_pool2d(z, 3, stride=2, padding=1, count_include_pad=True)  # 7x6 -> 4x3
        z = F.max_pool2d(torch.cat([z, torch.clamp(z, -0.3, 0.3)], 1), 2, ceil_mode=True)
        z = F.pad(z.permute(0, 1, 3, 2), (0, 1, 1, 0))  # 2x2 -> 3x3
        z = F.avg_pool2d(z, 3, stride=1, padding=1, divisor_override=5)
        z = F.adaptive_avg_pool2d(z, (1, 3))
        return self.head(torch.softmax(self.fc(torch.flatten(z, 1)), dim=-1))


@pytest.fixture(scope="module")
def every_lowering():
    torch.manual_seed(0)
    model = EveryLowering().eval()
    cal = [torch.randn(1, 3, 13, 11) for _ in range(4)]
    graph = build_graph(mcutorch.quantize(model, (cal[0],), calibration=cal))
    t = graph.inputs[0]
    return graph, [quant.quantize(c.numpy().transpose(0, 2, 3, 1), t.scale, t.zero_point)
                   for c in cal]


def test_every_lowering_through_the_compiler(every_lowering, tmp_path):
    graph, real = every_lowering
    runs = tosa.tosa_runs(graph)
    assert len(runs) == 2 and runs[1][-1].op == "fully_connected"
    lowered = tosa.verify_program_graph(graph, rng_inputs=4, inputs=[[x] for x in real])
    ops = {n.op for tg in lowered for n in tg.nodes}
    assert ops >= {"conv2d", "depthwise_conv2d", "fully_connected", "add", "mul", "lut",
                   "avg_pool2d", "max_pool2d", "concat", "transpose", "pad"}, ops
    notes = "\n".join(s for tg in lowered for s in tg.notes)
    assert "PAD -> AVG_POOL2D" in notes and "per group" in notes and "divisor 5" in notes, notes


MODELS = ["kws", "vww", "ic", "ad", "sww", "mobilenet_v2"]


@pytest.fixture(scope="module")
def model_graphs():
    """(graph, real int8 inputs) per model, random weights, built once per module."""
    from mcutorch.models import build, example_input, mobilenet_v2

    cache = {}

    def get(name):
        if name not in cache:
            torch.manual_seed(0)
            model = mobilenet_v2(width=0.35, resolution=96) if name == "mobilenet_v2" \
                else build(name)
            xs = [example_input(model.eval(), seed=i) for i in range(3)]
            graph = build_graph(mcutorch.quantize(model, (xs[0],), calibration=xs))
            t = graph.inputs[0]
            arrays = [x.numpy().transpose(0, 2, 3, 1) if x.ndim == 4 else x.numpy() for x in xs]
            cache[name] = graph, [quant.quantize(a, t.scale, t.zero_point) for a in arrays]
        return cache[name]

    return get


@pytest.mark.parametrize("name", MODELS)
def test_model_lowered_as_one_graph_is_exact(name, model_graphs):
    graph, real = model_graphs(name)
    nodes = [n for n in graph.nodes if n.op != "softmax"]
    assert all(tosa.tosa_support(n)[0] for n in nodes)
    assert [len(r) for r in tosa.tosa_runs(graph)] == [len(nodes)]
    tg = tosa.lower_graph(graph, nodes)
    assert len(tg.inputs) == 1 and len(tg.outputs) == 1
    if any(n.op == "softmax" for n in graph.nodes):  # the softmax input is the boundary
        assert tg.outputs[0] is [n for n in graph.nodes if n.op == "softmax"][0].inputs[0]
    rng = np.random.default_rng(1)
    for x in [*real, rng.integers(-128, 128, graph.inputs[0].shape, dtype=np.int8)]:
        tosa.verify(graph, nodes, [x])


def test_verify_program_graph_and_subgraphs(model_graphs):
    graph, real = model_graphs("ic")
    lowered = tosa.verify_program_graph(graph, rng_inputs=2, inputs=real[:1])
    assert len(lowered) == 1 and lowered[0].notes
    middle = graph.nodes[3:9]  # a connected piece from inside the graph, fed real activations
    from mcutorch.backends.tosa.verify import run_reference

    values = run_reference(graph.nodes, {id(graph.inputs[0]): real[0]})
    tg = tosa.lower_graph(graph, middle)
    tosa.verify(graph, middle, {t: values[id(t)] for t in tg.inputs})


def test_emit_tosa(model_graphs, tmp_path):
    graph, _ = model_graphs("kws")
    paths = tosa.emit_tosa(graph, tmp_path)
    assert [p.name for p in paths] == ["tosa_0.tosa"]
    run = tosa.tosa_runs(graph)[0]
    assert paths[0].read_bytes() == tosa.lower_graph(graph, run).flatbuffer
    assert "avg_pool2d" in (tmp_path / "tosa_0.txt").read_text()


@pytest.mark.parametrize("name", ["kws", "mobilenet_v2", "every_lowering"])
def test_vela_accepts_lowered_graph(name, model_graphs, request, tmp_path, capsys):
    vela = needs.module("ethosu.vela.vela")
    graph = request.getfixturevalue(name)[0] if name == "every_lowering" else model_graphs(name)[0]
    path = tosa.emit_tosa(graph, tmp_path)[0]
    rc = vela.main([str(path), "--accelerator-config", "ethos-u55-128", "--output-format", "raw",
                    "--output-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0 and (tmp_path / "tosa_0_vela.npz").is_file(), out
    assert "CPU operators = 0 " in out, out


@pytest.mark.parametrize("stride,pads,act", [((1, 1), (1, 1, 1, 1), (-128, 127)),
                                             ((2, 2), (0, 0, 1, 1), (0, 127))])
def test_conv2d_add(stride, pads, act):
    """The fused residual: CONV2D's sequence, then add's, equal to the reference bit for bit."""
    rng = np.random.default_rng(33)
    x, skip_shape = Tensor("x", (1, 8, 8, 6)), (1, 8 // stride[0], 8 // stride[1], 5)
    consts = mac_consts(rng, (5, 3, 3, 6), 5, 54, zero_channel=True)
    cs = [Tensor(f"c{i}", a.shape, dtype=str(a.dtype), data=a) for i, a in enumerate(consts)]
    skip, y = Tensor("skip", skip_shape), Tensor("y", skip_shape)
    conv = conv_attrs(stride, (1, 1), pads, -3, 7, (-128, 127))
    attrs = {**{k: v for k, v in conv.items() if k not in ("out_zp", "act_min", "act_max")},
             "groups": 1, "conv_zp": 7, "conv_min": -128, "conv_max": 127,
             **add_attrs(0.05, 0.08, 0.1, 7, -20, 3, act)}
    graph = Graph([Node("conv2d_add", [x, *cs, skip], [y], attrs)], [x, skip], [y])
    ok, why = tosa.tosa_support(graph.nodes[0])
    assert ok, why
    for arrays in input_sets([x.shape, skip_shape], rng):
        tosa.verify(graph, None, arrays)
