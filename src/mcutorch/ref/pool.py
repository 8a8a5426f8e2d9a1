"""Pooling: max_pool2d and avg_pool2d on int8 NHWC (no dilation); both also take int16 (zero
point 0, an int16 output: docs/numerics.md section 6), resize stays int8.

Both ops take an explicit (top, left, bottom, right) padding; a window is the kernel_h x kernel_w
block at (oh*stride_h - pad_top, ow*stride_w - pad_left). "Valid" elements are those inside the
input. A window with no valid element is outside the domain (ValueError), and so is an average
window that could hold more than 2^23 valid elements (its sum might leave int32).

The kernels read only the valid elements (no padded input is built; the kernel size is an
attribute, up to 2^30): per output row and column the valid input range, then sums from prefix
sums (avg) and maxima over the range offsets (max, one axis at a time). What they allocate is a
few times their input and output; `pool_shape` gives the output's shape without allocating.
"""
from __future__ import annotations

import math

import numpy as np

from mcutorch import quant

from mcutorch.ref._common import (INT16_MAX, as_activation, as_array, check, check_act,
                                  check_dims, check_scale, check_zp, out_size, requantize,
                                  requantize_int16, window_ranges)

AVG_MAX_COUNT = 1 << 30  # a divisor or kernel_h * kernel_w count: reciprocal mult < 2^31
AVG_MAX_WINDOW = 1 << 23  # valid elements of one average window: |sum| <= 255 * 2^23 < 2^31
AVG_MAX_WINDOW16 = 65_538  # int16 (zero point 0): |sum| <= 32767 * 65538 < 2^31


def _nonempty(size: int, out: int, kernel: int, stride: int, pad0: int) -> bool:
    """Every window of the axis holds a valid element (the first and the last one do)."""
    last = (out - 1) * stride - pad0
    return size > 0 and pad0 < kernel and last < size and last + kernel > 0


def pool_shape(x, *, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left, pad_bottom,
               pad_right, **_):
    """The (N, Ho, Wo, C) both pools return, from x's shape and the window attributes
    (ValueError outside their domain); allocates nothing."""
    as_activation(x, "x", 4)
    check_dims(x, "x", "pool")
    n, h, w, c = x.shape
    ho = out_size(h, kernel_h, stride_h, 1, pad_top, pad_bottom, "pool height")
    wo = out_size(w, kernel_w, stride_w, 1, pad_left, pad_right, "pool width")
    check(_nonempty(h, ho, kernel_h, stride_h, pad_top)
          and _nonempty(w, wo, kernel_w, stride_w, pad_left),
          "pool: a window lies entirely in the padding")
    return (n, ho, wo, c)


def _ranges(x, attrs):
    """(Ho, Wo) and the valid [lo, hi) of every output row and column."""
    n, ho, wo, c = pool_shape(x, **attrs)
    _, h, w, _ = x.shape
    return (window_ranges(h, ho, attrs["kernel_h"], attrs["stride_h"], attrs["pad_top"]),
            window_ranges(w, wo, attrs["kernel_w"], attrs["stride_w"], attrs["pad_left"]))


def _max_along(x, axis: int, lo, hi):
    """Max of x over [lo[o], hi[o]) along `axis`, per o (every range nonempty): offset t reads
    min(lo + t, hi - 1), so a short range repeats its last element, which leaves the max."""
    best = np.take(x, lo, axis=axis)
    for t in range(1, int((hi - lo).max())):
        best = np.maximum(best, np.take(x, np.minimum(lo + t, hi - 1), axis=axis))
    return best


def max_pool2d(x, *, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left, pad_bottom,
               pad_right, act_min, act_max):
    """Max over the valid elements of each window (padding never wins), then clamp."""
    # x: (N, H, W, C) int8  ->  y: (N, Ho, Wo, C) int8
    (r0, r1), (c0, c1) = _ranges(x, dict(
        kernel_h=kernel_h, kernel_w=kernel_w, stride_h=stride_h, stride_w=stride_w,
        pad_top=pad_top, pad_left=pad_left, pad_bottom=pad_bottom, pad_right=pad_right))
    _check_act(x, act_min, act_max)
    _, h, w, _ = x.shape
    if h * len(c0) <= len(r0) * w:  # columns first: the smaller intermediate
        best = _max_along(_max_along(x, 2, c0, c1), 1, r0, r1)
    else:
        best = _max_along(_max_along(x, 1, r0, r1), 2, c0, c1)
    return np.clip(best, act_min, act_max).astype(x.dtype)


def _check_act(x, act_min: int, act_max: int) -> None:
    """The clamp of an int8 pool, or of an int16 one (docs/numerics.md section 6)."""
    if x.dtype != np.int16:
        return check_act(act_min, act_max)
    check(-INT16_MAX <= act_min <= act_max <= INT16_MAX,
          f"act_min/act_max = {act_min}/{act_max} is not an int16 range [-32767, 32767]")


def avg_pool2d(x, *, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left, pad_bottom,
               pad_right, count_include_pad, divisor, in_zp, out_zp, act_min, act_max):
    """acc = sum of (x - in_zp) over valid elements; y = clamp(rq(acc, reciprocal_scale(count)))."""
    # x: (N, H, W, C) int8  ->  y: (N, Ho, Wo, C) int8
    (r0, r1), (c0, c1) = _ranges(x, dict(
        kernel_h=kernel_h, kernel_w=kernel_w, stride_h=stride_h, stride_w=stride_w,
        pad_top=pad_top, pad_left=pad_left, pad_bottom=pad_bottom, pad_right=pad_right))
    check_zp("in_zp", in_zp)
    wide = x.dtype == np.int16
    check(not wide or in_zp == 0, f"in_zp={in_zp}: int16 activations have zero point 0")
    check(count_include_pad in (0, 1), f"avg_pool2d: count_include_pad={count_include_pad}")
    check(0 <= divisor <= AVG_MAX_COUNT, f"avg_pool2d: divisor={divisor} outside [0, 2^30]")
    check(divisor > 0 or not count_include_pad or kernel_h * kernel_w <= AVG_MAX_COUNT,
          f"avg_pool2d: count {kernel_h}x{kernel_w} > 2^30")
    _, h, w, _ = x.shape
    most = AVG_MAX_WINDOW16 if wide else AVG_MAX_WINDOW
    check(min(kernel_h, h) * min(kernel_w, w) <= most,
          f"avg_pool2d: windows of up to {min(kernel_h, h)}x{min(kernel_w, w)} valid elements "
          f"(more than {most}: the sum may leave int32)")
    total = np.zeros((x.shape[0], h + 1, w + 1, x.shape[3]), np.int64)  # prefix sums
    total[:, 1:, 1:] = (x.astype(np.int64) - in_zp).cumsum(1).cumsum(2)
    rows0, rows1, cols0, cols1 = r0[:, None], r1[:, None], c0[None, :], c1[None, :]
    acc = (total[:, rows1, cols1] - total[:, rows0, cols1] - total[:, rows1, cols0]
           + total[:, rows0, cols0])

    if divisor > 0:
        count = np.full((len(r0), len(c0)), divisor, np.int64)
    elif count_include_pad:
        count = np.full((len(r0), len(c0)), kernel_h * kernel_w, np.int64)
    else:
        count = (r1 - r0)[:, None] * (c1 - c0)[None, :]
    counts, where = np.unique(count, return_inverse=True)
    scales = np.array([quant.reciprocal_scale(int(c)) for c in counts], np.int64).reshape(-1, 2)
    mult = scales[:, 0][where].reshape(count.shape)[:, :, None]
    shift = scales[:, 1][where].reshape(count.shape)[:, :, None]
    return (requantize_int16 if wide else requantize)(acc, mult, shift, out_zp, act_min, act_max)


# --- resize ---------------------------------------------------------------------------------------
# Resampling on TOSA RESIZE's integer coordinates. Per axis (y: H, x: W) output o reads source
# coordinate v = o * scale_d + offset in units of 1/scale_n: i = floor(v / scale_n), r = v - i *
# scale_n in [0, scale_n), taps i0 = clamp(i, 0, size - 1), i1 = clamp(i + 1, 0, size - 1).
# nearest: x[i1 if 2 r >= scale_n else i0] per axis (a copy). bilinear: acc = sum of the four
# taps times (n - r) or r per axis (int32: |acc| <= 128 * n_y * n_x <= 2^29), y = clamp(rq(acc,
# mult, shift)) with mult / 2^shift ~ 1 / (n_y * n_x): y shares x's qparams, so no zero point
# enters. The border ties the geometry to the output size exactly as TOSA's:
# (size - 1) * scale_n - offset + border == (out - 1) * scale_d.
RESIZE_MAX_N = 1 << 11  # TOSA's bound on scale_n: |acc| <= 128 * 2^22
RESIZE_MAX_D = 1 << 14  # o * scale_d + offset stays an int32 for outputs below 2^16
RESIZE_MAX_OFFSET = 1 << 16
RESIZE_MAX_DIM = (1 << 16) - 1


def _resize_axis(size: int, out: int, n: int, d: int, offset: int, border: int, what: str):
    check(1 <= n <= RESIZE_MAX_N and 1 <= d <= RESIZE_MAX_D, f"resize: {what} scale {n}/{d} "
          f"outside [1, 2^11] / [1, 2^14]")
    check(abs(offset) <= RESIZE_MAX_OFFSET, f"resize: {what} offset {offset} outside +-2^16")
    check(1 <= size <= RESIZE_MAX_DIM and 1 <= out <= RESIZE_MAX_DIM,
          f"resize: {what} sizes {size} -> {out} outside [1, 2^16)")
    check((size - 1) * n - offset + border == (out - 1) * d,
          f"resize: {what} border {border}: (size - 1) * n - offset + border != (out - 1) * d")
    v = np.arange(out, dtype=np.int64) * d + offset
    i = v // n
    return np.clip(i, 0, size - 1), np.clip(i + 1, 0, size - 1), v - i * n


def resize_shape(x, *, mode, scale_y_n, scale_y_d, offset_y, border_y, scale_x_n, scale_x_d,
                 offset_x, border_x, **_):
    """(N, OH, OW, C) from the attributes: OH = ((H - 1) * n - offset + border) / d + 1."""
    as_array(x, np.int8, "x", 4)
    _, h, w, c = x.shape
    sizes = []
    for size, n, d, off, bd in ((h, scale_y_n, scale_y_d, offset_y, border_y),
                                (w, scale_x_n, scale_x_d, offset_x, border_x)):
        num = (size - 1) * n - off + bd
        check(d > 0 and num >= 0 and num % d == 0, "resize: the border gives no whole size")
        sizes.append(num // d + 1)
    return (x.shape[0], *sizes, c)


def resize(x, *, mode, scale_y_n, scale_y_d, offset_y, border_y, scale_x_n, scale_x_d,
           offset_x, border_x, mult, shift, act_min, act_max):
    """TOSA RESIZE (nearest: a copy; bilinear: rq of the 4-tap sum), then the clamp."""
    # x: (N, H, W, C) int8  ->  y: (N, OH, OW, C) int8
    out = resize_shape(x, mode=mode, scale_y_n=scale_y_n, scale_y_d=scale_y_d, offset_y=offset_y,
                       border_y=border_y, scale_x_n=scale_x_n, scale_x_d=scale_x_d,
                       offset_x=offset_x, border_x=border_x)
    check(mode in (0, 1), f"resize: mode {mode} is not 0 (nearest) or 1 (bilinear)")
    check_act(act_min, act_max)
    _, h, w, _ = x.shape
    y0, y1, ry = _resize_axis(h, out[1], scale_y_n, scale_y_d, offset_y, border_y, "y")
    x0, x1, rx = _resize_axis(w, out[2], scale_x_n, scale_x_d, offset_x, border_x, "x")
    if mode == 0:
        check(mult == 0 and shift == 0, "resize: nearest takes mult = shift = 0")
        iy = np.where(2 * ry >= scale_y_n, y1, y0)
        ix = np.where(2 * rx >= scale_x_n, x1, x0)
        return np.clip(x[:, iy][:, :, ix], act_min, act_max).astype(np.int8)
    check_scale(mult, shift)
    bound = 128 * scale_y_n * scale_x_n
    check(int(quant.rq(-bound, mult, shift)) >= -2**31 and int(quant.rq(bound, mult, shift))
          < 2**31, "resize: rq of the 4-tap sum leaves int32")
    v = x.astype(np.int64)
    wy1, wx1 = ry[None, :, None, None], rx[None, None, :, None]
    wy0, wx0 = scale_y_n - wy1, scale_x_n - wx1
    top = v[:, y0][:, :, x0] * wx0 + v[:, y0][:, :, x1] * wx1
    bottom = v[:, y1][:, :, x0] * wx0 + v[:, y1][:, :, x1] * wx1
    acc = top * wy0 + bottom * wy1
    return np.clip(quant.rq(acc, mult, shift), act_min, act_max).astype(np.int8)


def resize_axis(size: int, out: int, mode: str, align_corners: bool,
                scale: float | None) -> tuple[int, int, int, int]:
    """(scale_n, scale_d, offset, border) giving PyTorch's source coordinate of one axis exactly,
    for `mode` "nearest" (floor(o * r)), "nearest-exact" (floor((o + 1/2) r)) or "linear"
    (max((o + 1/2) r - 1/2, 0), or o (size - 1) / (out - 1) with align_corners), where the ratio
    r is 1 / scale when a scale factor is given, else size / out (ValueError for a scale that is
    no small fraction). A "nearest" axis that picks the same pixels as "nearest-exact" (every
    integer upscale) takes the latter's half-pixel geometry, the one Ethos-U55 runs."""
    from fractions import Fraction

    if mode == "linear" and align_corners:
        n, d, offset = max(out - 1, 1), max(size - 1, 1), 0
    else:
        if scale:
            f = Fraction(scale).limit_denominator(256)
            check(abs(float(f) - scale) <= 1e-9 * scale, f"resize: scale {scale} is no p/q "
                  "with q <= 256")
            p, q = f.denominator, f.numerator  # r = p / q
        else:
            p, q = size, out
        n, d = 2 * q, 2 * p
        offset = -q if mode == "nearest" else p - q
        o = np.arange(out, dtype=np.int64)
        if mode == "nearest" and np.array_equal(np.minimum(o * p // q, size - 1),
                                                np.minimum((2 * o + 1) * p // (2 * q), size - 1)):
            offset = p - q  # the same pixels as nearest-exact (integer upscales): its geometry
    g = math.gcd(n, d, offset)
    n, d, offset = n // g, d // g, offset // g
    return n, d, offset, (out - 1) * d - (size - 1) * n + offset
