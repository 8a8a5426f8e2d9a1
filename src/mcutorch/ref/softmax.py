"""Integer softmax over the last axis, and `softmax_exp_table`, the compile-time exp table.

Input int8 with scale s_in (any zero point: only differences x_max - x matter); output int8 with
the fixed qparams (1/256, -128). Per row:

    d   = max(row) - x                      in 0..255
    e   = exp_table[d]                      round(2^16 exp(-s_in d)), so 0 <= e <= 65536 = e(0)
    sum = sum(e)                            <= 32767 * 65536 < 2^31 for rows of <= 32767
    y   = min((256 e + (sum >> 1)) // sum, 255) - 128        (unsigned division, round half up)

Every step is an unsigned 32-bit integer operation in C.

log_softmax (output qparams (s_out, out_zp) observed) shares d, e and sum, then takes the log of
sum / 2^16 from its leading bit k and the next 8 bits j, all in Q16 output steps:

    k    = floor(log2(sum)),  j = the 8 bits of sum after its leading one
    v    = -(d * in_mult + (k - 16) * ln2 + log_table[j])            int32
    y    = clamp(((v + 2^15) >> 16) + out_zp, -128, 127)
    in_mult = round(2^16 s_in / s_out),  ln2 = round(2^16 ln(2) / s_out),
    log_table[j] = round(2^16 ln(1 + (j + 1/2) / 256) / s_out)

Domain: in_mult in [0, 2^22], ln2 in [0, 2^25], every log_table entry in [0, ln2]: |v| < 2^31.
"""
from __future__ import annotations

import math

import numpy as np

from mcutorch.ref._common import as_array, check

EXP_ONE = 1 << 16  # exp_table[0]
MAX_ROW = 32767  # longest row: keeps sum below 2^31
INT16_MAX = 32767


def softmax_exp_table(scale: float) -> np.ndarray:
    """int32[256]: table[d] = round_half_even(2^16 exp(-scale d)), for the input scale s_in."""
    check(math.isfinite(scale) and scale > 0, f"softmax_exp_table: bad scale {scale}")
    d = np.arange(256, dtype=np.float64)
    return np.rint(EXP_ONE * np.exp(-np.float64(scale) * d)).astype(np.int32)


def _check_table(exp_table):
    as_array(exp_table, np.int32, "exp_table", 1)
    check(exp_table.shape == (256,), f"softmax: exp_table needs 256 entries, not {exp_table.shape}")
    check(exp_table[0] >= 1 and exp_table.min() >= 0 and exp_table.max() <= EXP_ONE,
          "softmax: exp_table entries must lie in [0, 65536] with exp_table[0] > 0")


LOG_MAX_MULT, LOG_MAX_LN2 = 1 << 22, 1 << 25


def log_softmax_tables(s_in: float, s_out: float) -> tuple[np.ndarray, np.ndarray, int, int]:
    """(exp_table, log_table, in_mult, ln2) of a log_softmax from its scales (ValueError when
    they leave the domain: s_in / s_out > 64 or s_out < ~0.0014)."""
    check(math.isfinite(s_out) and s_out > 0, f"log_softmax: bad output scale {s_out}")
    j = np.arange(256, dtype=np.float64)
    log_table = np.rint(EXP_ONE * np.log1p((j + 0.5) / 256) / s_out).astype(np.int64)
    in_mult, ln2 = round(EXP_ONE * s_in / s_out), round(EXP_ONE * math.log(2) / s_out)
    check(in_mult <= LOG_MAX_MULT and ln2 <= LOG_MAX_LN2,
          f"log_softmax: scales s_in={s_in:g}, s_out={s_out:g} outside the domain (s_in / s_out "
          f"<= 64 and 2^16 ln(2) / s_out <= 2^25)")
    return softmax_exp_table(s_in), log_table.astype(np.int32), in_mult, ln2


def log_softmax(x, exp_table, log_table, *, in_mult, ln2, out_zp):
    """Row-wise log_softmax of int8 x (rows along the last axis)."""
    # x: (..., L) int8, 1 <= L <= 32767; exp_table, log_table: (256,) int32  ->  y: (..., L) int8
    as_array(x, np.int8, "x")
    check(x.ndim >= 1 and 1 <= x.shape[-1] <= MAX_ROW,
          f"log_softmax: rows must have 1..{MAX_ROW} elements, got shape {x.shape}")
    _check_table(exp_table)
    as_array(log_table, np.int32, "log_table", 1)
    check(0 <= in_mult <= LOG_MAX_MULT and 0 <= ln2 <= LOG_MAX_LN2,
          f"log_softmax: in_mult={in_mult} outside [0, 2^22] or ln2={ln2} outside [0, 2^25]")
    check(log_table.shape == (256,) and log_table.min() >= 0 and log_table.max() <= ln2,
          "log_softmax: log_table needs 256 entries in [0, ln2]")
    check(-128 <= out_zp <= 127, f"log_softmax: out_zp={out_zp} is not an int8 zero point")
    xi = x.astype(np.int64)
    d = xi.max(axis=-1, keepdims=True) - xi
    total = exp_table.astype(np.int64)[d].sum(axis=-1, keepdims=True)
    k = np.floor(np.log2(total)).astype(np.int64)  # exact: total < 2^31 has 53-bit precision
    k = k - (total < (np.int64(1) << k)) + (total >= (np.int64(2) << k))  # guard float rounding
    j = np.where(k >= 8, total >> np.maximum(k - 8, 0), total << np.maximum(8 - k, 0)) & 255
    v = -(d * in_mult + (k - 16) * ln2 + log_table.astype(np.int64)[j])
    return np.clip(((v + (1 << 15)) >> 16) + out_zp, -128, 127).astype(np.int8)


def softmax(x, exp_table):
    """Row-wise softmax of int8 x, output qparams (1/256, -128); of int16 x (a 512-entry table,
    softmax16), output qparams (1/32768, 0)."""
    # x: (..., L) int8, 1 <= L <= 32767; exp_table: (256,) int32  ->  y: (..., L) int8
    if getattr(x, "dtype", None) == np.int16:
        return softmax16(x, exp_table)
    as_array(x, np.int8, "x")
    check(x.ndim >= 1 and 1 <= x.shape[-1] <= MAX_ROW,
          f"softmax: rows must have 1..{MAX_ROW} elements, got shape {x.shape}")
    _check_table(exp_table)
    xi = x.astype(np.int64)
    d = xi.max(axis=-1, keepdims=True) - xi
    e = exp_table.astype(np.int64)[d]
    total = e.sum(axis=-1, keepdims=True)  # >= exp_table[0] > 0: the max element has d = 0
    q = (e * 256 + (total >> 1)) // total
    return (np.minimum(q, 255) - 128).astype(np.int8)


EXP16_ONE = 1 << 30  # the int16 softmax's tables: Q30


def softmax_exp_table16(scale: float) -> np.ndarray:
    """int32[512] of an int16 softmax: [j] = round_half_even(2^30 exp(-scale j)) and
    [256 + j] = round_half_even(2^30 exp(-scale 256 j)), j < 256 (d = 256 hi + lo)."""
    check(math.isfinite(scale) and scale > 0, f"softmax_exp_table16: bad scale {scale}")
    j = np.arange(256, dtype=np.float64)
    lo, hi = np.exp(-np.float64(scale) * j), np.exp(-np.float64(scale) * 256 * j)
    return np.rint(EXP16_ONE * np.concatenate([lo, hi])).astype(np.int32)


def softmax16(x, exp_table):
    """Row-wise softmax of int16 x (docs/numerics.md section 6); output qparams (1/32768, 0):

        d = max(row) - x                                   0..65535
        e = (table[256 + (d >> 8)] * table[d & 255] + 2^29) >> 30      <= 2^30
        y = min((2^15 e + (sum >> 1)) // sum, 32767)        sum = sum(e) < 2^45, uint64"""
    # x: (..., L) int16, 1 <= L <= 32767; exp_table: (512,) int32  ->  y: (..., L) int16
    as_array(x, np.int16, "x")
    check(x.ndim >= 1 and 1 <= x.shape[-1] <= MAX_ROW,
          f"softmax: rows must have 1..{MAX_ROW} elements, got shape {x.shape}")
    as_array(exp_table, np.int32, "exp_table", 1)
    t = exp_table.astype(np.int64)
    check(t.shape == (512,) and t.min() >= 0 and t.max() <= EXP16_ONE and
          (t[0] * t[256] + (1 << 29)) >> 30 >= 1,
          "softmax: an int16 x takes a 512-entry exp_table in [0, 2^30] whose e(0) is >= 1")
    xi = x.astype(np.int64)
    d = xi.max(axis=-1, keepdims=True) - xi
    e = (t[256 + (d >> 8)] * t[d & 255] + (1 << 29)) >> 30
    total = e.sum(axis=-1, keepdims=True)  # >= e(0) >= 1: the max element has d = 0
    q = (e << 15) + (total >> 1)
    return np.minimum(q // total, INT16_MAX).astype(np.int16)
