"""Ops of the graph itself: views (IR only) and precompiled subgraphs (run by the interpreter)."""
from __future__ import annotations

from mcutorch.ops.defs import VARIADIC, OpDef, Source

VIEWS = ("flatten.using_ints", "view.default", "reshape.default", "squeeze.dim", "squeeze.dims",
         "squeeze.default", "unsqueeze.default", "_unsafe_view.default", "unflatten.int",
         "clone.default", "contiguous.default", "alias.default")

OPS = (
    OpDef("reshape", None, ("x",), ("y",), (), qparams="shared",
          sources=tuple(Source(f"aten.{v}", "shared") for v in VIEWS),
          doc="same bytes, new shape: a free alias in the program (no op record)"),
    OpDef("delegate", 15, (VARIADIC,), (VARIADIC,), ("index",), alias=("delegate",), dtypes=None,
          tosa="delegate: already a compiled subgraph",
          doc="runs delegate record `index`; its CPU version when no driver is linked"),
)
