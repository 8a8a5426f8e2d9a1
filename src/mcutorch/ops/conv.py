"""MAC ops: int32 accumulation, per-channel requantization, fused clamp (runtime/kernels/conv/)."""
from __future__ import annotations

import math

from mcutorch.ops.defs import MAC_OPERANDS, OpDef, Source

PAD4 = ("pad_top", "pad_left", "pad_bottom", "pad_right")
CONV_ATTRS = ("stride_h", "stride_w", "dilation_h", "dilation_w", *PAD4)
OUT_ATTRS = ("in_zp", "out_zp", "act_min", "act_max")
MATMUL_ATTRS = ("transpose_b", "a_zp", "b_zp", "out_zp", "mult", "shift", "act_min", "act_max")
MATMUL_MAX_K = (2**31 - 1) // (255 * 255)  # 33,025: K * 255 * 255 fits int32


def _out(outputs) -> int:
    return math.prod(outputs[0])


OPS = (
    OpDef("conv2d", 0, MAC_OPERANDS, ("y",), (*CONV_ATTRS, "groups", *OUT_ATTRS),
          {"x": "NHWC", "weight": "OHWI", "y": "NHWC"}, family="conv",
          sources=(Source("aten.conv2d.default", "mac"), Source("aten.conv2d.padding", "mac")),
          fusable=True, macs=lambda i, o, a: _out(o) * math.prod(i[1][1:]), mac_axis=0,
          doc="y = clamp(rq(bias + sum((x - in_zp) * w)) + out_zp); padding contributes 0"),
    OpDef("depthwise_conv2d", 1, MAC_OPERANDS, ("y",),
          (*CONV_ATTRS, "depth_multiplier", *OUT_ATTRS),
          {"x": "NHWC", "weight": "HWC: [KH, KW, C*M]", "y": "NHWC"}, family="conv",
          fusable=True, macs=lambda i, o, a: _out(o) * i[1][0] * i[1][1], mac_axis=-1,
          doc="output channel c*M+m reads input channel c (made from conv2d by passes/layout)"),
    OpDef("fully_connected", 2, MAC_OPERANDS, ("y",), OUT_ATTRS,
          {"x": "NC", "weight": "OI", "y": "NC"}, ("default", "folded"), family="conv",
          sources=(Source("aten.linear.default", "mac"),), fusable=True,
          macs=lambda i, o, a: _out(o) * i[1][1], mac_axis=0, zp_folded=("folded",),
          c_sources={"folded": ("conv/mt_fully_connected_s8.c",)},
          doc="folded: bias holds bias - in_zp * sum(w), in_zp is 0"),
    OpDef("matmul", 32, ("a", "b"), ("y",), MATMUL_ATTRS,
          {"a": "[..., M, K]", "b": "[..., K, N]; [..., N, K] when transpose_b",
           "y": "[..., M, N]; a, b, y of one rank 2..6, batch dims numpy-broadcast"},
          family="conv",
          sources=tuple(Source(f"aten.{f}.default", "binary") for f in ("matmul", "bmm", "mm")),
          fusable=True, since=4, macs=lambda i, o, a: _out(o) * i[0][-1],
          doc="y = clamp(rq(sum_k (a - a_zp) * (b - b_zp)) + out_zp), two int8 activations; "
              "K * 255 * 255 and its rq fit int32 (both readers check it at load)"),
)
