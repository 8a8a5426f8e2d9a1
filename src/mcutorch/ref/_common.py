"""Helpers shared by the reference kernels: argument checks, window geometry, requantize + clamp.

The checks here are part of the numerics contract (docs/numerics.md): they define the domain on
which every executor must agree. A kernel given arguments outside that domain raises ValueError
instead of returning a value that some executor (a 32-bit C kernel, TOSA) could not reproduce.
"""
from __future__ import annotations

import numpy as np

from mcutorch import quant

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT8_MIN, INT8_MAX = -128, 127
DIM_MAX = (1 << 30) - 1  # window ops: every dim, kernel, stride, dilation and pad (MT_DIM_MAX)


def check(cond: bool, msg: str) -> None:
    """Raise ValueError(msg) unless cond holds."""
    if not cond:
        raise ValueError(msg)


def as_array(a, dtype, name: str, ndim: int | tuple[int, ...] | None = None) -> np.ndarray:
    """`a` as an ndarray of exactly `dtype` (no silent casts), optionally of a given rank."""
    # messages are formatted only on failure: this runs on every operand of every call
    if not isinstance(a, np.ndarray):
        raise ValueError(f"{name}: expected a numpy array, got {type(a).__name__}")
    if a.dtype != dtype:
        raise ValueError(f"{name}: expected dtype {np.dtype(dtype)}, got {a.dtype}")
    if ndim is not None and a.ndim not in ((ndim,) if isinstance(ndim, int) else ndim):
        raise ValueError(f"{name}: expected rank {ndim}, got shape {a.shape}")
    return a


def check_zp(name: str, zp: int) -> None:
    """Zero points are int8 values."""
    check(INT8_MIN <= zp <= INT8_MAX, f"{name}={zp} is not an int8 zero point")


def check_act(act_min: int, act_max: int) -> None:
    """The fused activation range is a non-empty int8 interval."""
    check(INT8_MIN <= act_min <= act_max <= INT8_MAX,
          f"act_min/act_max = {act_min}/{act_max} is not an int8 range")


def check_scale(mult, shift, name: str = "mult/shift") -> None:
    """(mult, shift) pairs are legal for rq and TOSA RESCALE: 0 <= mult < 2^31, 2 <= shift <= 62."""
    mult = np.asarray(mult, np.int64)
    shift = np.asarray(shift, np.int64)
    if mult.size:
        check(mult.min() >= 0 and mult.max() <= INT32_MAX, f"{name}: multiplier outside [0, 2^31)")
    if shift.size:
        check(shift.min() >= quant.MIN_SHIFT and shift.max() <= quant.MAX_SHIFT,
              f"{name}: shift outside [{quant.MIN_SHIFT}, {quant.MAX_SHIFT}]")


def check_int32(v: np.ndarray, what: str) -> None:
    """Every intermediate of the contract is an int32; leaving that range is outside the domain."""
    if v.size:
        check(v.min() >= INT32_MIN and v.max() <= INT32_MAX, f"{what} overflows int32")


def requantize(acc, mult, shift, out_zp: int, act_min: int, act_max: int) -> np.ndarray:
    """y = clamp(rq(acc, mult, shift) + out_zp, act_min, act_max) as int8.

    `acc` must be int32-valued, and so must rq(acc) (TOSA apply_scale_32 requires both).
    mult/shift broadcast against acc (per channel: shape (C,) against (..., C)).
    """
    check_scale(mult, shift)
    check_zp("out_zp", out_zp)
    check_act(act_min, act_max)
    acc = np.asarray(acc, np.int64)
    check_int32(acc, "accumulator")
    scaled = quant.rq(acc, mult, shift)
    check_int32(scaled, "requantized accumulator")
    return np.clip(scaled + out_zp, act_min, act_max).astype(np.int8)


INT16_MAX = (1 << 15) - 1  # int16 activations: symmetric [-32767, 32767], zero point 0
INT48_MAX = (1 << 47) - 1  # the int16 MAC accumulator (TOSA INT48) and its bias


def as_activation(a, name: str, ndim=None) -> bool:
    """Check an activation operand (int8, or int16 for the ops with an int16 form); True if int16
    (docs/numerics.md, section 6)."""
    wide = isinstance(a, np.ndarray) and a.dtype == np.int16
    as_array(a, np.int16 if wide else np.int8, name, ndim)
    return wide


def requantize16(acc, mult, shift, out_zp: int, act_min: int, act_max: int) -> np.ndarray:
    """An int16 MAC op's output stage, with a 16-bit multiplier (TOSA RESCALE scale32 = false):
    |acc| <= 2^47 - 1 (int48), 0 <= mult < 2^15; otherwise as requantize_int16."""
    mult = np.asarray(mult, np.int64)
    check(not mult.size or mult.max() <= INT16_MAX, "mult/shift: int16 MAC multiplier outside "
          "[0, 2^15) (TOSA RESCALE scale32 = false)")
    return requantize_int16(acc, mult, shift, out_zp, act_min, act_max, INT48_MAX)


def requantize_int16(acc, mult, shift, out_zp: int, act_min: int, act_max: int,
                     acc_max: int = INT32_MAX) -> np.ndarray:
    """y = clamp(rq(acc, mult, shift), act_min, act_max) as int16 (docs/numerics.md section 6):
    zero point 0, -32767 <= act_min <= act_max <= 32767, |acc| <= acc_max (int32 but for the
    MAC ops' int48), rq(acc) an int32."""
    check_scale(mult, shift)
    check(out_zp == 0, f"out_zp={out_zp}: int16 activations have zero point 0")
    check(-INT16_MAX <= act_min <= act_max <= INT16_MAX,
          f"act_min/act_max = {act_min}/{act_max} is not an int16 range [-32767, 32767]")
    acc = np.asarray(acc, np.int64)
    check(not acc.size or (acc.min() >= -acc_max and acc.max() <= acc_max),
          f"accumulator overflows int{48 if acc_max == INT48_MAX else 32}")
    scaled = quant.rq(acc, mult, shift)
    check_int32(scaled, "requantized accumulator")
    return np.clip(scaled, act_min, act_max).astype(np.int16)


def check_dims(a: np.ndarray, name: str, op: str) -> None:
    """Window ops: every dim of an activation or weight is below 2^30 (int32 loop bounds in C)."""
    check(all(d <= DIM_MAX for d in a.shape), f"{op}: {name} shape {a.shape} has a dim >= 2^30")


def out_size(size: int, kernel: int, stride: int, dilation: int, pad0: int, pad1: int,
             what: str) -> int:
    """Output length of a window op: (size + pad0 + pad1 - dilation*(kernel-1) - 1)//stride + 1.

    The domain (docs/numerics.md): kernel, stride and dilation in [1, 2^30), pads in [0, 2^30),
    the padded size size + pad0 + pad1 below 2^31, and a window no larger than it."""
    check(1 <= kernel <= DIM_MAX and 1 <= stride <= DIM_MAX and 1 <= dilation <= DIM_MAX,
          f"{what}: kernel/stride/dilation {kernel}/{stride}/{dilation} outside [1, 2^30)")
    check(0 <= pad0 <= DIM_MAX and 0 <= pad1 <= DIM_MAX,
          f"{what}: padding {pad0}/{pad1} outside [0, 2^30)")
    check(size + pad0 + pad1 <= INT32_MAX, f"{what}: padded size {size + pad0 + pad1} >= 2^31")
    span = size + pad0 + pad1 - dilation * (kernel - 1) - 1
    check(span >= 0, f"{what}: window ({kernel}, dilation {dilation}) larger than padded input")
    return span // stride + 1


def tap_outputs(size: int, out: int, stride: int, pad0: int, offset: int) -> tuple[int, int]:
    """[lo, hi): the outputs o whose tap at `offset` (k * dilation) reads inside the input,
    0 <= o * stride - pad0 + offset < size (a range: positions grow with o)."""
    first = pad0 - offset  # o * stride >= first
    lo = max(0, -(-first // stride))
    hi = min(out, -(-(first + size) // stride))
    return lo, max(lo, hi)


def tap_slice(o0: int, o1: int, stride: int, pad0: int, offset: int) -> slice:
    """The input positions o * stride - pad0 + offset for o in [o0, o1) (o0 < o1, all inside)."""
    start = o0 * stride - pad0 + offset
    return slice(start, start + (o1 - o0 - 1) * stride + 1, stride)


def window_ranges(size: int, out: int, kernel: int, stride: int, pad0: int):
    """Pools (dilation 1): per output o, the in-bounds window [lo[o], hi[o]) as int64 arrays."""
    start = np.arange(out, dtype=np.int64) * stride - pad0
    return np.clip(start, 0, size), np.clip(start + kernel, 0, size)
