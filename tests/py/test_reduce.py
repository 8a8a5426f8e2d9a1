"""Reductions (reduce_sum / reduce_max / reduce_min; sum, mean, amax, amin, max/min values of
torch): the definition against independent formulas, the C kernel bit-exact against it on the
host (ASan + UBSan) and on every emulated board, the TOSA lowering on the reference model, the
domain edges in both executors, and end to end from torch modules against PyTorch's fake-quant
model (within 1 LSB, layer by layer too)."""
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
from mcutorch.ref.reduce import MAX_COUNT

from test_kernels_c import (BAD_ARGUMENT, BOARD_BUILDS, Case, bad, pick_act, pick_zp, rng_for,
                            run_board, run_host, s8)

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
    return cases + reduce_bad_cases()


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
@pytest.mark.parametrize("board,cpu", BOARD_BUILDS, ids=[f"{b}-{c}" for b, c in BOARD_BUILDS])
def test_reduce_kernels_qemu(cases, tmp_path, board, cpu):
    run_board(cases, tmp_path, board, cpu)
