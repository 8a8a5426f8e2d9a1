"""Integer softmax over the last axis, and `softmax_exp_table`, the compile-time exp table.

Input int8 with scale s_in (any zero point: only differences x_max - x matter); output int8 with
the fixed qparams (1/256, -128). Per row:

    d   = max(row) - x                      in 0..255
    e   = exp_table[d]                      round(2^16 exp(-s_in d)), so 0 <= e <= 65536 = e(0)
    sum = sum(e)                            <= 32767 * 65536 < 2^31 for rows of <= 32767
    y   = min((256 e + (sum >> 1)) // sum, 255) - 128        (unsigned division, round half up)

Every step is an unsigned 32-bit integer operation in C.
"""
from __future__ import annotations

import math

import numpy as np

from mcutorch.ref._common import as_array, check

EXP_ONE = 1 << 16  # exp_table[0]
MAX_ROW = 32767  # longest row: keeps sum below 2^31


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


def softmax(x, exp_table):
    """Row-wise softmax of int8 x; output qparams (1/256, -128)."""
    # x: (..., L) int8, 1 <= L <= 32767; exp_table: (256,) int32  ->  y: (..., L) int8
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
