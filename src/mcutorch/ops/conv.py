"""MAC ops: int32 accumulation, per-channel requantization, fused clamp (runtime/kernels/conv/)."""
from __future__ import annotations

import math

from mcutorch.ops.defs import MAC_OPERANDS, OpDef, Source

PAD4 = ("pad_top", "pad_left", "pad_bottom", "pad_right")
CONV_ATTRS = ("stride_h", "stride_w", "dilation_h", "dilation_w", *PAD4)
OUT_ATTRS = ("in_zp", "out_zp", "act_min", "act_max")
MATMUL_ATTRS = ("transpose_b", "a_zp", "b_zp", "out_zp", "mult", "shift", "act_min", "act_max")
# conv2d_add: conv2d's attributes (its output stage renamed conv_*), then add's, in their orders
CONV_ADD_ATTRS = (*CONV_ATTRS, "groups", "in_zp", "conv_zp", "conv_min", "conv_max", "a_zp",
                  "a_mult", "a_shift", "b_zp", "b_mult", "b_shift", "out_zp", "out_mult",
                  "out_shift", "act_min", "act_max")
# int8, or int16 activations with int8 weights and an int64 bias (a16w8, format 1.5)
A16W8 = (("int8", "int8"), ("int16", "int16"))
MATMUL_MAX_K = (2**31 - 1) // (255 * 255)  # 33,025: K * 255 * 255 fits int32


def _out(outputs) -> int:
    return math.prod(outputs[0])


# Alias kind "overlap" (docs/numerics.md, "Overlap"): the least bytes y must start below x. The
# C loader computes the same (mt_validate.c mt_overlap_delta). A 1x1 conv's kernels write each
# output pixel after reading it and at most OVERLAP_PIXELS - 1 pixels after it (MVE: blocks of
# 4 or 3, and a last block re-reading up to 3 pixels; DSP and C: pairs; the general path: 1),
# and read every pixel in one pass only while Cout fits one chunk of accumulators.
OVERLAP_PIXELS = 4
OVERLAP_COUT_MAX = 64  # MT_MAC_CHUNK and C1X1_CHUNK


def _lead(lo: int, hi: int, a: int, b: int, s: int, p: int, size: int) -> int:
    """max over o in [lo, hi] of o * a - min(size, max(0, o * s - p)) * b: piecewise linear in
    o, so its largest value is at an end or a breakpoint."""
    o1, o2 = p // s, (p + size - 1) // s
    return max(o * a - min(size, max(0, o * s - p)) * b
               for o in (min(hi, max(lo, o)) for o in (lo, hi, o1, o1 + 1, o2, o2 + 1)))


def _overlap_shapes(x, y, a) -> bool:
    """int8 NHWC x and y, strides and dilations >= 1, no negative padding."""
    return (x.dtype == y.dtype == "int8" and len(x.shape) == len(y.shape) == 4
            and min(a[k] for k in CONV_ATTRS[:4]) >= 1 and min(a[k] for k in PAD4) >= 0)


def _depthwise_overlap(x, y, w, a) -> int | None:
    """Output pixels go in raster order, each written after its window is read; a pixel's
    window starts at input row >= oy * stride_h - pad_top, column >= ox * stride_w - pad_left,
    and no later pixel's starts before the next output row's first. y's bytes up to pixel p
    must end before the first input byte a pixel >= p reads: the largest excess over p."""
    if not _overlap_shapes(x, y, a) or x.shape[0] != y.shape[0]:
        return None
    (n, h, wd, c), (_, ho, wo, co) = x.shape, y.shape
    if min(n, ho, wo) < 1:
        return 0
    img = max(0, (n - 1) * (ho * wo * co - h * wd * c))  # linear in the image index
    rows = _lead(0, ho - 1, wo * co, wd * c, a["stride_h"], a["pad_top"], h)
    cols = _lead(0, wo - 1, co, c, a["stride_w"], a["pad_left"], wd) + co
    next_row = _lead(1, ho, wo * co, wd * c, a["stride_h"], a["pad_top"], h)
    return max(0, img + rows + cols, img + next_row)


def _conv1x1_overlap(x, y, w, a) -> int | None:
    """groups 1, a 1x1 kernel, stride 1, no padding, Cout <= OVERLAP_COUT_MAX: pixel q of y is
    written after pixels q .. q + OVERLAP_PIXELS - 1 of x are read, before any later one."""
    if (not _overlap_shapes(x, y, a) or tuple(w.shape[1:3]) != (1, 1) or a["groups"] != 1
            or a["stride_h"] != 1 or a["stride_w"] != 1 or max(a[k] for k in PAD4) != 0
            or tuple(x.shape[:3]) != tuple(y.shape[:3]) or y.shape[3] > OVERLAP_COUT_MAX):
        return None
    npx, c, co, g = math.prod(x.shape[:3]), x.shape[3], y.shape[3], OVERLAP_PIXELS
    return max(0, *(min(q + g, npx) * co - q * c for q in {0, max(0, npx - g), max(0, npx - 1)}))


OPS = (
    OpDef("conv2d", 0, MAC_OPERANDS, ("y",), (*CONV_ATTRS, "groups", *OUT_ATTRS),
          {"x": "NHWC", "weight": "OHWI", "y": "NHWC"}, family="conv",
          sources=(Source("aten.conv2d.default", "mac"), Source("aten.conv2d.padding", "mac"),
                   Source("aten.conv1d.default", "mac"), Source("aten.conv1d.padding", "mac")),
          fusable=True, macs=lambda i, o, a: _out(o) * math.prod(i[1][1:]), mac_axis=0,
          c_sources={"default": ("conv/mt_conv2d_s8.c", "conv/mt_conv2d_s16.c")}, dtypes=A16W8,
          alias=("overlap",), overlap=_conv1x1_overlap,
          doc="y = clamp(rq(bias + sum((x - in_zp) * w)) + out_zp); padding contributes 0"),
    OpDef("depthwise_conv2d", 1, MAC_OPERANDS, ("y",),
          (*CONV_ATTRS, "depth_multiplier", *OUT_ATTRS),
          {"x": "NHWC", "weight": "HWC: [KH, KW, C*M]", "y": "NHWC"}, family="conv",
          fusable=True, macs=lambda i, o, a: _out(o) * i[1][0] * i[1][1], mac_axis=-1,
          c_sources={"default": ("conv/mt_depthwise_conv2d_s8.c",
                                 "conv/mt_depthwise_conv2d_s16.c")}, dtypes=A16W8,
          alias=("overlap",), overlap=_depthwise_overlap,
          doc="output channel c*M+m reads input channel c (made from conv2d by passes/layout)"),
    OpDef("fully_connected", 2, MAC_OPERANDS, ("y",), OUT_ATTRS,
          {"x": "NC", "weight": "OI", "y": "NC"}, ("default", "folded"), family="conv",
          sources=(Source("aten.linear.default", "mac"),), fusable=True,
          macs=lambda i, o, a: _out(o) * i[1][1], mac_axis=0, zp_folded=("folded",),
          c_sources={v: ("conv/mt_fully_connected_s8.c", "conv/mt_fully_connected_s16.c")
                     for v in ("default", "folded")}, dtypes=A16W8,
          doc="folded: bias holds bias - in_zp * sum(w), in_zp is 0"),
    OpDef("conv_transpose2d", 30, MAC_OPERANDS, ("y",), (*CONV_ATTRS, "groups", *OUT_ATTRS),
          {"x": "NHWC", "weight": "OHWI: [Cout, KH, KW, Cin/groups]", "y": "NHWC"},
          family="conv", sources=(Source("aten.conv_transpose2d.input", "mac"),
                                  Source("aten.conv_transpose1d.default", "mac")),
          fusable=True, macs=lambda i, o, a: _transposed_macs(i, o, a), mac_axis=0, since=4,
          tosa="", doc="x[iy, ix] adds (x - in_zp) * w[o, ky, kx] to y[iy*s - pad0 + k*d] "
          "(pad_bottom/right may be negative: output_padding); output-stationary kernel"),
    OpDef("matmul", 32, ("a", "b"), ("y",), MATMUL_ATTRS,
          {"a": "[..., M, K]", "b": "[..., K, N]; [..., N, K] when transpose_b",
           "y": "[..., M, N]; a, b, y of one rank 2..6, batch dims numpy-broadcast"},
          family="conv",
          sources=tuple(Source(f"aten.{f}.default", "binary") for f in ("matmul", "bmm", "mm")),
          fusable=True, since=4, macs=lambda i, o, a: _out(o) * i[0][-1], dtypes=A16W8,
          c_sources={"default": ("conv/mt_matmul_s8.c", "conv/mt_matmul_s16.c")},
          doc="y = clamp(rq(sum_k (a - a_zp) * (b - b_zp)) + out_zp), two int8 activations; "
              "K * 255 * 255 and its rq fit int32 (both readers check it at load)"),
    OpDef("conv2d_add", 33, (*MAC_OPERANDS, "skip"), ("y",), CONV_ADD_ATTRS,
          {"x": "NHWC", "weight": "OHWI", "skip": "NHWC, y's shape", "y": "NHWC"},
          family="conv", fusable=True, alias=("residual",), since=5,
          macs=lambda i, o, a: _out(o) * math.prod(i[1][1:]), mac_axis=0,
          c_sources={"default": ("conv/mt_conv2d_add_s8.c", "conv/mt_conv2d_s8.c",
                                 "conv/mt_conv2d_s16.c", "elementwise/mt_add_s8.c",
                                 "elementwise/mt_binary_s16.c")},
          doc="y = add(conv2d(x) with out_zp/act = conv_zp/conv_min/conv_max, skip): the "
              "residual add fused into the conv's output stage, y may be skip's bytes"),
)


def _taps_inside(size: int, out: int, kernel: int, stride: int, dilation: int, pad0: int) -> int:
    """Input positions i and taps k of one axis with 0 <= i * stride - pad0 + k * dilation < out."""
    total = 0
    for k in range(kernel):
        first = k * dilation - pad0
        lo, hi = max(0, -(first // stride)), min(size, (out - 1 - first) // stride + 1)
        total += max(0, hi - lo)
    return total


def _transposed_macs(i, o, a) -> int:
    (n, h, w, _), (cout, kh, kw, cg) = i[0], i[1]
    rows = _taps_inside(h, o[0][1], kh, a["stride_h"], a["dilation_h"], a["pad_top"])
    cols = _taps_inside(w, o[0][2], kw, a["stride_w"], a["dilation_w"], a["pad_left"])
    return n * rows * cols * cg * cout
