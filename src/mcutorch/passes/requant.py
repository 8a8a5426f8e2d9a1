"""Scales -> integers: every op gets the int32 attributes of ops.py and its constant tables.

Multipliers come from quant.quantize_multiplier only. Ops whose output must share the input's
qparams (pooling, data movement) get an explicit `rescale` when a custom quantizer broke that.
Rank < 4 tensors are treated as 4-D with leading 1-dims for perm/axis/pad (ref/movement.py).
"""
from __future__ import annotations

import math

import numpy as np

from mcutorch import ops
from mcutorch.errors import UnsupportedOpError
from mcutorch.ir import Graph, Node, Tensor, same_qparams
from mcutorch.quant import quantize_multiplier, quantize_multiplier16, quantize_multipliers, rq
from mcutorch.ref import (concat_attrs, gather_attrs, make_lut, make_lut16, pad_attrs,
                          slice_attrs, softmax_exp_table, transpose_attrs)
from mcutorch.ref.elementwise import compare_attrs
from mcutorch.ref.reduce import MAX_COUNT16, norm_constants, sum_range, var_attrs
from mcutorch.ref.conv import matmul16_check
from mcutorch.ref.softmax import log_softmax_tables, softmax_exp_table16

ADD_LEFT_SHIFT = 20  # inputs are scaled to 2^20 / (2 max(s_a, s_b)) before adding
ADD_LEFT_SHIFT16 = 15  # int16 inputs (docs/numerics.md section 6): 2^15 keeps a32 + b32 in int32
SHARED = frozenset(d.name for d in ops.REGISTRY if d.qparams == "shared")


def _const(name: str, data: np.ndarray) -> Tensor:
    return Tensor(name, data.shape, "int32", 1.0, 0, np.ascontiguousarray(data, np.int32))


def _act(node: Node) -> dict:
    wide = node.outputs[0].dtype == "int16"
    lo, hi = node.attrs.get("act", (-32767, 32767) if wide else (-128, 127))
    return {"act_min": int(lo), "act_max": int(hi)}


def _mac(node: Node) -> None:
    x, w, b = node.inputs[:3]
    y = node.outputs[0]
    real = x.scale * np.asarray(w.scale, np.float64) / y.scale
    real = np.broadcast_to(real, (w.shape[0] if node.op != "depthwise_conv2d" else w.shape[-1],))
    # an int16 x: int48 accumulator, 16-bit multipliers (docs/numerics.md section 6)
    mult, shift = quantize_multipliers(real, quantize_multiplier16 if x.dtype == "int16" else None)
    node.inputs = [x, w, b, _const(w.name + "_mult", mult), _const(w.name + "_shift", shift)]
    a = node.attrs
    attrs = {"in_zp": x.zero_point, "out_zp": y.zero_point, **_act(node)}
    if node.op != "fully_connected":
        (sh, sw), (dh, dw), pad = a["stride"], a["dilation"], a["padding"]
        attrs.update(stride_h=sh, stride_w=sw, dilation_h=dh, dilation_w=dw, pad_top=pad[0],
                     pad_left=pad[1], pad_bottom=pad[2], pad_right=pad[3])
        key = "depth_multiplier" if node.op == "depthwise_conv2d" else "groups"
        attrs[key] = a[key]
    node.attrs = attrs


def _add(node: Node) -> None:
    """add and sub (a - b): b's real step is alpha * its scale (alpha > 0, lift)."""
    a, b = node.inputs
    y = node.outputs[0]
    b_scale = b.scale * node.attrs.get("alpha", 1)
    twice_max = 2 * max(a.scale, b_scale)
    left = 1 << (ADD_LEFT_SHIFT16 if a.dtype == "int16" else ADD_LEFT_SHIFT)
    am, ash = quantize_multiplier(a.scale / twice_max * left)
    bm, bsh = quantize_multiplier(b_scale / twice_max * left)
    om, osh = quantize_multiplier(twice_max / (left * y.scale))
    node.attrs = {"a_zp": a.zero_point, "a_mult": am, "a_shift": ash, "b_zp": b.zero_point,
                  "b_mult": bm, "b_shift": bsh, "out_zp": y.zero_point, "out_mult": om,
                  "out_shift": osh, **_act(node)}


def _conv_add(node: Node) -> None:
    """conv2d_add: the conv's rule on its output (the tensor the fusion removed), add's rule on
    (that, skip) in add's operand order, a/b swapped so that a is the conv's side."""
    a, skip = node.attrs, node.inputs[3]
    conv = Node("conv2d", node.inputs[:3], [a["mid"]], a)
    _mac(conv)
    add = Node("add", [skip, a["mid"]] if a["conv_is_b"] else [a["mid"], skip], node.outputs,
               a["add"])
    _add(add)
    c, at, sides = conv.attrs, add.attrs, "ba" if a["conv_is_b"] else "ab"
    node.inputs = [*conv.inputs, skip]
    node.attrs = {**c, "conv_zp": c["out_zp"], "conv_min": c["act_min"],
                  "conv_max": c["act_max"], **at,
                  **{f"{s}_{k}": at[f"{o}_{k}"] for s, o in zip("ab", sides)
                     for k in ("zp", "mult", "shift")}}


def _mul(node: Node) -> None:
    """mul and matmul: one multiplier s_a * s_b / s_y (matmul's transpose_b first)."""
    a, b = node.inputs
    y = node.outputs[0]
    wide = node.op == "matmul" and a.dtype == "int16"  # int48 accumulator: 16-bit multiplier
    m, s = (quantize_multiplier16 if wide else quantize_multiplier)(a.scale * b.scale / y.scale)
    if wide:
        try:
            matmul16_check(a.shape[-1], m, s)
        except ValueError as err:
            raise UnsupportedOpError(f"{node.source}: {err}") from None
    pre = {"transpose_b": int(node.attrs["transpose_b"])} if node.op == "matmul" else {}
    node.attrs = {**pre, "a_zp": a.zero_point, "b_zp": b.zero_point, "out_zp": y.zero_point,
                  "mult": m, "shift": s, **_act(node)}


def _div(node: Node) -> None:
    a, b = node.inputs
    y = node.outputs[0]
    m, s = quantize_multiplier(a.scale / (b.scale * y.scale))
    node.attrs = {"a_zp": a.zero_point, "b_zp": b.zero_point, "out_zp": y.zero_point,
                  "mult": m, "shift": s, **_act(node)}


def _pool(node: Node) -> None:
    a, x, y = node.attrs, node.inputs[0], node.outputs[0]
    (kh, kw), (sh, sw), pad = a["kernel"], a["stride"], a["padding"]
    attrs = {"kernel_h": kh, "kernel_w": kw, "stride_h": sh, "stride_w": sw, "pad_top": pad[0],
             "pad_left": pad[1], "pad_bottom": pad[2], "pad_right": pad[3]}
    if node.op == "avg_pool2d":
        attrs.update(count_include_pad=a["count_include_pad"], divisor=a["divisor"],
                     in_zp=x.zero_point, out_zp=y.zero_point)
    node.attrs = {**attrs, **_act(node)}


def _resize(node: Node) -> None:
    """Per axis TOSA's (scale_n, scale_d, offset, border); bilinear divides the 4-tap sum by
    n_y * n_x (mult / 2^shift, the output shares x's qparams)."""
    a, names = node.attrs, ("scale_{}_n", "scale_{}_d", "offset_{}", "border_{}")
    attrs = {f.format(k): v for k, axis in zip("yx", a["geometry"]) for f, v in zip(names, axis)}
    yn, xn = a["geometry"][0][0], a["geometry"][1][0]
    mult, shift = quantize_multiplier(1.0 / (yn * xn)) if a["mode"] else (0, 0)
    node.attrs = {"mode": a["mode"], **attrs, "mult": mult, "shift": shift, **_act(node)}


def _rescale(node: Node) -> None:
    x, y = node.inputs[0], node.outputs[0]
    m, s = quantize_multiplier(x.scale / y.scale)
    node.attrs = {"in_zp": x.zero_point, "out_zp": y.zero_point, "mult": m, "shift": s,
                  **_act(node)}


def _lut(node: Node) -> None:
    x, y = node.inputs[0], node.outputs[0]
    if x.dtype == "int16":  # 513 interpolated entries (the int16 range is the table's)
        table16 = make_lut16(node.attrs["fn"], x.scale, y.scale)
        node.inputs = [x, Tensor(y.name + "_table", table16.shape, "int16", 1.0, 0, table16)]
        node.attrs = {}
        return
    table = make_lut(node.attrs["fn"], x.scale, x.zero_point, y.scale, y.zero_point)
    act = _act(node)
    table = np.clip(table, act["act_min"], act["act_max"]).astype(np.int8)
    node.inputs = [x, Tensor(y.name + "_table", (256,), "int8", 1.0, 0, table)]
    node.attrs = {}


def _softmax(node: Node) -> None:
    """The exp table: 256 entries (int8 x), or 512 (int16 x, output (1/32768, 0), section 6)."""
    x, y = node.inputs[0], node.outputs[0]
    wide = x.dtype == "int16"
    want = (1 / 32768, 0) if wide else (1 / 256, -128)
    if abs(y.scale - want[0]) > 1e-12 or y.zero_point != want[1] or y.dtype != x.dtype:
        raise UnsupportedOpError(f"{node.source}: {x.dtype} softmax output must be quantized "
                                 f"with {want}, got {y.dtype} ({y.scale}, {y.zero_point})")
    if x.shape[-1] > 32767:
        raise UnsupportedOpError(f"{node.source}: softmax over {x.shape[-1]} > 32767 values")
    table = (softmax_exp_table16 if wide else softmax_exp_table)(x.scale)
    node.inputs = [x, _const(y.name + "_exp", table)]
    node.attrs = {}


def _reduce(node: Node) -> None:
    """reduce_sum: mult = s_in / (count * s_out), count 1 for a sum, the reduced elements for a
    mean; reduce_max/min share qparams and keep only the axes and clamp."""
    x, y, a = node.inputs[0], node.outputs[0], node.attrs
    if node.op == "reduce_var":
        return _reduce_var(node)
    if node.op != "reduce_sum":
        node.attrs = {"axes": a["axes"], **_act(node)}
        return
    m, s = quantize_multiplier(x.scale / (y.scale * a["divide"]))
    count = math.prod(d for i, d in enumerate(x.shape) if a["axes"] >> i & 1)
    wide = x.dtype == "int16"
    if wide and count > MAX_COUNT16:
        raise UnsupportedOpError(f"{node.source}: an int16 sum over {count} elements; mcutorch "
                                 f"sums at most {MAX_COUNT16:,} int16 values (int32 stays exact)")
    if any(abs(int(rq(v, m, s))) >= 1 << 31 for v in sum_range(count, x.zero_point, wide)):
        raise UnsupportedOpError(f"{node.source}: a sum of {count} {x.dtype} values scaled by "
                                 f"{x.scale / y.scale:g} can leave int32 after requantization")
    node.attrs = {"axes": a["axes"], "in_zp": x.zero_point, "out_zp": y.zero_point, "mult": m,
                  "shift": s, **_act(node)}


def _log_softmax(node: Node) -> None:
    x, y = node.inputs[0], node.outputs[0]
    if x.shape[-1] > 32767:
        raise UnsupportedOpError(f"{node.source}: log_softmax over {x.shape[-1]} > 32767 values")
    try:
        exp, log, in_mult, ln2 = log_softmax_tables(x.scale, y.scale)
    except ValueError as err:
        raise UnsupportedOpError(f"{node.source}: {err}") from None
    node.inputs = [x, _const(y.name + "_exp", exp), _const(y.name + "_log", log)]
    node.attrs = {"in_mult": in_mult, "ln2": ln2, "out_zp": y.zero_point}


def _reduce_var(node: Node) -> None:
    x, y, a = node.inputs[0], node.outputs[0], node.attrs
    n = math.prod(d for i, d in enumerate(x.shape) if a["axes"] >> i & 1)
    try:
        found = var_attrs(n, a["root"], a["correction"], x.scale, y.scale)
    except ValueError as err:
        raise UnsupportedOpError(f"{node.source}: {err}") from None
    node.attrs = {"axes": a["axes"], **found, "out_zp": y.zero_point, **_act(node)}


def _norm(node: Node) -> None:
    x, y, a = node.inputs[0], node.outputs[0], node.attrs
    n = math.prod(d for i, d in enumerate(x.shape) if a["axes"] >> i & 1)
    axis = a["channel_axis"]
    try:
        sign, beta, mult, shift, eps = norm_constants(a["gamma"], a["beta"], a["eps"], n,
                                                      x.scale, y.scale, x.dtype == "int16")
    except ValueError as err:
        raise UnsupportedOpError(f"{node.source}: {err}") from None
    node.inputs = [x, Tensor(y.name + "_gamma_sign", sign.shape, "int8", 1.0, 0, sign),
                   _const(y.name + "_beta", beta), _const(y.name + "_mult", mult),
                   _const(y.name + "_shift", shift)]
    node.attrs = {"axes": a["axes"], "eps": eps,
                  "inner": 1 if axis is None else math.prod(x.shape[axis + 1:]),
                  "out_zp": y.zero_point, **_act(node)}


def _transpose(node: Node) -> None:
    node.attrs = transpose_attrs(node.attrs["perm"])


def _concat(node: Node) -> None:
    node.attrs = concat_attrs(node.attrs["axis"], len(node.outputs[0].shape))


def _pad(node: Node) -> None:
    a = node.attrs
    node.attrs = pad_attrs(list(zip(a["before"], a["after"])), a["value"])


def _slice(node: Node) -> None:
    node.attrs = slice_attrs(node.attrs["start"], node.attrs["step"], node.attrs["size"])


def _gather(node: Node) -> None:
    node.attrs = gather_attrs(node.attrs["axis"], len(node.outputs[0].shape))


def _compare(node: Node) -> None:
    a, b = node.inputs
    node.attrs = {"kind": node.attrs["kind"], "a_zp": a.zero_point, "b_zp": b.zero_point,
                  **compare_attrs(a.scale, b.scale)}


def _where(node: Node) -> None:
    """Each value rescaled into y's qparams (mult 2^30, shift 30: the identity, when it has
    them)."""
    y = node.outputs[0]
    node.attrs = {"out_zp": y.zero_point}
    for k, t in zip("ab", node.inputs[1:]):
        mult, shift = quantize_multiplier(t.scale / y.scale)
        node.attrs.update({f"{k}_zp": t.zero_point, f"{k}_mult": mult, f"{k}_shift": shift})


def _act_attrs(node: Node) -> None:
    """Ops whose only attributes are the output clamp (clamp, maximum, minimum)."""
    node.attrs = _act(node)


def _no_attrs(node: Node) -> None:
    """Ops whose program record has no attributes (reshape, copy), or that are made after this
    pass from requantized ops (ring_write, lstm, gru, rnn_tanh, rnn_relu)."""


RULES = {"conv2d": _mac, "depthwise_conv2d": _mac, "fully_connected": _mac,
         "conv_transpose2d": _mac, "add": _add, "conv2d_add": _conv_add,
         "mul": _mul, "max_pool2d": _pool, "avg_pool2d": _pool, "rescale": _rescale,
         "lut": _lut, "softmax": _softmax, "transpose": _transpose, "concat": _concat,
         "pad": _pad, "clamp": _act_attrs, "maximum": _act_attrs, "minimum": _act_attrs,
         "reshape": _no_attrs, "copy": _no_attrs, "strided_slice": _slice,
         "ring_write": _no_attrs, "gather": _gather, "reduce_sum": _reduce, "reduce_max": _reduce,
         "reduce_min": _reduce, "log_softmax": _log_softmax, "reduce_var": _reduce,
         "norm": _norm, "sub": _add, "div": _div, "compare": _compare, "where": _where,
         "resize": _resize, "matmul": _mul, "embedding": _no_attrs,
         **dict.fromkeys(("lstm", "gru", "rnn_tanh", "rnn_relu"), _no_attrs)}


def _share_qparams(node: Node) -> list[Node]:
    """Insert rescales so that a qparam-sharing op sees equal input and output qparams: the
    inputs of a several-input op (concat, maximum) each straight into the output's (one
    rounding, as the fake-quant model computes it), a lone input's output after the op."""
    y, pre, post = node.outputs[0], [], []
    values = [x for x in node.inputs if x.dtype == "int8"]  # not gather's int32 indices, ids
    ref = values[0] if len(values) == 1 else y
    for i, x in enumerate(node.inputs):
        if x.dtype == "int8" and not same_qparams(x, ref):
            t = Tensor(f"{x.name}_rq", x.shape, x.dtype, ref.scale, ref.zero_point,
                       layout=x.layout)
            pre.append(Node("rescale", [x], [t], {}, node.source))
            node.inputs[i] = t
    if not same_qparams(ref, y):
        t = Tensor(f"{y.name}_pre", y.shape, y.dtype, ref.scale, ref.zero_point,
                   layout=y.layout)
        post.append(Node("rescale", [t], [y], {"act": node.attrs.get("act", (-128, 127))},
                         node.source))
        node.outputs = [t]
    return [*pre, node, *post]


def run(graph: Graph) -> Graph:
    nodes: list[Node] = []
    for node in graph.nodes:
        expanded = _share_qparams(node) if node.op in SHARED else [node]
        for n in expanded:
            RULES[n.op](n)
        nodes.extend(expanded)
    graph.nodes = nodes
    return graph
