"""Reference kernels (mcutorch.ref) against independent formulas, and properties of mcutorch.quant.

Independence: MAC ops are recomputed with torch.nn.functional in float64 on the integer-valued
tensors (x - zp) (exact), pooling and softmax with naive Python loops, and every requantization
with Python big-int arithmetic (`rq_py`), never with quant.rq or numpy int64.
"""
from __future__ import annotations

import inspect
import math
import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from mcutorch import ops, quant
from mcutorch.ref import (KERNELS, concat_attrs, make_lut, pad_attrs, softmax_exp_table,
                          transpose_attrs)

I32 = (-(1 << 31), (1 << 31) - 1)
FULL = dict(act_min=-128, act_max=127)


# ----------------------------------------------------------------------------- helpers

def rq_py(acc: int, mult: int, shift: int) -> int:
    """Single-rounding requantization in Python ints: floor((acc*mult + 2^(shift-1)) / 2^shift)."""
    return (int(acc) * int(mult) + (1 << (int(shift) - 1))) >> int(shift)


def requant_py(acc, mult, shift, out_zp, act_min, act_max):
    """Expected int8 output with per-channel (last axis) scales, or None if rq leaves int32."""
    acc = np.asarray(acc, np.int64)
    mult = np.broadcast_to(np.asarray(mult, np.int64), acc.shape)
    shift = np.broadcast_to(np.asarray(shift, np.int64), acc.shape)
    out = np.empty(acc.shape, np.int64)
    for idx in np.ndindex(acc.shape):
        v = rq_py(acc[idx], mult[idx], shift[idx])
        if not I32[0] <= v <= I32[1]:
            return None
        out[idx] = min(max(v + out_zp, act_min), act_max)
    return out.astype(np.int8)


def check_requant(run, acc, mult, shift, out_zp, act_min, act_max):
    """run() must equal requant_py(...), or raise ValueError where the rq result leaves int32."""
    expected = requant_py(acc, mult, shift, out_zp, act_min, act_max)
    if expected is None:
        with pytest.raises(ValueError):
            run()
        return
    got = run()
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, expected)


def i8(rng, shape):
    return rng.integers(-128, 128, size=shape, dtype=np.int8)


def pick_scales(rng, acc, extreme: bool):
    """Per-channel (mult, shift) int32 arrays for accumulators acc (..., C).

    Most channels get a scale that maps max|acc| to 100 times a random factor in [1/10, 3] (few
    saturate, rounding is exercised); with `extreme`, channels also take the corners: real scales
    1e-6 and ~100, shift 62 with a large multiplier, shift 2 with a small one, a zero multiplier.
    """
    c = acc.shape[-1]
    peak = np.abs(acc.reshape(-1, c)).max(axis=0) + 1.0
    reals = 100.0 / peak * np.exp(rng.uniform(-2.3, 1.1, c))
    mult, shift = quant.quantize_multipliers(reals)
    if extreme:
        corners = [quant.quantize_multiplier(1e-6), quant.quantize_multiplier(99.7),
                   (int(rng.integers(1 << 30, 1 << 31)), 62), (int(rng.integers(1, 400)), 2),
                   (0, 2)]
        for ch, (m, s) in zip(rng.permutation(c)[:max(1, c // 3)], rng.permutation(corners)):
            mult[ch], shift[ch] = m, s
    return mult, shift


def pick_act(rng, out_zp):
    """Full range (half the time), ReLU-like (act_min = out_zp) or a random range."""
    kind = rng.integers(4)
    if kind <= 1:
        return -128, 127
    if kind == 2:
        return out_zp, 127
    lo, hi = sorted(rng.integers(-128, 128, 2))
    return int(lo), int(hi)


ZPS = [-128, 127, 0, -3, 17]


# ----------------------------------------------------------------------------- op table

KERNEL_OPS = [op for op in ops.OPS if op.name != "delegate"]


@pytest.mark.parametrize("op", KERNEL_OPS, ids=lambda o: o.name)
def test_kernel_signature_matches_op_table(op):
    params = list(inspect.signature(KERNELS[op.name]).parameters.values())
    positional = [p for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
    keyword = [p.name for p in params if p.kind is p.KEYWORD_ONLY]
    if op.inputs == (ops.VARIADIC,):
        assert params[0].kind is inspect.Parameter.VAR_POSITIONAL and not positional
    else:
        assert tuple(p.name for p in positional) == op.inputs
    assert tuple(keyword) == op.attrs
    assert set(KERNELS) == {o.name for o in ops.OPS} - {"delegate"}


# ----------------------------------------------------------------------------- MAC ops

def centring_bias(rng, acc0):
    """int32 bias per channel that roughly centres acc0 (..., C), as folded batch norm tends to;
    with 4 or more channels, one also gets a large offset (2^24)."""
    c = acc0.shape[-1]
    flat = acc0.reshape(-1, c).astype(np.float64)
    spread = flat.max(axis=0) - flat.min(axis=0) + 16
    bias = np.round(-np.median(flat, axis=0) + rng.uniform(-0.25, 0.25, c) * spread)
    if c >= 4:
        bias[rng.integers(c)] += rng.choice([-1, 1]) * (1 << 24)
    return bias.astype(np.int32)


def conv_expected_sum(x, w_oihw, in_zp, stride, dilation, pads, groups):
    """conv((x - in_zp) zero-padded, w) by torch in float64; x NHWC, w OIHW -> NHWC int64."""
    pt, pl, pb, pr = pads
    xt = torch.from_numpy(x.astype(np.float64) - in_zp).permute(0, 3, 1, 2)
    xt = F.pad(xt, (pl, pr, pt, pb))
    y = F.conv2d(xt, torch.from_numpy(w_oihw.astype(np.float64)), stride=stride,
                 dilation=dilation, groups=groups)
    acc = y.permute(0, 2, 3, 1).numpy()
    assert np.all(acc == np.round(acc))
    return acc.astype(np.int64)


CONV_EDGE = [  # (N, H, W, Cin, Cout, KH, KW, stride, dilation, pads(t, l, b, r), groups)
    (1, 7, 7, 3, 5, 3, 3, (2, 2), (1, 1), (1, 1, 1, 1), 1),  # stride 2, odd size
    (2, 8, 6, 3, 5, 3, 3, (2, 2), (1, 1), (1, 1, 1, 1), 1),  # stride 2, even size
    (1, 8, 8, 1, 17, 3, 3, (2, 2), (1, 1), (0, 0, 1, 1), 1),  # TF-style SAME, stride 2
    (1, 9, 7, 5, 3, 3, 2, (1, 2), (2, 3), (2, 0, 1, 3), 1),  # dilation, asymmetric padding
    (1, 49, 10, 1, 16, 10, 4, (2, 2), (1, 1), (4, 1, 5, 2), 1),  # KWS first layer
    (1, 6, 5, 6, 9, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1), 3),  # groups
    (1, 5, 5, 17, 17, 1, 1, (1, 1), (1, 1), (0, 0, 0, 0), 17),  # groups = channels
    (3, 4, 4, 17, 3, 1, 1, (1, 1), (1, 1), (0, 0, 0, 0), 1),  # pointwise, batch
    (1, 3, 3, 2, 4, 5, 5, (3, 3), (1, 1), (2, 2, 2, 2), 2),  # kernel > input
    (1, 1, 1, 3, 2, 1, 1, (1, 1), (1, 1), (0, 0, 0, 0), 1),  # 1x1 image
]


def random_conv_spec(rng):
    groups = int(rng.choice([1, 1, 1, 2, 3]))
    cin = groups * int(rng.choice([1, 3, 5, 17]))
    cout = groups * int(rng.choice([1, 2, 3, 5]))
    kh, kw = (int(v) for v in rng.integers(1, 6, 2))
    stride = tuple(int(v) for v in rng.integers(1, 4, 2))
    dilation = tuple(int(v) for v in rng.integers(1, 3, 2))
    pads = tuple(int(v) for v in rng.integers(0, 4, 4))
    h = max(int(rng.integers(1, 12)), dilation[0] * (kh - 1) + 1 - pads[0] - pads[2])
    w = max(int(rng.integers(1, 12)), dilation[1] * (kw - 1) + 1 - pads[1] - pads[3])
    return (int(rng.integers(1, 3)), h, w, cin, cout, kh, kw, stride, dilation, pads, groups)


CONV_CASES = [(i, spec) for i, spec in enumerate(CONV_EDGE)]
CONV_CASES += [(100 + i, random_conv_spec(np.random.default_rng(100 + i))) for i in range(40)]


@pytest.mark.parametrize("seed,spec", CONV_CASES)
def test_conv2d(seed, spec):
    n, h, w, cin, cout, kh, kw, stride, dilation, pads, groups = spec
    rng = np.random.default_rng(seed)
    x = i8(rng, (n, h, w, cin))
    weight = rng.integers(-127, 128, (cout, kh, kw, cin // groups), dtype=np.int8)
    in_zp, out_zp = ZPS[seed % 5], ZPS[(seed // 5) % 5]
    acc = conv_expected_sum(x, weight.transpose(0, 3, 1, 2), in_zp, stride, dilation, pads, groups)
    bias = centring_bias(rng, acc)
    acc += bias
    mult, shift = pick_scales(rng, acc, extreme=seed % 2 == 1)
    act_min, act_max = pick_act(rng, out_zp)
    attrs = dict(stride_h=stride[0], stride_w=stride[1], dilation_h=dilation[0],
                 dilation_w=dilation[1], pad_top=pads[0], pad_left=pads[1], pad_bottom=pads[2],
                 pad_right=pads[3], groups=groups, in_zp=in_zp, out_zp=out_zp, act_min=act_min,
                 act_max=act_max)
    run = lambda: KERNELS["conv2d"](x, weight, bias, mult, shift, **attrs)  # noqa: E731
    assert run().shape == acc.shape
    check_requant(run, acc, mult, shift, out_zp, act_min, act_max)


def convt_expected_sum(x, w_ohwi, in_zp, stride, dilation, pads, groups):
    """torch conv_transpose2d of (x - in_zp) in float64, then cropped / extended as the pads
    say (pad_bottom < 0: output_padding rows); x NHWC, w [Cout, KH, KW, Cin/g] -> NHWC int64."""
    pt, pl, pb, pr = pads
    cout, kh, kw, cg = w_ohwi.shape
    wt = w_ohwi.reshape(groups, cout // groups, kh, kw, cg).transpose(0, 4, 1, 2, 3)
    wt = torch.from_numpy(wt.reshape(groups * cg, cout // groups, kh, kw).astype(np.float64))
    xt = torch.from_numpy(x.astype(np.float64) - in_zp).permute(0, 3, 1, 2)
    op = (max(0, -pb), max(0, -pr))  # torch: output_padding < max(stride, dilation)
    y = F.conv_transpose2d(xt, wt, stride=stride, dilation=dilation, groups=groups,
                           output_padding=op)
    ho, wo = y.shape[2] - op[0] - max(pb, 0) - pt, y.shape[3] - op[1] - max(pr, 0) - pl
    y = y[:, :, pt:pt + ho + op[0], pl:pl + wo + op[1]]
    acc = y.permute(0, 2, 3, 1).numpy()
    assert np.all(acc == np.round(acc))
    return acc.astype(np.int64)


CONVT_EDGE = [  # (N, H, W, Cin, Cout, KH, KW, stride, dilation, pads(t, l, b, r), groups)
    (1, 8, 8, 32, 16, 4, 4, (2, 2), (1, 1), (1, 1, 1, 1), 1),  # decoder k4 s2 p1
    (1, 5, 7, 3, 4, 3, 3, (2, 2), (1, 1), (1, 1, 0, 0), 1),  # odd size, output_padding 1
    (1, 4, 5, 2, 3, 3, 3, (3, 3), (1, 1), (0, 0, -2, -2), 1),  # output_padding = stride - 1
    (2, 4, 4, 3, 5, 2, 2, (4, 3), (1, 1), (0, 0, 0, 0), 1),  # stride > kernel: gaps of bias
    (1, 4, 6, 3, 2, 3, 2, (2, 1), (3, 2), (2, 0, 0, 1), 1),  # dilation, gcd(stride, dil) 1
    (1, 4, 4, 2, 3, 2, 3, (1, 2), (3, 5), (0, 1, -2, -4), 1),  # output_padding = dilation - 1
    (1, 4, 4, 6, 4, 3, 3, (2, 2), (1, 1), (1, 1, 1, 1), 2),  # groups
    (1, 5, 5, 5, 10, 4, 4, (2, 2), (1, 1), (1, 1, 1, 1), 5),  # depthwise, multiplier 2
    (1, 6, 6, 2, 3, 3, 3, (1, 1), (1, 1), (2, 3, 3, 2), 1),  # padding crops into the interior
    (1, 1, 9, 5, 4, 1, 3, (1, 2), (1, 1), (0, 1, 0, 0), 1),  # conv_transpose1d as [N, 1, L, C]
    (1, 1, 1, 3, 2, 3, 3, (2, 2), (1, 1), (0, 0, 0, 0), 1),  # one input pixel
]


def random_convt_spec(rng):
    groups = int(rng.choice([1, 1, 2, 3]))
    cin, cout = groups * int(rng.choice([1, 3, 17])), groups * int(rng.choice([1, 2, 5]))
    kh, kw = (int(v) for v in rng.integers(1, 6, 2))
    stride = tuple(int(v) for v in rng.integers(1, 5, 2))
    dilation = tuple(int(v) for v in rng.integers(1, 3, 2))
    h, w = (int(v) for v in rng.integers(1, 8, 2))
    pads = []
    for size, k, s, d in ((h, kh, *stride[:1], dilation[0]), (w, kw, stride[1], dilation[1])):
        full = (size - 1) * s + d * (k - 1) + 1
        p0 = int(rng.integers(0, min(d * (k - 1), full - 1) + 1))
        p1 = int(rng.integers(1 - max(s, d), max(2 - max(s, d), full - p0)))
        pads.append((p0, p1))
    return (int(rng.integers(1, 3)), h, w, cin, cout, kh, kw, stride, dilation,
            (pads[0][0], pads[1][0], pads[0][1], pads[1][1]), groups)


CONVT_CASES = [(i, spec) for i, spec in enumerate(CONVT_EDGE)]
CONVT_CASES += [(200 + i, random_convt_spec(np.random.default_rng(200 + i))) for i in range(40)]


@pytest.mark.parametrize("seed,spec", CONVT_CASES)
def test_conv_transpose2d(seed, spec):
    n, h, w, cin, cout, kh, kw, stride, dilation, pads, groups = spec
    rng = np.random.default_rng(seed)
    x = i8(rng, (n, h, w, cin))
    weight = rng.integers(-127, 128, (cout, kh, kw, cin // groups), dtype=np.int8)
    in_zp, out_zp = ZPS[seed % 5], ZPS[(seed // 5) % 5]
    acc = convt_expected_sum(x, weight, in_zp, stride, dilation, pads, groups)
    bias = centring_bias(rng, acc)
    acc += bias
    mult, shift = pick_scales(rng, acc, extreme=seed % 2 == 1)
    act_min, act_max = pick_act(rng, out_zp)
    attrs = dict(stride_h=stride[0], stride_w=stride[1], dilation_h=dilation[0],
                 dilation_w=dilation[1], pad_top=pads[0], pad_left=pads[1], pad_bottom=pads[2],
                 pad_right=pads[3], groups=groups, in_zp=in_zp, out_zp=out_zp, act_min=act_min,
                 act_max=act_max)
    run = lambda: KERNELS["conv_transpose2d"](x, weight, bias, mult, shift, **attrs)  # noqa: E731
    assert run().shape == acc.shape
    check_requant(run, acc, mult, shift, out_zp, act_min, act_max)
    # the MAC count is the true one: with all-ones operands, each output sums its MACs
    got = ops.macs("conv_transpose2d", [x.shape, weight.shape], [acc.shape], attrs)
    xt = torch.ones(1, cin, h, w, dtype=torch.float64)
    ones = torch.ones(cin, cout // groups, kh, kw, dtype=torch.float64)
    full = F.conv_transpose2d(xt, ones, stride=stride, dilation=dilation, groups=groups)
    landed = full[:, :, pads[0]:pads[0] + acc.shape[1], pads[1]:pads[1] + acc.shape[2]]
    assert got == n * int(landed.sum())


def test_conv_transpose2d_domain():
    x, w = np.zeros((1, 3, 3, 2), np.int8), np.zeros((4, 3, 3, 2), np.int8)
    b, m, s = np.zeros(4, np.int32), np.full(4, 1 << 30, np.int32), np.full(4, 31, np.int32)
    ok = dict(stride_h=2, stride_w=2, dilation_h=1, dilation_w=1, pad_top=0, pad_left=0,
              pad_bottom=-1, pad_right=-1, groups=1, in_zp=0, out_zp=0, act_min=-128,
              act_max=127)
    assert KERNELS["conv_transpose2d"](x, w, b, m, s, **ok).shape == (1, 8, 8, 4)
    for bad in (dict(pad_bottom=-2), dict(pad_top=-1), dict(pad_top=4, pad_bottom=4),
                dict(groups=3), dict(stride_h=0), dict(in_zp=128)):
        with pytest.raises(ValueError):
            KERNELS["conv_transpose2d"](x, w, b, m, s, **{**ok, **bad})


DW_EDGE = [  # (N, H, W, C, M, KH, KW, stride, dilation, pads)
    (1, 25, 5, 64, 1, 3, 3, (1, 1), (1, 1), (1, 1, 1, 1)),  # KWS block
    (1, 7, 8, 3, 2, 3, 3, (2, 2), (1, 1), (1, 1, 1, 1)),  # stride 2 odd/even, M = 2
    (2, 9, 9, 5, 3, 3, 3, (2, 1), (2, 2), (2, 1, 2, 0)),  # dilation, asymmetric pad, M = 3
    (1, 4, 6, 1, 4, 2, 5, (1, 3), (1, 1), (0, 2, 1, 2)),  # C = 1, M = 4
    (1, 5, 5, 17, 1, 5, 5, (1, 1), (1, 1), (2, 2, 2, 2)),
]


def random_dw_spec(rng):
    kh, kw = (int(v) for v in rng.integers(1, 6, 2))
    stride = tuple(int(v) for v in rng.integers(1, 4, 2))
    dilation = tuple(int(v) for v in rng.integers(1, 3, 2))
    pads = tuple(int(v) for v in rng.integers(0, 4, 4))
    h = max(int(rng.integers(1, 12)), dilation[0] * (kh - 1) + 1 - pads[0] - pads[2])
    w = max(int(rng.integers(1, 12)), dilation[1] * (kw - 1) + 1 - pads[1] - pads[3])
    return (int(rng.integers(1, 3)), h, w, int(rng.choice([1, 3, 5, 17])),
            int(rng.choice([1, 1, 2, 3])), kh, kw, stride, dilation, pads)


DW_CASES = [(i, spec) for i, spec in enumerate(DW_EDGE)]
DW_CASES += [(200 + i, random_dw_spec(np.random.default_rng(200 + i))) for i in range(30)]


@pytest.mark.parametrize("seed,spec", DW_CASES)
def test_depthwise_conv2d(seed, spec):
    n, h, w, c, m, kh, kw, stride, dilation, pads = spec
    rng = np.random.default_rng(seed)
    x = i8(rng, (n, h, w, c))
    weight = rng.integers(-128, 128, (kh, kw, c * m), dtype=np.int8)
    in_zp, out_zp = ZPS[(seed + 2) % 5], ZPS[(seed // 3) % 5]
    # torch groups = C: output channel o belongs to group o // M, i.e. o = c*M + m reads channel c
    w_oihw = weight.transpose(2, 0, 1)[:, None]
    acc = conv_expected_sum(x, w_oihw, in_zp, stride, dilation, pads, c)
    bias = centring_bias(rng, acc)
    acc += bias
    mult, shift = pick_scales(rng, acc, extreme=seed % 2 == 0)
    act_min, act_max = pick_act(rng, out_zp)
    attrs = dict(stride_h=stride[0], stride_w=stride[1], dilation_h=dilation[0],
                 dilation_w=dilation[1], pad_top=pads[0], pad_left=pads[1], pad_bottom=pads[2],
                 pad_right=pads[3], depth_multiplier=m, in_zp=in_zp, out_zp=out_zp,
                 act_min=act_min, act_max=act_max)
    run = lambda: KERNELS["depthwise_conv2d"](x, weight, bias, mult, shift, **attrs)  # noqa: E731
    check_requant(run, acc, mult, shift, out_zp, act_min, act_max)
    # the "1HWC" 4-D weight layout of ops.py gives the same result
    if requant_py(acc, mult, shift, out_zp, act_min, act_max) is not None:
        got4 = KERNELS["depthwise_conv2d"](x, weight[None], bias, mult, shift, **attrs)
        np.testing.assert_array_equal(got4, run())


@pytest.mark.parametrize("seed", range(12))
def test_fully_connected(seed):
    rng = np.random.default_rng(300 + seed)
    n, cin, cout = int(rng.integers(1, 5)), int(rng.choice([1, 3, 5, 17, 64, 250])), \
        int(rng.choice([1, 3, 5, 17, 32]))
    x = i8(rng, (n, cin))
    weight = rng.integers(-127, 128, (cout, cin), dtype=np.int8)
    in_zp, out_zp = ZPS[seed % 5], ZPS[(seed + 1) % 5]
    acc = F.linear(torch.from_numpy(x.astype(np.float64) - in_zp),
                   torch.from_numpy(weight.astype(np.float64))).numpy().astype(np.int64)
    bias = centring_bias(rng, acc)
    acc += bias
    mult, shift = pick_scales(rng, acc, extreme=seed % 3 == 0)
    act_min, act_max = pick_act(rng, out_zp)
    run = lambda: KERNELS["fully_connected"](  # noqa: E731
        x, weight, bias, mult, shift, in_zp=in_zp, out_zp=out_zp, act_min=act_min,
        act_max=act_max)
    check_requant(run, acc, mult, shift, out_zp, act_min, act_max)


def test_mac_domain_errors():
    x = np.full((1, 300), 127, np.int8)
    w = np.full((1, 300), 127, np.int8)
    bias = np.array([(1 << 31) - 1000], np.int32)
    m, s = np.array([1 << 30], np.int32), np.array([40], np.int32)
    with pytest.raises(ValueError, match="int32"):  # accumulator leaves int32
        KERNELS["fully_connected"](x, w, bias, m, s, in_zp=-128, out_zp=0, **FULL)
    with pytest.raises(ValueError, match="dtype"):
        KERNELS["fully_connected"](x.astype(np.int16), w, bias, m, s, in_zp=0, out_zp=0, **FULL)
    with pytest.raises(ValueError, match="shift"):
        KERNELS["fully_connected"](x, w, bias * 0, m, s * 0 + 1, in_zp=0, out_zp=0, **FULL)
    with pytest.raises(ValueError, match="groups"):
        KERNELS["conv2d"](np.zeros((1, 3, 3, 4), np.int8), np.zeros((2, 1, 1, 3), np.int8),
                          *(np.zeros(2, np.int32),) * 2, np.full(2, 31, np.int32), stride_h=1,
                          stride_w=1, dilation_h=1, dilation_w=1, pad_top=0, pad_left=0,
                          pad_bottom=0, pad_right=0, groups=1, in_zp=0, out_zp=0, **FULL)


# ----------------------------------------------------------------------------- element-wise

def add_params(rng):
    """Scales as a compiler would make them: both inputs to a 2^20 fixed-point grid, then back."""
    s_a, s_b, s_out = np.exp(rng.uniform(-9, 2, 3))
    big = max(s_a, s_b)
    a_mult, a_shift = quant.quantize_multiplier((1 << 20) * s_a / (2 * big))
    b_mult, b_shift = quant.quantize_multiplier((1 << 20) * s_b / (2 * big))
    out_mult, out_shift = quant.quantize_multiplier(2 * big / ((1 << 20) * s_out))
    return dict(a_mult=a_mult, a_shift=a_shift, b_mult=b_mult, b_shift=b_shift,
                out_mult=out_mult, out_shift=out_shift)


@pytest.mark.parametrize("seed", range(6))
def test_add_exhaustive_pairs(seed):
    rng = np.random.default_rng(400 + seed)
    p = add_params(rng)
    a_zp, b_zp, out_zp = ZPS[seed % 5], ZPS[(seed + 1) % 5], ZPS[(seed + 3) % 5]
    act_min, act_max = pick_act(rng, out_zp)
    vals = np.arange(-128, 128)
    a, b = (v.astype(np.int8) for v in np.meshgrid(vals, vals, indexing="ij"))
    got = KERNELS["add"](a, b, a_zp=a_zp, b_zp=b_zp, out_zp=out_zp, act_min=act_min,
                         act_max=act_max, **p)
    ra = [rq_py(v - a_zp, p["a_mult"], p["a_shift"]) for v in range(-128, 128)]
    rb = [rq_py(v - b_zp, p["b_mult"], p["b_shift"]) for v in range(-128, 128)]
    expected = np.array([[min(max(rq_py(ra[i] + rb[j], p["out_mult"], p["out_shift"]) + out_zp,
                                  act_min), act_max) for j in range(256)] for i in range(256)])
    np.testing.assert_array_equal(got, expected)


def test_add_rejects_int32_overflow_and_broadcast():
    p = dict(a_mult=(1 << 31) - 1, a_shift=2, b_mult=(1 << 31) - 1, b_shift=2, out_mult=1 << 30,
             out_shift=31)  # a32 alone is up to 255 * 2^29
    a = np.zeros(4, np.int8)
    with pytest.raises(ValueError, match="int32"):
        KERNELS["add"](a, a, a_zp=0, b_zp=0, out_zp=0, **p, **FULL)
    with pytest.raises(ValueError, match="shape"):
        KERNELS["add"](a, a[:2], a_zp=0, b_zp=0, out_zp=0, **add_params(np.random.default_rng()),
                       **FULL)


@pytest.mark.parametrize("seed", range(8))
def test_mul(seed):
    rng = np.random.default_rng(500 + seed)
    a, b = i8(rng, (3, 5, 17)), i8(rng, (3, 5, 17))
    a[0, 0, :3], b[0, 0, :3] = [-128, 127, -128], [-128, 127, 127]
    a_zp, b_zp, out_zp = ZPS[seed % 5], ZPS[(seed + 2) % 5], ZPS[(seed + 4) % 5]
    mult, shift = quant.quantize_multiplier(float(np.exp(rng.uniform(np.log(1e-6), np.log(100)))))
    act_min, act_max = pick_act(rng, out_zp)
    prod = (a.astype(np.int64) - a_zp) * (b.astype(np.int64) - b_zp)
    run = lambda: KERNELS["mul"](a, b, a_zp=a_zp, b_zp=b_zp, out_zp=out_zp, mult=mult,  # noqa
                                 shift=shift, act_min=act_min, act_max=act_max)
    check_requant(run, prod, mult, shift, out_zp, act_min, act_max)


RESCALE_SCALES = [1e-6, 1e-3, 0.25, 0.5, 0.999, 1.0, 1.5, 7.3, 99.0]


@pytest.mark.parametrize("real", RESCALE_SCALES)
@pytest.mark.parametrize("in_zp,out_zp", [(-128, 127), (127, -128), (0, 0), (5, -7)])
def test_rescale_all_inputs(real, in_zp, out_zp):
    x = np.arange(-128, 128, dtype=np.int8)
    mult, shift = quant.quantize_multiplier(real)
    run = lambda: KERNELS["rescale"](x, in_zp=in_zp, out_zp=out_zp, mult=mult,  # noqa: E731
                                     shift=shift, **FULL)
    check_requant(run, x.astype(np.int64) - in_zp, mult, shift, out_zp, -128, 127)


@pytest.mark.parametrize("mult,shift", [((1 << 31) - 1, 2), (1, 2), (0, 2), ((1 << 31) - 1, 62),
                                        (1 << 30, 62), (3, 3)])
def test_rescale_shift_extremes(mult, shift):
    x = np.arange(-128, 128, dtype=np.int8)
    run = lambda: KERNELS["rescale"](x, in_zp=-3, out_zp=4, mult=mult, shift=shift,  # noqa
                                     act_min=-100, act_max=90)
    check_requant(run, x.astype(np.int64) + 3, mult, shift, 4, -100, 90)


@pytest.mark.parametrize("lo,hi", [(-128, 127), (0, 127), (-128, -128), (-20, 6), (127, 127)])
def test_clamp(lo, hi):
    x = np.arange(-128, 128, dtype=np.int8).reshape(16, 16)
    got = KERNELS["clamp"](x, act_min=lo, act_max=hi)
    assert got.dtype == np.int8
    assert got.ravel().tolist() == [min(max(v, lo), hi) for v in range(-128, 128)]
    with pytest.raises(ValueError):
        KERNELS["clamp"](x, act_min=hi + 1, act_max=hi)


@pytest.mark.parametrize("op,fn", [("maximum", max), ("minimum", min)])
@pytest.mark.parametrize("lo,hi", [(-128, 127), (-7, 127), (-128, 5), (3, 3)])
def test_minmax_all_pairs(op, fn, lo, hi):
    a, b = (v.astype(np.int8) for v in np.meshgrid(np.arange(-128, 128), np.arange(-128, 128)))
    got = KERNELS[op](a, b, act_min=lo, act_max=hi)
    want = [min(max(fn(int(u), int(v)), lo), hi) for u, v in zip(a.ravel(), b.ravel())]
    assert got.dtype == np.int8 and got.shape == a.shape and got.ravel().tolist() == want
    with pytest.raises(ValueError, match="do not broadcast"):
        KERNELS[op](a, b[:2], act_min=lo, act_max=hi)
    with pytest.raises(ValueError):
        KERNELS[op](a, b, act_min=hi + 1, act_max=hi)


COMPARE_SCALES = [(0.5, 0.25), (3.0, 7.0), (0.1, 0.1), (0.1, 0.30000001), (1e-9, 3.0),
                  (3.0, 1e-9), (2.0**-30, 2.0**20), (0.0039215689, 0.0078431377), (1.0, 255.0),
                  (1.0, 256.0), (255.0, 1.0), (6.1e-5, 0.0234), (1.5e-38, 1.0)]


@pytest.mark.parametrize("sa,sb", COMPARE_SCALES)
@pytest.mark.parametrize("a_zp,b_zp", [(0, 0), (-128, 127), (17, -3)])
def test_compare_all_pairs(sa, sb, a_zp, b_zp):
    """compare = the comparison of the exact real values (Fractions of the float32 scales), on
    every int8 pair, for every kind: ties at equal real values included."""
    from fractions import Fraction

    from mcutorch.ref.elementwise import COMPARE_KINDS, compare_attrs
    a, b = (v.astype(np.int8) for v in np.meshgrid(np.arange(-128, 128), np.arange(-128, 128)))
    fa, fb = Fraction(float(np.float32(sa))), Fraction(float(np.float32(sb)))
    ra = {int(q): fa * (int(q) - a_zp) for q in range(-128, 128)}
    rb = {int(q): fb * (int(q) - b_zp) for q in range(-128, 128)}
    sign = np.array([(ra[u] > rb[v]) - (ra[u] < rb[v]) for u, v in zip(a.ravel().tolist(),
                                                                       b.ravel().tolist())])
    want = {"eq": sign == 0, "ne": sign != 0, "gt": sign > 0, "ge": sign >= 0, "lt": sign < 0,
            "le": sign <= 0}
    attrs = compare_attrs(sa, sb)
    assert all(0 <= attrs[k] <= 31 for k in ("a_shift", "b_shift"))
    for kind, name in enumerate(COMPARE_KINDS):
        got = KERNELS["compare"](a, b, kind=kind, a_zp=a_zp, b_zp=b_zp, **attrs)
        assert got.dtype == np.uint8 and got.shape == a.shape
        assert got.ravel().tolist() == want[name].astype(int).tolist(), name


def test_compare_domain_and_broadcast():
    x = np.arange(-128, 128, dtype=np.int8).reshape(16, 16)
    base = dict(kind=2, a_zp=0, a_mult=1, a_shift=0, b_zp=0, b_mult=1, b_shift=0)
    got = KERNELS["compare"](x, np.array([5], np.int8), **base)
    assert got.ravel().tolist() == [int(v > 5) for v in range(-128, 128)]
    got = KERNELS["compare"](x[:, :1], x[:1, :], **base)  # column against row
    assert np.array_equal(got, (x[:, :1] > x[:1, :]).astype(np.uint8))
    for bad in (dict(kind=6), dict(a_mult=0), dict(b_mult=(1 << 24) + 1), dict(a_shift=32),
                dict(b_shift=-1), dict(a_zp=128)):
        with pytest.raises(ValueError):
            KERNELS["compare"](x, x, **{**base, **bad})
    with pytest.raises(ValueError, match="do not broadcast"):
        KERNELS["compare"](x, x[:3], **base)


@pytest.mark.parametrize("seed", range(4))
def test_where_rescales_each_side(seed):
    """where = per element, the chosen side rescaled (rq) into y's qparams; any nonzero mask
    byte picks a; numpy broadcasting of all three operands."""
    rng = np.random.default_rng(seed)
    mask = rng.integers(0, 3, size=(4, 1, 6)).astype(np.uint8)
    a, b = i8(rng, (1, 5, 6)), i8(rng, (6,))
    attrs = {}
    for k in ("a", "b"):
        m, sh = quant.quantize_multiplier(float(np.exp(rng.uniform(-4, 3))))
        attrs.update({f"{k}_zp": int(rng.choice(ZPS)), f"{k}_mult": m, f"{k}_shift": sh})
    out_zp = int(rng.choice(ZPS))
    got = KERNELS["where"](mask, a, b, **attrs, out_zp=out_zp)
    mb, ab, bb = np.broadcast_arrays(mask, a, b)
    want = [requant_py(int(u) - attrs["a_zp"], attrs["a_mult"], attrs["a_shift"], out_zp, -128,
                       127) if m else
            requant_py(int(v) - attrs["b_zp"], attrs["b_mult"], attrs["b_shift"], out_zp, -128,
                       127) for m, u, v in zip(mb.ravel(), ab.ravel(), bb.ravel())]
    assert got.shape == (4, 5, 6) and got.dtype == np.int8 and got.ravel().tolist() == want
    with pytest.raises(ValueError):
        KERNELS["where"](mask.astype(np.int8), a, b, **attrs, out_zp=out_zp)
    with pytest.raises(ValueError):
        KERNELS["where"](mask, a, b, **{**attrs, "a_shift": 1}, out_zp=out_zp)
    with pytest.raises(ValueError, match="do not broadcast"):
        KERNELS["where"](mask, a[..., :3], b, **attrs, out_zp=out_zp)


def test_lut():
    rng = np.random.default_rng(6)
    table = i8(rng, 256)
    x = i8(rng, (2, 7, 3))
    x.flat[:2] = [-128, 127]
    got = KERNELS["lut"](x, table)
    assert got.dtype == np.int8 and got.shape == x.shape
    assert got.ravel().tolist() == [int(table[int(v) + 128]) for v in x.ravel()]


def _lut_py(fn, s_in, zp_in, s_out, zp_out):
    return [min(max(round(fn(s_in * (i - 128 - zp_in)) / s_out) + zp_out, -128), 127)
            for i in range(256)]


@pytest.mark.parametrize("name,fn_np,fn_py,s_in,zp_in,s_out,zp_out", [
    ("sigmoid", lambda v: 1 / (1 + np.exp(-v)), lambda v: 1 / (1 + math.exp(-v)),
     0.1, -3, 1 / 256, -128),
    ("tanh", np.tanh, math.tanh, 0.05, 10, 1 / 128, 0),
    ("hardswish", lambda v: v * np.clip(v + 3, 0, 6) / 6, lambda v: v * min(max(v + 3, 0), 6) / 6,
     0.04, 127, 0.03, -100),
    ("halves", lambda v: v, lambda v: v, 0.5, 0, 1.0, 0),  # every other entry is a .5 tie
])
def test_make_lut(name, fn_np, fn_py, s_in, zp_in, s_out, zp_out):
    table = make_lut(fn_np, s_in, zp_in, s_out, zp_out)
    assert table.dtype == np.int8 and table.shape == (256,)
    assert table.tolist() == _lut_py(fn_py, s_in, zp_in, s_out, zp_out)
    if name == "halves":  # round half to even: 0.5 -> 0, 1.5 -> 2, -0.5 -> 0
        assert table[128 + 1] == 0 and table[128 + 3] == 2 and table[128 - 1] == 0


def _lut_domain_py(fn, s_in, zp_in, s_out, zp_out):
    """make_lut outside fn's domain, written out: NaN -> zp_out, ±inf -> 127 / -128."""
    table = []
    for i in range(256):
        v = fn(s_in * (i - 128 - zp_in))
        if math.isnan(v):
            table.append(zp_out)
        elif math.isinf(v):
            table.append(127 if v > 0 else -128)
        else:
            table.append(min(max(round(v / s_out) + zp_out, -128), 127))
    return table


def _py_domain(fn):
    """A math function with numpy's results outside its domain (nan for ValueError, ±inf at
    poles)."""
    def f(v):
        try:
            return fn(v)
        except ValueError:
            return math.nan
        except ZeroDivisionError:
            return math.copysign(math.inf, v)
    return f


@pytest.mark.parametrize("name,fn_np,fn_py,s_in,zp_in,s_out,zp_out", [
    ("log", np.log, lambda v: -math.inf if v == 0 else _py_domain(math.log)(v), 0.05, -20,
     0.1, 30),  # negative inputs NaN, log(0) = -inf
    ("sqrt", np.sqrt, _py_domain(math.sqrt), 0.03, 0, 0.02, -128),  # sqrt(0) = 0 exactly
    ("reciprocal", lambda v: 1 / v, _py_domain(lambda v: 1 / v), 0.01, 5, 0.5, 0),  # near 0
    ("rsqrt", lambda v: 1 / np.sqrt(v), _py_domain(lambda v: 1 / math.sqrt(v)), 0.02, -128,
     0.05, -100),
    ("acosh", np.arccosh, _py_domain(math.acosh), 0.02, -100, 0.01, -128),
    ("atanh", np.arctanh, lambda v: math.copysign(math.inf, v) if abs(v) == 1 else
     _py_domain(math.atanh)(v), 1 / 128, 0, 0.02, 0),  # ±1 -> ±inf, outside: NaN
    ("overflow", np.exp, lambda v: math.inf if v > 709 else math.exp(v), 10.0, 0, 1.0, 0),
])
def test_make_lut_outside_the_domain(name, fn_np, fn_py, s_in, zp_in, s_out, zp_out):
    table = make_lut(fn_np, s_in, zp_in, s_out, zp_out)
    want = _lut_domain_py(fn_py, s_in, zp_in, s_out, zp_out)
    assert table.tolist() == want
    real = s_in * (np.arange(-128, 128) - zp_in)
    with np.errstate(all="ignore"):
        val = fn_np(real)
    assert np.isnan(val).any() or np.isinf(val).any(), "the case leaves the domain"
    assert (table[np.isnan(val)] == zp_out).all()
    assert (table[np.isposinf(val)] == 127).all() and (table[np.isneginf(val)] == -128).all()
    if name == "sqrt":
        assert table[128 + zp_in] == zp_out  # sqrt(0) = 0


# ----------------------------------------------------------------------------- pooling

def pool_windows(x, kh, kw, sh, sw, pads):
    """Naive window enumeration: yields (n, oh, ow, list of valid (row, col) in the window)."""
    n_, h, w, _ = x.shape
    pt, pl, pb, pr = pads
    ho = (h + pt + pb - kh) // sh + 1
    wo = (w + pl + pr - kw) // sw + 1
    for n in range(n_):
        for oh in range(ho):
            for ow in range(wo):
                cells = [(r, c) for r in range(oh * sh - pt, oh * sh - pt + kh)
                         for c in range(ow * sw - pl, ow * sw - pl + kw)
                         if 0 <= r < h and 0 <= c < w]
                yield n, oh, ow, cells


def pool_out_shape(x, kh, kw, sh, sw, pads):
    pt, pl, pb, pr = pads
    ho = (x.shape[1] + pt + pb - kh) // sh + 1
    wo = (x.shape[2] + pl + pr - kw) // sw + 1
    return x.shape[0], ho, wo, x.shape[3]


POOL_CASES = [  # (N, H, W, C, KH, KW, stride, pads)
    (1, 7, 7, 3, 3, 3, (2, 2), (1, 1, 1, 1)),  # stride 2, odd
    (2, 8, 6, 5, 3, 3, (2, 2), (1, 1, 1, 1)),  # stride 2, even
    (1, 8, 8, 17, 2, 2, (2, 2), (0, 0, 0, 0)),
    (1, 9, 5, 1, 3, 2, (2, 1), (2, 0, 1, 1)),  # asymmetric padding
    (1, 25, 5, 64, 25, 5, (1, 1), (0, 0, 0, 0)),  # global pool, KWS
    (1, 6, 7, 3, 4, 3, (3, 2), (1, 2, 3, 0)),
    (1, 1, 1, 5, 1, 1, (1, 1), (0, 0, 0, 0)),
    (2, 5, 5, 3, 5, 5, (1, 1), (2, 2, 2, 2)),  # count varies from 9 to 25
]


@pytest.mark.parametrize("case", range(len(POOL_CASES)))
def test_max_pool2d(case):
    n, h, w, c, kh, kw, stride, pads = POOL_CASES[case]
    rng = np.random.default_rng(600 + case)
    x = i8(rng, (n, h, w, c))
    act_min, act_max = [(-128, 127), (-5, 127), (-128, 40)][case % 3]
    got = KERNELS["max_pool2d"](x, kernel_h=kh, kernel_w=kw, stride_h=stride[0],
                                stride_w=stride[1], pad_top=pads[0], pad_left=pads[1],
                                pad_bottom=pads[2], pad_right=pads[3], act_min=act_min,
                                act_max=act_max)
    expected = np.zeros(pool_out_shape(x, kh, kw, *stride, pads), np.int64)
    for b, oh, ow, cells in pool_windows(x, kh, kw, *stride, pads):
        for ch in range(c):
            v = max(int(x[b, r, q, ch]) for r, q in cells)
            expected[b, oh, ow, ch] = min(max(v, act_min), act_max)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("mode", ["valid_count", "include_pad", "divisor"])
@pytest.mark.parametrize("case", range(len(POOL_CASES)))
def test_avg_pool2d(case, mode):
    n, h, w, c, kh, kw, stride, pads = POOL_CASES[case]
    rng = np.random.default_rng(700 + case)
    x = i8(rng, (n, h, w, c))
    in_zp, out_zp = ZPS[case % 5], ZPS[(case + 2) % 5]
    act_min, act_max = pick_act(rng, out_zp)
    divisor = int(rng.integers(1, 40)) if mode == "divisor" else 0
    include = int(mode == "include_pad")
    got = KERNELS["avg_pool2d"](x, kernel_h=kh, kernel_w=kw, stride_h=stride[0],
                                stride_w=stride[1], pad_top=pads[0], pad_left=pads[1],
                                pad_bottom=pads[2], pad_right=pads[3], count_include_pad=include,
                                divisor=divisor, in_zp=in_zp, out_zp=out_zp, act_min=act_min,
                                act_max=act_max)
    expected = np.zeros(pool_out_shape(x, kh, kw, *stride, pads), np.int64)
    for b, oh, ow, cells in pool_windows(x, kh, kw, *stride, pads):
        count = divisor or (kh * kw if include else len(cells))
        # TOSA reciprocal_scale, written out: k = ceil(log2(count))
        k = 0
        while (1 << k) < count:
            k += 1
        m, s = (((1 << 30) + 1) << k) // count, 30 + k
        for ch in range(c):
            acc = sum(int(x[b, r, q, ch]) - in_zp for r, q in cells)
            expected[b, oh, ow, ch] = min(max(rq_py(acc, m, s) + out_zp, act_min), act_max)
    np.testing.assert_array_equal(got, expected)


def test_avg_pool_matches_rounded_mean():
    """With exact divisions the mean is exact; otherwise within one half LSB of the true mean."""
    rng = np.random.default_rng(8)
    x = i8(rng, (1, 25, 5, 64))
    got = KERNELS["avg_pool2d"](x, kernel_h=25, kernel_w=5, stride_h=1, stride_w=1, pad_top=0,
                                pad_left=0, pad_bottom=0, pad_right=0, count_include_pad=0,
                                divisor=0, in_zp=-128, out_zp=-128, **FULL)
    mean = (x.astype(np.float64) + 128).mean(axis=(1, 2), keepdims=True) - 128
    assert np.abs(got - mean).max() <= 0.5 + 1e-9


def test_pool_rejects_fully_padded_window():
    x = np.zeros((1, 4, 4, 1), np.int8)
    with pytest.raises(ValueError, match="padding"):
        KERNELS["max_pool2d"](x, kernel_h=2, kernel_w=2, stride_h=1, stride_w=1, pad_top=2,
                              pad_left=0, pad_bottom=0, pad_right=0, **FULL)


# ----------------------------------------------------------------------------- softmax

def softmax_py(row, table):
    """Integer softmax of one row with Python ints, per docs/numerics.md."""
    top = max(row)
    e = [int(table[top - v]) for v in row]
    total = sum(e)
    out = []
    for ei in e:
        q, _ = divmod(256 * ei + total // 2, total)
        out.append(min(q, 255) - 128)
    return out


def test_softmax_exp_table():
    for s in (1 / 16, 0.1, 0.0039, 0.5):
        table = softmax_exp_table(s)
        assert table.dtype == np.int32 and table.shape == (256,) and table[0] == 65536
        assert table.tolist() == [round(65536 * math.exp(-s * d)) for d in range(256)]


@pytest.mark.parametrize("length", [1, 2, 12, 1000])
@pytest.mark.parametrize("s_in", [0.0039, 0.1, 0.5])
def test_softmax(length, s_in):
    rng = np.random.default_rng(length)
    rows = 3 if length == 1000 else 6
    x = i8(rng, (2, rows, length))
    x[0, 0] = 127  # a constant row
    if length > 1:
        x[0, 1, 0], x[0, 1, 1:] = 127, -128  # one dominant element
    table = softmax_exp_table(s_in)
    got = KERNELS["softmax"](x, table)
    assert got.dtype == np.int8 and got.shape == x.shape
    expected = [softmax_py([int(v) for v in row], table) for row in x.reshape(-1, length)]
    np.testing.assert_array_equal(got.reshape(-1, length), np.array(expected))
    # loose sanity against float softmax: quantization step 1/256 plus the table's rounding
    ref = torch.softmax(torch.from_numpy(x.astype(np.float64)) * s_in, dim=-1).numpy()
    assert np.abs((got.astype(np.float64) + 128) / 256 - ref).max() <= 1 / 256 + 1e-3


def test_softmax_rounds_ties_up():
    """256 e / sum exactly k + 1/2 (possible only for even sums) rounds up (custom legal tables)."""
    table = np.full(256, 128, np.int32)
    table[0] = 511 * 128  # row [0, -1]: e = [65408, 128], sum 65536, 256 * 128 / sum = 0.5
    assert KERNELS["softmax"](np.array([[0, -1]], np.int8), table).tolist() == [[127, -127]]
    table[:] = 1  # 512 equal elements: 256 / 512 = 0.5 -> 1
    assert (KERNELS["softmax"](np.zeros((1, 512), np.int8), table) == -127).all()
    table[0], table[1] = 3, 1  # row [0, -1, -1]: sum 5, 153.6 and 51.2 -> 154, 51 (no tie)
    assert KERNELS["softmax"](np.array([[0, -1, -1]], np.int8), table).tolist() == \
        [[154 - 128, 51 - 128, 51 - 128]]


def test_softmax_longest_row():
    x = np.full((1, 32767), 5, np.int8)
    table = softmax_exp_table(0.1)
    got = KERNELS["softmax"](x, table)
    assert got.tolist()[0] == softmax_py([5] * 32767, table)[:1] * 32767
    with pytest.raises(ValueError):
        KERNELS["softmax"](np.zeros((1, 32768), np.int8), table)


# ----------------------------------------------------------------------------- movement

@pytest.mark.parametrize("perm", [(0, 3, 1, 2), (3, 2, 1, 0), (0, 1, 2, 3), (2, 0, 1), (1, 0),
                                  (0,), (1, 2, 0)])
def test_transpose(perm):
    rng = np.random.default_rng(len(perm))
    shape = (2, 3, 5, 17)[:len(perm)]
    x = i8(rng, shape)
    attrs = transpose_attrs(perm)
    got = KERNELS["transpose"](x, **attrs)
    np.testing.assert_array_equal(got, np.transpose(x, perm))
    assert got.flags.c_contiguous and got.dtype == np.int8


def test_movement_attr_convention():
    assert transpose_attrs((1, 0)) == dict(perm0=0, perm1=1, perm2=3, perm3=2)
    assert concat_attrs(-1, 2) == {"axis": 3} and concat_attrs(0, 4) == {"axis": 0}
    assert pad_attrs([(1, 2)], -5) == dict(before0=0, before1=0, before2=0, before3=1, after0=0,
                                           after1=0, after2=0, after3=2, value=-5)
    x = np.zeros((3, 4), np.int8)
    with pytest.raises(ValueError, match="prepended"):
        KERNELS["transpose"](x, perm0=1, perm1=0, perm2=2, perm3=3)
    with pytest.raises(ValueError, match="axis"):
        KERNELS["concat"](x, x, axis=1)


@pytest.mark.parametrize("rank,axis", [(4, 3), (4, 1), (4, 0), (2, 1), (2, 0), (3, 2), (1, 0)])
def test_concat(rank, axis):
    rng = np.random.default_rng(rank * 10 + axis)
    base = [2, 3, 5, 4][:rank]
    xs = []
    for extra in (1, 3, 17):
        shape = list(base)
        shape[axis] = extra
        xs.append(i8(rng, shape))
    got = KERNELS["concat"](*xs, **concat_attrs(axis, rank))
    np.testing.assert_array_equal(got, np.concatenate(xs, axis=axis))
    single = KERNELS["concat"](xs[0], **concat_attrs(axis, rank))
    np.testing.assert_array_equal(single, xs[0])


@pytest.mark.parametrize("pads,value", [([(0, 0), (1, 2), (0, 3), (2, 0)], -128),
                                        ([(1, 1), (0, 0), (1, 0), (0, 0)], 127),
                                        ([(2, 1), (0, 4)], 7), ([(3, 0)], 0)])
def test_pad(pads, value):
    rng = np.random.default_rng(len(pads))
    x = i8(rng, (2, 3, 4, 5)[:len(pads)])
    got = KERNELS["pad"](x, **pad_attrs(pads, value))
    assert got.dtype == np.int8
    expected = np.full([d + b + a for d, (b, a) in zip(x.shape, pads)], value, np.int8)
    idx = tuple(slice(b, b + d) for d, (b, _) in zip(x.shape, pads))
    expected[idx] = x
    np.testing.assert_array_equal(got, expected)


def test_copy():
    x = i8(np.random.default_rng(9), (2, 3, 4))
    y = KERNELS["copy"](x)
    np.testing.assert_array_equal(x, y)
    assert y is not x and not np.shares_memory(x, y)


# ----------------------------------------------------------------------------- KWS-sized net

def test_kws_network_is_fast():
    """conv 10x4 s2 (49x10x1 -> 25x5x64) + 4 x [dw 3x3, pw 64->64]: 2.66 M MACs."""
    rng = np.random.default_rng(10)

    def chan(c):
        m, s = quant.quantize_multipliers(np.exp(rng.uniform(-9, -7, c)))
        return rng.integers(-1000, 1000, c, dtype=np.int32), m, s

    common = dict(stride_h=1, stride_w=1, dilation_h=1, dilation_w=1, in_zp=-128, out_zp=-128,
                  act_min=-128, act_max=127)
    x = i8(rng, (1, 49, 10, 1))
    w0, c0 = rng.integers(-127, 128, (64, 10, 4, 1), dtype=np.int8), chan(64)
    blocks = [(rng.integers(-127, 128, (3, 3, 64), dtype=np.int8), chan(64),
               rng.integers(-127, 128, (64, 1, 1, 64), dtype=np.int8), chan(64)) for _ in range(4)]

    def net():
        y = KERNELS["conv2d"](x, w0, *c0, **{**common, "stride_h": 2, "stride_w": 2}, pad_top=4,
                              pad_left=1, pad_bottom=5, pad_right=2, groups=1)
        for dw, cd, pw, cp in blocks:
            y = KERNELS["depthwise_conv2d"](y, dw, *cd, **common, pad_top=1, pad_left=1,
                                            pad_bottom=1, pad_right=1, depth_multiplier=1)
            y = KERNELS["conv2d"](y, pw, *cp, **common, pad_top=0, pad_left=0, pad_bottom=0,
                                  pad_right=0, groups=1)
        return y

    assert net().shape == (1, 25, 5, 64)
    start = time.perf_counter()
    for _ in range(5):
        net()
    assert (time.perf_counter() - start) / 5 < 0.1  # typically ~6 ms


# ----------------------------------------------------------------------------- quant.py

@settings(max_examples=400, deadline=None)
@given(st.floats(min_value=2.0 ** -32, max_value=2.0 ** 28, allow_nan=False))
def test_quantize_multiplier_round_trip(real):
    mult, shift = quant.quantize_multiplier(real)
    assert quant.MIN_SHIFT <= shift <= quant.MAX_SHIFT
    assert (1 << 30) <= mult < (1 << 31)
    assert abs(mult * 2.0 ** -shift - real) <= real * 2.0 ** -30


@settings(max_examples=200, deadline=None)
@given(st.floats(min_value=0.0, max_value=2.0 ** -32, allow_nan=False))
def test_quantize_multiplier_tiny(real):
    mult, shift = quant.quantize_multiplier(real)
    assert quant.MIN_SHIFT <= shift <= quant.MAX_SHIFT and 0 <= mult < (1 << 31)
    assert abs(mult * 2.0 ** -shift - real) <= 2.0 ** -62 + real * 2.0 ** -30


def test_quantize_multiplier_edges():
    assert quant.quantize_multiplier(0.5) == (1 << 30, 31)
    assert quant.quantize_multiplier(1.0) == (1 << 30, 30)
    assert quant.quantize_multiplier(0.0) == (0, 2)
    for bad in (-1.0, float("nan"), float("inf"), 2.0 ** 29):
        with pytest.raises(ValueError):
            quant.quantize_multiplier(bad)


@settings(max_examples=500, deadline=None)
@given(st.integers(I32[0], I32[1]), st.integers(0, (1 << 31) - 1), st.integers(2, 62))
def test_rq_matches_big_int(acc, mult, shift):
    assert int(quant.rq(acc, mult, shift)) == rq_py(acc, mult, shift)
    # and as floor(acc * mult / 2^shift + 1/2), i.e. round half up, also for negative acc
    num, den = acc * mult, 1 << shift
    assert int(quant.rq(acc, mult, shift)) == (2 * num + den) // (2 * den)


def test_rq_vectorised_and_half_up():
    rng = np.random.default_rng(11)
    acc = rng.integers(I32[0], I32[1], 1000, dtype=np.int64)
    mult = rng.integers(0, 1 << 31, 1000, dtype=np.int64)
    shift = rng.integers(2, 63, 1000, dtype=np.int64)
    got = quant.rq(acc, mult, shift)
    assert got.tolist() == [rq_py(a, m, s) for a, m, s in zip(acc, mult, shift)]
    half = quant.quantize_multiplier(0.5)
    assert quant.rq([-3, -1, 1, 3], *half).tolist() == [-1, 0, 1, 2]  # ties go up


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 1 << 16), st.integers(-255, 255))
def test_reciprocal_scale_divides_exactly(count, v):
    mult, shift = quant.reciprocal_scale(count)
    assert (1 << 30) <= mult < (1 << 31) and 30 <= shift <= 62
    assert rq_py(count * v, mult, shift) == v


def test_boundary_quantize():
    s = 0.1
    x = np.array([0.05, 0.15, 0.25, -0.05, 1e9, -1e9, 3.3], np.float32)
    q = quant.quantize(x, s, 3)
    expected = [min(max(round(float(np.float32(v) / np.float32(s))) + 3, -128), 127) for v in x]
    assert q.tolist() == expected and q.dtype == np.int8
    assert quant.quantize(np.array([0.5, 1.5, 2.5]), 1.0, 0).tolist() == [0, 2, 2]
    expected_real = (q.astype(np.float32) - 3) * np.float32(s)
    np.testing.assert_array_equal(quant.dequantize(q, s, 3), expected_real)


MATMUL_SHAPES = [  # a, b (as stored: [.., N, K] when transpose_b), transpose_b
    ((3, 1), (1, 4), 0), ((5, 7), (6, 7), 1), ((16, 16), (16, 16), 1), ((16, 16), (16, 24), 0),
    ((2, 3, 17), (1, 17, 5), 0), ((1, 4, 9), (3, 6, 9), 1), ((2, 1, 3, 8), (1, 4, 8, 5), 0),
    ((1, 2, 1, 2, 3, 4), (2, 1, 2, 1, 5, 4), 1), ((4, 300), (300, 3), 0),
]


@pytest.mark.parametrize("seed", range(len(MATMUL_SHAPES)))
def test_matmul(seed):
    """matmul against torch.matmul on the dequantized integers (float64, exact), batch dims
    broadcast by torch, b transposed by torch when transpose_b."""
    rng = np.random.default_rng(900 + seed)
    a_shape, b_shape, tb = MATMUL_SHAPES[seed]
    a, b = i8(rng, a_shape), i8(rng, b_shape)
    a.flat[:2], b.flat[:2] = (-128, 127), (-128, -128)
    a_zp, b_zp, out_zp = ZPS[seed % 5], ZPS[(seed + 1) % 5], ZPS[(seed + 3) % 5]
    bt = torch.from_numpy(b.astype(np.float64) - b_zp)
    acc = torch.matmul(torch.from_numpy(a.astype(np.float64) - a_zp),
                       bt.transpose(-1, -2) if tb else bt).numpy().astype(np.int64)
    mult, shift = quant.quantize_multiplier(float(rng.uniform(0.3, 3.0)) * 100 /
                                            (np.abs(acc).max() + 1))
    act_min, act_max = pick_act(rng, out_zp)
    run = lambda: KERNELS["matmul"](a, b, transpose_b=tb, a_zp=a_zp, b_zp=b_zp,  # noqa: E731
                                    out_zp=out_zp, mult=mult, shift=shift, act_min=act_min,
                                    act_max=act_max)
    check_requant(run, acc, mult, shift, out_zp, act_min, act_max)


def test_matmul_domain():
    """K * 255 * 255 must fit int32 (K <= 33,025), and its rq too; shapes must agree."""
    ok = dict(transpose_b=0, a_zp=0, b_zp=0, out_zp=0, mult=1 << 30, shift=40, **FULL)
    kmax = (2**31 - 1) // (255 * 255)
    a, b = np.zeros((1, kmax), np.int8), np.zeros((kmax, 1), np.int8)
    assert KERNELS["matmul"](a, b, **ok).shape == (1, 1)
    with pytest.raises(ValueError, match="K=33026"):
        KERNELS["matmul"](np.zeros((1, kmax + 1), np.int8), np.zeros((kmax + 1, 1), np.int8), **ok)
    with pytest.raises(ValueError, match="overflow"):
        KERNELS["matmul"](a[:, :100], b[:100], **{**ok, "mult": (1 << 31) - 1, "shift": 2})
    for bad_b, tb in ((np.zeros((3, 2), np.int8), 0), (np.zeros((3, 2), np.int8), 1),
                      (np.zeros((2, 1, 2), np.int8), 0)):
        with pytest.raises(ValueError):
            KERNELS["matmul"](np.zeros((2, 4), np.int8), bad_b, **{**ok, "transpose_b": tb})
