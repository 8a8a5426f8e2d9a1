"""Data movement (runtime/kernels/movement/): no arithmetic, qparams shared.

Rank r < 4 tensors are addressed as 4-D with 4 - r leading unit dims (ref/movement.py).
"""
from __future__ import annotations

from mcutorch.ops.defs import VARIADIC, OpDef, Source

OPS = (
    OpDef("transpose", 11, ("x",), ("y",), ("perm0", "perm1", "perm2", "perm3"),
          family="movement", qparams="shared",
          sources=(Source("aten.permute.default", "shared"),
                   Source("aten.transpose.int", "shared"))),
    OpDef("concat", 12, (VARIADIC,), ("y",), ("axis",), family="movement", qparams="shared",
          sources=(Source("aten.cat.default", "shared"), Source("aten.concat.default", "shared"))),
    OpDef("pad", 13, ("x",), ("y",),
          ("before0", "before1", "before2", "before3", "after0", "after1", "after2", "after3",
           "value"), family="movement", qparams="shared",
          sources=(Source("aten.pad.default", "shared"),
                   Source("aten.constant_pad_nd.default", "shared"))),
    OpDef("copy", 14, ("x",), ("y",), (), family="movement", qparams="shared",
          doc="byte copy (a reshape that cannot alias, a tensor out of an NPU scratch area)"),
)
