"""Lowering rules: one function per IR op, each emitting the TOSA 1.0 sequence that
docs/numerics.md ("TOSA lowering") shows to be exact.

Every rule is `rule(builder, node, inputs, out, notes) -> name`: `inputs` are the TOSA names of the
node's activations, `out` names the final tensor, `notes` collects remarks on what was changed.
Shared pieces: the output stage (RESCALE int32 -> int8 with SINGLE_ROUND, then CLAMP when the fused
activation is narrower than int8) and `_fit_window`, which makes window geometry legal for TOSA 1.0
without changing any computed value (trailing pad/rows no window reads; stride 1 when there is one
output position). Unit dims that mcutorch prepends to address movement ops as 4-D
(ref/movement.py) are dropped again: TOSA sees every tensor at its real rank.
"""
from __future__ import annotations

import numpy as np
import tosa_serializer as ts

from mcutorch.ir import Node, Tensor
from mcutorch.passes.fuse import split_residual
from mcutorch.quant import reciprocal_scale
from mcutorch.ref.elementwise import COMPARE_KINDS

from mcutorch.backends.tosa.builder import Builder, attr
from mcutorch.backends.tosa import support as S
from mcutorch.backends.tosa.support import rescale_shifts, window_fit

INT8_RANGE = (-128, 127)

# --- shared pieces --------------------------------------------------------------------------------

def _output_stage(b: Builder, acc: str, mult, shift, out_zp: int, act_min: int, act_max: int,
                  out: str, in_zp: int = 0, dtype: str = "int8") -> str:
    """RESCALE to int8 or int16 (per channel if several multipliers), then CLAMP if the range is
    narrower (int16 always: its activations are [-32767, 32767], RESCALE saturates to -32768)."""
    shift = rescale_shifts(mult, shift)
    narrow = (act_min, act_max) != INT8_RANGE or dtype == "int16"
    y = b.rescale(acc, mult, shift, in_zp, out_zp, dtype, None if narrow else out)
    return b.clamp(y, act_min, act_max, out) if narrow else y


def _fit_window(b: Builder, x: str, kernel, stride, dilation, pads, notes: list[str]):
    """Legal TOSA geometry: returns (x, stride (h, w), TOSA pad [top, bottom, left, right])."""
    n, h, w, c = b.shape(x)
    top, left, bottom, right = pads
    _, sh, bottom2, drop_h = window_fit(h, kernel[0], stride[0], dilation[0], top, bottom)
    _, sw, right2, drop_w = window_fit(w, kernel[1], stride[1], dilation[1], left, right)
    if (bottom2, right2) != (bottom, right):
        notes.append(f"pad bottom/right {bottom}/{right} -> {bottom2}/{right2} (TOSA idiv_check)")
    if (sh, sw) != tuple(stride):
        notes.append(f"stride {tuple(stride)} -> {(sh, sw)} (one output position)")
    if drop_h or drop_w:
        notes.append(f"SLICE drops {drop_h} trailing rows, {drop_w} columns no window reads")
        x = b.slice(x, [0, 0, 0, 0], [n, h - drop_h, w - drop_w, c])
    return x, (sh, sw), [top, bottom2, left, right2]


def _geometry(node: Node):
    a = node.attrs
    return ((a["stride_h"], a["stride_w"]), (a["dilation_h"], a["dilation_w"]),
            (a["pad_top"], a["pad_left"], a["pad_bottom"], a["pad_right"]))


def _conv(b: Builder, opname: str, x: str, weight: np.ndarray, bias: np.ndarray, in_zp: int,
          stride, dilation, pad, out_shape) -> str:
    """CONV2D (OHWI weight) or DEPTHWISE_CONV2D ([KH, KW, C, M]) with an int32 accumulator, or
    for an int16 x an int48 one (TOSA's i16 x i8 form, an int48 bias)."""
    wide = b.dtype(x) == "int16"
    acc_t = "int48" if wide else "int32"
    args = [x, b.const(weight, "int8", "weight"), b.const(bias, acc_t, "bias"),
            b.const(in_zp, b.dtype(x), "input_zp"), b.const(0, "int8", "weight_zp")]
    kind = "Conv2d" if opname == "CONV2D" else "DepthwiseConv2d"
    at = attr(kind, list(pad), list(stride), list(dilation), False,
              ts.DType.INT48 if wide else ts.DType.INT32)
    return b.op(opname, args, out_shape, acc_t, at)


def _out_shape(node: Node, channels: int | None = None) -> list[int]:
    shape = list(node.outputs[0].shape)
    if channels is not None:
        shape[-1] = channels
    return shape


# --- MAC ops --------------------------------------------------------------------------------------

def lower_conv2d(b: Builder, node: Node, ins: list[str], out: str, notes: list[str]) -> str:
    x, (w, bias, mult, shift) = ins[0], (t.data for t in node.inputs[1:])
    a = node.attrs
    stride, dilation, pads = _geometry(node)
    x, stride, pad = _fit_window(b, x, w.shape[1:3], stride, dilation, pads, notes)
    groups, cin = a["groups"], b.shape(x)[3]
    if groups == 1:
        acc = _conv(b, "CONV2D", x, w, bias, a["in_zp"], stride, dilation, pad, _out_shape(node))
    elif w.shape[3] == 1:  # one input channel per group: depthwise, multiplier Cout / Cin
        notes.append(f"groups={groups} with one input channel each -> DEPTHWISE_CONV2D")
        dw = w[..., 0].transpose(1, 2, 0).reshape(w.shape[1], w.shape[2], cin, -1)
        acc = _conv(b, "DEPTHWISE_CONV2D", x, dw, bias, a["in_zp"], stride, dilation, pad,
                    _out_shape(node))
    else:
        notes.append(f"groups={groups} -> SLICE / CONV2D / CONCAT per group")
        acc = _grouped(b, node, x, w, bias, stride, dilation, pad)
    return _output_stage(b, acc, mult, shift, a["out_zp"], a["act_min"], a["act_max"], out,
                         dtype=node.outputs[0].dtype)


def _grouped(b: Builder, node: Node, x: str, w, bias, stride, dilation, pad) -> str:
    n, h, wd, cin = b.shape(x)
    groups = node.attrs["groups"]
    cg, og = cin // groups, w.shape[0] // groups
    accs = []
    for g in range(groups):
        xg = b.slice(x, [0, 0, 0, g * cg], [n, h, wd, cg])
        ws, bs = w[g * og:(g + 1) * og], bias[g * og:(g + 1) * og]
        accs.append(_conv(b, "CONV2D", xg, ws, bs, node.attrs["in_zp"], stride, dilation, pad,
                          _out_shape(node, og)))
    return b.concat(accs, 3)


def check_conv_transpose2d(node: Node) -> str:
    """TRANSPOSE_CONV2D has no dilation, and its out_pad (= -pad) must exceed -kernel."""
    a, (kh, kw) = node.attrs, node.inputs[1].shape[1:3]
    if (a["dilation_h"], a["dilation_w"]) != (1, 1):
        return "conv_transpose2d: dilation > 1 (TOSA 1.0 TRANSPOSE_CONV2D has no dilation)"
    if max(a["pad_top"], a["pad_bottom"]) >= kh or max(a["pad_left"], a["pad_right"]) >= kw:
        return "conv_transpose2d: padding >= kernel (TOSA 1.0 needs out_pad > -kernel)"
    return S.check_mac(node)


def lower_conv_transpose2d(b: Builder, node: Node, ins, out: str, notes) -> str:
    """TRANSPOSE_CONV2D (weight [Cout, KH, KW, Cin/G] as ours, out_pad = -pad); groups > 1 as
    SLICE / TRANSPOSE_CONV2D / CONCAT per group."""
    x, (w, bias, mult, shift), a = ins[0], (t.data for t in node.inputs[1:]), node.attrs
    n, h, wd, cin = b.shape(x)
    groups = a["groups"]
    cg, og = cin // groups, w.shape[0] // groups
    at = attr("TransposeConv2d", [-a["pad_top"], -a["pad_bottom"], -a["pad_left"],
                                  -a["pad_right"]], [a["stride_h"], a["stride_w"]], False,
              ts.DType.INT32)
    accs = []
    for g in range(groups):
        xg = x if groups == 1 else b.slice(x, [0, 0, 0, g * cg], [n, h, wd, cg])
        args = [xg, b.const(w[g * og:(g + 1) * og], "int8", "weight"),
                b.const(bias[g * og:(g + 1) * og], "int32", "bias"),
                b.const(a["in_zp"], "int8", "input_zp"), b.const(0, "int8", "weight_zp")]
        accs.append(b.op("TRANSPOSE_CONV2D", args, _out_shape(node, og), "int32", at))
    if groups > 1:
        notes.append(f"groups={groups} -> SLICE / TRANSPOSE_CONV2D / CONCAT per group")
    acc = accs[0] if groups == 1 else b.concat(accs, 3)
    return _output_stage(b, acc, mult, shift, a["out_zp"], a["act_min"], a["act_max"], out)


def lower_depthwise_conv2d(b: Builder, node: Node, ins, out: str, notes) -> str:
    w, bias, mult, shift = (t.data for t in node.inputs[1:])
    a = node.attrs
    w = w.reshape(w.shape[-3:])  # "1HWC" accepted like the reference
    stride, dilation, pads = _geometry(node)
    x, stride, pad = _fit_window(b, ins[0], w.shape[:2], stride, dilation, pads, notes)
    c = b.shape(x)[3]
    dw = w.reshape(w.shape[0], w.shape[1], c, a["depth_multiplier"])
    acc = _conv(b, "DEPTHWISE_CONV2D", x, dw, bias, a["in_zp"], stride, dilation, pad,
                _out_shape(node))
    return _output_stage(b, acc, mult, shift, a["out_zp"], a["act_min"], a["act_max"], out,
                         dtype=node.outputs[0].dtype)


def lower_fully_connected(b: Builder, node: Node, ins, out: str, notes) -> str:
    w, bias, mult, shift = (t.data for t in node.inputs[1:])
    a = node.attrs
    n, cin = b.shape(ins[0])
    notes.append("as CONV2D 1x1 on [N, 1, 1, In] (TOSA 1.0 has no FULLY_CONNECTED)")
    x4 = b.reshape(ins[0], [n, 1, 1, cin])
    acc = _conv(b, "CONV2D", x4, w.reshape(w.shape[0], 1, 1, cin), bias, a["in_zp"], (1, 1),
                (1, 1), [0, 0, 0, 0], [n, 1, 1, w.shape[0]])
    y = _output_stage(b, acc, mult, shift, a["out_zp"], a["act_min"], a["act_max"], None,
                      dtype=node.outputs[0].dtype)
    return b.reshape(y, [n, w.shape[0]], out)


def check_matmul(node: Node) -> str:
    a = node.attrs
    if node.inputs[0].dtype == "int16":  # i16 x i16 -> i48; apply_scale_16 takes any int48
        k = node.inputs[0].shape[-1] << 30
        if k > S.INT48[1]:
            return "matmul: the int16 accumulator can leave int48 (TOSA MATMUL i16 -> i48)"
        lo, hi = (S._rq(v, a["mult"], a["shift"]) for v in (-k, k))
        return ("matmul: the rescaled int16 accumulator can leave int32 (TOSA apply_scale_16)"
                if lo < S.INT32[0] or hi > S.INT32[1] else "")
    k = node.inputs[0].shape[-1] * 255 * 255  # |acc| bound of two int8 activations
    return S._rescale_problem("matmul", -k, k, a["mult"], a["shift"], "the accumulator")


def lower_matmul(b: Builder, node: Node, ins, out: str, notes) -> str:
    """MATMUL [B, M, K] x [B, K, N] -> int32 (zero points as inputs), then the output stage.
    TOSA 1.0 MATMUL has no batch broadcast and no transposed operand: TILE and TRANSPOSE."""
    a, y = node.attrs, node.outputs[0].shape
    dt = node.inputs[0].dtype  # int16: MATMUL i16 x i16 -> i48, RESCALE apply_scale_16
    batch, xs = y[:-2], []
    for x in ins:
        shp = b.shape(x)
        if tuple(shp[:-2]) != tuple(batch):
            notes.append("broadcast batch dims made explicit (TILE)")
            times = [yd // xd for xd, yd in zip(shp[:-2], batch)] + [1, 1]
            x = b.op("TILE", [x, b.shape_const(times)], (*batch, *shp[-2:]), dt, attr("Tile"))
        xs.append(b.reshape(x, [int(np.prod(batch, dtype=np.int64)), *shp[-2:]]))
    av, bv = xs
    if a["transpose_b"]:
        nb, n, k = b.shape(bv)
        bv = b.op("TRANSPOSE", [bv], [nb, k, n], dt, attr("Transpose", [0, 2, 1]))
    zps = [b.const(a[z], dt, z) for z in ("a_zp", "b_zp")]
    acc = b.op("MATMUL", [av, bv, *zps], [*b.shape(av)[:2], b.shape(bv)[2]],
               "int48" if dt == "int16" else "int32", attr("MatMul"))
    yv = _output_stage(b, acc, a["mult"], a["shift"], a["out_zp"], a["act_min"], a["act_max"],
                       None, dtype=dt)
    return b.reshape(yv, y, out)


# --- element-wise ---------------------------------------------------------------------------------

def _equal_rank(b: Builder, node: Node, ins) -> list[str]:
    """The operands of an element-wise op (a constant one as a TOSA constant), of y's rank: TOSA
    broadcasts size-1 dims of equal-rank tensors, so leading 1s are added (RESHAPE)."""
    acts, r, xs = iter(ins), len(node.outputs[0].shape), []
    for t in node.inputs:
        x = b.const(t.data.reshape((1,) * (r - t.data.ndim) + t.data.shape).view(np.int8),
                    "int8", t.name) if t.is_const else next(acts)  # a uint8 mask: its bytes
        xs.append(x if len(b.shape(x)) == r else
                  b.reshape(x, (1,) * (r - len(b.shape(x))) + tuple(b.shape(x))))
    return xs


def lower_add(b: Builder, node: Node, ins, out: str, notes) -> str:
    a = node.attrs
    ins = _equal_rank(b, node, ins)
    scaled = [b.rescale(x, a[f"{s}_mult"], rescale_shifts(a[f"{s}_mult"], a[f"{s}_shift"]),
                        a[f"{s}_zp"], 0, "int32") for x, s in zip(ins, "ab")]
    kind = "Sub" if node.op == "sub" else "Add"  # sub: the same sequence with SUB
    total = b.op(kind.upper(), scaled, _out_shape(node), "int32", attr(kind))
    return _output_stage(b, total, a["out_mult"], a["out_shift"], a["out_zp"], a["act_min"],
                         a["act_max"], out, dtype=node.outputs[0].dtype)


def check_conv2d_add(node: Node) -> str:
    conv, add = split_residual(node)
    return S.check_mac(conv) or S.check_add(add)


def lower_conv2d_add(b: Builder, node: Node, ins, out: str, notes) -> str:
    """CONV2D's sequence to the conv's int8 output, then add's with skip (exactly the pair)."""
    conv, add = split_residual(node)
    mid = lower_conv2d(b, conv, ins[:1], None, notes)
    return lower_add(b, add, [mid, ins[1]], out, notes)


def lower_mul(b: Builder, node: Node, ins, out: str, notes) -> str:
    a = node.attrs
    ins = _equal_rank(b, node, ins)
    if a["a_zp"] or a["b_zp"]:  # MUL has no zero points: subtract them in an exact RESCALE
        notes.append("zero points removed by RESCALE int8->int32 (x1: mult 2^30, shift 30)")
        ins = [b.rescale(x, 1 << 30, 30, a[f"{s}_zp"], 0, "int32") for x, s in zip(ins, "ab")]
    prod = b.op("MUL", [*ins, b.const(0, "int8", "mul_shift")], _out_shape(node), "int32",
                attr("Mul"))
    return _output_stage(b, prod, a["mult"], a["shift"], a["out_zp"], a["act_min"],
                         a["act_max"], out, dtype=node.outputs[0].dtype)


def lower_rescale(b: Builder, node: Node, ins, out: str, notes) -> str:
    a = node.attrs
    return _output_stage(b, ins[0], a["mult"], a["shift"], a["out_zp"], a["act_min"],
                         a["act_max"], out, in_zp=a["in_zp"], dtype=node.outputs[0].dtype)


def lower_clamp(b: Builder, node: Node, ins, out: str, notes) -> str:
    return b.clamp(ins[0], node.attrs["act_min"], node.attrs["act_max"], out)


def lower_minmax(b: Builder, node: Node, ins, out: str, notes) -> str:
    """MAXIMUM/MINIMUM take int32 in TOSA 1.0 INT: exact RESCALEs to int32 and back (x1)."""
    kind = "Maximum" if node.op == "maximum" else "Minimum"
    wide = [b.rescale(x, 1 << 30, 30, 0, 0, "int32") for x in _equal_rank(b, node, ins)]
    nan = ts.NanPropagationMode.PROPAGATE  # no NaN in integers; the attribute is required
    y = b.op(kind.upper(), wide, _out_shape(node), "int32", attr(kind, nan))
    a = node.attrs
    return _output_stage(b, y, 1 << 30, 30, 0, a["act_min"], a["act_max"], out)


def lower_compare(b: Builder, node: Node, ins, out: str, notes) -> str:
    """RESCALE each side to int32, exactly (v - zp) * mult * 2^shift (mult' = mult * 2^(shift +
    10), shift 10; support.check_compare bounds it) -> GREATER / GREATER_EQUAL / EQUAL (lt, le:
    operands swapped; ne: LOGICAL_NOT) -> CAST bool -> int8 0/1 (the uint8 mask's bytes)."""
    a, shape = node.attrs, _out_shape(node)
    wide = [b.rescale(x, a[f"{s}_mult"] << (a[f"{s}_shift"] + 10), 10, a[f"{s}_zp"], 0, "int32")
            for x, s in zip(_equal_rank(b, node, ins), "ab")]
    kind = COMPARE_KINDS[a["kind"]]
    args = wide[::-1] if kind in ("lt", "le") else wide
    name = {"eq": "Equal", "ne": "Equal", "gt": "Greater", "lt": "Greater"}.get(kind,
                                                                               "GreaterEqual")
    mask = b.op({"Equal": "EQUAL", "Greater": "GREATER"}.get(name, "GREATER_EQUAL"), args, shape,
                "bool", attr(name))
    if kind == "ne":
        mask = b.op("LOGICAL_NOT", [mask], shape, "bool", attr("LogicalNot"))
    return b.op("CAST", [mask], shape, "int8", attr("Cast"), out)


def lower_where(b: Builder, node: Node, ins, out: str, notes) -> str:
    """CAST the mask int8 -> bool (nonzero: true); RESCALE a and b into y's qparams unless they
    have them (mult 2^30, shift 30, zp = out_zp) -> SELECT."""
    a, xs = node.attrs, _equal_rank(b, node, ins)
    mask = b.op("CAST", [xs[0]], b.shape(xs[0]), "bool", attr("Cast"))
    vals = [x if (a[f"{s}_mult"], a[f"{s}_shift"], a[f"{s}_zp"]) == (1 << 30, 30, a["out_zp"])
            else b.rescale(x, a[f"{s}_mult"], rescale_shifts(a[f"{s}_mult"], a[f"{s}_shift"]),
                           a[f"{s}_zp"], a["out_zp"], "int8")
            for x, s in zip(xs[1:], "ab")]
    return b.op("SELECT", [mask, *vals], _out_shape(node), "int8", attr("Select"), out)


def lower_lut(b: Builder, node: Node, ins, out: str, notes) -> str:
    """TABLE; int16: TABLE's interpolation (int32, 7 fraction bits of half-LSB entries), then
    RESCALE by 2^-6 (mult 2^30, shift 36) to int16: the reference's (acc + 32) >> 6."""
    if b.dtype(ins[0]) == "int16":
        table = b.const(node.inputs[1].data, "int16", "table")
        acc = b.op("TABLE", [ins[0], table], b.shape(ins[0]), "int32", attr("Table"))
        return b.rescale(acc, 1 << 30, 36, 0, 0, "int16", out)
    table = b.const(node.inputs[1].data, "int8", "table")
    return b.op("TABLE", [ins[0], table], b.shape(ins[0]), "int8", attr("Table"), out)


# --- pooling --------------------------------------------------------------------------------------

def _pool_params(node: Node):
    a = node.attrs
    return ((a["kernel_h"], a["kernel_w"]), (a["stride_h"], a["stride_w"]),
            (a["pad_top"], a["pad_left"], a["pad_bottom"], a["pad_right"]))


def _clamp_if(b: Builder, y: str, node: Node, out: str) -> str:
    lo, hi = node.attrs["act_min"], node.attrs["act_max"]
    return y if (lo, hi) == INT8_RANGE and b.dtype(y) == "int8" else b.clamp(y, lo, hi, out)


def lower_max_pool2d(b: Builder, node: Node, ins, out: str, notes) -> str:
    kernel, stride, pads = _pool_params(node)
    x, stride, pad = _fit_window(b, ins[0], kernel, stride, (1, 1), pads, notes)
    at = attr("MaxPool2d", list(kernel), list(stride), pad, ts.NanPropagationMode.PROPAGATE)
    narrow = (node.attrs["act_min"], node.attrs["act_max"]) != INT8_RANGE or b.dtype(x) != "int8"
    y = b.op("MAX_POOL2D", [x], _out_shape(node), b.dtype(x), at, None if narrow else out)
    return _clamp_if(b, y, node, out)


def lower_avg_pool2d(b: Builder, node: Node, ins, out: str, notes) -> str:
    a = node.attrs
    kernel, stride, pads = _pool_params(node)
    area = kernel[0] * kernel[1]
    if a["divisor"] > 0 and a["divisor"] != area:
        return _avg_pool_divisor(b, node, ins[0], out, notes)
    x, stride, pad = _fit_window(b, ins[0], kernel, stride, (1, 1), pads, notes)
    counts_pad = a["count_include_pad"] or a["divisor"] == area
    if counts_pad and any(pad):  # every window counts KH*KW: pad explicitly with in_zp (adds 0)
        notes.append("count_include_pad: PAD with in_zp, then AVG_POOL2D without padding")
        x = b.pad(x, [0, pad[0], pad[2], 0], [0, pad[1], pad[3], 0], a["in_zp"])
        pad = [0, 0, 0, 0]
    args = [x, b.const(a["in_zp"], "int8", "input_zp"), b.const(a["out_zp"], "int8", "output_zp")]
    at = attr("AvgPool2d", list(kernel), list(stride), pad, ts.DType.INT32)
    narrow = (a["act_min"], a["act_max"]) != INT8_RANGE
    y = b.op("AVG_POOL2D", args, _out_shape(node), "int8", at, None if narrow else out)
    return _clamp_if(b, y, node, out)


def check_resize(node: Node) -> str:
    """TOSA 1.0 RESIZE's bounds per axis (scale_n <= 2^11 is the op's domain already)."""
    a = node.attrs
    for k in ("y", "x"):
        n, d, offset, border = (a[f"scale_{k}_n"], a[f"scale_{k}_d"], a[f"offset_{k}"],
                                a[f"border_{k}"])
        if d >= 16 * n or not (-n <= offset < 16 * n and -16 * n <= border < n):
            return (f"resize: {k} scale {n}/{d}, offset {offset}, border {border}: TOSA needs "
                    "scale_d < 16 n, -n <= offset < 16 n, -16 n <= border < n (a shrink by 16 "
                    "or more, align_corners on a size-1 axis)")
    bound = 128 * a["scale_y_n"] * a["scale_x_n"]
    return a["mode"] and S._rescale_problem("resize", -bound, bound, a["mult"], a["shift"],
                                            "the 4-tap sum") or ""


def lower_resize(b: Builder, node: Node, ins, out: str, notes) -> str:
    """RESIZE (nearest: int8; bilinear: the int32 4-tap sum, then RESCALE), CLAMP if narrow."""
    a, linear = node.attrs, node.attrs["mode"] == 1
    args = [ins[0], b.shape_const([a[f"scale_{k}_{f}"] for k in "yx" for f in "nd"]),
            b.shape_const([a["offset_y"], a["offset_x"]]),
            b.shape_const([a["border_y"], a["border_x"]])]
    at = attr("Resize", ts.ResizeMode.BILINEAR if linear else ts.ResizeMode.NEAREST)
    if linear:
        acc = b.op("RESIZE", args, _out_shape(node), "int32", at)
        return _output_stage(b, acc, [a["mult"]], [a["shift"]], 0, a["act_min"], a["act_max"],
                             out)
    narrow = (a["act_min"], a["act_max"]) != INT8_RANGE
    return _clamp_if(b, b.op("RESIZE", args, _out_shape(node), "int8", at,
                             None if narrow else out), node, out)


def _avg_pool_divisor(b: Builder, node: Node, x: str, out: str, notes) -> str:
    """sum(x - in_zp) by a DEPTHWISE_CONV2D of ones, then RESCALE by reciprocal_scale(divisor)."""
    a = node.attrs
    kernel, stride, pads = _pool_params(node)
    notes.append(f"divisor {a['divisor']}: DEPTHWISE_CONV2D of ones + RESCALE (AVG_POOL2D "
                 "divides by the window's own count)")
    x, stride, pad = _fit_window(b, x, kernel, stride, (1, 1), pads, notes)
    c = b.shape(x)[3]
    ones = np.ones((*kernel, c, 1), np.int8)
    acc = _conv(b, "DEPTHWISE_CONV2D", x, ones, np.zeros(c, np.int32), a["in_zp"], stride, (1, 1),
                pad, _out_shape(node))
    mult, shift = reciprocal_scale(a["divisor"])
    return _output_stage(b, acc, mult, shift, a["out_zp"], a["act_min"], a["act_max"], out)


# --- reductions -----------------------------------------------------------------------------------

def _reduced(node: Node) -> list[int]:
    return [i for i in range(len(node.inputs[0].shape)) if node.attrs["axes"] >> i & 1]


def lower_reduce_sum(b: Builder, node: Node, ins, out: str, notes) -> str:
    """x - in_zp by an exact RESCALE to int32 (x1), REDUCE_SUM per reduced axis, output stage
    (int8 or int16: int32 sums of at most 2^16 - 1 int16 values, zero points 0)."""
    a = node.attrs
    acc = b.rescale(ins[0], 1 << 30, 30, a["in_zp"], 0, "int32")
    for axis in _reduced(node):
        shape = [1 if i == axis else d for i, d in enumerate(b.shape(acc))]
        acc = b.op("REDUCE_SUM", [acc], shape, "int32", attr("ReduceSum", axis))
    return _output_stage(b, acc, a["mult"], a["shift"], a["out_zp"], a["act_min"], a["act_max"],
                         out, dtype=node.outputs[0].dtype)


def lower_reduce_minmax(b: Builder, node: Node, ins, out: str, notes) -> str:
    """REDUCE_MAX / REDUCE_MIN on int8, one per reduced axis, then the clamp."""
    kind, y = ("Max" if node.op == "reduce_max" else "Min"), ins[0]
    axes = _reduced(node)
    narrow = (node.attrs["act_min"], node.attrs["act_max"]) != INT8_RANGE
    for k, axis in enumerate(axes):
        shape = [1 if i == axis else d for i, d in enumerate(b.shape(y))]
        last = k == len(axes) - 1 and not narrow
        at = attr(f"Reduce{kind}", axis, ts.NanPropagationMode.PROPAGATE)
        y = b.op(f"REDUCE_{kind.upper()}", [y], shape, "int8", at, out if last else None)
    return _clamp_if(b, y, node, out)


# --- data movement --------------------------------------------------------------------------------

def _lead(t: Tensor) -> int:
    return 4 - len(t.shape)


def lower_transpose(b: Builder, node: Node, ins, out: str, notes) -> str:
    lead = _lead(node.inputs[0])
    perm = [node.attrs[f"perm{i}"] - lead for i in range(lead, 4)]
    return b.op("TRANSPOSE", ins, node.outputs[0].shape, b.dtype(ins[0]),
                attr("Transpose", perm), out)


def lower_concat(b: Builder, node: Node, ins, out: str, notes) -> str:
    return b.concat(ins, node.attrs["axis"] - _lead(node.inputs[0]), out)


def lower_pad(b: Builder, node: Node, ins, out: str, notes) -> str:
    lead = _lead(node.inputs[0])
    before = [node.attrs[f"before{i}"] for i in range(lead, 4)]
    after = [node.attrs[f"after{i}"] for i in range(lead, 4)]
    return b.pad(ins[0], before, after, node.attrs["value"], out)


def check_slice(node: Node) -> str:
    a, rank = node.attrs, len(node.inputs[0].shape)
    if any(a[f"step{k}"] not in (-1, 0, 1) and a[f"size{k}"] > 1 for k in range(6)):
        return "strided_slice: a step other than -1, 0 or 1 (TOSA SLICE reads whole boxes)"
    return "" if rank <= 4 else f"strided_slice: rank {rank} outside 1..4"


def lower_slice(b: Builder, node: Node, ins, out: str, notes) -> str:
    """SLICE of the box read, then REVERSE along each step -1 dim, TILE along the step 0 ones."""
    a, real = node.attrs, range(6 - len(node.inputs[0].shape), 6)
    size = [a[f"size{k}"] for k in real]
    step = [a[f"step{k}"] if n > 1 else 1 for k, n in zip(real, size)]
    start = [a[f"start{k}"] + min(st, 0) * (n - 1) for k, st, n in zip(real, step, size)]
    todo = [("REVERSE", k) for k, st in enumerate(step) if st < 0] + [("TILE", 0)] * (0 in step)
    y = b.slice(ins[0], start, [n if st else 1 for st, n in zip(step, size)], None if todo else out)
    for i, (op, k) in enumerate(todo):
        last = out if i == len(todo) - 1 else None
        if op == "REVERSE":
            y = b.op("REVERSE", [y], b.shape(y), b.dtype(y), attr("Reverse", k), last)
        else:
            tiles = b.shape_const([n if st == 0 else 1 for st, n in zip(step, size)])
            y = b.op("TILE", [y, tiles], size, b.dtype(y), attr("Tile"), last)
    return y


def lower_gather(b: Builder, node: Node, ins, out: str, notes) -> str:
    """x as [outer, n, inner] -> GATHER with the indices repeated per outer index -> y."""
    x, idx = node.inputs[0], node.inputs[1].data
    axis = node.attrs["axis"] - (6 - len(x.shape))
    outer, inner = int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis + 1:]))
    values = b.reshape(ins[0], [outer, x.shape[axis], inner])
    table = b.const(np.tile(idx, (outer, 1)), "int32", "indices")
    y = b.op("GATHER", [values, table], [outer, idx.size, inner], "int8", attr("Gather"))
    return b.reshape(y, list(node.outputs[0].shape), out)


def lower_reshape(b: Builder, node: Node, ins, out: str, notes) -> str:
    return b.reshape(ins[0], node.outputs[0].shape, out)


# op -> (exactness check from support.py: '' or why not, lowering). Every op of the registry
# whose `tosa` fact is "" has a row (tests/py/test_registry.py).
RULES = {
    "conv2d": (S.check_mac, lower_conv2d),
    "conv2d_add": (check_conv2d_add, lower_conv2d_add),
    "depthwise_conv2d": (S.check_mac, lower_depthwise_conv2d),
    "fully_connected": (S.check_mac, lower_fully_connected),
    "matmul": (check_matmul, lower_matmul),
    "conv_transpose2d": (check_conv_transpose2d, lower_conv_transpose2d),
    "add": (S.check_add, lower_add), "sub": (S.check_add, lower_add),
    "mul": (S.check_mul, lower_mul),
    "rescale": (S.check_rescale, lower_rescale),
    "clamp": (S.exact, lower_clamp),
    "lut": (S.check_lut, lower_lut),
    "maximum": (S.exact, lower_minmax),
    "minimum": (S.exact, lower_minmax),
    "max_pool2d": (S.pool_windows, lower_max_pool2d),
    "avg_pool2d": (S.check_avg_pool, lower_avg_pool2d),
    "resize": (check_resize, lower_resize),
    "transpose": (S.check_movement, lower_transpose),
    "concat": (S.check_movement, lower_concat),
    "pad": (S.check_movement, lower_pad),
    "copy": (S.check_movement, lower_reshape),
    "strided_slice": (check_slice, lower_slice),
    "gather": (S.check_movement, lower_gather),
    "reduce_sum": (S.check_reduce_sum, lower_reduce_sum),
    "reduce_max": (S.exact, lower_reduce_minmax),
    "reduce_min": (S.exact, lower_reduce_minmax),
    "reshape": (S.check_movement, lower_reshape),
    "compare": (S.check_compare, lower_compare),
    "where": (S.check_where, lower_where),
}
