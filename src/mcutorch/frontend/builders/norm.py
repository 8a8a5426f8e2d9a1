"""Normalisation. Lift builders of layer_norm, group_norm and instance_norm (the `norm` op:
mean, variance, an integer reciprocal square root, a per-channel affine; docs/numerics.md), and,
before PT2E, the weight scaling of a BatchNorm folded into the conv, transposed conv or linear
before it (`scale_out_channels`), and a BatchNorm that does not follow one becomes a
per-channel affine, a depthwise 1x1 conv2d (weight gamma / sqrt(var + eps), bias
beta - mean * weight, groups = C), so it quantizes and compiles as a conv: each channel's one
weight is int8 +-127 exactly (per-channel symmetric), the bias int32 at s_in * s_w.
BatchNorm1d on [N, C] or [N, C, L] is viewed as [N, C, L, 1] around it."""
from __future__ import annotations

import math

import numpy as np
import torch
from torch.fx import GraphModule, Node

from mcutorch.errors import UnsupportedOpError
from mcutorch.frontend.builders._common import node_arg
from mcutorch.frontend.capture import source_of
from mcutorch.ir import Tensor
from mcutorch.ref.reduce import MAX_COUNT

A = torch.ops.aten


TRANSPOSED = {A.conv_transpose2d.input, A.conv_transpose1d.default}


def scale_out_channels(prod: Node, w: torch.Tensor, inv: torch.Tensor) -> torch.Tensor:
    """`w` with output channel o scaled by inv[o]: a BatchNorm folded into `prod`. Convs and
    linears keep output channels in dim 0 ([O, I/g, k...]); a transposed conv's weight is
    [I, O/g, k...], its output channel g * O/g + j in group g's dim-1 slice j."""
    if prod.target not in TRANSPOSED:
        return w * inv.reshape(-1, *([1] * (w.dim() - 1)))
    groups = prod.args[6] if len(prod.args) > 6 else 1
    grouped = w.reshape(groups, w.shape[0] // groups, *w.shape[1:])
    scale = inv.reshape(groups, 1, w.shape[1], *([1] * (w.dim() - 2)))
    return (grouped * scale).reshape(w.shape)


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


def _affine(lf, n: Node, arg, size: int, default: float) -> np.ndarray:
    """The float values of an affine weight/bias as fake-quant uses them (dequantized), or
    `default` when the module has none."""
    if arg is None:
        return np.full(size, default)
    if isinstance(arg, Node) and arg.op == "get_attr":  # left float by the quantizer
        return lf._attr(arg).numpy().astype(np.float64).ravel()
    t = lf.operand(arg, n)
    value = (t.data.astype(np.float64) - t.zero_point) * np.float64(np.float32(t.scale))
    return value.astype(np.float32).astype(np.float64).ravel()


def _emit(lf, n: Node, x: Tensor, out: Tensor, act, dims, channel_axis, gamma, beta, eps):
    count = math.prod(x.shape[d] for d in dims)
    if count > MAX_COUNT:
        raise UnsupportedOpError(f"{source_of(n)}: a normalisation over {count} elements; "
                                 "mcutorch takes at most 2^23")
    attrs = {"axes": sum(1 << d for d in dims), "eps": float(eps), "gamma": gamma,
             "beta": beta, "channel_axis": channel_axis, "act": act}
    lf.emit("norm", [x], out, attrs, n)


def layer_norm(lf, n: Node, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    shape, k = tuple(x.shape), len(n.args[1])
    if len(shape) == 4 and k != 3:
        raise UnsupportedOpError(f"{source_of(n)}: layer_norm over the last {k} dims of a 4-D "
                                 "tensor (stored NHWC): mcutorch normalises [C, H, W] of 4-D "
                                 "tensors and the last dims of the other ranks")
    size = math.prod(shape[-k:])
    gamma = _affine(lf, n, node_arg(n, 2, "weight"), size, 1.0)
    beta = _affine(lf, n, node_arg(n, 3, "bias"), size, 0.0)
    if len(shape) == 4:  # the affine follows the stored order: [C, H, W] -> [H, W, C]
        gamma, beta = (v.reshape(shape[1:]).transpose(1, 2, 0).ravel() for v in (gamma, beta))
    _emit(lf, n, x, out, act, range(len(shape) - k, len(shape)), None, gamma, beta,
          node_arg(n, 4, "eps", 1e-5))


def group_norm(lf, n: Node, out: Tensor, act) -> None:
    """[N, C, *] as [N, G, C/G, *]: each (n, g) normalised, the affine per channel."""
    x = lf.operand(n.args[0], n)
    shape, groups = tuple(x.shape), int(n.args[1])
    if len(shape) + 1 > 6:
        raise UnsupportedOpError(f"{source_of(n)}: group_norm of a {len(shape)}-D tensor")
    c = shape[1]
    view = (shape[0], groups, c // groups, *shape[2:])
    gamma = _affine(lf, n, node_arg(n, 2, "weight"), c, 1.0)
    beta = _affine(lf, n, node_arg(n, 3, "bias"), c, 0.0)
    xv = lf.new_tensor(out.name + "_groups_in", view, x.scale, x.zero_point)
    yv = lf.new_tensor(out.name + "_groups", view, out.scale, out.zero_point)
    lf.emit("reshape", [x], xv, {}, n)
    _emit(lf, n, xv, yv, act, range(2, len(view)), 2, gamma, beta, node_arg(n, 4, "eps", 1e-5))
    lf.emit("reshape", [yv], out, {}, n)


def instance_norm(lf, n: Node, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    if not node_arg(n, 5, "use_input_stats", True):
        raise UnsupportedOpError(f"{source_of(n)}: instance_norm with running statistics "
                                 "(track_running_stats=True in eval mode) is not supported")
    c = x.shape[1]
    gamma = _affine(lf, n, node_arg(n, 1, "weight"), c, 1.0)
    beta = _affine(lf, n, node_arg(n, 2, "bias"), c, 0.0)
    _emit(lf, n, x, out, act, range(2, len(x.shape)), 1, gamma, beta, node_arg(n, 7, "eps", 1e-5))


def norm(lf, n: Node, out: Tensor, act) -> None:
    {"layer_norm": layer_norm, "group_norm": group_norm, "instance_norm": instance_norm}[
        str(n.target).split(".")[1]](lf, n, out, act)


# registry op name -> builder; ACT: the builders that apply `act` (the output clamp)
BUILDERS = {"norm": norm}
ACT = {norm}
