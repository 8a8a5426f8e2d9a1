"""THE op table: every op a program can hold, in one place.

Each op names its operands (activations first, then constants), its int32 attributes in the order
they are stored in the program, and its kernel variants. The IR, the program writer/reader, the
Python reference runtime and the generated C header (`runtime/include/mt_program.h`) all read this
table;
nothing else defines an opcode.

Conventions shared by every op (the numerics contract, docs/numerics.md):
  - activations are int8 NHWC (2-D [N, C] for fully connected), per-tensor (scale, zero point);
  - weights are int8 symmetric per output channel, bias int32 with scale s_in * s_w[c];
  - `mult`/`shift` operands are int32 per-channel requantization tables (see quant.py);
  - `act_min`/`act_max` are the int8 output clamp (fused ReLU/ReLU6/clamp, or -128..127).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

VARIADIC = "*"
PAD4 = ("pad_top", "pad_left", "pad_bottom", "pad_right")
CONV_ATTRS = ("stride_h", "stride_w", "dilation_h", "dilation_w", *PAD4)
OUT_ATTRS = ("in_zp", "out_zp", "act_min", "act_max")


@dataclass(frozen=True)
class OpDef:
    name: str  # Python name; the C opcode is MT_OP_<NAME.upper()>
    opcode: int
    inputs: tuple[str, ...]  # operand names; VARIADIC = any number of activations
    outputs: tuple[str, ...]
    attrs: tuple[str, ...]  # int32 attributes, stored in this order
    layouts: dict  # operand name -> memory layout of that operand
    variants: tuple[str, ...] = ("ref",)  # kernel variants; index stored per op record
    doc: str = ""

    @property
    def c_name(self) -> str:
        return "MT_OP_" + self.name.upper()

    def attr_index(self, attr: str) -> int:
        return self.attrs.index(attr)


OPS: tuple[OpDef, ...] = (
    # --- MAC ops: int32 accumulate, per-channel requantize, clamp ---
    OpDef("conv2d", 0, ("x", "weight", "bias", "mult", "shift"), ("y",),
          (*CONV_ATTRS, "groups", *OUT_ATTRS),
          {"x": "NHWC", "weight": "OHWI", "y": "NHWC"},
          doc="y = clamp(rq(bias + sum((x - in_zp) * w)) + out_zp); padding contributes 0"),
    OpDef("depthwise_conv2d", 1, ("x", "weight", "bias", "mult", "shift"), ("y",),
          (*CONV_ATTRS, "depth_multiplier", *OUT_ATTRS),
          {"x": "NHWC", "weight": "HWC: [KH, KW, C*M]", "y": "NHWC"},
          doc="output channel c*M+m reads input channel c"),
    OpDef("fully_connected", 2, ("x", "weight", "bias", "mult", "shift"), ("y",), OUT_ATTRS,
          {"x": "NC", "weight": "OI", "y": "NC"}, ("ref", "folded")),
    # --- element-wise binary ops (same shapes) ---
    OpDef("add", 3, ("a", "b"), ("y",),
          ("a_zp", "a_mult", "a_shift", "b_zp", "b_mult", "b_shift",
           "out_zp", "out_mult", "out_shift", "act_min", "act_max"), {},
          doc="TOSA-style: RESCALE both to int32, ADD, RESCALE to int8"),
    OpDef("mul", 4, ("a", "b"), ("y",),
          ("a_zp", "b_zp", "out_zp", "mult", "shift", "act_min", "act_max"), {}),
    # --- pooling (output shares the input's scale) ---
    OpDef("max_pool2d", 5, ("x",), ("y",),
          ("kernel_h", "kernel_w", "stride_h", "stride_w", *PAD4, "act_min", "act_max"),
          {"x": "NHWC", "y": "NHWC"}, doc="padding never wins"),
    OpDef("avg_pool2d", 6, ("x",), ("y",),
          ("kernel_h", "kernel_w", "stride_h", "stride_w", *PAD4, "count_include_pad",
           "divisor", *OUT_ATTRS),
          {"x": "NHWC", "y": "NHWC"},
          doc="sum(x - in_zp) * reciprocal(count) (TOSA reciprocal_scale); divisor>0 overrides"),
    # --- element-wise unary ops ---
    OpDef("clamp", 7, ("x",), ("y",), ("act_min", "act_max"), {}),
    OpDef("lut", 8, ("x", "table"), ("y",), (), {"table": "int8[256] indexed by x + 128"},
          doc="sigmoid, tanh, hardswish, ...: one 256-entry table made at compile time"),
    OpDef("rescale", 9, ("x",), ("y",), ("in_zp", "out_zp", "mult", "shift", "act_min", "act_max"),
          {}, doc="int8 -> int8 with new qparams"),
    OpDef("softmax", 10, ("x", "exp_table"), ("y",), (),
          {"x": "rows along the last axis", "exp_table": "int32[256]: round(2^16 exp(-s_in d))"},
          doc="output qparams fixed (1/256, -128); see docs/numerics.md"),
    # --- data movement (no arithmetic; qparams shared) ---
    # rank r < 4 tensors are addressed as 4-D with 4 - r leading unit dims (ref/movement.py)
    OpDef("transpose", 11, ("x",), ("y",), ("perm0", "perm1", "perm2", "perm3"), {}),
    OpDef("concat", 12, (VARIADIC,), ("y",), ("axis",), {}),
    OpDef("pad", 13, ("x",), ("y",),
          ("before0", "before1", "before2", "before3", "after0", "after1", "after2", "after3",
           "value"), {}),
    OpDef("copy", 14, ("x",), ("y",), (), {}, doc="byte copy (a reshape that cannot alias)"),
    # --- delegates: a precompiled subgraph (Ethos-U command stream) ---
    OpDef("delegate", 15, (VARIADIC,), (VARIADIC,), ("index",), {},
          doc="runs delegate record `index`; its CPU version when no driver is linked"),
)

BY_NAME = {op.name: op for op in OPS}
BY_OPCODE = {op.opcode: op for op in OPS}
assert len(BY_NAME) == len(OPS) == len(BY_OPCODE), "op names and opcodes must be unique"
assert sorted(BY_OPCODE) == list(range(len(OPS))), "opcodes are dense from 0"
MAX_ATTRS = max(len(op.attrs) for op in OPS)


def get(name: str) -> OpDef:
    """The OpDef for `name`; KeyError names the known ops."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r}; known: {', '.join(BY_NAME)}") from None


def macs(op: str, inputs: list[tuple], outputs: list[tuple], attrs: dict) -> int:
    """Multiply-accumulates of one op from operand shapes (for inspect and bench)."""
    out = math.prod(outputs[0]) if outputs else 0
    if op == "conv2d":
        return out * math.prod(inputs[1][1:])
    if op == "depthwise_conv2d":
        return out * inputs[1][0] * inputs[1][1]
    if op == "fully_connected":
        return out * inputs[1][1]
    return 0
