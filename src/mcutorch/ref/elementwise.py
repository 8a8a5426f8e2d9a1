"""Element-wise ops: add, sub, mul, div, clamp, lut, rescale, maximum, minimum, compare, where; and
`make_lut`, the
compile-time table maker.

Binary ops take two int8 tensors with numpy broadcasting (ranks up to 6; `broadcast_shape`).
Every value goes through int32 intermediates exactly as the TOSA sequences named in
docs/numerics.md do. add, sub and mul also take two int16 tensors (zero points 0, int16 output:
docs/numerics.md section 6).
"""
from __future__ import annotations

import numpy as np

from mcutorch import quant

from mcutorch.ref._common import (INT8_MAX, INT8_MIN, INT16_MAX, INT32_MAX, INT32_MIN,
                                  as_activation, as_array, check, check_act, check_scale,
                                  check_zp, requantize, requantize_int16)


MAX_RANK = 6


def broadcast_shape(a_shape, b_shape, op: str) -> tuple[int, ...]:
    """numpy's broadcast of two shapes (right-aligned, size-1 dims stretch), ranks up to 6."""
    check(len(a_shape) <= MAX_RANK and len(b_shape) <= MAX_RANK,
          f"{op}: ranks {len(a_shape)} and {len(b_shape)}; at most {MAX_RANK}")
    r = max(len(a_shape), len(b_shape))
    da = (1,) * (r - len(a_shape)) + tuple(a_shape)
    db = (1,) * (r - len(b_shape)) + tuple(b_shape)
    check(all(u == v or 1 in (u, v) for u, v in zip(da, db)),
          f"{op}: shapes {tuple(a_shape)} and {tuple(b_shape)} do not broadcast")
    return tuple(v if u == 1 else u for u, v in zip(da, db))


def _binary(a, b, op: str):
    """Both operands as int64 arrays broadcast to their common shape."""
    as_array(a, np.int8, "a")
    as_array(b, np.int8, "b")
    shape = broadcast_shape(a.shape, b.shape, op)
    return (np.broadcast_to(a.astype(np.int64), shape), np.broadcast_to(b.astype(np.int64), shape))


def _binary16(a, b, op: str, zps):
    """add/sub/mul operands: two int8, or two int16 tensors with zero points 0; (a, b, int16?)."""
    wide = as_activation(a, "a")
    if as_activation(b, "b") != wide:  # the message is formatted on failure only
        check(False, f"{op}: a is {a.dtype}, b is {b.dtype}; both int8 or both int16")
    if not wide:
        return (*_binary(a, b, op), False)
    check(all(zp == 0 for zp in zps), f"{op}: zero points {zps}: int16 activations have 0")
    shape = broadcast_shape(a.shape, b.shape, op)
    return (np.broadcast_to(a.astype(np.int64), shape), np.broadcast_to(b.astype(np.int64), shape),
            True)


def _output(acc, mult, shift, out_zp, act_min, act_max, wide: bool):
    return (requantize_int16 if wide else requantize)(acc, mult, shift, out_zp, act_min, act_max)


def _range(wide: bool) -> tuple[int, int]:
    return (-INT16_MAX, INT16_MAX) if wide else (INT8_MIN, INT8_MAX)


def _rq_range(zp: int, mult: int, shift: int, wide: bool = False) -> tuple[int, int]:
    """[lo, hi] of rq(v - zp) over all int8 (int16) v (rq is monotone for mult >= 0)."""
    lo, hi = quant.rq([v - zp for v in _range(wide)], mult, shift)
    return int(lo), int(hi)


def _check_add_attrs(a_zp, a_mult, a_shift, b_zp, b_mult, b_shift, out_mult, out_shift,
                     op="add", wide=False):
    """Static domain of add (sub): every int32 intermediate fits for every input pair."""
    for name, zp in (("a_zp", a_zp), ("b_zp", b_zp)):
        check_zp(name, zp)
    check_scale([a_mult, b_mult, out_mult], [a_shift, b_shift, out_shift], f"{op} scales")
    a_lo, a_hi = _rq_range(a_zp, a_mult, a_shift, wide)
    b_lo, b_hi = _rq_range(b_zp, b_mult, b_shift, wide)
    lo, hi = (a_lo + b_lo, a_hi + b_hi) if op == "add" else (a_lo - b_hi, a_hi - b_lo)
    check(INT32_MIN <= lo and hi <= INT32_MAX, f"{op}: a32 {'+-'[op == 'sub']} b32 can overflow "
          "int32")
    out = quant.rq([lo, hi], out_mult, out_shift)
    check(INT32_MIN <= out.min() and out.max() <= INT32_MAX,
          f"{op}: rescaled {'difference' if op == 'sub' else 'sum'} can overflow int32")


def add(a, b, *, a_zp, a_mult, a_shift, b_zp, b_mult, b_shift, out_zp, out_mult, out_shift,
        act_min, act_max):
    """RESCALE(a) + RESCALE(b) in int32, then RESCALE to int8 and clamp."""
    # a, b: int8, numpy-broadcastable  ->  y: int8 of the broadcast shape
    a, b, wide = _binary16(a, b, "add", (a_zp, b_zp))
    _check_add_attrs(a_zp, a_mult, a_shift, b_zp, b_mult, b_shift, out_mult, out_shift, "add",
                     wide)
    a32 = quant.rq(a - a_zp, a_mult, a_shift)
    b32 = quant.rq(b - b_zp, b_mult, b_shift)
    return _output(a32 + b32, out_mult, out_shift, out_zp, act_min, act_max, wide)


def sub(a, b, *, a_zp, a_mult, a_shift, b_zp, b_mult, b_shift, out_zp, out_mult, out_shift,
        act_min, act_max):
    """RESCALE(a) - RESCALE(b) in int32 (add's sequence with SUB), then RESCALE to int8."""
    # a, b: int8, numpy-broadcastable  ->  y: int8 of the broadcast shape
    a, b, wide = _binary16(a, b, "sub", (a_zp, b_zp))
    _check_add_attrs(a_zp, a_mult, a_shift, b_zp, b_mult, b_shift, out_mult, out_shift, "sub",
                     wide)
    a32 = quant.rq(a - a_zp, a_mult, a_shift)
    b32 = quant.rq(b - b_zp, b_mult, b_shift)
    return _output(a32 - b32, out_mult, out_shift, out_zp, act_min, act_max, wide)


def div(a, b, *, a_zp, b_zp, out_zp, mult, shift, act_min, act_max):
    """a / b: q = round_half_away((a - a_zp) * mult / (b - b_zp)) in int64, then
    y = clamp(((q + 2^(shift-1)) >> shift) + out_zp); a zero divisor (b = b_zp) gives 127, -128
    or out_zp by the sign of a - a_zp (the quantized +inf, -inf and NaN -> 0), then the clamp."""
    # a, b: int8, numpy-broadcastable  ->  y: int8 of the broadcast shape
    a, b = _binary(a, b, "div")
    check_zp("a_zp", a_zp)
    check_zp("b_zp", b_zp)
    check_zp("out_zp", out_zp)
    check_scale(mult, shift, "div scale")
    check_act(act_min, act_max)
    na, den = a - a_zp, b - b_zp
    num = na * mult  # |num| < 2^39, |den| <= 255
    mag = (2 * np.abs(num) + np.abs(den)) // np.maximum(2 * np.abs(den), 1)
    q = np.where((num < 0) != (den < 0), -mag, mag)
    v = (q + (1 << (shift - 1))) >> shift  # int64: |q| < 2^39
    v = np.clip(v + out_zp, INT8_MIN, INT8_MAX)
    zero = np.where(na > 0, INT8_MAX, np.where(na < 0, INT8_MIN, out_zp))
    return np.clip(np.where(den == 0, zero, v), act_min, act_max).astype(np.int8)


def _check_rq_range(lo: int, hi: int, mult: int, shift: int, op: str) -> None:
    """Static domain: rq of every value in [lo, hi] fits int32 (rq is monotone for mult >= 0)."""
    check_scale(mult, shift, f"{op} scale")
    out = quant.rq([lo, hi], mult, shift)
    check(INT32_MIN <= out.min() and out.max() <= INT32_MAX,
          f"{op}: rq(mult={mult}, shift={shift}) of [{lo}, {hi}] can overflow int32")


def mul(a, b, *, a_zp, b_zp, out_zp, mult, shift, act_min, act_max):
    """y = clamp(rq((a - a_zp) * (b - b_zp)) + out_zp)."""
    # a, b: int8, numpy-broadcastable  ->  y: int8 of the broadcast shape
    a, b, wide = _binary16(a, b, "mul", (a_zp, b_zp))
    check_zp("a_zp", a_zp)
    check_zp("b_zp", b_zp)
    corners = [(u - a_zp) * (v - b_zp) for u in _range(wide)
               for v in _range(wide)]  # the extreme products
    _check_rq_range(min(corners), max(corners), mult, shift, "mul")
    prod = (a - a_zp) * (b - b_zp)  # |prod| <= 255 * 255 (int16: 32767^2 < 2^30)
    return _output(prod, mult, shift, out_zp, act_min, act_max, wide)


def clamp(x, *, act_min, act_max):
    """y = clip(x, act_min, act_max)."""
    # x: (...) int8  ->  y: (...) int8
    as_array(x, np.int8, "x")
    check_act(act_min, act_max)
    return np.clip(x, act_min, act_max).astype(np.int8)


def maximum(a, b, *, act_min, act_max):
    """y = clip(max(a, b), act_min, act_max); a, b and y share qparams, so no arithmetic."""
    # a, b: int8, numpy-broadcastable  ->  y: int8 of the broadcast shape
    a, b = _binary(a, b, "maximum")
    check_act(act_min, act_max)
    return np.clip(np.maximum(a, b), act_min, act_max).astype(np.int8)


def minimum(a, b, *, act_min, act_max):
    """y = clip(min(a, b), act_min, act_max); a, b and y share qparams, so no arithmetic."""
    # a, b: int8, numpy-broadcastable  ->  y: int8 of the broadcast shape
    a, b = _binary(a, b, "minimum")
    check_act(act_min, act_max)
    return np.clip(np.minimum(a, b), act_min, act_max).astype(np.int8)


def lut(x, table):
    """y = table[x + 128]; an int16 x: TOSA TABLE's interpolation in a 513-entry int16 table of
    half-LSB entries (docs/numerics.md section 6), y = clamp((acc + 32) >> 6) to int16."""
    # x: (...) int8; table: (256,) int8  ->  y: (...) int8
    # x: (...) int16; table: (513,) int16  ->  y: (...) int16
    if as_activation(x, "x"):
        as_array(table, np.int16, "table", 1)
        check(table.shape == (LUT16_SIZE,), f"lut: an int16 table has {LUT16_SIZE} entries, got "
              f"{table.shape}")
        v = x.astype(np.int32) + 32768
        base, top = table[v >> 7].astype(np.int32), table[(v >> 7) + 1].astype(np.int32)
        acc = (base << 7) + (top - base) * (v & 127)  # TOSA TABLE int16: int32, 7 fraction bits
        return np.clip((acc + 32) >> 6, -32768, 32767).astype(np.int16)
    as_array(x, np.int8, "x")
    as_array(table, np.int8, "table", 1)
    check(table.shape == (256,), f"lut: table must have 256 entries, got {table.shape}")
    return table[x.astype(np.int16) + 128]


LUT16_SIZE, LUT16_MAX = 513, (1 << 14) - 1  # the int16 table: half-LSB entries, slopes in int16


def rescale(x, *, in_zp, out_zp, mult, shift, act_min, act_max):
    """y = clamp(rq(x - in_zp) + out_zp) into new int8 qparams; rescale_to for an int16 y."""
    # x: (...) int8 or int16  ->  y: (...) int8
    return rescale_to(x, "int8", in_zp=in_zp, out_zp=out_zp, mult=mult, shift=shift,
                      act_min=act_min, act_max=act_max)


def rescale_to(x, out_dtype: str, *, in_zp, out_zp, mult, shift, act_min, act_max):
    """rescale into an `out_dtype` y, int8 or int16 on either side (docs/numerics.md section 6:
    an int16 side has zero point 0, an int16 y the range [-32767, 32767])."""
    # x: (...) int8 or int16  ->  y: (...) out_dtype
    x = as_array(x, np.int16 if getattr(x, "dtype", None) == np.int16 else np.int8, "x")
    check(out_dtype in ("int8", "int16"), f"rescale: output dtype {out_dtype} is not int8/int16")
    if x.dtype == np.int16:
        check(in_zp == 0, f"rescale: in_zp={in_zp}: int16 activations have zero point 0")
        lo, hi = -INT16_MAX - 1, INT16_MAX
    else:
        check_zp("in_zp", in_zp)
        lo, hi = INT8_MIN, INT8_MAX
    _check_rq_range(lo - in_zp, hi - in_zp, mult, shift, "rescale")
    acc = x.astype(np.int64) - in_zp
    if out_dtype == "int16":
        return requantize_int16(acc, mult, shift, out_zp, act_min, act_max)
    return requantize(acc, mult, shift, out_zp, act_min, act_max)


def make_lut(fn, in_scale: float, in_zp: int, out_scale: float, out_zp: int) -> np.ndarray:
    """The `lut` table for y = fn(x): table[i] = clamp(round_half_even(fn(s_in*(i-128-in_zp))/s_out)
    + out_zp), all in float64. Outside fn's domain, ±inf saturates (to 127 / -128) and NaN maps
    to out_zp (the real value 0).

    `fn` maps a float64 numpy array to one of the same shape (np.tanh, a sigmoid lambda, ...).
    Pass the scales exactly as the program stores them. Made once, at compile time; no executor
    evaluates fn.
    """
    check(in_scale > 0 and out_scale > 0, "make_lut: scales must be positive")
    check_zp("in_zp", in_zp)
    check_zp("out_zp", out_zp)
    real = np.float64(in_scale) * (np.arange(INT8_MIN, INT8_MAX + 1, dtype=np.float64) - in_zp)
    with np.errstate(all="ignore"):  # log(0), sqrt(-1), 1/0: handled below
        val = np.asarray(fn(real), dtype=np.float64)
        check(val.shape == (256,), f"make_lut: fn returned shape {val.shape}, expected (256,)")
        q = np.rint(val / np.float64(out_scale)) + out_zp  # np.rint rounds half to even
    q = np.where(np.isnan(q), out_zp, q)  # outside the domain: the real value 0
    return np.clip(q, INT8_MIN, INT8_MAX).astype(np.int8)  # ±inf saturates


def make_lut16(fn, in_scale: float, out_scale: float) -> np.ndarray:
    """The int16 `lut` table for y = fn(x), x and y int16 (zero points 0): entry i is fn at
    x_i = 128·i − 32768 in half output LSBs, lowered by a quarter of the interpolation error at
    the midpoints of its two segments (e_k = (f_k + f_k+1)/2 − fn(midpoint k), so a segment's line
    is off by ±e/2 instead of e): clamp(round_half_even((f_i − c_i) / (2 s_out)), ±16383),
    float64; ±inf saturates, NaN is 0 (as make_lut)."""
    check(in_scale > 0 and out_scale > 0, "make_lut16: scales must be positive")
    k = np.arange(LUT16_SIZE, dtype=np.float64) * 128 - 32768
    with np.errstate(all="ignore"):
        f = np.asarray(fn(np.float64(in_scale) * k), dtype=np.float64)
        check(f.shape == (LUT16_SIZE,), f"make_lut16: fn returned shape {f.shape}")
        mid = np.asarray(fn(np.float64(in_scale) * (k[:-1] + 64)), dtype=np.float64)
        e = (f[:-1] + f[1:]) / 2 - mid
        e = np.where(np.isfinite(e), e, 0.0)
        c = np.concatenate([e[:1], e]) / 4 + np.concatenate([e, e[-1:]]) / 4
        q = np.rint((f - c) / (2 * np.float64(out_scale)))
    q = np.where(np.isnan(q), 0, q)
    return np.clip(q, -LUT16_MAX, LUT16_MAX).astype(np.int16)


# --- comparisons and selection --------------------------------------------------------------
COMPARE_KINDS = ("eq", "ne", "gt", "ge", "lt", "le")  # compare's `kind` attribute (ops)
COMPARE_MULT_MAX = 1 << 24  # compare's mults are float32 mantissas (odd, at most 24 bits)
COMPARE_SHIFT_MAX = 31  # |(v - zp) * mult << shift| <= 255 * 2^24 * 2^31 < 2^63
_COMPARE = (np.equal, np.not_equal, np.greater, np.greater_equal, np.less, np.less_equal)


def _mantissa(scale: float) -> tuple[int, int]:
    """(m, e) with float32(scale) == m * 2^e exactly, m odd (m > 0)."""
    frac, exp = np.frexp(np.float32(scale))
    m, e = int(np.float64(frac) * (1 << 24)), int(exp) - 24
    while m % 2 == 0:
        m, e = m // 2, e + 1
    return m, e


def compare_attrs(a_scale: float, b_scale: float) -> dict:
    """compare's (a_mult, a_shift, b_mult, b_shift): the integer ratio of the two float32
    scales, a_mult 2^a_shift : b_mult 2^b_shift == sa : sb exactly, reduced (equal scales give
    1, 0, 1, 0). When one side's smallest nonzero step exceeds the other side's largest value
    (ratio > 255), only signs matter and the ratio becomes 512 : 1, which decides every pair
    the same way."""
    check(np.float32(a_scale) > 0 and np.float32(b_scale) > 0, "compare: scales must be > 0")
    (ma, ea), (mb, eb) = _mantissa(a_scale), _mantissa(b_scale)
    g = np.gcd(ma, mb)
    ma, mb, d = ma // g, mb // g, ea - eb
    if d >= 0 and ma << min(d, 40) > 255 * mb:  # a's step dominates
        return {"a_mult": 1, "a_shift": 9, "b_mult": 1, "b_shift": 0}
    if d <= 0 and mb << min(-d, 40) > 255 * ma:
        return {"a_mult": 1, "a_shift": 0, "b_mult": 1, "b_shift": 9}
    return {"a_mult": int(ma), "a_shift": max(d, 0), "b_mult": int(mb), "b_shift": max(-d, 0)}


def _check_compare_side(name: str, zp: int, mult: int, shift: int) -> None:
    check_zp(f"{name}_zp", zp)
    check(1 <= mult <= COMPARE_MULT_MAX and 0 <= shift <= COMPARE_SHIFT_MAX,
          f"compare: {name}_mult {mult} / {name}_shift {shift} outside [1, 2^24] / [0, 31]")


def compare(a, b, *, kind, a_zp, a_mult, a_shift, b_zp, b_mult, b_shift):
    """y = ((a - a_zp) * a_mult * 2^a_shift  KIND  (b - b_zp) * b_mult * 2^b_shift) as 0/1,
    in int64 (exact: |each side| < 2^63). With compare_attrs' ratio this is the comparison of
    the real values sa (a - a_zp) and sb (b - b_zp), decided exactly."""
    # a, b: int8, numpy-broadcastable  ->  y: uint8 0/1 of the broadcast shape
    a, b = _binary(a, b, "compare")
    check(0 <= kind < len(COMPARE_KINDS), f"compare: kind {kind} not in 0..5")
    _check_compare_side("a", a_zp, a_mult, a_shift)
    _check_compare_side("b", b_zp, b_mult, b_shift)
    va = ((a - a_zp) * a_mult) << a_shift
    vb = ((b - b_zp) * b_mult) << b_shift
    return _COMPARE[kind](va, vb).astype(np.uint8)


def broadcast_shape3(m_shape, a_shape, b_shape, op: str) -> tuple[int, ...]:
    """numpy's broadcast of three shapes (ranks up to 6)."""
    return broadcast_shape(broadcast_shape(m_shape, a_shape, op), b_shape, op)


def where(mask, a, b, *, a_zp, a_mult, a_shift, b_zp, b_mult, b_shift, out_zp):
    """y = mask ? clamp(rq(a - a_zp, a_mult, a_shift) + out_zp)
                : clamp(rq(b - b_zp, b_mult, b_shift) + out_zp)  (each side a rescale); any
    nonzero mask byte selects a (compare writes 0/1). int16 a and b (section 6): zero points 0,
    an int16 y clamped to [-32767, 32767]."""
    # mask: uint8 0/1, a, b: int8 (int16), all numpy-broadcastable -> y: the broadcast shape
    as_array(mask, np.uint8, "mask")
    a, b, wide = _binary16(a, b, "where", (a_zp, b_zp, out_zp))
    shape = broadcast_shape3(mask.shape, a.shape, b.shape, "where")
    check_zp("a_zp", a_zp)
    check_zp("b_zp", b_zp)
    lo, hi = (-INT16_MAX - 1, INT16_MAX) if wide else (INT8_MIN, INT8_MAX)
    _check_rq_range(lo - a_zp, hi - a_zp, a_mult, a_shift, "where a")
    _check_rq_range(lo - b_zp, hi - b_zp, b_mult, b_shift, "where b")
    lo, hi = (-INT16_MAX, INT16_MAX) if wide else (INT8_MIN, INT8_MAX)
    ya = _output(a.astype(np.int64) - a_zp, a_mult, a_shift, out_zp, lo, hi, wide)
    yb = _output(b.astype(np.int64) - b_zp, b_mult, b_shift, out_zp, lo, hi, wide)
    return np.where(np.broadcast_to(mask, shape) != 0, np.broadcast_to(ya, shape),
                    np.broadcast_to(yb, shape)).astype(ya.dtype)
