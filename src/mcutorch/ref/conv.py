"""MAC ops: conv2d, depthwise_conv2d and fully_connected, int8 in / int8 out.

All three compute an int32 accumulator

    acc[c] = bias[c] + sum over the window of (x - in_zp) * w          (padding contributes 0)

and requantize it per output channel: y = clamp(rq(acc, mult[c], shift[c]) + out_zp, act_min,
act_max). Products are summed exactly: (x - in_zp) * w is at most 255 * 128 in magnitude, so float64
matrix products of these integer-valued arrays are exact (every partial sum stays far below 2^53)
whatever order BLAS adds them in. The accumulator must fit int32 (checked).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from mcutorch.ref._common import (as_array, check, check_zp, out_size, pad_hw, requantize,
                      window_slice)


def _mac_operands(bias, mult, shift, cout: int):
    """Check the per-channel int32 operands; returns bias as int64."""
    for name, a in (("bias", bias), ("mult", mult), ("shift", shift)):
        as_array(a, np.int32, name, 1)
        check(a.shape == (cout,), f"{name}: expected shape ({cout},), got {a.shape}")
    return bias.astype(np.int64)


def _geometry(x, kh, kw, stride_h, stride_w, dilation_h, dilation_w, pads, op):
    """Output (Ho, Wo) of a window op on NHWC x; pads = (top, left, bottom, right)."""
    _, h, w, _ = x.shape
    ho = out_size(h, kh, stride_h, dilation_h, pads[0], pads[2], f"{op} height")
    wo = out_size(w, kw, stride_w, dilation_w, pads[1], pads[3], f"{op} width")
    return ho, wo


def _im2col(xc, kh, kw, ho, wo, stride_h, stride_w, dilation_h, dilation_w):
    """Patches of padded float64 NHWC xc -> (N, Ho, Wo, KH, KW, C) (a copy, C fastest)."""
    eff_h, eff_w = dilation_h * (kh - 1) + 1, dilation_w * (kw - 1) + 1
    win = sliding_window_view(xc, (eff_h, eff_w), axis=(1, 2))  # (N, H', W', C, effH, effW)
    win = win[:, ::stride_h, ::stride_w, :, ::dilation_h, ::dilation_w][:, :ho, :wo]
    return np.ascontiguousarray(win.transpose(0, 1, 2, 4, 5, 3))


def conv2d(x, weight, bias, mult, shift, *, stride_h, stride_w, dilation_h, dilation_w,
           pad_top, pad_left, pad_bottom, pad_right, groups, in_zp, out_zp, act_min, act_max):
    """Grouped 2-D convolution, NHWC activations, OHWI weights, per-channel requantization."""
    # x: (N, H, W, Cin) int8; weight: (Cout, KH, KW, Cin/groups) int8
    # bias, mult, shift: (Cout,) int32  ->  y: (N, Ho, Wo, Cout) int8
    as_array(x, np.int8, "x", 4)
    as_array(weight, np.int8, "weight", 4)
    check_zp("in_zp", in_zp)
    n, _, _, cin = x.shape
    cout, kh, kw, cg = weight.shape
    check(groups >= 1 and cg * groups == cin and cout % groups == 0,
          f"conv2d: groups={groups} does not fit Cin={cin}, weight {weight.shape}")
    bias64 = _mac_operands(bias, mult, shift, cout)
    pads = (pad_top, pad_left, pad_bottom, pad_right)
    ho, wo = _geometry(x, kh, kw, stride_h, stride_w, dilation_h, dilation_w, pads, "conv2d")

    xc = pad_hw(x.astype(np.float64) - in_zp, pads, 0.0)  # padding with in_zp contributes 0
    cols = _im2col(xc, kh, kw, ho, wo, stride_h, stride_w, dilation_h, dilation_w)
    m = n * ho * wo
    # (G, M, KH*KW*Cg) @ (G, KH*KW*Cg, Cout/G): one matmul per group (G = 1: a single matmul)
    cols = cols.reshape(m, kh * kw, groups, cg).transpose(2, 0, 1, 3).reshape(groups, m, -1)
    wmat = weight.astype(np.float64).reshape(groups, cout // groups, -1).transpose(0, 2, 1)
    acc = np.matmul(cols, wmat).transpose(1, 0, 2).reshape(n, ho, wo, cout)
    acc = acc.astype(np.int64) + bias64
    return requantize(acc, mult, shift, out_zp, act_min, act_max)


def depthwise_conv2d(x, weight, bias, mult, shift, *, stride_h, stride_w, dilation_h, dilation_w,
                     pad_top, pad_left, pad_bottom, pad_right, depth_multiplier, in_zp, out_zp,
                     act_min, act_max):
    """Depthwise convolution: output channel c*M + m reads input channel c only."""
    # x: (N, H, W, C) int8; weight: (KH, KW, C*M) int8 (a leading 1 dim, "1HWC", is accepted)
    # bias, mult, shift: (C*M,) int32  ->  y: (N, Ho, Wo, C*M) int8
    as_array(x, np.int8, "x", 4)
    as_array(weight, np.int8, "weight", (3, 4))
    if weight.ndim == 4:
        check(weight.shape[0] == 1, f"depthwise weight: need (1, KH, KW, C*M), not {weight.shape}")
        weight = weight[0]
    check_zp("in_zp", in_zp)
    n, _, _, c = x.shape
    kh, kw, cout = weight.shape
    check(depth_multiplier >= 1 and cout == c * depth_multiplier,
          f"depthwise_conv2d: weight {weight.shape} does not fit C={c}, M={depth_multiplier}")
    bias64 = _mac_operands(bias, mult, shift, cout)
    pads = (pad_top, pad_left, pad_bottom, pad_right)
    ho, wo = _geometry(x, kh, kw, stride_h, stride_w, dilation_h, dilation_w, pads, "depthwise")

    xc = pad_hw(x.astype(np.int64) - in_zp, pads, 0)
    if depth_multiplier > 1:
        xc = np.repeat(xc, depth_multiplier, axis=3)  # channel c*M + m is a copy of c
    w64 = weight.astype(np.int64)
    acc = np.broadcast_to(bias64, (n, ho, wo, cout)).copy()
    for i in range(kh):  # shift-and-accumulate: one strided slab per kernel tap
        rows = window_slice(i * dilation_h, stride_h, ho)
        for j in range(kw):
            cols = window_slice(j * dilation_w, stride_w, wo)
            acc += xc[:, rows, cols, :] * w64[i, j]
    return requantize(acc, mult, shift, out_zp, act_min, act_max)


def fold_bias(weight, bias, in_zp):
    """bias' = bias - in_zp * sum(w) per output channel (int64; "folded" variant operand).

    weight: (Out, ...) int8, bias: (Out,) int32. The caller checks bias' fits int32.
    """
    wsum = np.asarray(weight, np.int64).reshape(weight.shape[0], -1).sum(axis=1)
    return np.asarray(bias, np.int64) - int(in_zp) * wsum


def fully_connected_folded(x, weight, bias, mult, shift, *, in_zp, out_zp, act_min, act_max):
    """fully_connected, variant "folded": `bias` is bias' = bias - in_zp * sum(w) (fold_bias),
    so acc = bias' + sum(x * w); equal to fully_connected on the unfolded bias."""
    check_zp("in_zp", in_zp)
    return fully_connected(x, weight, bias, mult, shift, in_zp=0, out_zp=out_zp,
                           act_min=act_min, act_max=act_max)


def fully_connected(x, weight, bias, mult, shift, *, in_zp, out_zp, act_min, act_max):
    """y = x @ weight.T with per-output-channel requantization."""
    # x: (N, In) int8; weight: (Out, In) int8; bias, mult, shift: (Out,) int32 -> y: (N, Out) int8
    as_array(x, np.int8, "x", 2)
    as_array(weight, np.int8, "weight", 2)
    check_zp("in_zp", in_zp)
    check(x.shape[1] == weight.shape[1],
          f"fully_connected: x {x.shape} and weight {weight.shape} disagree on In")
    bias64 = _mac_operands(bias, mult, shift, weight.shape[0])
    acc = (x.astype(np.float64) - in_zp) @ weight.astype(np.float64).T
    acc = acc.astype(np.int64) + bias64
    return requantize(acc, mult, shift, out_zp, act_min, act_max)
