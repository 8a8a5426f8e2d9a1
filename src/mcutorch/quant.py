"""Integer requantization: the one place multipliers and shifts are made, and their rounding rule.

A real scale factor M > 0 is stored as an int32 multiplier `mult` in [2^30, 2^31) and a shift in
[2, 62] with M ~= mult * 2^-shift. Applying it is TOSA's `apply_scale_32` with SINGLE_ROUND:

    rq(acc) = (acc * mult + 2^(shift-1)) >> shift          (64-bit product, arithmetic shift)

Every executor (numpy reference, C kernels, TOSA RESCALE) uses exactly this; no executor derives a
multiplier of its own. Scales below 2^-31 lose multiplier bits (shift capped at 62); 0 maps to
mult 0.

The int64 accumulator of an int16-activation MAC op (TOSA: INT48) is requantized with a 16-bit
multiplier, TOSA's `apply_scale_16` (RESCALE with scale32 = false): `quantize_multiplier16` gives
mult in [2^14, 2^15) and shift in [2, 62], and `rq` applies it with the same formula; |acc| < 2^48
and mult < 2^15 keep the product below 2^63.
"""
from __future__ import annotations

import math

import numpy as np

ROUNDING_SINGLE = 0  # program header field `rounding`; 1 is reserved for TFLite double rounding
MIN_SHIFT, MAX_SHIFT = 2, 62


def quantize_multiplier(real: float) -> tuple[int, int]:
    """(mult, shift) with real ~= mult * 2^-shift; e.g. quantize_multiplier(0.5) == (2**30, 31)."""
    return _multiplier(real, 31)


def quantize_multiplier16(real: float) -> tuple[int, int]:
    """(mult, shift) with a 16-bit multiplier, mult in [2^14, 2^15) (TOSA RESCALE scale32 = false,
    int16 multiplier >= 0), shift in [2, 62]; e.g. quantize_multiplier16(0.5) == (2**14, 15)."""
    return _multiplier(real, 15)


def _multiplier(real: float, bits: int) -> tuple[int, int]:
    """(mult, shift), mult in [2^(bits-1), 2^bits) rounded to nearest, shift in [2, 62]."""
    if not math.isfinite(real) or real < 0:
        raise ValueError(f"requantization scale must be finite and >= 0, got {real}")
    if real == 0.0:
        return 0, MIN_SHIFT
    frac, exp = math.frexp(real)  # real = frac * 2^exp, frac in [0.5, 1)
    mult = round(frac * (1 << bits))
    if mult == 1 << bits:
        mult, exp = mult // 2, exp + 1
    shift = bits - exp
    if shift > MAX_SHIFT:
        mult >>= shift - MAX_SHIFT
        shift = MAX_SHIFT
        if mult == 0:
            return 0, MIN_SHIFT
    if shift < MIN_SHIFT:
        raise ValueError(f"requantization scale {real} is too large for a {bits + 1}-bit "
                         f"multiplier (>= 2^{bits - 2})")
    return int(mult), int(shift)


def quantize_multipliers(reals, one=None) -> tuple[np.ndarray, np.ndarray]:
    """Vector form of quantize_multiplier (or of `one`, e.g. quantize_multiplier16): int32 arrays
    (mult, shift)."""
    pairs = [(one or quantize_multiplier)(float(r)) for r in np.asarray(reals, np.float64).ravel()]
    mult = np.array([p[0] for p in pairs], np.int32)
    shift = np.array([p[1] for p in pairs], np.int32)
    return mult, shift


def rq(acc, mult, shift) -> np.ndarray:
    """Apply (mult, shift) to int accumulators with single rounding; returns int64."""
    acc = np.asarray(acc, np.int64)
    mult = np.asarray(mult, np.int64)
    shift = np.asarray(shift, np.int64)
    return (acc * mult + (np.int64(1) << (shift - 1))) >> shift


def reciprocal_scale(count: int) -> tuple[int, int]:
    """TOSA reciprocal_scale: (mult, shift) approximating 1/count, used by average pooling."""
    if count <= 0:
        raise ValueError("count must be positive")
    k = (count - 1).bit_length()  # 2^(k-1) < count <= 2^k
    numerator = ((1 << 30) + 1) << k
    return numerator // count, 30 + k


def inverse_scale(scale: float) -> np.float32:
    """float32(1 / scale), the reciprocal in float64 rounded once to float32: what PyTorch's
    quantize_per_tensor multiplies by (`inv_scale = 1.0 / scale` on the Python float, then a
    float32 tensor times that scalar computes in float32). For a float32 scale it equals the
    float32 division 1.0f / scale (double rounding is harmless at 53 >= 2 * 24 + 2 bits)."""
    scale = float(scale)
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"quantization scale must be finite and > 0, got {scale}")
    return np.float32(1.0 / scale)


RANGES = {"int8": (-128, 127, np.int8), "int16": (-32767, 32767, np.int16)}  # activation dtypes


def quantize(x, scale: float, zero_point: int, dtype: str = "int8") -> np.ndarray:
    """Float -> int8 at the program boundary, exactly as PyTorch's converted model computes it
    (torch.ops.quantized_decomposed.quantize_per_tensor, int8, range [-128, 127]):

        q = clamp(round_half_even(float32(x) * float32(1 / scale)) + zp, -128, 127)

    every step in float32, clamped after the zero point is added. A multiplication by the
    reciprocal, not a division: the two round differently on some exact .5 ties. +-Inf
    saturates as in PyTorch; NaN, where PyTorch's result is undefined, gives the zero point.
    dtype "int16": the same with the symmetric int16 range [-32767, 32767] (zero point 0)."""
    lo, hi, np_dtype = RANGES[dtype]
    inv = inverse_scale(scale)
    v = np.round(np.asarray(x, np.float32) * inv)
    v = np.where(np.isnan(v), np.float32(0), v)  # NaN: the zero point (as the C helper)
    return np.clip(v + np.float32(zero_point), lo, hi).astype(np_dtype)


def dequantize(q, scale: float, zero_point: int) -> np.ndarray:
    """int8/int16 -> float32: (q - zp) * float32(s), as PyTorch's dequantize_per_tensor."""
    return ((np.asarray(q, np.int32) - zero_point) * np.float32(scale)).astype(np.float32)
