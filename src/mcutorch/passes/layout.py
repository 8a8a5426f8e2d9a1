"""NCHW -> NHWC: every 4-D activation is stored channels-last, as Cortex-M kernels and TOSA want.

- conv weights OIHW -> OHWI; depthwise (groups == in channels) becomes `depthwise_conv2d` with
  weights [KH, KW, C*M];
- a 4-D constant read as an activation (a folded constant added to one, ...) is transposed too;
- axis attributes (concat, pad, softmax, transpose, strided_slice, gather, the reductions' axes
  mask) are renumbered; a softmax over another dim than the last gets a transpose to the last and
  back around it;
- a reshape nothing reads is dropped; a reshape is free when NCHW and NHWC orders agree
  (H*W == 1 or C == 1); a flatten feeding only fully connected layers folds the NCHW order
  into their weights; any other reshape gets explicit
  transposes around it.
"""
from __future__ import annotations

import math

import numpy as np

from mcutorch.ir import Graph, Node, Tensor

TO_NHWC = (0, 2, 3, 1)  # nhwc = nchw.transpose(TO_NHWC)
TO_NCHW = (0, 3, 1, 2)
AXIS_NHWC = {0: 0, 1: 3, 2: 1, 3: 2}  # NCHW axis -> NHWC axis


def _nchw_shape(t: Tensor) -> tuple[int, ...]:
    return tuple(t.shape[i] for i in TO_NCHW) if t.layout == "NHWC" else t.shape


def _orders_agree(shape_nchw) -> bool:
    return len(shape_nchw) != 4 or shape_nchw[2] * shape_nchw[3] == 1 or shape_nchw[1] == 1


def run(graph: Graph) -> Graph:
    for node in graph.nodes:  # conv/FC weights have their own re-layout (FIXUPS)
        for t in node.inputs if node.op not in ("conv2d", "fully_connected") else ():
            if t.is_const and t.layout is None and len(t.shape) == 4:
                t.layout = "NCHW"
    for t in graph.tensors():
        if t.layout == "NCHW":
            t.shape, t.layout = tuple(t.shape[i] for i in TO_NHWC), "NHWC"
            if t.is_const:
                t.data = np.ascontiguousarray(t.data.transpose(TO_NHWC))
    consumers = graph.consumers()
    nodes: list[Node] = []
    for node in graph.nodes:
        nodes.extend(FIXUPS.get(node.op, _keep)(node, graph, consumers))
    graph.nodes = nodes
    graph.meta["layout"] = "NHWC"
    return graph


def _keep(node, graph, consumers):
    return [node]


def _conv(node: Node, graph, consumers):
    x, w, b = node.inputs
    cin, groups = x.shape[3], node.attrs["groups"]
    wd = w.data
    if groups > 1 and groups == cin and wd.shape[1] == 1:
        node.op = "depthwise_conv2d"
        node.attrs["depth_multiplier"] = wd.shape[0] // cin
        data = np.ascontiguousarray(wd[:, 0].transpose(1, 2, 0))  # [KH, KW, C*M]
    else:
        data = np.ascontiguousarray(wd.transpose(0, 2, 3, 1))  # OHWI
    node.inputs[1] = Tensor(w.name, data.shape, "int8", w.scale, 0, data)
    return [node]


def _reshape(node: Node, graph, consumers):
    x, y = node.inputs[0], node.outputs[0]
    if y not in consumers and y not in graph.outputs:  # a view nothing reads (builders/conv.py)
        return []
    out: list[Node] = []
    if x.layout == "NHWC" and not _orders_agree(_nchw_shape(x)):
        users = consumers.get(y, [])
        if (len(y.shape) == 2 and users and y not in graph.outputs and y.shape[0] == x.shape[0]
                and all(u.op == "fully_connected" for u in users)):
            _fold_flatten(users, _nchw_shape(x), y)
            graph.meta.setdefault("nhwc_flattened", {})[y.name] = _nchw_shape(x)[1:]
        else:
            x = _transpose(x, TO_NCHW, _nchw_shape(x), out, node)
    if y.layout == "NHWC" and not _orders_agree(_nchw_shape(y)):
        y_nchw = Tensor(y.name + "_nchw", _nchw_shape(y), y.dtype, y.scale, y.zero_point)
        out.append(Node("reshape", [x], [y_nchw], {}, node.source))
        out.append(Node("transpose", [y_nchw], [y], {"perm": TO_NHWC}, node.source))
        return out
    out.append(Node("reshape", [x], [y], {}, node.source))
    return out


def _transpose(x: Tensor, perm, shape, out: list, node: Node) -> Tensor:
    t = Tensor(x.name + "_nchw", tuple(shape), x.dtype, x.scale, x.zero_point)
    out.append(Node("transpose", [x], [t], {"perm": tuple(perm)}, node.source))
    return t


def _fold_flatten(users: list[Node], nchw, flat: Tensor) -> None:
    _, c, h, w = nchw
    for fc in users:
        wt = fc.inputs[1]
        data = wt.data.reshape(-1, c, h, w).transpose(0, 2, 3, 1).reshape(wt.data.shape)
        fc.inputs[1] = Tensor(wt.name, wt.shape, "int8", wt.scale, 0, np.ascontiguousarray(data))


def _permute(node: Node, graph, consumers):
    x = node.inputs[0]
    p = node.attrs["perm"]
    if x.layout == "NHWC":
        node.attrs["perm"] = tuple(TO_NCHW[p[TO_NHWC[i]]] for i in range(4))
    return [node]


def _axis(node: Node, key: str):
    if node.outputs[0].layout == "NHWC":
        node.attrs[key] = AXIS_NHWC[node.attrs[key]]
    return node


def _concat(node, graph, consumers):
    return [_axis(node, "axis")]


def _softmax(node, graph, consumers):
    """The kernels take rows along the last axis: over another dim d of [A, D, B] (stored order,
    B > 1), reshape to [A, D, B], transpose to [A, B, D] and back around the op."""
    _axis(node, "dim")
    x, y, dim = node.inputs[0], node.outputs[0], node.attrs["dim"]
    a, d, b = math.prod(x.shape[:dim]), x.shape[dim], math.prod(x.shape[dim + 1:])
    if b == 1:
        return [node]

    x3 = Tensor(x.name + "_rows3", (a, d, b), x.dtype, x.scale, x.zero_point)
    y3 = Tensor(y.name + "_rows3", (a, d, b), y.dtype, y.scale, y.zero_point)
    yt = Tensor(y.name + "_rows", (a, b, d), y.dtype, y.scale, y.zero_point)
    pre = [Node("reshape", [x], [x3], {}, node.source)]
    xt = _transpose(x3, (0, 2, 1), (a, b, d), pre, node)
    node.inputs, node.outputs, node.attrs["dim"] = [xt], [yt], 2
    return [*pre, node, Node("transpose", [yt], [y3], {"perm": (0, 2, 1)}, node.source),
            Node("reshape", [y3], [y], {}, node.source)]


def _per_dim(node, graph, consumers):
    """pad, strided_slice: each tuple attribute holds one value per dim."""
    if node.inputs[0].layout == "NHWC":
        node.attrs = {k: tuple(v[i] for i in TO_NHWC) if isinstance(v, tuple) else v
                      for k, v in node.attrs.items()}
    return [node]


def _reduce(node, graph, consumers):
    if node.inputs[0].layout == "NHWC":  # the mask's bit i (NCHW dim i) moves to AXIS_NHWC[i]
        mask = node.attrs["axes"]
        node.attrs["axes"] = sum(1 << AXIS_NHWC[i] for i in range(4) if mask >> i & 1)
        if node.attrs.get("channel_axis") is not None:  # norm's per-channel affine
            node.attrs["channel_axis"] = AXIS_NHWC[node.attrs["channel_axis"]]
    return [node]


def _matmul(node, graph, consumers):
    """matmul computes in torch's dim order: NHWC operands get transposes to it (and back)."""
    out = []
    for i, t in enumerate(node.inputs):
        if t.layout == "NHWC":
            node.inputs[i] = _transpose(t, TO_NCHW, _nchw_shape(t), out, node)
    y = node.outputs[0]
    if y.layout != "NHWC":
        return [*out, node]
    node.outputs = [Tensor(y.name + "_nchw", _nchw_shape(y), y.dtype, y.scale, y.zero_point)]
    return [*out, node, Node("transpose", node.outputs, [y], {"perm": TO_NHWC}, node.source)]


FIXUPS = {"matmul": _matmul,
          "conv2d": _conv, "reshape": _reshape, "transpose": _permute, "concat": _concat,
          "softmax": _softmax, "pad": _per_dim, "strided_slice": _per_dim, "gather": _concat,
          "reduce_sum": _reduce, "reduce_max": _reduce, "reduce_min": _reduce,
          "log_softmax": _softmax, "reduce_var": _reduce, "norm": _reduce}
