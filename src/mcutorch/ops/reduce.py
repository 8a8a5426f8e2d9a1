"""Reductions (runtime/kernels/reduce/): sum, mean, max and min over any set of axes.

`axes` is a bit mask over the input's dims (bit i: dim i is reduced); the output keeps the
input's rank with every reduced dim 1 (keepdim=False is a free reshape after it). A mean is a
`reduce_sum` whose multiplier holds 1 / count (docs/numerics.md, "Reductions")."""
from __future__ import annotations

from mcutorch.ops.defs import OpDef, Source

SAME16 = (("int8", "int8"), ("int16", "int16"))  # reduce_sum: int16 x and y (a16w8, format 1.7)
REDUCE_OUT = ("axes", "in_zp", "out_zp", "mult", "shift", "act_min", "act_max")

OPS = (
    OpDef("reduce_sum", 20, ("x",), ("y",), REDUCE_OUT,
          {"x": "any rank 1..6 (NHWC for 4-D)", "y": "x's rank, reduced dims 1"},
          family="reduce",
          sources=(Source("aten.sum.dim_IntList", "free"), Source("aten.sum.default", "free"),
                   Source("aten.mean.dim", "shared"), Source("aten.mean.default", "shared")),
          fusable=True, since=3, dtypes=SAME16,
          c_sources={"default": ("reduce/mt_reduce_sum_s8.c", "reduce/mt_reduce_sum_s16.c")},
          doc="y = clamp(rq(sum over axes of (x - in_zp)) + out_zp); a mean folds 1/count "
              "into mult; int16 x and y (format 1.7): zero points 0, count <= 2^16 - 1"),
    OpDef("reduce_max", 21, ("x",), ("y",), ("axes", "act_min", "act_max"),
          {"x": "any rank 1..6 (NHWC for 4-D)", "y": "x's rank, reduced dims 1"},
          family="reduce",
          sources=(Source("aten.amax.default", "shared"), Source("aten.max.default", "shared")),
          qparams="shared", fusable=True, since=3, doc="y = clamp(max over axes of x)"),
    OpDef("reduce_min", 22, ("x",), ("y",), ("axes", "act_min", "act_max"),
          {"x": "any rank 1..6 (NHWC for 4-D)", "y": "x's rank, reduced dims 1"},
          family="reduce",
          sources=(Source("aten.amin.default", "shared"), Source("aten.min.default", "shared")),
          qparams="shared", fusable=True, since=3, doc="y = clamp(min over axes of x)"),
    OpDef("reduce_var", 24, ("x",), ("y",),
          ("axes", "root", "pre", "mult", "shift", "out_zp", "act_min", "act_max"),
          {"x": "any rank 1..6 (NHWC for 4-D)", "y": "x's rank, reduced dims 1"},
          family="reduce",
          sources=tuple(Source(f"aten.{f}.{o}", "free") for f in ("var", "std")
                        for o in ("correction", "dim", "default")),
          fusable=True, since=3,
          tosa="reduce_var: TOSA 1.0 INT has no 64-bit sum of squares and no square root that "
               "reproduce our definition exactly; it runs on the CPU",
          doc="D = n sum(x^2) - sum(x)^2 (int64); var: rq(D >> pre), std: rq(isqrt(D 4^pre))"),
    OpDef("norm", 25, ("x", "gamma_sign", "beta", "mult", "shift"), ("y",),
          ("axes", "eps", "inner", "out_zp", "act_min", "act_max"),
          {"x": "any rank 1..6 (NHWC for 4-D)", "y": "x's shape",
           "gamma_sign": "int8[A]: sign of the affine weight", "beta": "int32[A]",
           "mult": "int32[A]", "shift": "int32[A]"},
          family="reduce",
          sources=(Source("aten.layer_norm.default", "free"),
                   Source("aten.group_norm.default", "free"),
                   Source("aten.instance_norm.default", "free")),
          fusable=True, since=3, dtypes=SAME16,
          c_sources={"default": ("reduce/mt_norm_s8.c", "reduce/mt_norm_s16.c")},
          tosa="norm: TOSA 1.0 INT has no 64-bit sum of squares and no reciprocal square root "
               "that reproduce our definition exactly; it runs on the CPU",
          doc="z = (n x - sum x) isqrt(2^62 / (D + eps)) >> 19 (Q12); y = rq(z sign_c + beta_c) "
              "per affine channel c = (i / inner) % A; see docs/numerics.md"),
)
