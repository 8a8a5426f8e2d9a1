"""Softmax (runtime/kernels/softmax/): an exact integer definition of our own."""
from __future__ import annotations

from mcutorch.ops.defs import OpDef, Source

SOFTMAX = (1 / 256, -128)  # fixed output qparams

OPS = (
    OpDef("softmax", 10, ("x", "exp_table"), ("y",), (),
          {"x": "rows along the last axis", "exp_table": "int32[256]: round(2^16 exp(-s_in d))"},
          family="softmax",
          sources=(Source("aten.softmax.int", "fixed", SOFTMAX),
                   Source("aten._softmax.default", "fixed", SOFTMAX)),
          qparams="fixed", dtypes=(("int8", "int8"), ("int16", "int16")),
          c_sources={"default": ("softmax/mt_softmax_s8.c", "softmax/mt_softmax_s16.c")},
          tosa="softmax: TOSA 1.0 has no softmax, and no exact TOSA sequence reproduces our "
               "row-wise exp-table / integer-divide definition; it runs on the CPU",
          doc="output qparams fixed (1/256, -128); see docs/numerics.md"),
    OpDef("log_softmax", 23, ("x", "exp_table", "log_table"), ("y",), ("in_mult", "ln2", "out_zp"),
          {"x": "rows along the last axis", "exp_table": "int32[256]: the softmax's",
           "log_table": "int32[256]: round(2^16 ln(1 + (j + 1/2) / 256) / s_out)"},
          family="softmax",
          sources=(Source("aten.log_softmax.int", "free"),
                   Source("aten._log_softmax.default", "free")),
          since=3,
          tosa="log_softmax: TOSA 1.0 has no log or softmax that reproduces our exp-table / "
               "log-table definition exactly; it runs on the CPU",
          doc="y = clamp(round(-(d in_mult + (k - 16) ln2 + log_table[j]) / 2^16) + out_zp); "
              "see docs/numerics.md"),
)
