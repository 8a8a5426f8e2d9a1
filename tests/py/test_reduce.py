"""Reductions (reduce_sum / reduce_max / reduce_min; torch's sum, mean, amax, amin and the
values of max/min) and log_softmax, with softmax and log_softmax over any dim: the definition
against independent formulas, the C kernel bit-exact against it on the host (ASan + UBSan) and on
every emulated board, the TOSA lowering on the reference model, the domain edges in both
executors, and end to end from torch modules against PyTorch's fake-quant model (within 1 LSB,
layer by layer too)."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from torch import nn

import mcutorch
from mcutorch import quant
from mcutorch.compare import layer_by_layer
from mcutorch.compiler import build_graph
from mcutorch.errors import UnsupportedOpError
from mcutorch.ref import KERNELS
from mcutorch.ref.reduce import MAX_COUNT, norm_constants, var_attrs, var_bound
from mcutorch.ref.softmax import log_softmax_tables

from test_kernels_c import (BAD_ARGUMENT, BOARD_PARAMS, Case, bad, i32, pick_act, pick_zp,
                            rng_for, run_board, run_host, s8)

INT32_MAX = (1 << 31) - 1


def mask(dims) -> int:
    return sum(1 << d for d in dims)


def mean_scale(count: int) -> tuple[int, int]:
    return quant.quantize_multiplier(1.0 / count)


# ----------------------------------------------------------------------------- definition

@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4), (2, 3, 4, 5), (1, 2, 3, 2, 3),
                                   (2, 1, 3, 2, 2, 3)])
def test_definition_against_numpy(shape):
    """Every non-empty set of dims: the sum is numpy's exact sum of x - zp requantized; max and
    min are numpy's, clamped; the mean (1/count in the multiplier) is within half an LSB plus the
    multiplier's rounding of the true mean."""
    rng = np.random.default_rng(len(shape))
    x = s8(rng, shape)
    for r in range(1, len(shape) + 1):
        for dims in itertools.combinations(range(len(shape)), r):
            count = math.prod(shape[d] for d in dims)
            zp = int(rng.integers(-128, 128))
            m, s = mean_scale(count)
            got = KERNELS["reduce_sum"](x, axes=mask(dims), in_zp=zp, out_zp=0, mult=m, shift=s,
                                        act_min=-128, act_max=127)
            exact = (x.astype(np.int64) - zp).sum(axis=dims, keepdims=True)
            want = np.clip((exact * m + (1 << (s - 1))) >> s, -128, 127)
            assert np.array_equal(got, want)
            true_mean = (x.astype(np.float64) - zp).mean(axis=dims, keepdims=True)
            assert np.all(np.abs(got - np.clip(true_mean, -128, 127)) <= 0.5 + 1e-6)
            for op, fn in (("reduce_max", np.max), ("reduce_min", np.min)):
                y = KERNELS[op](x, axes=mask(dims), act_min=-20, act_max=90)
                assert np.array_equal(y, np.clip(fn(x, axis=dims, keepdims=True), -20, 90))


def test_sum_reaches_int32_edges_exactly():
    """count * 255 at the sum's limit: the int32 accumulator stays exact (no float)."""
    x = np.full((1 << 12, 1 << 11), 127, np.int8)
    y = KERNELS["reduce_sum"](x, axes=3, in_zp=-128, out_zp=-128, mult=1 << 30, shift=55,
                              act_min=-128, act_max=127)
    assert y.item() == ((255 * (1 << 23) * (1 << 30) + (1 << 54)) >> 55) - 128 == -64


@pytest.mark.parametrize("op,attrs,msg", [
    ("reduce_sum", dict(axes=0), "axes mask 0"),
    ("reduce_sum", dict(axes=8), "axes mask 8"),
    ("reduce_sum", dict(in_zp=128), "in_zp"),
    ("reduce_sum", dict(mult=INT32_MAX, shift=2), "leaves int32"),
    ("reduce_sum", dict(shift=1), "shift"),
    ("reduce_max", dict(axes=-1), "axes mask"),
    ("reduce_min", dict(act_min=3, act_max=2), "act_min"),
])
def test_definition_refuses_outside_its_domain(op, attrs, msg):
    x = np.zeros((2, 3, 4), np.int8)
    base = dict(axes=2, in_zp=0, out_zp=0, mult=1 << 30, shift=31, act_min=-128, act_max=127)
    if op != "reduce_sum":
        base = dict(axes=2, act_min=-128, act_max=127)
    with pytest.raises(ValueError, match=msg):
        KERNELS[op](x, **{**base, **attrs})


# ----------------------------------------------------------------------------- C kernels

def sum_case(name, shape, dims, mean=True, zp=None, act=None):
    rng = rng_for(name)
    count = math.prod(shape[d] for d in dims)
    in_zp, out_zp = (pick_zp(rng), pick_zp(rng)) if zp is None else zp
    real = 1.0 / count if mean else float(np.exp(rng.uniform(-6, -2)))
    m, s = quant.quantize_multiplier(real)
    lo, hi = act or pick_act(rng, out_zp)
    return Case(name, "reduce_sum", (s8(rng, shape),),
                dict(axes=mask(dims), in_zp=in_zp, out_zp=out_zp, mult=m, shift=s,
                     act_min=lo, act_max=hi))


def minmax_case(name, op, shape, dims):
    rng = rng_for(name)
    lo, hi = pick_act(rng, pick_zp(rng))
    return Case(name, op, (s8(rng, shape),), dict(axes=mask(dims), act_min=lo, act_max=hi))


# (shape, dims): rows (last dims, MVE 16 / DSP 4 lanes and tails), columns (NHWC H, W with
# channels around 4 and 16), and masks the odometer runs (several reduced runs, ranks 1..6)
GEOMETRIES = [
    ((1,), (0,)), ((33,), (0,)), ((3, 17), (1,)), ((2, 4, 4, 15), (3,)), ((5, 64), (1,)),
    ((1, 5, 7, 1), (1, 2)), ((1, 5, 7, 3), (1, 2)), ((1, 4, 6, 4), (1, 2)),
    ((2, 3, 3, 17), (1, 2)), ((1, 7, 7, 33), (1, 2)), ((1, 9, 1, 64), (1, 2)),
    ((300, 5), (0,)), ((2, 300, 20), (1,)), ((2, 3, 4, 5), (0, 2)), ((2, 3, 4, 5), (1, 3)),
    ((2, 3, 4, 5), (0, 1, 2, 3)), ((2, 3, 4, 5), (0, 3)), ((3, 2, 2, 3, 5), (0, 2, 4)),
    ((2, 2, 3, 2, 3, 2), (1, 3, 5)), ((2, 2, 3, 2, 3, 2), (0, 2, 3)), ((4, 1, 5), (1,)),
    ((6, 7), (0,)), ((2, 3, 4, 5), (2,)),
]


def reduce_cases():
    cases = []
    for i, (shape, dims) in enumerate(GEOMETRIES):
        cases.append(sum_case(f"reduce_mean_{i}", shape, dims))
        cases.append(sum_case(f"reduce_sum_{i}", shape, dims, mean=False))
        for op in ("reduce_max", "reduce_min"):
            cases.append(minmax_case(f"{op}_{i}", op, shape, dims))
    cases += [sum_case("reduce_mean_zp_extremes", (1, 6, 6, 20), (1, 2), zp=(-128, 127)),
              sum_case("reduce_mean_zp_top", (2, 9, 24), (2,), zp=(127, -128)),
              sum_case("reduce_mean_257_rows", (1, 257, 2, 8), (1, 2), zp=(-128, 0),
                       act=(-128, 127)),  # DSP: 16-bit halves flushed every 256 rows
              sum_case("reduce_sum_all_127", (1, 300, 2, 4), (1, 2), zp=(-128, 0))]
    cases[-1].inputs = (np.full((1, 300, 2, 4), 127, np.int8),)
    return cases + reduce_bad_cases() + log_softmax_cases() + var_cases() + norm_cases()


def norm_consts(rng, a, s_out=0.03):
    """A random affine as the compiler encodes it (ref.reduce.norm_constants), one channel with
    gamma 0."""
    gamma = rng.uniform(-2, 2, a)
    gamma[rng.integers(a)] = 0.0
    return norm_constants(gamma, rng.uniform(-1, 1, a), 1e-5, 4, 0.05, s_out)[:4]


def norm_case(name, shape, dims, inner, a, eps=1, x=None):
    rng = rng_for(name)
    lo, hi = pick_act(rng, 0)
    x = s8(rng, shape) if x is None else x
    return Case(name, "norm", (x, *norm_consts(rng, a)),
                dict(axes=mask(dims), eps=eps, inner=inner, out_zp=int(rng.integers(-20, 20)),
                     act_min=lo, act_max=hi))


def norm_cases():
    cases = [
        norm_case("norm_layer_last", (3, 7, 20), (2,), 1, 20),  # layer norm over D
        norm_case("norm_layer_chw", (2, 3, 5, 4), (1, 2, 3), 1, 60),  # [C, H, W] stored NHWC
        norm_case("norm_instance", (2, 4, 5, 6), (1, 2), 1, 6),  # NHWC instance norm
        norm_case("norm_group", (2, 2, 3, 4, 5), (2, 3, 4), 20, 6),  # [N, G, C/G, H, W]
        norm_case("norm_instance_1d", (2, 3, 17), (2,), 1, 17, eps=1000),
        norm_case("norm_single", (4, 1), (1,), 1, 1),  # one element: D = 0, z = 0
        norm_case("norm_constant", (2, 9), (1,), 1, 9, x=np.full((2, 9), -128, np.int8)),
        norm_case("norm_extreme", (1, 300), (1,), 1, 300,
                  x=np.tile(np.array([-128, 127], np.int8), 150).reshape(1, 300)),
        norm_case("norm_one_outlier", (1, 400), (1,), 1, 1,
                  x=np.concatenate([np.full(399, -128), [127]]).astype(np.int8).reshape(1, 400)),
        norm_case("norm_eps_max", (2, 9), (1,), 1, 9, eps=INT32_MAX)]
    base = norm_case("norm_edge", (2, 6), (1,), 1, 6)
    x, sign, beta, mult, shift = base.inputs
    zmax = ((math.isqrt(5) + 1) << 12) + 1
    # rq(zmax + |beta|) = 2 (zmax + |beta|) with (2^30, 29): 2^31 - 2 accepted, 2^31 refused
    edge = [-((1 << 30) - zmax - 1) if k == 0 else 0 for k in range(6)]
    over = [-((1 << 30) - zmax) if k == 0 else 0 for k in range(6)]
    twice = (i32([1 << 30] * 6), i32([29] * 6))
    return cases + [
        Case("norm_edge_beta_2p30", "norm", (x, sign, i32([1 << 30] * 6), mult, shift),
             {**base.attrs}),
        Case("norm_edge_rq_max", "norm", (x, sign, i32(edge), *twice), base.attrs),
        bad(base, "rq_overflow", inputs=(x, sign, i32(over), *twice)),
        bad(base, "beta_over", inputs=(x, sign, i32([(1 << 30) + 1] * 6), mult, shift)),
        bad(base, "sign_2", inputs=(x, np.full(6, 2, np.int8), beta, mult, shift)),
        bad(base, "mult_short", inputs=(x, sign, beta, mult[:5], shift)),
        bad(base, "eps0", eps=0), bad(base, "inner0", inner=0), bad(base, "axes0", axes=0),
        bad(base, "out_zp128", out_zp=128), bad(base, "act_empty", act_min=3, act_max=2),
        bad(base, "y_shape", out_shape=(2, 1), ref_raises=False)]


def var_case(name, shape, dims, root, x=None):
    rng = rng_for(name)
    count = math.prod(shape[d] for d in dims)
    lo, hi = pick_act(rng, -128)
    attrs = dict(axes=mask(dims), **var_attrs(count, root, 1, 0.05, 0.02 if root else 0.001),
                 out_zp=-128, act_min=lo, act_max=hi)
    return Case(name, "reduce_var", (s8(rng, shape) if x is None else x,), attrs)


def var_cases():
    cases = [var_case(f"reduce_{('var', 'std')[root]}_{i}", shape, dims, root)
             for i, (shape, dims) in enumerate(GEOMETRIES[1::2]) for root in (0, 1)]
    half = np.tile(np.array([-128, 127], np.int8), 150).reshape(1, 300)  # the largest D
    cases += [var_case(f"reduce_{('var', 'std')[r]}_extreme", (1, 300), (1,), r, x=half)
              for r in (0, 1)]
    cases += [var_case("reduce_std_constant", (3, 7), (1,), 1, x=np.full((3, 7), 5, np.int8))]
    base = var_case("reduce_var_edge", (2, 6), (1,), 0)
    std = var_case("reduce_std_edge", (2, 6), (1,), 1)
    top = var_bound(6)  # 9 * 65025 = 585225 ~ 2^19.2: D * 4^pre < 2^62 up to pre = 21
    assert top << 42 < 1 << 62 <= top << 44
    return cases + [
        Case("reduce_std_edge_pre_max", "reduce_var", std.inputs, {**std.attrs, "pre": 21,
                                                                    "mult": 1, "shift": 62}),
        bad(std, "pre_over", pre=22), bad(std, "pre_neg", pre=-1), bad(base, "pre_63", pre=63),
        bad(base, "root2", root=2), bad(base, "rq_overflow", pre=0, mult=INT32_MAX, shift=19),
        Case("reduce_var_edge_rq_max", "reduce_var", base.inputs,
             {**base.attrs, "pre": 0, "mult": INT32_MAX, "shift": 20}),
        bad(base, "axes0", axes=0), bad(base, "y_shape", out_shape=(2, 6), ref_raises=False)]


def log_softmax_case(name, shape, s_in=0.05, s_out=0.06, zp=127, x=None):
    rng = rng_for(name)
    exp, log, in_mult, ln2 = log_softmax_tables(s_in, s_out)
    x = s8(rng, shape) if x is None else x
    return Case(name, "log_softmax", (x, exp, log), dict(in_mult=in_mult, ln2=ln2, out_zp=zp))


def log_softmax_cases():
    cases = [log_softmax_case(f"log_softmax_{i}", s, s_in, s_out, zp)
             for i, (s, s_in, s_out, zp) in enumerate([
                 ((1,), 0.05, 0.06, 127), ((3, 17), 0.1, 0.05, 120), ((2, 3, 300), 0.02, 0.04, 127),
                 ((2, 2, 2, 5), 0.5, 0.2, 0), ((4, 64), 0.004, 0.0014, 127),
                 ((1, 1000), 0.03, 0.03, -128), ((5, 2), 1.0, 1.0 / 64, 127)])]
    x = np.full((1, 32767), 127, np.int8)
    x[0, ::3] = -128
    cases.append(log_softmax_case("log_softmax_row_32767", x.shape, 0.08, 0.05, 127, x=x))
    base = log_softmax_case("log_softmax_edge", (2, 9))
    x, exp, log = base.inputs
    low = exp.copy()
    low[0] = 1  # the smallest table the domain allows: sums below 2^16, negative log terms
    edge = [Case("log_softmax_edge_in_mult_max", "log_softmax", base.inputs,
                 {**base.attrs, "in_mult": 1 << 22}),
            Case("log_softmax_edge_ln2_max", "log_softmax", (x, exp, np.full(256, 1 << 25,
                 np.int32)), {**base.attrs, "ln2": 1 << 25}),
            Case("log_softmax_edge_exp_small", "log_softmax", (x, low, log), base.attrs)]
    over_log = log.copy()
    over_log[7] = base.attrs["ln2"] + 1
    bad_exp = exp.copy()
    bad_exp[0] = 0
    return cases + edge + [
        bad(base, "in_mult_2p22_plus1", in_mult=(1 << 22) + 1),
        bad(base, "in_mult_neg", in_mult=-1),
        bad(base, "ln2_2p25_plus1", ln2=(1 << 25) + 1), bad(base, "out_zp128", out_zp=128),
        bad(base, "log_table_over_ln2", inputs=(x, exp, over_log)),
        bad(base, "log_table_neg", inputs=(x, exp, np.full(256, -1, np.int32))),
        bad(base, "exp_table_0", inputs=(x, bad_exp, log)),
        bad(base, "log_table_short", inputs=(x, exp, log[:255])),
        bad(base, "row_32768", inputs=(np.zeros((1, 32768), np.int8), exp, log),
            out_shape=(1, 32768)),
        bad(base, "y_shape", out_shape=(9, 2), ref_raises=False)]


def reduce_bad_cases():
    """Refused by both executors (ValueError / MT_STATUS_BAD_ARGUMENT), each at the first value
    outside the domain, next to the last accepted one (which runs, bit-exact)."""
    base = sum_case("reduce_edge", (2, 3, 4), (2,), zp=(-128, 0), act=(-128, 127))
    mx = minmax_case("reduce_max_edge", "reduce_max", (2, 3, 4), (0, 2))
    mn = minmax_case("reduce_min_edge", "reduce_min", (2, 3, 4), (1,))
    # rq(255 * 4) must fit int32: with mult 2^31 - 1 shift 10 is the last accepted
    top = dict(mult=INT32_MAX, shift=10)
    edge = [Case("reduce_edge_rq_max", "reduce_sum", base.inputs, {**base.attrs, **top}),
            Case("reduce_edge_axes_all", "reduce_sum", base.inputs, {**base.attrs, "axes": 7},
                 out_shape=None),
            Case("reduce_max_edge_axes_all", "reduce_max", mx.inputs, {**mx.attrs, "axes": 7})]
    cases = [bad(base, "rq_overflow", mult=INT32_MAX, shift=9),
             bad(base, "axes0", axes=0), bad(base, "axes8", axes=8), bad(base, "axes_neg", axes=-1),
             bad(base, "in_zp128", in_zp=128), bad(base, "out_zp_neg129", out_zp=-129),
             bad(base, "shift1", shift=1), bad(base, "shift63", shift=63),
             bad(base, "mult_neg", mult=-1), bad(base, "act_empty", act_min=1, act_max=0),
             bad(mx, "axes8", axes=8), bad(mx, "act_empty", act_min=1, act_max=0),
             bad(mn, "axes0", axes=0), bad(mn, "act_128", act_max=128),
             # shapes: y must be x with the reduced dims 1 (never broadcast into y)
             bad(base, "y_squeezed", out_shape=(2, 3), ref_raises=False),
             bad(base, "y_kept", out_shape=(2, 3, 4), ref_raises=False),
             bad(mx, "y_wrong", out_shape=(1, 3, 2), ref_raises=False),
             bad(base, "empty_x", inputs=(np.zeros((2, 0, 4), np.int8),),
                 out_shape=(2, 0, 1))]
    return edge + cases


def count_edge_cases():
    """The count bound (2^23 summed elements): the last accepted and the first refused. Host
    only: the inputs are 8 MiB."""
    ok = np.full((MAX_COUNT,), -128, np.int8)
    over = np.full((MAX_COUNT + 1,), -128, np.int8)
    attrs = dict(axes=1, in_zp=127, out_zp=0, mult=1 << 30, shift=53, act_min=-128, act_max=127)
    return [Case("reduce_edge_count_2p23", "reduce_sum", (ok,), attrs),
            Case("reduce_bad_count_2p23_plus1", "reduce_sum", (over,), attrs,
                 status=BAD_ARGUMENT, out_shape=(1,))]


@pytest.fixture(scope="module")
def cases():
    return reduce_cases()


def test_reduce_kernels_host(cases, tmp_path):
    run_host(cases + count_edge_cases(), tmp_path)


@pytest.mark.qemu
@pytest.mark.parametrize("board,cpu", BOARD_PARAMS)
def test_reduce_kernels_qemu(cases, tmp_path, board, cpu):
    run_board(cases, tmp_path, board, cpu)


@pytest.mark.parametrize("root", [0, 1])
def test_var_std_against_float(root):
    """With the compiler's attributes the integer var/std is within 1 LSB of float64's on the
    same int8 values (biased and unbiased), on every mask of a 4-D tensor."""
    rng = np.random.default_rng(root)
    x = s8(rng, (3, 4, 5, 6))
    for r in range(1, 5):
        for dims in itertools.combinations(range(4), r):
            count = math.prod(x.shape[d] for d in dims)
            for c in (0, 1):
                s_out = 0.02 if root else 0.001
                a = var_attrs(count, root, c, 0.05, s_out)
                y = KERNELS["reduce_var"](x, axes=mask(dims), **a, out_zp=-128, act_min=-128,
                                          act_max=127)
                v = (x.astype(np.float64) * 0.05).var(axis=dims, ddof=c, keepdims=True)
                want = np.clip(np.round((np.sqrt(v) if root else v) / s_out) - 128, -128, 127)
                assert np.abs(y.astype(np.int64) - want).max() <= 1, (dims, c)


def test_log_softmax_against_float():
    """The integer log_softmax is within 1 LSB of float64 log_softmax of the dequantized input,
    quantized with the output qparams, on random and extreme rows."""
    rng = np.random.default_rng(5)
    for s_in, s_out, n in ((0.05, 0.06, 10), (0.2, 0.1, 1000), (0.01, 0.02, 3), (0.5, 0.25, 64)):
        exp, log, in_mult, ln2 = log_softmax_tables(s_in, s_out)
        x = s8(rng, (50, n))
        x[0] = 127
        x[1, 1:] = -128
        y = KERNELS["log_softmax"](x, exp, log, in_mult=in_mult, ln2=ln2, out_zp=127)
        v = x.astype(np.float64) * s_in
        ref = v - v.max(-1, keepdims=True)
        ref = ref - np.log(np.exp(ref).sum(-1, keepdims=True))
        want = np.clip(np.round(ref / s_out) + 127, -128, 127)
        assert np.abs(y - want).max() <= 1, (s_in, s_out, n)


def test_log_softmax_scales_outside_the_domain_are_refused():
    with pytest.raises(ValueError, match="s_in / s_out <= 64"):
        log_softmax_tables(1.0, 0.01)
    with pytest.raises(ValueError, match="outside the domain"):
        log_softmax_tables(0.001, 0.001)


# ----------------------------------------------------------------------------- TOSA

@pytest.mark.parametrize("shape,dims", GEOMETRIES[::2] + [((2, 3, 4, 5), (0, 1, 2, 3))])
def test_tosa_lowering_is_exact(shape, dims):
    """x - in_zp by RESCALE, REDUCE_SUM per axis, RESCALE (+ CLAMP); REDUCE_MAX/MIN on int8: on
    the TOSA reference model, identical to the definition on extreme and random inputs."""
    from test_tosa import check_op

    count = math.prod(shape[d] for d in dims)
    m, s = mean_scale(count)
    rng = np.random.default_rng(count)
    check_op("reduce_sum", [shape], rng=rng, axes=mask(dims), in_zp=-7, out_zp=5, mult=m,
             shift=s, act_min=-100, act_max=127)
    m, s = quant.quantize_multiplier(0.01)
    check_op("reduce_sum", [shape], rng=rng, axes=mask(dims), in_zp=127, out_zp=-128, mult=m,
             shift=s, act_min=-128, act_max=127)
    check_op("reduce_max", [shape], rng=rng, axes=mask(dims), act_min=-128, act_max=127)
    check_op("reduce_min", [shape], rng=rng, axes=mask(dims), act_min=-3, act_max=90)


def test_tosa_refuses_a_sum_its_rescale_cannot_take():
    """apply_scale_32 needs |sum| < 2^(shift-1): a large scale on a long sum stays on the CPU."""
    from test_tosa import single_op

    from mcutorch.backends import tosa

    attrs = dict(axes=4, in_zp=-128, out_zp=0, mult=INT32_MAX, shift=10, act_min=-128,
                 act_max=127)
    ok, why = tosa.tosa_support(single_op("reduce_sum", [(2, 3, 4)], **attrs).nodes[0])
    assert not ok and "reduce_sum: the sum spans [0, 1020]" in why, why


# ----------------------------------------------------------------------------- end to end

class Reductions(nn.Module):
    """A conv, then every reduction form: means and sums over C, H, W, several dims and every
    element, with and without keepdim, negative dims, amax/amin, max/min values, 5-D."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        y = self.conv(x)
        outs = [y.mean(1), y.mean(1, keepdim=True), y.mean((0, 2)), y.sum(-1) * 0.25,
                torch.relu(y.sum((2, 3), keepdim=True)), y.amax((1, 3)), y.amin(2, keepdim=True),
                y.max(dim=1).values, torch.min(y, -1, keepdim=True)[0], y.max(), y.min(),
                y.reshape(2, 2, 4, 6, 7).mean((1, 3)), self.fc(y.mean((2, 3))).sum(-1),
                y.sum(), y.mean(dim=(-3, -1))]
        return torch.cat([o.reshape(-1) for o in outs])


def _end_to_end(model, cal):
    """(qmodel, program, share of the outputs within 1 LSB of fake-quant on cal[:4])."""
    qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal)
    program = mcutorch.compile(qmodel, (cal[0],))
    out = program.program.tensors[program.program.outputs[0]]
    within = [np.abs(np.round((program.run(x).numpy() - qmodel(x).detach().numpy()) / out.scale))
              <= 1 for x in cal[:4]]
    return qmodel, program, float(np.concatenate(within).mean())


def test_reductions_end_to_end():
    """Every reduction of a torch module within 1 LSB of PyTorch's fake-quant model on >= 99 %
    of the elements (each layer fed the same int8 input too), the program's ops as expected, and
    the TOSA lowering exact on the reference model."""
    torch.manual_seed(7)
    model = Reductions().eval()
    cal = [torch.randn(2, 3, 6, 7) for _ in range(8)]
    qmodel, program, share = _end_to_end(model, cal)
    names = [op.name for op in program.program.ops]
    assert names.count("reduce_sum") >= 8 and names.count("reduce_max") == 3, names
    assert names.count("reduce_min") == 3 and "avg_pool2d" in names, names
    print(f"reductions end to end: {share:.2%} of the outputs within 1 LSB of fake-quant")
    assert share >= 0.99
    report = layer_by_layer(qmodel, (cal[1],))
    reduce_rows = [r for r in report if r["op"].startswith("reduce_")]  # the ones whose output
    # is a quantize node's (keepdim; without it the reshape after the op holds the qparams)
    assert len(reduce_rows) >= 4 and all(r["within_1lsb"] >= 0.99 for r in reduce_rows), report
    from mcutorch.backends import tosa

    tosa.verify_program_graph(build_graph(qmodel))


class Softmaxes(nn.Module):
    """softmax and log_softmax over every dim of a 4-D NCHW tensor, of 3-D and 5-D views."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        outs = [f(y, d) for f in (torch.softmax, torch.log_softmax) for d in (0, 1, 2, -1)]
        outs += [torch.softmax(y.reshape(2, 6, 20), 1), torch.log_softmax(y.reshape(2, 6, 20), 0),
                 torch.log_softmax(y.reshape(2, 3, 2, 4, 5), 2),
                 nn.functional.log_softmax(y.flatten(1), -1)]
        return torch.cat([o.reshape(-1) for o in outs])


def test_softmax_and_log_softmax_over_any_dim_end_to_end():
    """A softmax or log_softmax over any dim is the last-axis kernel between two transposes (none
    when the dim is the stored last one, NHWC's C); within 1 LSB of fake-quant."""
    torch.manual_seed(3)
    model = Softmaxes().eval()
    cal = [torch.randn(2, 3, 4, 5) for _ in range(8)]
    qmodel, program, share = _end_to_end(model, cal)
    names = [op.name for op in program.program.ops]
    assert names.count("softmax") == 5 and names.count("log_softmax") == 7, names
    print(f"softmax / log_softmax over any dim: {share:.2%} within 1 LSB of fake-quant")
    assert share >= 0.99
    report = [r for r in layer_by_layer(qmodel, (cal[1],)) if r["op"] == "log_softmax"]
    assert report and all(r["within_1lsb"] >= 0.99 for r in report), report


class Spreads(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        outs = [y.var(1), y.std((2, 3), keepdim=True), y.var(unbiased=False),
                torch.std(y, -1, correction=0), y.reshape(2, 3, 2, 6, 5).var((1, 3)), y.std()]
        return torch.cat([o.reshape(-1) for o in outs])


def test_var_and_std_end_to_end():
    torch.manual_seed(4)
    model = Spreads().eval()
    cal = [torch.randn(2, 3, 6, 5) for _ in range(8)]
    qmodel, program, share = _end_to_end(model, cal)
    assert [op.name for op in program.program.ops].count("reduce_var") == 6
    print(f"var / std end to end: {share:.2%} within 1 LSB of fake-quant")
    assert share >= 0.99


def test_var_of_one_element_unbiased_is_refused():
    """PyTorch's var of one element with correction 1 is NaN: calibration names it."""
    from mcutorch.errors import QuantizeError

    with pytest.raises(QuantizeError, match=r"\[nan, nan\] at test_reduce.py:\d+ \(aten.var.dim\)"):
        mcutorch.quantize(Wrap(lambda v: v.var(1)), (torch.randn(3, 1),))


def test_norm_against_float():
    """The integer normalisation (z in Q12 from the exact int64 variance and the integer
    reciprocal square root) is within 1 LSB of float64 (x - mean) / sqrt(var + eps) * gamma +
    beta on the same int8 values, quantized with the output qparams."""
    rng = np.random.default_rng(11)
    s_in, s_out, eps = 0.04, 0.03, 1e-5
    for shape, dims in (((3, 7, 20), (2,)), ((2, 4, 5, 6), (1, 2)), ((1, 500), (1,))):
        x = s8(rng, shape)
        a = shape[-1]
        gamma, beta = rng.uniform(-2, 2, a), rng.uniform(-1, 1, a)
        n = math.prod(shape[d] for d in dims)
        *consts, e = norm_constants(gamma, beta, eps, n, s_in, s_out)
        y = KERNELS["norm"](x, *consts, axes=mask(dims), eps=e, inner=1, out_zp=0, act_min=-128,
                            act_max=127)
        v = x.astype(np.float64) * s_in
        z = (v - v.mean(dims, keepdims=True)) / np.sqrt(v.var(dims, keepdims=True) + eps)
        want = np.clip(np.round((z * gamma + beta) / s_out), -128, 127)
        assert np.abs(y - want).max() <= 1, shape


class Norms(nn.Module):
    """layer_norm (last dim of 3-D, [C, H, W] of 4-D, with and without affine), group_norm,
    instance_norm (2-D with affine, 1-D without)."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 1)
        self.ln, self.gn = nn.LayerNorm(5), nn.GroupNorm(2, 4)
        self.inn = nn.InstanceNorm2d(4, affine=True)
        self.ln_chw, self.ln_plain = nn.LayerNorm((4, 3, 5)), nn.LayerNorm((4, 3, 5), False)
        for m in (self.ln, self.gn, self.inn, self.ln_chw):
            m.weight.data.uniform_(-2, 2)
            m.bias.data.uniform_(-1, 1)

    def forward(self, x):
        y = self.c(x)
        outs = [self.gn(y), self.inn(y), self.ln_plain(y), self.ln_chw(y),
                self.ln(y.reshape(2, 12, 5)), nn.functional.instance_norm(y.flatten(2))]
        return torch.cat([o.flatten() for o in outs])


def test_layer_group_instance_norm_end_to_end():
    torch.manual_seed(0)
    model = Norms().eval()
    cal = [torch.randn(2, 3, 3, 5) for _ in range(6)]
    qmodel, program, share = _end_to_end(model, cal)
    assert [op.name for op in program.program.ops].count("norm") == 6
    print(f"layer/group/instance norm end to end: {share:.2%} within 1 LSB of fake-quant")
    assert share >= 0.99
    report = [r for r in layer_by_layer(qmodel, (cal[1],)) if r["op"] == "norm"]
    assert report and all(r["within_1lsb"] >= 0.99 for r in report), report


def test_layer_norm_over_w_of_4d_is_refused_naming_it():
    qmodel = mcutorch.quantize(Wrap(nn.LayerNorm(5)), (torch.randn(1, 2, 3, 5),))
    with pytest.raises(UnsupportedOpError, match=r"layer_norm over the last 1 dims of a 4-D"):
        mcutorch.compile(qmodel, (torch.randn(1, 2, 3, 5),))


class Wrap(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def test_argmax_indices_are_refused_naming_the_node():
    with pytest.raises(UnsupportedOpError, match=r"test_reduce.py:\d+ \(aten\.max\.dim\): its "
                                                 r"indices output \(an int64 argmax\) is used"):
        mcutorch.quantize(Wrap(lambda x: x.max(1)[1] + x.max(1)[0]), (torch.randn(2, 3),))


def test_a_sum_over_more_than_2p23_elements_is_refused_at_compile_time():
    x = torch.randn(MAX_COUNT + 1)
    qmodel = mcutorch.quantize(Wrap(lambda v: v.sum()), (x,))
    with pytest.raises(UnsupportedOpError, match=r"a sum over 8388609 elements; mcutorch sums "
                                                 r"at most 2\^23"):
        mcutorch.compile(qmodel, (x,))


def test_a_sum_that_requantizes_out_of_int32_is_refused_at_compile_time():
    """A custom scale so small that rq(sum) leaves int32: named at compile time, not run time."""
    from mcutorch.passes import requant
    from mcutorch.ir import Graph, Node, Tensor

    x = Tensor("x", (4, 3000), scale=1.0, zero_point=-128)
    y = Tensor("y", (4, 1), scale=1e-6, zero_point=0)
    graph = Graph([Node("reduce_sum", [x], [y], {"axes": 2, "divide": 1}, "m.py:1 (sum)")],
                  [x], [y])
    with pytest.raises(UnsupportedOpError, match=r"m.py:1 \(sum\): a sum of 3000 int8 values "
                                                 r"scaled by 1e\+06 can leave int32"):
        requant.run(graph)


class OnTheNpu(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1)
        self.d = nn.Conv2d(1, 8, 1)

    def forward(self, x):
        y = self.c(x)
        z = (y.mean(1, keepdim=True) + y.amax(1, keepdim=True) + y.sum(1, keepdim=True) * 0.1
             + y.amin(1, keepdim=True))
        return self.d(torch.relu(z))


@pytest.mark.parametrize("npu", ["ethos-u55-128", "ethos-u85-256"])
def test_reductions_go_to_the_npu(npu):
    """Vela takes REDUCE_SUM / REDUCE_MAX / REDUCE_MIN with their RESCALEs: the whole model is
    one delegate, and the program computes what the CPU-only program does, bit for bit."""
    from mcutorch.backends.ethos_u.partition import partition

    torch.manual_seed(0)
    cal = [torch.randn(1, 3, 8, 8) for _ in range(4)]
    qmodel = mcutorch.quantize(OnTheNpu().eval(), (cal[0],), calibration=cal)
    part = partition(build_graph(qmodel), npu)
    assert len(part.groups) == 1 and all(r.npu for r in part.rows), part.rows
    program = mcutorch.compile(qmodel, (cal[0],), target=f"cortex-m55+{npu}")
    cpu = mcutorch.compile(qmodel, (cal[0],), target="cortex-m55")
    assert program.program.ops[0].name == "delegate"
    assert np.array_equal(program.run(cal[1]).numpy(), cpu.run(cal[1]).numpy())


class LooseBatchNorms(nn.Module):
    """BatchNorms that follow no conv/linear: after a ReLU (2-D), after a mean (1-D on [N, C])
    and on [N, C, L] (1-D)."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 6, 1)
        self.bn, self.bn1, self.bn1l = nn.BatchNorm2d(6), nn.BatchNorm1d(6), nn.BatchNorm1d(6)
        for b in (self.bn, self.bn1, self.bn1l):
            b.running_mean.uniform_(-1, 1)
            b.running_var.uniform_(0.5, 2)
            b.weight.data.uniform_(-2, 2)
            b.bias.data.uniform_(-1, 1)

    def forward(self, x):
        y = torch.relu(self.c(x))
        return torch.cat([self.bn(y).flatten(), self.bn1(y.mean((2, 3))).flatten(),
                          self.bn1l(y.flatten(2)).flatten()])


def test_batch_norm_that_follows_no_conv_is_a_depthwise_conv():
    """A loose BatchNorm is a per-channel affine: a depthwise 1x1 conv (no new kernel), within
    1 LSB of fake-quant and exact on the TOSA reference model."""
    torch.manual_seed(0)
    model = LooseBatchNorms().eval()
    cal = [torch.randn(2, 3, 4, 5) for _ in range(6)]
    qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal)
    program = mcutorch.compile(qmodel, (cal[0],))
    names = [op.name for op in program.program.ops]
    assert names.count("depthwise_conv2d") == 3 and "batch_norm" not in str(names), names
    out = program.program.tensors[program.program.outputs[0]]
    for x in cal[:3]:
        diff = np.abs(np.round((program.run(x).numpy() - qmodel(x).detach().numpy()) / out.scale))
        assert (diff <= 1).mean() >= 0.99
    from mcutorch.backends import tosa

    tosa.verify_program_graph(build_graph(qmodel))


def test_batch_norm_of_5d_is_refused_naming_it():
    with pytest.raises(UnsupportedOpError, match=r"BatchNorm of a 5-D tensor"):
        mcutorch.quantize(nn.BatchNorm3d(2).eval(), (torch.randn(1, 2, 2, 2, 2),))
