"""Data movement (runtime/kernels/movement/): no arithmetic, qparams shared.

Rank r < 4 tensors are addressed as 4-D with 4 - r leading unit dims (ref/movement.py);
strided_slice addresses rank r <= 6 as 6-D the same way.
"""
from __future__ import annotations

from mcutorch.ops.defs import VARIADIC, OpDef, Source

SAME_8_OR_16 = (("int8", "int8"), ("int16", "int16"))  # element-size-generic kernels (1.5)

OPS = (
    OpDef("transpose", 11, ("x",), ("y",), ("perm0", "perm1", "perm2", "perm3"),
          family="movement", qparams="shared",
          sources=(Source("aten.permute.default", "shared"),
                   Source("aten.transpose.int", "shared"), Source("aten.t.default", "shared"),
                   Source("aten.pixel_shuffle.default", "shared"),
                   Source("aten.pixel_unshuffle.default", "shared"),
                   Source("aten.channel_shuffle.default", "shared")), dtypes=SAME_8_OR_16),
    OpDef("concat", 12, (VARIADIC,), ("y",), ("axis",), family="movement", qparams="shared",
          sources=(Source("aten.cat.default", "shared"), Source("aten.concat.default", "shared"),
                   Source("aten.stack.default", "shared"), Source("aten.roll.default", "shared")),
          dtypes=SAME_8_OR_16),
    OpDef("pad", 13, ("x",), ("y",),
          ("before0", "before1", "before2", "before3", "after0", "after1", "after2", "after3",
           "value"), family="movement", qparams="shared",
          sources=(Source("aten.pad.default", "shared"),
                   Source("aten.constant_pad_nd.default", "shared")), dtypes=SAME_8_OR_16),
    OpDef("copy", 14, ("x",), ("y",), (), family="movement", qparams="shared", dtypes=SAME_8_OR_16,
          doc="byte copy (a reshape that cannot alias, a tensor out of an NPU scratch area)"),
    OpDef("strided_slice", 18, ("x",), ("y",),
          tuple(f"{a}{k}" for a in ("start", "step", "size") for k in range(6)),
          family="movement", qparams="shared", since=3,
          sources=tuple(Source(f"aten.{v}", "shared") for v in (
              "slice.Tensor", "select.int", "narrow.default", "flip.default", "expand.default",
              "repeat.default", "tile.default")), dtypes=SAME_8_OR_16,
          doc="y[i] = x[start + i * step] per 6-D dim (slice, select, split, flip, expand, "
              "repeat); y has x's rank and the sizes"),
    OpDef("ring_write", 34, ("x",), ("y",), ("slots",), family="movement", qparams="shared",
          since=6, dtypes=SAME_8_OR_16,
          tosa="ring buffer: the state stays on the CPU",
          doc="a streaming history as a ring (format 1.6): writes frame x into ring window y's "
              "block (p = (p + 1) % slots; slots p + slots - 1 and p - 1), so y reads the last "
              "`slots` frames at slot p, contiguous"),
    OpDef("gather", 19, ("x", "indices"), ("y",), ("axis",), family="movement",
          qparams="shared", since=3,
          sources=(Source("aten.index_select.default", "shared"),
                   Source("aten.index.Tensor", "shared")),
          doc="y[..., j, ...] = x[..., indices[j], ...] along 6-D dim `axis`; constant int32 "
              "indices"),
    OpDef("embedding", 35, ("ids", "table"), ("y",), (), family="movement", qparams="shared",
          since=6, sources=(Source("aten.embedding.default", "shared"),),
          dtypes=(("int32", "int8"),),
          tosa="the token ids are a run-time input: TOSA GATHER leaves an index outside [0, V) "
               "unpredictable (a REQUIRE), the definition refuses it with a status before "
               "reading, so embedding stays on the CPU",
          doc="y[..., :] = table[ids[...], :]: int32 token ids (a program input, no qparams), "
              "an int8 table [V, D] whose qparams y shares; an id outside [0, V) is refused "
              "before any row is read"),
)
