"""Reductions over any set of axes of an int8 tensor of rank 1..6 (NHWC for 4-D); reduce_sum
also takes int16 (zero points 0, an int16 output: docs/numerics.md section 6).

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
from mcutorch.ref._common import (INT16_MAX, INT32_MAX, INT32_MIN, as_array, check,
                                  check_act, check_scale, check_zp, requantize,
                                  requantize_int16)

MAX_RANK = 6
MAX_COUNT = 1 << 23  # reduced elements of one output: |sum of (x - in_zp)| <= 255 * 2^23 < 2^31
MAX_COUNT16 = (1 << 16) - 1  # int16 x (zero point 0): |sum| <= 32768 * (2^16 - 1) < 2^31


def reduced_dims(x, axes: int, op: str, wide: bool = False) -> tuple[int, ...]:
    """The dims `axes` reduces (ValueError outside the domain: rank, mask, empty dims); `wide`
    takes an int16 x."""
    as_array(x, np.int16 if wide else np.int8, "x", tuple(range(1, MAX_RANK + 1)))
    check(1 <= axes < (1 << x.ndim), f"{op}: axes mask {axes} outside [1, 2^{x.ndim})")
    check(x.size > 0, f"{op}: x of shape {x.shape} is empty")
    return tuple(i for i in range(x.ndim) if axes >> i & 1)


def sum_range(count: int, in_zp: int, wide: bool = False) -> tuple[int, int]:
    """The extreme values of a sum of `count` terms x - in_zp over int8 x (int16 x with `wide`,
    in_zp 0)."""
    lo, hi = (-INT16_MAX - 1, INT16_MAX) if wide else (-128, 127)
    return (lo - in_zp) * count, (hi - in_zp) * count


def reduce_sum(x, *, axes, in_zp, out_zp, mult, shift, act_min, act_max):
    """acc = sum over the reduced dims of (x - in_zp); y = clamp(rq(acc, mult, shift) + out_zp).
    An int16 x: in_zp = out_zp = 0, at most 2^16 - 1 elements per sum, an int16 y."""
    # x: (d0, ..., dr-1) int8 or int16  ->  y: same rank, reduced dims 1, x's dtype
    wide = isinstance(x, np.ndarray) and x.dtype == np.int16
    dims = reduced_dims(x, axes, "reduce_sum", wide)
    count = math.prod(x.shape[d] for d in dims)
    top, bits = (MAX_COUNT16, "2^16 - 1") if wide else (MAX_COUNT, "2^23")
    check(count <= top, f"reduce_sum: {count} elements per sum (more than {bits}: the sum "
                        "may leave int32)")
    check_zp("in_zp", in_zp)
    check(not wide or in_zp == 0, f"in_zp={in_zp}: int16 activations have zero point 0")
    check_scale(mult, shift)
    lo, hi = (int(quant.rq(v, mult, shift)) for v in sum_range(count, in_zp, wide))
    check(lo >= INT32_MIN and hi <= INT32_MAX,
          f"reduce_sum: rq of the sums' range [{lo}, {hi}] leaves int32")
    acc = (x.astype(np.int64) - in_zp).sum(axis=dims, keepdims=True)
    return (requantize_int16 if wide else requantize)(acc, mult, shift, out_zp, act_min,
                                                      act_max)


def var_bound(count: int) -> int:
    """The largest D = n sum(x^2) - sum(x)^2 over int8 x (half the values at each end)."""
    return 255 * 255 * (count // 2) * ((count + 1) // 2)


def var_value_bound(count: int, root: int, pre: int) -> int:
    """The largest v reduce_var requantizes (from var_bound, before rq)."""
    top = var_bound(count)
    return math.isqrt(top << 2 * pre) if root else (top + (1 << pre >> 1)) >> pre


def var_attrs(count: int, root: int, correction: float, s_in: float, s_out: float) -> dict:
    """The compile-time attributes (root, pre, mult, shift) of a var (root 0) or std (root 1) of
    `count` elements: var = s_in^2 D / (n (n - correction)), std its square root; pre keeps v
    below 2^31 (var) or D 4^pre below 2^62 (std). ValueError when rq could leave int32."""
    bits = var_bound(count).bit_length()
    pre = (62 - bits) // 2 if root else max(0, bits - 31)
    real = (s_in * s_in / (count * (count - correction))) ** (0.5 if root else 1.0)
    mult, shift = quant.quantize_multiplier(real * (2.0**-pre if root else 2.0**pre) / s_out)
    check(quant.rq(var_value_bound(count, root, pre), mult, shift) <= INT32_MAX,
          f"the {('var', 'std')[root]} of {count} int8 values at output scale {s_out:g} can "
          "leave int32")
    return {"root": root, "pre": pre, "mult": mult, "shift": shift}


def reduce_var(x, *, axes, root, pre, mult, shift, out_zp, act_min, act_max):
    """D = n sum(x^2) - sum(x)^2 over the reduced dims (int64, exact); var (root 0): v = D
    rounded right by `pre`; std (root 1): v = isqrt(D * 4^pre) (floor); y = clamp(rq(v) + out_zp).
    The compiler folds s_in^2 / (n (n - correction) s_out) (or its square root) into mult."""
    dims = reduced_dims(x, axes, "reduce_var")
    count = math.prod(x.shape[d] for d in dims)
    check(count <= MAX_COUNT, f"reduce_var: {count} elements per sum (more than 2^23)")
    check(root in (0, 1), f"reduce_var: root={root} is neither 0 (var) nor 1 (std)")
    top_pre = 31 if root else 62
    check(0 <= pre <= top_pre, f"reduce_var: pre={pre} outside [0, {top_pre}]")
    check(not root or var_bound(count) << 2 * pre < 1 << 62,
          f"reduce_var: D * 4^{pre} can reach 2^62 for {count} elements")
    top = var_value_bound(count, root, pre)
    check_scale(mult, shift)
    check(top <= INT32_MAX and quant.rq(top, mult, shift) <= INT32_MAX,
          f"reduce_var: the value {top} or its rq leaves int32")
    xi = x.astype(np.int64)
    s1, s2 = xi.sum(axis=dims, keepdims=True), (xi * xi).sum(axis=dims, keepdims=True)
    big = count * s2 - s1 * s1  # exact int64: < 2^60
    if root:
        v = np.vectorize(lambda d: math.isqrt(int(d) << 2 * pre), otypes=[np.int64])(big)
    else:
        v = (big + (1 << pre >> 1)) >> pre
    return requantize(v.reshape(big.shape), mult, shift, out_zp, act_min, act_max)


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


NORM_Z_SHIFT = 19  # (n x - S1) * R ~ z * 2^31: z in Q12
NORM_MAX_BETA = 1 << 30


def norm_z_bound(count: int, q: int = 12) -> int:
    """A bound on |z| (Q12; int16 x: Q20): a standardized value is at most sqrt(n - 1) in
    magnitude."""
    return ((math.isqrt(max(count - 1, 0)) + 1) << q) + 1


NORM16_Q = 20  # an int16 norm's z: Q20
NORM16_MAX_COUNT = 1 << 15  # int16 x: |n x - sum x| < 2^31 and n sum(x^2) <= 2^60


def norm_constants(gamma, beta, eps: float, count: int, s_in: float, s_out: float,
                   wide: bool = False):
    """(gamma_sign int8, beta int32, mult, shift, eps) of a norm from torch's affine (float
    arrays), eps and scales: z (Q12; Q20 for an int16 x, `wide`) has scale 2^-12, channel c's
    accumulator z * sign(gamma_c) + beta_c the scale |gamma_c| 2^-12 (2^-12 when gamma_c = 0);
    eps counts in steps of the variance D (n^2 var / s_in^2). ValueError outside the domain."""
    gamma, beta = np.asarray(gamma, np.float64), np.asarray(beta, np.float64)
    acc_scale = np.where(gamma == 0, 1.0, np.abs(gamma)) * 2.0**-(NORM16_Q if wide else 12)
    bias = np.round(beta / acc_scale)
    steps = max(1, round(eps * count * count / (s_in * s_in)))
    check(steps <= INT32_MAX and np.abs(bias).max() <= NORM_MAX_BETA,
          f"normalisation constants out of range (eps {steps} in steps of the input variance, "
          f"bias up to {np.abs(bias).max():.3g}; the domain is 2^31 and 2^30)")
    check(not wide or count <= NORM16_MAX_COUNT,
          f"an int16 norm over {count} elements; mcutorch normalises at most 2^15 int16 values")
    mult, shift = quant.quantize_multipliers(acc_scale / s_out)
    return np.sign(gamma).astype(np.int8), bias.astype(np.int32), mult, shift, steps


def norm16_rsqrt(t: int) -> tuple[int, int]:
    """(R, s) of an int16 norm: t' = t >> 2s below 2^28 (s the least such), R = isqrt(2^62 //
    t'), so R ~ 2^(31 + s) / sqrt(t) with at least 17 bits."""
    s = max(0, (t.bit_length() - 27) // 2)
    return math.isqrt((1 << 62) // (t >> 2 * s)), s


def norm(x, gamma_sign, beta, mult, shift, *, axes, eps, inner, out_zp, act_min, act_max):
    """Per reduced group of n elements: D = n sum(x^2) - sum(x)^2 (int64), R = isqrt(2^62 //
    (D + eps)), z = ((n x - sum x) R + 2^18) >> 19; per element i with affine channel
    c = (i // inner) % A: y = clamp(rq(z gamma_sign[c] + beta[c], mult[c], shift[c]) + out_zp).
    int16 x (docs/numerics.md section 6): n <= 2^15, (R, s) = norm16_rsqrt(D + eps),
    z = ((n x - sum x) R + 2^(10 + s)) >> (11 + s) in Q20, out_zp 0, an int16 y."""
    wide = getattr(x, "dtype", None) == np.int16
    dims = reduced_dims(x, axes, "norm", wide)
    count = math.prod(x.shape[d] for d in dims)
    top_count = NORM16_MAX_COUNT if wide else MAX_COUNT
    check(count <= top_count, f"norm: {count} elements per group (more than {top_count})")
    check(1 <= eps <= INT32_MAX and 1 <= inner <= INT32_MAX,
          f"norm: eps={eps} or inner={inner} outside [1, 2^31)")
    as_array(gamma_sign, np.int8, "gamma_sign", 1)
    a = gamma_sign.shape[0]
    for name, t in (("beta", beta), ("mult", mult), ("shift", shift)):
        as_array(t, np.int32, name, 1)
        check(t.shape == (a,), f"norm: {name} has {t.shape}, gamma_sign ({a},)")
    check(a >= 1 and np.abs(gamma_sign.astype(np.int64)).max() <= 1,
          "norm: gamma_sign needs entries in {-1, 0, 1}")
    check(np.abs(beta.astype(np.int64)).max() <= NORM_MAX_BETA, "norm: |beta| > 2^30")
    check_scale(mult, shift)
    top = norm_z_bound(count, NORM16_Q if wide else 12) + np.abs(beta.astype(np.int64))
    low, high = quant.rq(-top, mult, shift), quant.rq(top, mult, shift)
    check(low.min() >= INT32_MIN and high.max() <= INT32_MAX,
          "norm: rq of the accumulator leaves int32")
    xi = x.astype(np.int64)
    s1, s2 = xi.sum(axis=dims, keepdims=True), (xi * xi).sum(axis=dims, keepdims=True)
    big = count * s2 - s1 * s1
    if wide:
        rs = [norm16_rsqrt(int(d) + eps) for d in big.ravel()]
        r = np.array([v[0] for v in rs], np.int64).reshape(big.shape)
        sh = np.array([11 + v[1] for v in rs], np.int64).reshape(big.shape)
        z = ((count * xi - s1) * r + (np.int64(1) << (sh - 1))) >> sh
    else:
        r = np.vectorize(lambda d: math.isqrt((1 << 62) // (int(d) + eps)),
                         otypes=[np.int64])(big)
        z = ((count * xi - s1) * r.reshape(big.shape) + (1 << (NORM_Z_SHIFT - 1))) >> NORM_Z_SHIFT
    c = (np.arange(x.size, dtype=np.int64).reshape(x.shape) // inner) % a
    acc = z * gamma_sign.astype(np.int64)[c] + beta.astype(np.int64)[c]
    return (requantize_int16 if wide else requantize)(
        acc, mult.astype(np.int64)[c], shift.astype(np.int64)[c], out_zp, act_min, act_max)
