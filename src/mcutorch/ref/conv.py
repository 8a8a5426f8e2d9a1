"""MAC ops: conv2d, depthwise_conv2d and fully_connected, int8 in / int8 out.

All three compute an int32 accumulator

    acc[c] = bias[c] + sum over the window of (x - in_zp) * w          (padding contributes 0)

and requantize it per output channel: y = clamp(rq(acc, mult[c], shift[c]) + out_zp, act_min,
act_max). Products are summed exactly: (x - in_zp) * w is at most 255 * 128 in magnitude, so float64
matrix products of these integer-valued arrays are exact (every partial sum stays far below 2^53)
whatever order BLAS adds them in. The accumulator must fit int32 (checked).

int16 activations (docs/numerics.md, section 6): conv2d, depthwise_conv2d and fully_connected
given an int16 x (zero points 0) accumulate in int64 with an int64 bias, both within int48, and
requantize with a 16-bit multiplier to an int16 output (`requantize16`); |x * w| <= 32767 * 127,
so the float64 sums stay exact while the accumulator is inside int48 (checked).

Window ops never build a padded input: padding contributes 0, so each kernel tap adds the
products of the outputs whose tap lands inside the input (a strided view of x), as the C kernels
skip the padding. What they allocate is a few times the operands they are given and the output
they return; `conv2d_shape` & co. give that output's shape from the operand shapes and the
attributes alone, so an executor can compare it with the program's output first (ref.output_shape).
"""
from __future__ import annotations

import numpy as np

from mcutorch import quant
from mcutorch.ref._common import (DIM_MAX, INT16_MAX, INT32_MAX, INT32_MIN, INT48_MAX,
                                  as_activation, as_array, check, check_dims, check_scale, check_zp,
                                  out_size, requantize, requantize16, tap_outputs, tap_slice)
from mcutorch.ref.elementwise import add


def _mac_operands(bias, mult, shift, cout: int, wide: bool = False):
    """Check the per-channel operands (int32; an int16 op's bias int64 within int48, section 6
    of docs/numerics.md); returns bias as int64."""
    for name, a in (("bias", bias), ("mult", mult), ("shift", shift)):
        as_array(a, np.int64 if wide and name == "bias" else np.int32, name, 1)
        check(a.shape == (cout,), f"{name}: expected shape ({cout},), got {a.shape}")
    check(not wide or not bias.size or int(np.abs(bias).max()) <= INT48_MAX,
          "bias: an int16 MAC op's bias must fit int48")
    return bias.astype(np.int64)


def _mac_input(x, ndim: int, in_zp: int) -> bool:
    """Check a MAC op's activation input and in_zp; True if int16 (then in_zp must be 0)."""
    wide = as_activation(x, "x", ndim)
    check_zp("in_zp", in_zp)
    check(not wide or in_zp == 0, f"in_zp={in_zp}: int16 activations have zero point 0")
    return wide


def _output(acc, mult, shift, out_zp, act_min, act_max, wide: bool):
    """The output stage: int8 (section 2) or, for an int16 input, int16 (section 6)."""
    return (requantize16 if wide else requantize)(acc, mult, shift, out_zp, act_min, act_max)


def _geometry(x, kh, kw, stride_h, stride_w, dilation_h, dilation_w, pads, op):
    """Output (Ho, Wo) of a window op on NHWC x; pads = (top, left, bottom, right)."""
    as_activation(x, "x", 4)
    check_dims(x, "x", op)
    _, h, w, _ = x.shape
    ho = out_size(h, kh, stride_h, dilation_h, pads[0], pads[2], f"{op} height")
    wo = out_size(w, kw, stride_w, dilation_w, pads[1], pads[3], f"{op} width")
    return ho, wo


def _taps(x_shape, kh, kw, ho, wo, stride, dilation, pads):
    """For every kernel tap (i, j) that some window reads inside the input: (i, j, output rows,
    output cols, input rows, input cols) as slices, the input ones strided."""
    _, h, w, _ = x_shape
    (sh, sw), (dh, dw), (pt, pl, _, _) = stride, dilation, pads
    rows = [(i, tap_outputs(h, ho, sh, pt, i * dh)) for i in _used(h, ho, kh, sh, dh, pt)]
    cols = [(j, tap_outputs(w, wo, sw, pl, j * dw)) for j in _used(w, wo, kw, sw, dw, pl)]
    for i, (r0, r1) in rows:
        for j, (c0, c1) in cols:
            yield (i, j, slice(r0, r1), slice(c0, c1), tap_slice(r0, r1, sh, pt, i * dh),
                   tap_slice(c0, c1, sw, pl, j * dw))


def _used(size, out, kernel, stride, dilation, pad0):
    """The taps k of one axis that land inside [0, size) for some output (vectorised over k)."""
    first = pad0 - np.arange(kernel, dtype=np.int64) * dilation
    lo = np.maximum(0, -(-first // stride))
    hi = np.minimum(out, -(-(first + size) // stride))
    return np.flatnonzero(lo < hi).tolist()


def conv2d_shape(x, weight, *_, stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left,
                 pad_bottom, pad_right, **__):
    """The (N, Ho, Wo, Cout) conv2d returns, from shapes and attributes (ValueError outside the
    window domain); allocates nothing."""
    as_array(weight, np.int8, "weight", 4)
    check_dims(weight, "weight", "conv2d")
    ho, wo = _geometry(x, weight.shape[1], weight.shape[2], stride_h, stride_w, dilation_h,
                       dilation_w, (pad_top, pad_left, pad_bottom, pad_right), "conv2d")
    check(x.shape[0] * ho * wo < 1 << 31, "conv2d: N * Ho * Wo output pixels must be < 2^31")
    return (x.shape[0], ho, wo, weight.shape[0])


def conv2d(x, weight, bias, mult, shift, *, stride_h, stride_w, dilation_h, dilation_w,
           pad_top, pad_left, pad_bottom, pad_right, groups, in_zp, out_zp, act_min, act_max):
    """Grouped 2-D convolution, NHWC activations, OHWI weights, per-channel requantization."""
    # x: (N, H, W, Cin) int8; weight: (Cout, KH, KW, Cin/groups) int8
    # bias, mult, shift: (Cout,) int32  ->  y: (N, Ho, Wo, Cout) int8
    pads = (pad_top, pad_left, pad_bottom, pad_right)
    n, ho, wo, cout = conv2d_shape(x, weight, stride_h=stride_h, stride_w=stride_w,
                                   dilation_h=dilation_h, dilation_w=dilation_w, pad_top=pad_top,
                                   pad_left=pad_left, pad_bottom=pad_bottom, pad_right=pad_right)
    wide = _mac_input(x, 4, in_zp)
    cin = x.shape[3]
    _, kh, kw, cg = weight.shape
    check(groups >= 1 and cg * groups == cin and cout % groups == 0,
          f"conv2d: groups={groups} does not fit Cin={cin}, weight {weight.shape}")
    bias64 = _mac_operands(bias, mult, shift, cout, wide)

    xc = x.astype(np.float64) - in_zp  # padding would hold in_zp: it contributes 0
    # per tap, one (G, M, Cg) @ (G, Cg, Cout/G) matmul (G = 1: a single matmul); every sum is
    # an integer below 2^53 in magnitude (|bias| < 2^31, K * 255 * 128 < 2^47; int16: the
    # int48 domain, every partial sum checked below 2^47 by requantize16): float64 is exact
    wt = weight.astype(np.float64).reshape(groups, cout // groups, kh, kw, cg)
    acc = np.broadcast_to(bias64.astype(np.float64), (n, ho, wo, cout)).copy()
    for i, j, orow, ocol, irow, icol in _taps(x.shape, kh, kw, ho, wo, (stride_h, stride_w),
                                              (dilation_h, dilation_w), pads):
        slab = xc[:, irow, icol, :]
        m = slab.shape[0] * slab.shape[1] * slab.shape[2]
        if groups == 1:
            part = slab.reshape(m, cg) @ wt[0, :, i, j, :].T
        else:
            part = np.matmul(slab.reshape(m, groups, cg).transpose(1, 0, 2),
                             wt[:, :, i, j, :].transpose(0, 2, 1)).transpose(1, 0, 2)
        acc[:, orow, ocol, :] += part.reshape(slab.shape[:3] + (cout,))
    return _output(acc.astype(np.int64), mult, shift, out_zp, act_min, act_max, wide)


def conv2d_add_shape(x, weight, bias, mult, shift, skip, **attrs):
    """The shape conv2d_add returns: skip's, which must be conv2d's output shape."""
    y = conv2d_shape(x, weight, **attrs)
    check(tuple(np.shape(skip)) == y, f"conv2d_add: skip {np.shape(skip)} is not the conv's "
          f"output shape {y}")
    return y


def conv2d_add(x, weight, bias, mult, shift, skip, *, stride_h, stride_w, dilation_h, dilation_w,
               pad_top, pad_left, pad_bottom, pad_right, groups, in_zp, conv_zp, conv_min,
               conv_max, a_zp, a_mult, a_shift, b_zp, b_mult, b_shift, out_zp, out_mult,
               out_shift, act_min, act_max):
    """add(conv2d(x, ...), skip): exactly the unfused pair, the conv's int8 output (conv_zp,
    clamped to [conv_min, conv_max]) rescaled as add's a, skip as its b (no broadcasting)."""
    # x: (N, H, W, Cin) int8; weight: (Cout, KH, KW, Cin/groups) int8; bias, mult, shift:
    # (Cout,) int32; skip: (N, Ho, Wo, Cout) int8  ->  y: (N, Ho, Wo, Cout) int8
    geo = dict(stride_h=stride_h, stride_w=stride_w, dilation_h=dilation_h,
               dilation_w=dilation_w, pad_top=pad_top, pad_left=pad_left, pad_bottom=pad_bottom,
               pad_right=pad_right)
    as_array(skip, np.int8, "skip", 4)
    conv2d_add_shape(x, weight, bias, mult, shift, skip, **geo)
    t = conv2d(x, weight, bias, mult, shift, **geo, groups=groups, in_zp=in_zp, out_zp=conv_zp,
               act_min=conv_min, act_max=conv_max)
    return add(t, skip, a_zp=a_zp, a_mult=a_mult, a_shift=a_shift, b_zp=b_zp, b_mult=b_mult,
               b_shift=b_shift, out_zp=out_zp, out_mult=out_mult, out_shift=out_shift,
               act_min=act_min, act_max=act_max)


def _dw_weight(weight):
    """The depthwise weight as (KH, KW, C*M): rank 3, or rank 4 with a leading 1 ("1HWC")."""
    as_array(weight, np.int8, "weight", (3, 4))
    if weight.ndim == 4:
        check(weight.shape[0] == 1, f"depthwise weight: need (1, KH, KW, C*M), not {weight.shape}")
        weight = weight[0]
    check_dims(weight, "weight", "depthwise_conv2d")
    return weight


def depthwise_conv2d_shape(x, weight, *_, stride_h, stride_w, dilation_h, dilation_w, pad_top,
                           pad_left, pad_bottom, pad_right, **__):
    """The (N, Ho, Wo, C*M) depthwise_conv2d returns (see conv2d_shape)."""
    weight = _dw_weight(weight)
    ho, wo = _geometry(x, weight.shape[0], weight.shape[1], stride_h, stride_w, dilation_h,
                       dilation_w, (pad_top, pad_left, pad_bottom, pad_right), "depthwise")
    return (x.shape[0], ho, wo, weight.shape[2])


def depthwise_conv2d(x, weight, bias, mult, shift, *, stride_h, stride_w, dilation_h, dilation_w,
                     pad_top, pad_left, pad_bottom, pad_right, depth_multiplier, in_zp, out_zp,
                     act_min, act_max):
    """Depthwise convolution: output channel c*M + m reads input channel c only."""
    # x: (N, H, W, C) int8; weight: (KH, KW, C*M) int8 (a leading 1 dim, "1HWC", is accepted)
    # bias, mult, shift: (C*M,) int32  ->  y: (N, Ho, Wo, C*M) int8
    pads = (pad_top, pad_left, pad_bottom, pad_right)
    n, ho, wo, cout = depthwise_conv2d_shape(
        x, weight, stride_h=stride_h, stride_w=stride_w, dilation_h=dilation_h,
        dilation_w=dilation_w, pad_top=pad_top, pad_left=pad_left, pad_bottom=pad_bottom,
        pad_right=pad_right)
    weight = _dw_weight(weight)
    wide = _mac_input(x, 4, in_zp)
    c = x.shape[3]
    kh, kw, _ = weight.shape
    check(depth_multiplier >= 1 and cout == c * depth_multiplier,
          f"depthwise_conv2d: weight {weight.shape} does not fit C={c}, M={depth_multiplier}")
    bias64 = _mac_operands(bias, mult, shift, cout, wide)

    xc = x.astype(np.int64) - in_zp  # padding would hold in_zp: it contributes 0
    w64 = weight.astype(np.int64)
    acc = np.broadcast_to(bias64, (n, ho, wo, cout)).copy()
    for i, j, orow, ocol, irow, icol in _taps(x.shape, kh, kw, ho, wo, (stride_h, stride_w),
                                              (dilation_h, dilation_w), pads):
        slab = xc[:, irow, icol, :]  # shift-and-accumulate: one strided slab per kernel tap
        if depth_multiplier > 1:
            slab = np.repeat(slab, depth_multiplier, axis=3)  # channel c*M + m is a copy of c
        acc[:, orow, ocol, :] += slab * w64[i, j]
    return _output(acc, mult, shift, out_zp, act_min, act_max, wide)


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


def fully_connected_shape(x, weight, *_, **__):
    """The (N, Out) fully_connected (either variant) returns; allocates nothing."""
    as_activation(x, "x", 2)
    as_array(weight, np.int8, "weight", 2)
    return (x.shape[0], weight.shape[0])


def fully_connected(x, weight, bias, mult, shift, *, in_zp, out_zp, act_min, act_max):
    """y = x @ weight.T with per-output-channel requantization."""
    # x: (N, In) int8; weight: (Out, In) int8; bias, mult, shift: (Out,) int32 -> y: (N, Out) int8
    fully_connected_shape(x, weight)
    wide = _mac_input(x, 2, in_zp)
    check(x.shape[1] == weight.shape[1],
          f"fully_connected: x {x.shape} and weight {weight.shape} disagree on In")
    bias64 = _mac_operands(bias, mult, shift, weight.shape[0], wide)
    acc = (x.astype(np.float64) - in_zp) @ weight.astype(np.float64).T  # exact below 2^53
    acc = acc.astype(np.int64) + bias64
    return _output(acc, mult, shift, out_zp, act_min, act_max, wide)


MATMUL_MAX_K = (INT32_MAX) // (255 * 255)  # K * 255 * 255 fits int32 (ops.conv.MATMUL_MAX_K)


MATMUL16_MAX_K = INT48_MAX // (1 << 30)  # 131,071: K * 32768^2 fits int48 (int16 a and b)


def matmul_shape(a, b, *, transpose_b, **_):
    """The [..., M, N] matmul returns (a, b of one rank 2..6, int8 or int16, batch dims
    broadcast)."""
    wide = getattr(a, "dtype", None) == np.int16
    as_array(a, np.int16 if wide else np.int8, "a", (2, 3, 4, 5, 6))
    as_array(b, a.dtype, "b", a.ndim)
    check(transpose_b in (0, 1), f"matmul: transpose_b={transpose_b} is not 0 or 1")
    (m, k), (kb, n) = a.shape[-2:], (b.shape[-1:-3:-1] if transpose_b else b.shape[-2:])
    check(k == kb, f"matmul: a {a.shape} and b {b.shape} (transpose_b={transpose_b}) "
          "disagree on K")
    batch = []
    for da, db in zip(a.shape[:-2], b.shape[:-2]):
        check(da == db or 1 in (da, db), f"matmul: batch dims of a {a.shape} and b {b.shape} "
              "do not broadcast")
        batch.append(max(da, db) if 0 not in (da, db) else 0)
    return (*batch, m, n)


def matmul(a, b, *, transpose_b, a_zp, b_zp, out_zp, mult, shift, act_min, act_max):
    """y = clamp(rq(sum_k (a[..., m, k] - a_zp) * (b[..., k, n] - b_zp)) + out_zp).

    Static domain: K <= MATMUL_MAX_K (|acc| <= K * 255 * 255 fits int32) and rq of
    [-K * 255 * 255, K * 255 * 255] fits int32; both program readers check it at load.
    int16 a and b (docs/numerics.md section 6): zero points 0, acc in int48 (K <= 131,071),
    a 16-bit multiplier, an int16 y (requantize16)."""
    # a: [..., M, K] int8/16; b: [..., K, N] ([..., N, K] if transpose_b) -> y: [..., M, N]
    shape = matmul_shape(a, b, transpose_b=transpose_b)
    wide = a.dtype == np.int16
    k = a.shape[-1]
    if wide:
        check(a_zp == 0 and b_zp == 0, f"matmul: a_zp={a_zp}, b_zp={b_zp}: int16 activations "
              "have zero point 0")
        check(k <= MATMUL16_MAX_K, f"matmul: K={k} > {MATMUL16_MAX_K}: the int16 accumulator "
              "can leave int48")
        matmul16_check(k, mult, shift)
    else:
        check_zp("a_zp", a_zp)
        check_zp("b_zp", b_zp)
        check(k <= MATMUL_MAX_K, f"matmul: K={k} > {MATMUL_MAX_K}: the accumulator can leave "
              "int32")
        check_scale(mult, shift, "matmul scale")
        bound = quant.rq([-k * 255 * 255, k * 255 * 255], mult, shift)
        check(INT32_MIN <= bound.min() and bound.max() <= INT32_MAX,
              f"matmul: rq(mult={mult}, shift={shift}) of +-{k} * 255 * 255 can overflow int32")
    a64 = a.astype(np.int64) - a_zp
    b64 = b.astype(np.int64) - b_zp
    if transpose_b:
        b64 = np.swapaxes(b64, -1, -2)
    acc = np.matmul(a64, b64) if a64.size and b64.size else np.zeros(shape, np.int64)
    return (requantize16 if wide else requantize)(acc.reshape(shape), mult, shift, out_zp,
                                                  act_min, act_max)


def matmul16_check(k: int, mult: int, shift: int) -> None:
    """An int16 matmul's scale: a 16-bit multiplier and rq(+-K * 2^30) inside int32 (both program
    readers check the same at load)."""
    check_scale(mult, shift, "matmul scale")
    check(mult <= INT16_MAX, f"matmul: mult={mult}: an int16 matmul's multiplier is 16-bit")
    bound = quant.rq([-k << 30, k << 30], mult, shift)
    check(INT32_MIN <= bound.min() and bound.max() <= INT32_MAX,
          f"matmul: rq(mult={mult}, shift={shift}) of +-{k} * 2^30 can overflow int32")


def _transposed_axis(size: int, kernel: int, stride: int, dilation: int, pad0: int, pad1: int,
                     what: str) -> int:
    """Output length of a transposed window op: (size - 1) * stride + dilation * (kernel - 1)
    + 1 - pad0 - pad1. Domain: kernel, stride, dilation in [1, 2^30), pad0 in [0, 2^30), pad1 in
    (-max(stride, dilation), 2^30) (negative: PyTorch's output_padding), a length in [1, 2^30)."""
    check(1 <= kernel <= DIM_MAX and 1 <= stride <= DIM_MAX and 1 <= dilation <= DIM_MAX,
          f"{what}: kernel/stride/dilation {kernel}/{stride}/{dilation} outside [1, 2^30)")
    check(0 <= pad0 <= DIM_MAX and -max(stride, dilation) < pad1 <= DIM_MAX,
          f"{what}: padding {pad0}/{pad1} outside [0, 2^30) / (-max(stride, dilation), 2^30)")
    out = (size - 1) * stride + dilation * (kernel - 1) + 1 - pad0 - pad1
    check(1 <= out <= DIM_MAX, f"{what}: output length {out} outside [1, 2^30)")
    return out


def _transposed_rows(size: int, out: int, stride: int, pad0: int, offset: int):
    """(input slice, output slice) of one tap: input i lands on output i * stride - pad0 + offset;
    None when no input lands inside [0, out)."""
    first = offset - pad0
    lo, hi = max(0, -(first // stride)), min(size, (out - 1 - first) // stride + 1)
    if lo >= hi:
        return None
    o0 = lo * stride + first
    return slice(lo, hi), slice(o0, o0 + (hi - lo - 1) * stride + 1, stride)


def conv_transpose2d_shape(x, weight, *_, stride_h, stride_w, dilation_h, dilation_w, pad_top,
                           pad_left, pad_bottom, pad_right, **__):
    """The (N, Ho, Wo, Cout) conv_transpose2d returns (ValueError outside the domain)."""
    as_array(x, np.int8, "x", 4)
    as_array(weight, np.int8, "weight", 4)
    check_dims(x, "x", "conv_transpose2d")
    check_dims(weight, "weight", "conv_transpose2d")
    _, h, w, _ = x.shape
    ho = _transposed_axis(h, weight.shape[1], stride_h, dilation_h, pad_top, pad_bottom,
                          "conv_transpose2d height")
    wo = _transposed_axis(w, weight.shape[2], stride_w, dilation_w, pad_left, pad_right,
                          "conv_transpose2d width")
    check(x.shape[0] * ho * wo < 1 << 31, "conv_transpose2d: N * Ho * Wo must be < 2^31")
    return (x.shape[0], ho, wo, weight.shape[0])


def conv_transpose2d(x, weight, bias, mult, shift, *, stride_h, stride_w, dilation_h, dilation_w,
                     pad_top, pad_left, pad_bottom, pad_right, groups, in_zp, out_zp, act_min,
                     act_max):
    """Grouped transposed 2-D convolution: input pixel (iy, ix) adds (x - in_zp) * w[o, ky, kx]
    to output pixel (iy * stride_h - pad_top + ky * dilation_h, ix * stride_w - pad_left +
    kx * dilation_w) when it lies inside the output; per-channel requantization."""
    # x: (N, H, W, Cin) int8; weight: (Cout, KH, KW, Cin/groups) int8 (output channels first)
    # bias, mult, shift: (Cout,) int32  ->  y: (N, Ho, Wo, Cout) int8
    n, ho, wo, cout = conv_transpose2d_shape(
        x, weight, stride_h=stride_h, stride_w=stride_w, dilation_h=dilation_h,
        dilation_w=dilation_w, pad_top=pad_top, pad_left=pad_left, pad_bottom=pad_bottom,
        pad_right=pad_right)
    check_zp("in_zp", in_zp)
    cin = x.shape[3]
    _, kh, kw, cg = weight.shape
    check(groups >= 1 and cg * groups == cin and cout % groups == 0,
          f"conv_transpose2d: groups={groups} does not fit Cin={cin}, weight {weight.shape}")
    bias64 = _mac_operands(bias, mult, shift, cout)

    xc = x.astype(np.float64) - in_zp  # exact integer sums below 2^53, as in conv2d
    wt = weight.astype(np.float64).reshape(groups, cout // groups, kh, kw, cg)
    xg = xc.reshape(n, x.shape[1], x.shape[2], groups, cg)
    acc = np.broadcast_to(bias64.astype(np.float64), (n, ho, wo, cout)).copy()
    h, w = x.shape[1:3]
    for i in range(kh):
        rows = _transposed_rows(h, ho, stride_h, pad_top, i * dilation_h)
        for j in range(kw):
            cols = _transposed_rows(w, wo, stride_w, pad_left, j * dilation_w)
            if rows is None or cols is None:
                continue
            slab = xg[:, rows[0], cols[0]]  # (n, r, c, G, Cg) @ (G, Cg, Cout/G)
            part = np.einsum("nrcgi,goi->nrcgo", slab, wt[:, :, i, j, :])
            acc[:, rows[1], cols[1], :] += part.reshape(slab.shape[:3] + (cout,))
    return requantize(acc.astype(np.int64), mult, shift, out_zp, act_min, act_max)
