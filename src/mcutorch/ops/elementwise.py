"""Element-wise ops (runtime/kernels/elementwise/): the output may be placed over an input."""
from __future__ import annotations

import math

import numpy as np

from mcutorch.ops.defs import OpDef, Source

ACT = ("act_min", "act_max")
SIGMOID = (1 / 256, -128)  # fixed output qparams (docs/numerics.md)
TANH = (1 / 128, 0)


def _gelu(v):
    return 0.5 * v * (1 + np.vectorize(math.erf)(v / math.sqrt(2)))


# One 256-entry table per smooth function: a new one is one Source here (docs/adding_an_op.md).
LUT_SOURCES = (
    Source("aten.sigmoid.default", "fixed", SIGMOID, fn=lambda v: 1 / (1 + np.exp(-v))),
    Source("aten.tanh.default", "fixed", TANH, fn=np.tanh),
    Source("aten.hardswish.default", "free", fn=lambda v: v * np.clip(v + 3, 0, 6) / 6),
    Source("aten.hardsigmoid.default", "free", fn=lambda v: np.clip(v + 3, 0, 6) / 6),
    Source("aten.silu.default", "free", fn=lambda v: v / (1 + np.exp(-v))),
    Source("aten.gelu.default", "free", fn=_gelu),
)
ACTIVATION_SOURCES = tuple(Source(f"aten.{name}", "activation") for name in (
    "relu.default", "relu_.default", "relu6.default", "hardtanh.default", "hardtanh_.default",
    "clamp.default"))

OPS = (
    OpDef("add", 3, ("a", "b"), ("y",),
          ("a_zp", "a_mult", "a_shift", "b_zp", "b_mult", "b_shift",
           "out_zp", "out_mult", "out_shift", *ACT), family="elementwise",
          sources=(Source("aten.add.Tensor", "binary"), Source("aten.add_.Tensor", "binary")),
          fusable=True, alias=("inplace",),
          doc="TOSA-style: RESCALE both to int32, ADD, RESCALE to int8"),
    OpDef("mul", 4, ("a", "b"), ("y",), ("a_zp", "b_zp", "out_zp", "mult", "shift", *ACT),
          family="elementwise",
          sources=(Source("aten.mul.Tensor", "binary"), Source("aten.mul_.Tensor", "binary")),
          fusable=True, alias=("inplace",)),
    OpDef("clamp", 7, ("x",), ("y",), ACT, family="elementwise", sources=ACTIVATION_SOURCES,
          qparams="shared", alias=("inplace",),
          doc="a standalone ReLU/ReLU6/clamp (lifted as a rescale when its qparams change)"),
    OpDef("lut", 8, ("x", "table"), ("y",), (), {"table": "int8[256] indexed by x + 128"},
          family="elementwise", sources=LUT_SOURCES, alias=("inplace",),
          doc="sigmoid, tanh, hardswish, ...: one 256-entry table made at compile time"),
    OpDef("rescale", 9, ("x",), ("y",), ("in_zp", "out_zp", "mult", "shift", *ACT),
          family="elementwise", fusable=True, alias=("inplace",),
          doc="int8 -> int8 with new qparams"),
    OpDef("maximum", 16, ("a", "b"), ("y",), ACT, family="elementwise",
          sources=(Source("aten.maximum.default", "shared"),), qparams="shared", fusable=True,
          alias=("inplace",), since=2, doc="y = clamp(max(a, b)); a, b and y share qparams"),
    OpDef("minimum", 17, ("a", "b"), ("y",), ACT, family="elementwise",
          sources=(Source("aten.minimum.default", "shared"),), qparams="shared", fusable=True,
          alias=("inplace",), since=2, doc="y = clamp(min(a, b)); a, b and y share qparams"),
)
