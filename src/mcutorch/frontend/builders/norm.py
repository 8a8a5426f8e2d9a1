"""Normalisation before PT2E: a BatchNorm that does not follow a conv2d/linear becomes a
per-channel affine, a depthwise 1x1 conv2d (weight gamma / sqrt(var + eps), bias
beta - mean * weight, groups = C), so it quantizes and compiles as a conv: each channel's one
weight is int8 +-127 exactly (per-channel symmetric), the bias int32 at s_in * s_w.
BatchNorm1d on [N, C] or [N, C, L] is viewed as [N, C, L, 1] around it."""
from __future__ import annotations

import torch
from torch.fx import GraphModule, Node

from mcutorch.errors import UnsupportedOpError
from mcutorch.frontend.capture import source_of

A = torch.ops.aten


def batch_norm_as_conv(gm: GraphModule, bn: Node, gamma, beta, mean, var, eps: float) -> Node:
    """Insert x -> [view] -> conv2d(groups=C) -> [view] before `bn`; returns the last node."""
    x = bn.args[0]
    shape = tuple(x.meta["val"].shape)
    if len(shape) not in (2, 3, 4):
        raise UnsupportedOpError(f"{source_of(bn)}: BatchNorm of a {len(shape)}-D tensor (mcutorch "
                                 "takes [N, C], [N, C, L] and [N, C, H, W])")
    c = shape[1]
    inv = (gamma.detach() if gamma is not None else torch.ones(c)) / torch.sqrt(var.detach() + eps)
    bias = (beta.detach() if beta is not None else torch.zeros(c)) - mean.detach() * inv
    names = (f"_bn_w_{bn.name}", f"_bn_b_{bn.name}")
    for name, value in zip(names, (inv.reshape(c, 1, 1, 1), bias)):
        gm.register_parameter(name, torch.nn.Parameter(value.float(), requires_grad=False))
    four = (*shape, 1, 1)[:4]
    meta = {k: v for k, v in bn.meta.items() if k != "val"}

    def call(target, args, out_shape):
        node = gm.graph.call_function(target, args)
        node.meta.update(meta)
        node.meta["val"] = torch.empty(out_shape)
        return node

    with gm.graph.inserting_before(bn):
        w, b = (gm.graph.get_attr(n) for n in names)
        w.meta["val"], b.meta["val"] = gm.get_parameter(names[0]), gm.get_parameter(names[1])
        v = x if len(shape) == 4 else call(A.reshape.default, (x, list(four)), four)
        y = call(A.conv2d.default, (v, w, b, [1, 1], [0, 0], [1, 1], c), four)
        return y if len(shape) == 4 else call(A.reshape.default, (y, list(shape)), shape)
