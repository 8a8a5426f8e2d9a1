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
    v = lf.new_tensor(x.name + "_2d", shape, x.scale, x.zero_point, dtype=x.dtype,
                     layout="NCHW")
    lf.emit("reshape", [x], v, {}, n)
    return v


def _as_2d(lf, n: FxNode, out: Tensor, x: Tensor, w: Tensor, b: Tensor, op: str, attrs: dict):
    """Emit the 2-D `op` of a 1-D node on [N, C, 1, L] views; weight [A, B, K] -> [A, B, 1, K]."""
    x4 = _view4(lf, x, n)
    w4 = lf.new_tensor(w.name + "_2d", (*w.shape[:2], 1, w.shape[2]), w.scale, 0, dtype="int8",
                       data=w.data.reshape(*w.shape[:2], 1, w.shape[2]))
    y4 = lf.new_tensor(out.name + "_2d", (out.shape[0], out.shape[1], 1, out.shape[2]),
                       out.scale, out.zero_point, dtype=out.dtype, layout="NCHW")
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
    if len(x.shape) == 2:
        return lf.emit("fully_connected", [x, w, b], out, {"act": act}, n)
    # any rank: the leading dims are the rows of one fully_connected ([B, T, C] -> [B*T, C]),
    # in torch's dim order (the layout pass puts transposes around the reshapes of a 4-D NHWC x)
    rows = math.prod(x.shape[:-1])
    x2 = lf.new_tensor(x.name + "_rows", (rows, x.shape[-1]), x.scale, x.zero_point,
                       dtype=x.dtype)
    y2 = lf.new_tensor(out.name + "_rows", (rows, w.shape[0]), out.scale, out.zero_point,
                       dtype=out.dtype)
    lf.emit("reshape", [x], x2, {}, n)
    lf.emit("fully_connected", [x2, w, b], y2, {"act": act}, n)
    lf.emit("reshape", [y2], out, {}, n)


# registry op name -> builder; ACT: the builders that apply `act` (the output clamp)
BUILDERS = {"conv2d": conv, "fully_connected": linear, "conv_transpose2d": conv_transpose}
ACT = {conv, linear, conv_transpose}


def conv3d_as_conv2d(gm) -> None:
    """Before PT2E: conv3d(x [N, C, D, H, W]) as one conv2d, exactly (one accumulation).

    x is zero-padded in depth (a pad: exact, the zero point), and for each output depth od the
    KD input depth slices it reads, od * sd - pd + kd * dd, are concatenated along channels
    (per group, kd-major), the Do results stacked along the batch: [Do * N, KD * C, H, W]. One
    conv2d with the weight [Cout, Cin/G, KD, KH, KW] re-laid as [Cout, KD * Cin/G, KH, KW] (the
    same order) and the conv's (h, w) attributes gives [Do * N, Cout, Ho, Wo], viewed and
    permuted back to [N, Cout, Do, Ho, Wo]. Memory: the padded input plus the gathered
    [Do * N, KD * C, H, W] int8 tensor (KD * Do / D times the input: ~KD / sd)."""
    import torch

    a = torch.ops.aten
    for n in [n for n in gm.graph.nodes if n.op == "call_function" and n.target in
              (a.conv3d.default, a.conv3d.padding)]:
        x, wnode = n.args[0], n.args[1]
        shape = tuple(x.meta["val"].shape)
        if len(shape) != 5 or wnode.op != "get_attr":
            raise UnsupportedOpError(f"{source_of(n)}: conv3d of a {len(shape)}-D input or with "
                                     "a computed weight")
        w = _get(gm, wnode.target).detach()
        stride = pair(node_arg(n, 3, "stride", 1), 3)
        padding = node_arg(n, 4, "padding", 0)
        dilation = pair(node_arg(n, 5, "dilation", 1), 3)
        groups = int(node_arg(n, 6, "groups", 1))
        _, c, d, _, _ = shape
        cout, cg, kd = w.shape[:3]
        if isinstance(padding, str):
            p = same_padding(shape[2:], w.shape[2:], stride, dilation, padding, n)
            if padding == "same" and any(s != 1 for s in stride):
                raise UnsupportedOpError(f"{source_of(n)}: padding='same' with stride > 1")
            total = max((kd - 1) * dilation[0], 0) if padding == "same" else 0
            pd0, pd1, hw_pad = total // 2, total - total // 2, (p[0], p[1])
            if p[0] != p[2] or p[1] != p[3]:
                raise UnsupportedOpError(f"{source_of(n)}: asymmetric 'same' padding of conv3d")
        else:
            pd, ph, pw = pair(padding, 3)
            pd0, pd1, hw_pad = pd, pd, (ph, pw)
        do = (d + pd0 + pd1 - dilation[0] * (kd - 1) - 1) // stride[0] + 1
        if do < 1:
            raise UnsupportedOpError(f"{source_of(n)}: conv3d window deeper than the input")
        w2 = w.reshape(groups, cout // groups, cg, kd, *w.shape[3:]).transpose(2, 3)
        name = f"_conv3d_w_{n.name}"
        gm.register_parameter(name, torch.nn.Parameter(
            w2.reshape(cout, kd * cg, *w.shape[3:]).contiguous(), requires_grad=False))
        meta = {k: v for k, v in n.meta.items() if k not in ("val", "tensor_meta")}
        fake = x.meta["val"].fake_mode

        def call(target, *args):
            node = gm.graph.call_function(target, tuple(args))
            node.meta.update(meta)
            with torch.no_grad():  # the shape on "meta" tensors, then a FakeTensor of it
                shape = target(*[_stand_in(v) for v in args]).shape
            node.meta["val"] = fake.from_tensor(torch.empty(shape), static_shapes=True)
            return node

        with gm.graph.inserting_before(n):
            wn = gm.graph.get_attr(name)
            wn.meta["val"] = fake.from_tensor(gm.get_parameter(name), static_shapes=True)
            xp = call(a.constant_pad_nd.default, x, [0, 0, 0, 0, pd0, pd1], 0.0) \
                if pd0 + pd1 else x
            parts = []
            for od in range(do):
                for g in range(groups):
                    xs = xp if groups == 1 else call(a.slice.Tensor, xp, 1, g * (c // groups),
                                                     (g + 1) * (c // groups))
                    parts += [call(a.select.int, xs, 2, od * stride[0] + k * dilation[0])
                              for k in range(kd)]
            per = kd * groups
            rows = [call(a.cat.default, parts[i:i + per], 1) if per > 1 else parts[i]
                    for i in range(0, len(parts), per)]
            xb = call(a.cat.default, rows, 0) if do > 1 else rows[0]
            bias = n.args[2] if len(n.args) > 2 else None
            y = call(a.conv2d.default, xb, wn, bias, list(stride[1:]), list(hw_pad),
                     list(dilation[1:]), groups)
            ho, wo = y.meta["val"].shape[2:]
            y = call(a.reshape.default, y, [do, shape[0], cout, ho, wo])
            y = call(a.permute.default, y, [1, 2, 0, 3, 4])
        n.replace_all_uses_with(y)
        gm.graph.erase_node(n)


def _stand_in(v):
    """A "meta" tensor of a node's shape, lists element-wise."""
    import torch

    if isinstance(v, (list, tuple)):
        return [_stand_in(u) for u in v]
    return torch.empty(tuple(v.meta["val"].shape), device="meta") if isinstance(v, FxNode) else v


def _get(gm, target: str):
    try:
        return gm.get_parameter(target)
    except AttributeError:
        return gm.get_buffer(target)
