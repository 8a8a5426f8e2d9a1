"""Reductions over any set of axes of an int8 tensor of rank 1..6 (NHWC for 4-D).

`axes` is a bit mask (bit i: dim i is reduced), in [1, 2^rank); the output keeps the rank, every
reduced dim 1. reduce_sum sums x - in_zp over the `count` reduced elements in int32 and
requantizes once; a mean is a reduce_sum with 1/count folded into (mult, shift). The domain
(docs/numerics.md): every dim >= 1, count <= 2^23 (|sum| <= 255 * 2^23 < 2^31), and rq of the
extreme sums (x - in_zp at its minimum or maximum everywhere) inside int32, a condition on the
attributes and shape alone. reduce_max / reduce_min share qparams: no arithmetic.
"""
from __future__ import annotations

import math

import numpy as np

from mcutorch import quant
from mcutorch.ref._common import (INT32_MAX, INT32_MIN, as_array, check, check_act, check_scale,
                                  check_zp, requantize)

MAX_RANK = 6
MAX_COUNT = 1 << 23  # reduced elements of one output: |sum of (x - in_zp)| <= 255 * 2^23 < 2^31


def reduced_dims(x, axes: int, op: str) -> tuple[int, ...]:
    """The dims `axes` reduces (ValueError outside the domain: rank, mask, empty dims)."""
    as_array(x, np.int8, "x", tuple(range(1, MAX_RANK + 1)))
    check(1 <= axes < (1 << x.ndim), f"{op}: axes mask {axes} outside [1, 2^{x.ndim})")
    check(x.size > 0, f"{op}: x of shape {x.shape} is empty")
    return tuple(i for i in range(x.ndim) if axes >> i & 1)


def sum_range(count: int, in_zp: int) -> tuple[int, int]:
    """The extreme values of a sum of `count` terms x - in_zp over int8 x."""
    return (-128 - in_zp) * count, (127 - in_zp) * count


def reduce_sum(x, *, axes, in_zp, out_zp, mult, shift, act_min, act_max):
    """acc = sum over the reduced dims of (x - in_zp); y = clamp(rq(acc, mult, shift) + out_zp)."""
    # x: (d0, ..., dr-1) int8  ->  y: same rank, reduced dims 1, int8
    dims = reduced_dims(x, axes, "reduce_sum")
    count = math.prod(x.shape[d] for d in dims)
    check(count <= MAX_COUNT, f"reduce_sum: {count} elements per sum (more than 2^23: the sum "
                              "may leave int32)")
    check_zp("in_zp", in_zp)
    check_scale(mult, shift)
    lo, hi = (int(quant.rq(v, mult, shift)) for v in sum_range(count, in_zp))
    check(lo >= INT32_MIN and hi <= INT32_MAX,
          f"reduce_sum: rq of the sums' range [{lo}, {hi}] leaves int32")
    acc = (x.astype(np.int64) - in_zp).sum(axis=dims, keepdims=True)
    return requantize(acc, mult, shift, out_zp, act_min, act_max)


def reduce_max(x, *, axes, act_min, act_max):
    """y = clamp(max over the reduced dims of x)."""
    dims = reduced_dims(x, axes, "reduce_max")
    check_act(act_min, act_max)
    return np.clip(x.max(axis=dims, keepdims=True), act_min, act_max).astype(np.int8)


def reduce_min(x, *, axes, act_min, act_max):
    """y = clamp(min over the reduced dims of x)."""
    dims = reduced_dims(x, axes, "reduce_min")
    check_act(act_min, act_max)
    return np.clip(x.min(axis=dims, keepdims=True), act_min, act_max).astype(np.int8)
