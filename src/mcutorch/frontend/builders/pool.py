"""Lift builders of pooling and means: max/avg pooling, adaptive and global average pooling,
the mean of every element.

Each builder is called as builder(lifter, fx node, output IR tensor, act) and emits IR nodes
through `lifter.emit` (frontend/lift.py Lifter)."""
from __future__ import annotations

import math

from torch.fx import Node as FxNode

from mcutorch.errors import UnsupportedOpError
from mcutorch.frontend.builders._common import A, node_arg, pair
from mcutorch.frontend.capture import source_of
from mcutorch.ir import Tensor


def pool(lf, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    is_max = n.target == A.max_pool2d.default
    kernel = pair(n.args[1])
    stride = pair(node_arg(n, 2, "stride", None) or kernel)
    ph, pw = pair(node_arg(n, 3, "padding", 0))
    if is_max:
        if pair(node_arg(n, 4, "dilation", 1)) != (1, 1):
            raise UnsupportedOpError(f"{source_of(n)}: dilated max pooling")
        ceil = bool(node_arg(n, 5, "ceil_mode", False))
        include_pad, divisor = False, 0
    else:
        ceil = bool(node_arg(n, 4, "ceil_mode", False))
        include_pad = bool(node_arg(n, 5, "count_include_pad", True))
        divisor = int(node_arg(n, 6, "divisor_override", None) or 0)
    padding = [ph, pw, ph, pw]
    for i, (size, k, s) in enumerate(zip(x.shape[2:], kernel, stride)):
        want = out.shape[2 + i]
        extra = (want - 1) * s + k - (size + 2 * padding[i])
        if extra > 0 and not ceil:
            raise UnsupportedOpError(f"{source_of(n)}: inconsistent pooling shape")
        if extra > 0 and not is_max and (include_pad or divisor):
            raise UnsupportedOpError(f"{source_of(n)}: ceil_mode average pooling that counts "
                                     "padding is not supported")
        padding[2 + i] += max(extra, 0)
    attrs = {"kernel": kernel, "stride": stride, "padding": tuple(padding), "act": act,
             "count_include_pad": int(include_pad), "divisor": divisor}
    lf.emit("max_pool2d" if is_max else "avg_pool2d", [x], out, attrs, n)


def mean_all(lf, n: FxNode, x: Tensor, out: Tensor, act) -> None:
    """The mean of every element: one avg_pool2d window over x reshaped to [1, 1, size/W, W]."""
    window = (math.prod(x.shape) // x.shape[-1], x.shape[-1]) if x.shape else (1, 1)
    flat = lf.new_tensor(out.name + "_flat", (1, 1, *window), x.scale, x.zero_point,
                         layout="NCHW")
    pooled = lf.new_tensor(out.name + "pool", (1, 1, 1, 1), out.scale, out.zero_point,
                           layout="NCHW")
    lf.emit("reshape", [x], flat, {}, n)
    lf.emit("avg_pool2d", [flat], pooled, {"kernel": window, "stride": window, "act": act,
                                           "padding": (0, 0, 0, 0), "count_include_pad": 0,
                                           "divisor": 0}, n)
    lf.emit("reshape", [pooled], out, {}, n)


def global_pool(lf, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    rank, mean = len(x.shape), n.target in (A.mean.dim, A.mean.default)
    dims = sorted({d % max(rank, 1) for d in node_arg(n, 1, "dim", None) or range(rank)} if mean
                  else ())
    if mean and dims == list(range(rank)):
        return mean_all(lf, n, x, out, act)
    if rank != 4:
        raise UnsupportedOpError(f"{source_of(n)}: pooling needs a 4-D input")
    h, w = x.shape[2:]
    if n.target == A.mean.dim:
        oh = ow = 1
    else:
        oh, ow = pair(n.args[1])
    if h % oh or w % ow:
        raise UnsupportedOpError(f"{source_of(n)}: adaptive pooling {h}x{w} -> {oh}x{ow} "
                                 "with uneven windows")
    pooled_shape = (x.shape[0], x.shape[1], oh, ow)
    pooled = out if tuple(out.shape) == pooled_shape else lf.new_tensor(
        out.name + "pool", pooled_shape, out.scale, out.zero_point, layout="NCHW")
    k = (h // oh, w // ow)
    attrs = {"kernel": k, "stride": k, "padding": (0, 0, 0, 0), "act": act,
             "count_include_pad": 0, "divisor": 0}
    lf.emit("avg_pool2d", [x], pooled, attrs, n)
    if pooled is not out:  # mean without keepdim
        lf.emit("reshape", [pooled], out, {}, n)


def avg_pool(lf, n: FxNode, out: Tensor, act) -> None:
    (pool if n.target == A.avg_pool2d.default else global_pool)(lf, n, out, act)


# registry op name -> builder; ACT: the builders that apply `act` (the output clamp)
BUILDERS = {"max_pool2d": pool, "avg_pool2d": avg_pool}  # means: builders/reduce.py
ACT = {pool, avg_pool}
