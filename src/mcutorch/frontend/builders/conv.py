"""Lift builders of the MAC ops: conv2d (any padding mode) and linear.

Each builder is called as builder(lifter, fx node, output IR tensor, act) and emits IR nodes
through `lifter.emit` (frontend/lift.py Lifter)."""
from __future__ import annotations

import math

from torch.fx import Node as FxNode

from mcutorch.frontend.builders._common import node_arg, pair
from mcutorch.ir import Tensor


def conv(lf, n: FxNode, out: Tensor, act) -> None:
    x, w = lf.operand(n.args[0], n), lf.weight(n.args[1], n)
    b = lf.bias(n.args[2] if len(n.args) > 2 else None, n, x, w)
    stride = pair(node_arg(n, 3, "stride", 1))
    padding = node_arg(n, 4, "padding", 0)
    dilation = pair(node_arg(n, 5, "dilation", 1))
    groups = int(node_arg(n, 6, "groups", 1))
    if isinstance(padding, str):
        padding = same_padding(x.shape[2:], w.shape[2:], stride, dilation, padding, n)
    else:
        ph, pw = pair(padding)
        padding = (ph, pw, ph, pw)
    attrs = {"stride": stride, "dilation": dilation, "padding": tuple(padding), "groups": groups,
             "act": act}
    lf.emit("conv2d", [x, w, b], out, attrs, n)


def same_padding(in_hw, k_hw, stride, dilation, mode, n) -> tuple[int, int, int, int]:
    if mode == "valid":
        return (0, 0, 0, 0)
    pads = []
    for size, k, s, d in zip(in_hw, k_hw, stride, dilation):
        total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
        pads.append((total // 2, total - total // 2))
    return (pads[0][0], pads[1][0], pads[0][1], pads[1][1])


def linear(lf, n: FxNode, out: Tensor, act) -> None:
    x, w = lf.operand(n.args[0], n), lf.weight(n.args[1], n)
    b = lf.bias(n.args[2] if len(n.args) > 2 else None, n, x, w)
    if len(x.shape) == 2:
        return lf.emit("fully_connected", [x, w, b], out, {"act": act}, n)
    # any rank: the leading dims are the rows of one fully_connected ([B, T, C] -> [B*T, C]),
    # in torch's dim order (the layout pass puts transposes around the reshapes of a 4-D NHWC x)
    rows = math.prod(x.shape[:-1])
    x2 = lf.new_tensor(x.name + "_rows", (rows, x.shape[-1]), x.scale, x.zero_point)
    y2 = lf.new_tensor(out.name + "_rows", (rows, w.shape[0]), out.scale, out.zero_point)
    lf.emit("reshape", [x], x2, {}, n)
    lf.emit("fully_connected", [x2, w, b], y2, {"act": act}, n)
    lf.emit("reshape", [y2], out, {}, n)


# registry op name -> builder; ACT: the builders that apply `act` (the output clamp)
BUILDERS = {"conv2d": conv, "fully_connected": linear}
ACT = {conv, linear}
