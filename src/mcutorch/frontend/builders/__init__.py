"""Lift builders, one module per kernel family: registry op name -> builder (frontend/lift.py
calls the builder of an aten node's registry op, `ops.SOURCES`)."""
from __future__ import annotations

from mcutorch.frontend.builders import (conv, elementwise, movement, norm, pool, reduce, select,
                                        softmax)

_FAMILIES = (conv, elementwise, pool, movement, softmax, reduce, norm, select)
BUILDERS = {name: b for family in _FAMILIES for name, b in family.BUILDERS.items()}
ACT_BUILDERS = set().union(*(family.ACT for family in _FAMILIES))  # builders that apply `act`
assert len(BUILDERS) == sum(len(family.BUILDERS) for family in _FAMILIES), "an op built twice"

__all__ = ["ACT_BUILDERS", "BUILDERS"]
