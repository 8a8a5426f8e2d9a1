"""Lift builders of the MAC ops: conv1d/conv2d (any padding mode), conv_transpose1d/2d and
linear.

Each builder is called as builder(lifter, fx node, output IR tensor, act) and emits IR nodes
through `lifter.emit` (frontend/lift.py Lifter). A 1-D op runs as its 2-D form on [N, C, 1, L]
views: the input view, the op with a [.., 1, K] weight, the output view back to [N, C, L];
a 1-D op reading the output of another reads the latter's 4-D tensor directly (the view back
is then unused and dropped by passes/layout), so a chain of 1-D convs stays channels-last."""
from __future__ import annotations

import math

import numpy as np
from torch.fx import Node as FxNode

from mcutorch.errors import UnsupportedOpError
from mcutorch.frontend.builders._common import node_arg, pair
from mcutorch.frontend.capture import source_of
from mcutorch.ir import Tensor


def _view4(lf, x: Tensor, n: FxNode) -> Tensor:
    """x [N, C, L] as [N, C, 1, L]: the 4-D tensor x is a view of, if any, else a new view."""
    shape = (x.shape[0], x.shape[1], 1, x.shape[2])
    for node in reversed(lf.nodes):
        if node.outputs[0] is x:
            src = node.inputs[0]
            if node.op == "reshape" and src.shape == shape and src.layout == "NCHW":
                return src
            break
    v = lf.new_tensor(x.name + "_2d", shape, x.scale, x.zero_point, layout="NCHW")
    lf.emit("reshape", [x], v, {}, n)
    return v


def _as_2d(lf, n: FxNode, out: Tensor, x: Tensor, w: Tensor, b: Tensor, op: str, attrs: dict):
    """Emit the 2-D op `op` of a 1-D node on [N, C, 1, L] views; weight [A, B, K] -> [A, B, 1, K]."""
    x4 = _view4(lf, x, n)
    w4 = lf.new_tensor(w.name + "_2d", (*w.shape[:2], 1, w.shape[2]), w.scale, 0, dtype="int8",
                       data=w.data.reshape(*w.shape[:2], 1, w.shape[2]))
    y4 = lf.new_tensor(out.name + "_2d", (out.shape[0], out.shape[1], 1, out.shape[2]),
                       out.scale, out.zero_point, layout="NCHW")
    lf.emit(op, [x4, w4, b], y4, attrs, n)
    lf.emit("reshape", [y4], out, {}, n)


def conv(lf, n: FxNode, out: Tensor, act) -> None:
    x, w = lf.operand(n.args[0], n), lf.weight(n.args[1], n)
    b = lf.bias(n.args[2] if len(n.args) > 2 else None, n, x, w)
    one_d = len(x.shape) == 3
    if len(x.shape) != (3 if one_d else 4) or len(w.shape) != len(x.shape):
        raise UnsupportedOpError(f"{source_of(n)}: a convolution of a {len(x.shape)}-D input")
    spatial = (1, x.shape[2]) if one_d else x.shape[2:]
    k = (1, w.shape[2]) if one_d else w.shape[2:]
    stride = _hw(node_arg(n, 3, "stride", 1), one_d)
    padding = node_arg(n, 4, "padding", 0)
    dilation = _hw(node_arg(n, 5, "dilation", 1), one_d)
    groups = int(node_arg(n, 6, "groups", 1))
    if isinstance(padding, str):
        padding = same_padding(spatial, k, stride, dilation, padding, n)
    else:
        ph, pw = _hw(padding, one_d, pad=True)
        padding = (ph, pw, ph, pw)
    attrs = {"stride": stride, "dilation": dilation, "padding": tuple(padding), "groups": groups,
             "act": act}
    if one_d:
        _as_2d(lf, n, out, x, w, b, "conv2d", attrs)
    else:
        lf.emit("conv2d", [x, w, b], out, attrs, n)


def _hw(v, one_d: bool, pad: bool = False) -> tuple[int, int]:
    """A 2-D (h, w) attribute of a 1-D or 2-D op: the 1-D value is w (h: 1, or 0 for padding)."""
    if not one_d:
        return pair(v)
    (value,) = pair(v, 1)
    return (0 if pad else 1, int(value))


def same_padding(in_hw, k_hw, stride, dilation, mode, n) -> tuple[int, int, int, int]:
    if mode == "valid":
        return (0, 0, 0, 0)
    pads = []
    for size, k, s, d in zip(in_hw, k_hw, stride, dilation):
        total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
        pads.append((total // 2, total - total // 2))
    return (pads[0][0], pads[1][0], pads[0][1], pads[1][1])


def _transposed_weight(lf, arg, n: FxNode, groups: int) -> Tensor:
    """The weight [Cin, Cout/G, *K] of a transposed conv as [Cout, Cin/G, *K] (output channels
    first, like a conv's: the bias, requantization and the readers' MAC bound go per row); its
    scale per output channel (quantized along axis 1, groups == 1) or per tensor."""
    if not (isinstance(arg, FxNode) and arg.op == "call_function" and arg.args
            and isinstance(arg.args[0], FxNode) and arg.args[0].op == "get_attr"
            and "dequantize" in str(arg.target)):
        raise UnsupportedOpError(f"{source_of(n)}: its weight is not an int8 constant")
    lf.used.add(arg)
    data = lf._attr(arg.args[0]).numpy()
    if "per_channel" in str(arg.target):
        zps = lf._attr(arg.args[2]).numpy()
        if int(arg.args[3]) != 1 or groups != 1 or np.any(zps != 0):
            raise UnsupportedOpError(f"{source_of(n)}: weight quantized per channel along axis "
                                     f"{arg.args[3]} with groups={groups}; mcutorch takes axis 1 "
                                     "(groups 1, symmetric) or per tensor")
        scale = lf._attr(arg.args[1]).numpy().astype(np.float64)
    else:
        scale, zp = float(lf._scalar(arg.args[1], arg, "scale")), lf._scalar(arg.args[2], arg, "")
        if int(zp) != 0:
            raise UnsupportedOpError(f"{source_of(n)}: weight zero point {zp} (need 0)")
    if data.dtype != np.int8:
        raise UnsupportedOpError(f"{source_of(n)}: weight of dtype {data.dtype} (need int8)")
    cin, cog, k = data.shape[0], data.shape[1], data.shape[2:]
    cg = cin // groups  # [G, Cin/G, Cout/G, *K] -> [G, Cout/G, Cin/G, *K]
    w = data.reshape(groups, cg, cog, *k).swapaxes(1, 2).reshape(groups * cog, cg, *k)
    return lf.new_tensor(str(arg.args[0].target).replace(".", "_") + "_oi", w.shape, scale, 0,
                         dtype="int8", data=np.ascontiguousarray(w))


def conv_transpose(lf, n: FxNode, out: Tensor, act) -> None:
    """aten.conv_transpose{1,2}d(x, w, bias, stride, padding, output_padding, groups, dilation):
    padding p crops p rows at each end of the full output, output_padding adds rows at the end
    (pad_bottom = p - output_padding, negative when it adds)."""
    x = lf.operand(n.args[0], n)
    one_d = len(x.shape) == 3
    if len(x.shape) not in (3, 4):
        raise UnsupportedOpError(f"{source_of(n)}: a transposed conv of a {len(x.shape)}-D input")
    groups = int(node_arg(n, 6, "groups", 1))
    w = _transposed_weight(lf, n.args[1], n, groups)
    b = lf.bias(node_arg(n, 2, "bias"), n, x, w)
    stride = _hw(node_arg(n, 3, "stride", 1), one_d)
    ph, pw = _hw(node_arg(n, 4, "padding", 0), one_d, pad=True)
    oh, ow = _hw(node_arg(n, 5, "output_padding", 0), one_d, pad=True)
    dilation = _hw(node_arg(n, 7, "dilation", 1), one_d)
    attrs = {"stride": stride, "dilation": dilation, "padding": (ph, pw, ph - oh, pw - ow),
             "groups": groups, "act": act}
    if one_d:
        _as_2d(lf, n, out, x, w, b, "conv_transpose2d", attrs)
    else:
        lf.emit("conv_transpose2d", [x, w, b], out, attrs, n)


def linear(lf, n: FxNode, out: Tensor, act) -> None:
    x, w = lf.operand(n.args[0], n), lf.weight(n.args[1], n)
    b = lf.bias(n.args[2] if len(n.args) > 2 else None, n, x, w)
    if len(x.shape) != 2:
        raise UnsupportedOpError(f"{source_of(n)}: linear on a {len(x.shape)}-D input; flatten "
                                 "it to [N, features] first")
    lf.emit("fully_connected", [x, w, b], out, {"act": act}, n)


# registry op name -> builder; ACT: the builders that apply `act` (the output clamp)
BUILDERS = {"conv2d": conv, "fully_connected": linear, "conv_transpose2d": conv_transpose}
ACT = {conv, linear, conv_transpose}
