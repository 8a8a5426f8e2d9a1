"""Lift builders of data movement: reshape, permute/transpose, cat, constant padding.

Each builder is called as builder(lifter, fx node, output IR tensor, act) and emits IR nodes
through `lifter.emit` (frontend/lift.py Lifter)."""
from __future__ import annotations

import numpy as np
from torch.fx import Node as FxNode

from mcutorch.errors import UnsupportedOpError
from mcutorch.frontend.builders._common import A, node_arg
from mcutorch.frontend.capture import source_of
from mcutorch.ir import Tensor
from mcutorch.quant import quantize as quantize_float


def reshape(lf, n: FxNode, out: Tensor, act) -> None:
    lf.emit("reshape", [lf.operand(n.args[0], n)], out, {}, n)


def permute(lf, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    rank = len(x.shape)
    if n.target == A.transpose.int:
        perm = list(range(rank))
        i, j = int(n.args[1]) % rank, int(n.args[2]) % rank
        perm[i], perm[j] = perm[j], perm[i]
    else:
        perm = [int(p) % rank for p in n.args[1]]
    lf.emit("transpose", [x], out, {"perm": tuple(perm)}, n)


def cat(lf, n: FxNode, out: Tensor, act) -> None:
    xs = [lf.operand(v, n) for v in n.args[0]]
    axis = int(node_arg(n, 1, "dim", 0)) % len(out.shape)
    lf.emit("concat", xs, out, {"axis": axis}, n)


def pad(lf, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    mode = node_arg(n, 2, "mode", "constant") if n.target == A.pad.default else "constant"
    value = node_arg(n, 3 if n.target == A.pad.default else 2, "value", 0.0) or 0.0
    if mode != "constant":
        raise UnsupportedOpError(f"{source_of(n)}: {mode} padding (only constant)")
    flat = list(n.args[1])
    rank = len(x.shape)
    before, after = [0] * rank, [0] * rank
    for i in range(len(flat) // 2):  # torch lists the last dim first
        before[rank - 1 - i], after[rank - 1 - i] = int(flat[2 * i]), int(flat[2 * i + 1])
    if min(before + after) < 0:
        raise UnsupportedOpError(f"{source_of(n)}: negative padding (cropping)")
    qvalue = int(quantize_float(np.float32(value), x.scale, x.zero_point))
    lf.emit("pad", [x], out, {"before": tuple(before), "after": tuple(after), "value": qvalue}, n)


# registry op name -> builder; ACT: the builders that apply `act` (the output clamp)
BUILDERS = {"transpose": permute, "concat": cat, "pad": pad, "reshape": reshape}
ACT = set()
