"""Pooling: max_pool2d and avg_pool2d on int8 NHWC (no dilation).

Both ops take an explicit (top, left, bottom, right) padding; a window is the kernel_h x kernel_w
block at (oh*stride_h - pad_top, ow*stride_w - pad_left). "Valid" elements are those inside the
input. A window with no valid element is outside the domain (ValueError).
"""
from __future__ import annotations

import numpy as np

from mcutorch import quant

from mcutorch.ref._common import (as_array, check, check_act, check_zp, out_size, pad_hw,
                                  requantize, window_slice)


def _pool_geometry(x, kernel_h, kernel_w, stride_h, stride_w, pads, op):
    """(Ho, Wo) and the number of valid elements of each window, shape (Ho, Wo)."""
    _, h, w, _ = x.shape
    ho = out_size(h, kernel_h, stride_h, 1, pads[0], pads[2], f"{op} height")
    wo = out_size(w, kernel_w, stride_w, 1, pads[1], pads[3], f"{op} width")
    rows = _valid_1d(h, ho, kernel_h, stride_h, pads[0])
    cols = _valid_1d(w, wo, kernel_w, stride_w, pads[1])
    valid = np.outer(rows, cols)
    check(valid.min() > 0, f"{op}: a window lies entirely in the padding")
    return ho, wo, valid


def _valid_1d(size, out, kernel, stride, pad0):
    """Valid elements per window along one axis: |[start, start+kernel) & [0, size)|."""
    start = np.arange(out) * stride - pad0
    return np.clip(np.minimum(start + kernel, size) - np.maximum(start, 0), 0, None)


def _taps(xp, kernel_h, kernel_w, stride_h, stride_w, ho, wo):
    """Yield the strided slab of padded xp read by each kernel tap, each (N, Ho, Wo, C)."""
    for i in range(kernel_h):
        for j in range(kernel_w):
            yield xp[:, window_slice(i, stride_h, ho), window_slice(j, stride_w, wo), :]


def max_pool2d(x, *, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left, pad_bottom,
               pad_right, act_min, act_max):
    """Max over the valid elements of each window (padding never wins), then clamp."""
    # x: (N, H, W, C) int8  ->  y: (N, Ho, Wo, C) int8
    as_array(x, np.int8, "x", 4)
    check_act(act_min, act_max)
    pads = (pad_top, pad_left, pad_bottom, pad_right)
    ho, wo, _ = _pool_geometry(x, kernel_h, kernel_w, stride_h, stride_w, pads, "max_pool2d")
    xp = pad_hw(x.astype(np.int16), pads, np.iinfo(np.int16).min)  # below every int8
    best = None
    for slab in _taps(xp, kernel_h, kernel_w, stride_h, stride_w, ho, wo):
        best = slab.copy() if best is None else np.maximum(best, slab)
    return np.clip(best, act_min, act_max).astype(np.int8)


def avg_pool2d(x, *, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left, pad_bottom,
               pad_right, count_include_pad, divisor, in_zp, out_zp, act_min, act_max):
    """acc = sum of (x - in_zp) over valid elements; y = clamp(rq(acc, reciprocal_scale(count)))."""
    # x: (N, H, W, C) int8  ->  y: (N, Ho, Wo, C) int8
    as_array(x, np.int8, "x", 4)
    check_zp("in_zp", in_zp)
    check(count_include_pad in (0, 1), f"avg_pool2d: count_include_pad={count_include_pad}")
    check(divisor >= 0, f"avg_pool2d: divisor={divisor} < 0")
    pads = (pad_top, pad_left, pad_bottom, pad_right)
    ho, wo, valid = _pool_geometry(x, kernel_h, kernel_w, stride_h, stride_w, pads, "avg_pool2d")
    xp = pad_hw(x.astype(np.int64) - in_zp, pads, 0)
    acc = sum(_taps(xp, kernel_h, kernel_w, stride_h, stride_w, ho, wo))

    if divisor > 0:
        count = np.full((ho, wo), divisor)
    elif count_include_pad:
        count = np.full((ho, wo), kernel_h * kernel_w)
    else:
        count = valid
    scales = {int(c): quant.reciprocal_scale(int(c)) for c in np.unique(count)}
    mult = np.vectorize(lambda c: scales[c][0], otypes=[np.int64])(count)[:, :, None]
    shift = np.vectorize(lambda c: scales[c][1], otypes=[np.int64])(count)[:, :, None]
    return requantize(acc, mult, shift, out_zp, act_min, act_max)
