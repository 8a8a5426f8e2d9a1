"""Lift builders of softmax and log_softmax (over any dim: passes/layout.py moves it last).

Each builder is called as builder(lifter, fx node, output IR tensor, act) and emits IR nodes
through `lifter.emit` (frontend/lift.py Lifter)."""
from __future__ import annotations

from torch.fx import Node as FxNode

from mcutorch import ops
from mcutorch.ir import Tensor


def softmax(lf, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    dim = int(n.args[1]) % len(x.shape)
    lf.emit(ops.SOURCES[str(n.target)][0].name, [x], out, {"dim": dim}, n)


# registry op name -> builder; ACT: the builders that apply `act` (the output clamp)
BUILDERS = {"softmax": softmax, "log_softmax": softmax}
ACT = set()
