"""MAC ops: int32 accumulation, per-channel requantization, fused clamp (runtime/kernels/conv/)."""
from __future__ import annotations

import math

from mcutorch.ops.defs import MAC_OPERANDS, OpDef, Source

PAD4 = ("pad_top", "pad_left", "pad_bottom", "pad_right")
CONV_ATTRS = ("stride_h", "stride_w", "dilation_h", "dilation_w", *PAD4)
OUT_ATTRS = ("in_zp", "out_zp", "act_min", "act_max")


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
)
