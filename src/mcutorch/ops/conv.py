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


OPS = (
    OpDef("conv2d", 0, MAC_OPERANDS, ("y",), (*CONV_ATTRS, "groups", *OUT_ATTRS),
          {"x": "NHWC", "weight": "OHWI", "y": "NHWC"}, family="conv",
          sources=(Source("aten.conv2d.default", "mac"), Source("aten.conv2d.padding", "mac"),
                   Source("aten.conv1d.default", "mac"), Source("aten.conv1d.padding", "mac")),
          fusable=True, macs=lambda i, o, a: _out(o) * math.prod(i[1][1:]), mac_axis=0,
          c_sources={"default": ("conv/mt_conv2d_s8.c", "conv/mt_conv2d_s16.c")}, dtypes=A16W8,
          doc="y = clamp(rq(bias + sum((x - in_zp) * w)) + out_zp); padding contributes 0"),
    OpDef("depthwise_conv2d", 1, MAC_OPERANDS, ("y",),
          (*CONV_ATTRS, "depth_multiplier", *OUT_ATTRS),
          {"x": "NHWC", "weight": "HWC: [KH, KW, C*M]", "y": "NHWC"}, family="conv",
          fusable=True, macs=lambda i, o, a: _out(o) * i[1][0] * i[1][1], mac_axis=-1,
          c_sources={"default": ("conv/mt_depthwise_conv2d_s8.c",
                                 "conv/mt_depthwise_conv2d_s16.c")}, dtypes=A16W8,
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
