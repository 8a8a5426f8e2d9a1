"""Lift builders, one module per kernel family: registry op name -> builder (frontend/lift.py
calls the builder of an aten node's registry op, `ops.SOURCES`)."""
from __future__ import annotations

from mcutorch.frontend.builders import (conv, elementwise, matmul, movement, norm, pool, reduce,
                                        select, softmax)

_FAMILIES = (conv, elementwise, pool, movement, softmax, reduce, norm, matmul, select)
BUILDERS = {name: b for family in _FAMILIES for name, b in family.BUILDERS.items()}
ACT_BUILDERS = set().union(*(family.ACT for family in _FAMILIES))  # builders that apply `act`
# builder -> a check of the aten node run before calibration (UnsupportedOpError naming it)
PRECHECKS = {b: c for family in _FAMILIES for b, c in getattr(family, "PRECHECK", {}).items()}
assert len(BUILDERS) == sum(len(family.BUILDERS) for family in _FAMILIES), "an op built twice"

__all__ = ["ACT_BUILDERS", "BUILDERS", "PRECHECKS"]
