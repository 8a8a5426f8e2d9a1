"""Lift a PT2E-converted graph (quantize/dequantize around aten ops) into mcutorch IR.

Every `quantize_per_tensor` node becomes one int8 IR tensor; the aten op chain feeding it (an op,
optionally followed by a ReLU/ReLU6/clamp that fuses into the op's clamp) becomes one IR node
whose operands are the int8 tensors behind its `dequantize` inputs. The result is still in torch's
NCHW layout with float scales; passes/ turn it into program-ready NHWC integer ops.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch.fx import GraphModule, Node as FxNode

from mcutorch.errors import UnsupportedOpError
from mcutorch.frontend.capture import source_of
from mcutorch.ir import Graph, Node, Tensor, verify
from mcutorch import ops
from mcutorch.frontend._torchao import pt2e

pt2e()  # registers torch.ops.quantized_decomposed

A = torch.ops.aten
QD = torch.ops.quantized_decomposed
Q_OPS = {QD.quantize_per_tensor.default, QD.quantize_per_tensor.tensor}
DQ_OPS = {QD.dequantize_per_tensor.default, QD.dequantize_per_tensor.tensor,
          QD.dequantize_per_channel.default}
ACT_BOUNDS = {A.relu.default: (0.0, math.inf), A.relu_.default: (0.0, math.inf),
              A.relu6.default: (0.0, 6.0)}
HARDTANH = {A.hardtanh.default, A.hardtanh_.default}


def _bounds(node: FxNode) -> tuple[float, float] | None:
    """Float clamp bounds of an activation node, or None if it is not one."""
    if node.target in ACT_BOUNDS:
        return ACT_BOUNDS[node.target]
    if node.target in HARDTANH:
        return (float(_arg(node, 1, "min_val", -1.0)), float(_arg(node, 2, "max_val", 1.0)))
    if node.target == A.clamp.default:
        lo, hi = _arg(node, 1, "min", None), _arg(node, 2, "max", None)
        return (-math.inf if lo is None else float(lo), math.inf if hi is None else float(hi))
    return None


def _arg(node: FxNode, i: int, name: str, default=None):
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def _pair(v, n=2) -> tuple[int, ...]:
    return tuple(v) * (n // len(v)) if isinstance(v, (list, tuple)) else (int(v),) * n


class Lifter:
    def __init__(self, gm: GraphModule):
        self.gm = gm
        self.values: dict[FxNode, Tensor] = {}  # q node / constant node -> IR tensor
        self.nodes: list[Node] = []
        self.names: set[str] = set()
        self.qnodes: dict[str, str] = {}  # IR tensor name -> the quantize node it came from

    # --- tensors ------------------------------------------------------------------------------
    def new_tensor(self, name: str, shape, scale=1.0, zp=0, **kw) -> Tensor:
        base, i = name, 1
        while name in self.names:
            name, i = f"{base}_{i}", i + 1
        self.names.add(name)
        return Tensor(name, tuple(int(s) for s in shape), scale=scale, zero_point=int(zp), **kw)

    def qparams(self, q: FxNode) -> tuple[float, int]:
        scale, zp = q.args[1], q.args[2]
        if isinstance(scale, FxNode):
            scale, zp = (self._attr(scale).item(), int(self._attr(zp).item()))
        return float(scale), int(zp)

    def _attr(self, node: FxNode) -> torch.Tensor:
        if node.op != "get_attr":
            raise UnsupportedOpError(f"expected a constant, got {node.format_node()}")
        obj = self.gm
        for part in node.target.split("."):
            obj = getattr(obj, part)
        return obj.detach() if isinstance(obj, torch.Tensor) else torch.as_tensor(obj)

    def operand(self, arg, user: FxNode) -> Tensor:
        """IR tensor behind an op's argument (must come through a dequantize)."""
        if not (isinstance(arg, FxNode) and arg.op == "call_function" and arg.target in DQ_OPS):
            raise UnsupportedOpError(
                f"{source_of(user)} takes a non-quantized input ({_describe(arg)}); mcutorch "
                "programs are int8 end to end")
        src = arg.args[0]
        if src in self.values:
            return self.values[src]
        if src.op != "get_attr":
            raise UnsupportedOpError(f"cannot trace the input of {source_of(user)}")
        data = self._attr(src).numpy()
        if arg.target == QD.dequantize_per_channel.default:
            scale = self._attr(arg.args[1]).numpy().astype(np.float64)
            zp, axis = 0, int(arg.args[3])
            if axis != 0:
                raise UnsupportedOpError(f"per-channel axis {axis} at {source_of(user)}")
        else:
            scale, zp = self.qparams(arg)
        dtype = {np.int8: "int8", np.int32: "int32"}.get(data.dtype.type)
        if dtype is None:
            raise UnsupportedOpError(f"constant of dtype {data.dtype} at {source_of(user)}")
        t = self.new_tensor(src.name, data.shape, scale, zp, dtype=dtype, data=data)
        self.values[src] = t
        return t

    # --- graph --------------------------------------------------------------------------------
    def run(self) -> Graph:
        inputs, outputs = [], []
        meta = {"inputs": [], "outputs": [], "qnodes": self.qnodes}
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                q = _only_quantize_user(node)
                s, zp = self.qparams(q)
                shape = tuple(node.meta["val"].shape)
                t = self.new_tensor(node.name, shape, s, zp, layout=_layout(shape))
                self.values[q] = t
                self.qnodes[t.name] = q.name
                inputs.append(t)
                meta["inputs"].append({"name": node.name, "shape": list(shape),
                                       "dtype": str(node.meta["val"].dtype)})
            elif node.op == "call_function" and node.target in Q_OPS and node not in self.values:
                self.lift_quantize(node)
            elif node.op == "output":
                for ret in _flatten(node.args[0]):
                    t = self.operand(ret, node)
                    outputs.append(t)
                    meta["outputs"].append({"name": t.name, "shape": list(t.shape)})
            elif node.op == "call_function" and node.target not in Q_OPS | DQ_OPS:
                if not any(u.target in Q_OPS for u in node.users) and not _feeds_act(node):
                    raise UnsupportedOpError(f"{source_of(node)} is not quantized: mcutorch "
                                             "has no int8 lowering for it")
        return verify(Graph(self.nodes, inputs, outputs, meta), stage="lift")

    def lift_quantize(self, q: FxNode) -> None:
        prod = q.args[0]
        s, zp = self.qparams(q)
        bounds = None
        if isinstance(prod, FxNode) and _bounds(prod) is not None:
            inner = prod.args[0]
            if inner.op == "call_function" and inner.target not in DQ_OPS and len(inner.users) == 1:
                bounds, prod = _bounds(prod), inner  # fused activation
        requant = prod.target in DQ_OPS  # q(dq(x)): requantize an existing int8 tensor
        src = self.operand(prod, q) if requant else None
        shape = src.shape if requant else tuple(prod.meta["val"].shape)
        out = self.new_tensor(prod.name if not requant else q.name, shape, s, zp,
                              layout=src.layout if requant else _layout(shape))
        self.values[q] = out
        self.qnodes[out.name] = q.name
        act = _act_range(bounds, s, zp)
        if requant:
            self.emit("rescale", [src], out, {"act": act}, q)
            return
        builder_of(prod)(self, prod, out, act)

    def emit(self, op: str, inputs: list[Tensor], out: Tensor, attrs: dict, src: FxNode) -> None:
        self.nodes.append(Node(op, inputs, [out], attrs, source_of(src)))


def _act_range(bounds, s: float, zp: int) -> tuple[int, int]:
    if bounds is None:
        return (-128, 127)
    lo, hi = bounds
    qlo = -128 if lo == -math.inf else int(np.clip(np.round(np.float32(lo) / np.float32(s)) + zp,
                                                   -128, 127))
    qhi = 127 if hi == math.inf else int(np.clip(np.round(np.float32(hi) / np.float32(s)) + zp,
                                                 -128, 127))
    return (qlo, qhi)


def _layout(shape) -> str | None:
    return "NCHW" if len(shape) == 4 else None


def _flatten(obj):
    if isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _flatten(o)
    else:
        yield obj


def _describe(arg) -> str:
    return arg.format_node() if isinstance(arg, FxNode) else repr(arg)


def _only_quantize_user(node: FxNode) -> FxNode:
    qs = [u for u in node.users if u.target in Q_OPS]
    if len(qs) != 1 or len(node.users) != 1:
        raise UnsupportedOpError(f"model input {node.name} must feed quantized ops only")
    return qs[0]


def _feeds_act(node: FxNode) -> bool:
    users = list(node.users)
    return len(users) == 1 and _bounds(users[0]) is not None


# --- builders: one per aten op family ---------------------------------------------------------
def _conv(lf: Lifter, n: FxNode, out: Tensor, act) -> None:
    x, w = lf.operand(n.args[0], n), lf.operand(n.args[1], n)
    b = lf.operand(n.args[2], n) if len(n.args) > 2 and n.args[2] is not None else None
    stride = _pair(_arg(n, 3, "stride", 1))
    padding = _arg(n, 4, "padding", 0)
    dilation = _pair(_arg(n, 5, "dilation", 1))
    groups = int(_arg(n, 6, "groups", 1))
    if isinstance(padding, str):
        padding = _same_padding(x.shape[2:], w.shape[2:], stride, dilation, padding, n)
    else:
        ph, pw = _pair(padding)
        padding = (ph, pw, ph, pw)
    if b is None:
        b = _zero_bias(lf, w, x)
    attrs = {"stride": stride, "dilation": dilation, "padding": tuple(padding), "groups": groups,
             "act": act}
    lf.emit("conv2d", [x, w, b], out, attrs, n)


def _same_padding(in_hw, k_hw, stride, dilation, mode, n) -> tuple[int, int, int, int]:
    if mode == "valid":
        return (0, 0, 0, 0)
    pads = []
    for size, k, s, d in zip(in_hw, k_hw, stride, dilation):
        total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
        pads.append((total // 2, total - total // 2))
    return (pads[0][0], pads[1][0], pads[0][1], pads[1][1])


def _zero_bias(lf: Lifter, w: Tensor, x: Tensor) -> Tensor:
    cout = w.shape[0]
    return lf.new_tensor(w.name + "_bias", (cout,), x.scale * np.asarray(w.scale), 0,
                         dtype="int32", data=np.zeros(cout, np.int32))


def _linear(lf: Lifter, n: FxNode, out: Tensor, act) -> None:
    x, w = lf.operand(n.args[0], n), lf.operand(n.args[1], n)
    b = lf.operand(n.args[2], n) if len(n.args) > 2 and n.args[2] is not None else None
    if len(x.shape) != 2:
        raise UnsupportedOpError(f"{source_of(n)}: linear on a {len(x.shape)}-D input; flatten "
                                 "it to [N, features] first")
    lf.emit("fully_connected", [x, w, b if b is not None else _zero_bias(lf, w, x)], out,
            {"act": act}, n)


def _binary(lf: Lifter, n: FxNode, out: Tensor, act) -> None:
    a, b = (lf.operand(v, n) for v in n.args[:2])
    if a.shape != b.shape or a.shape != out.shape:
        raise UnsupportedOpError(f"{source_of(n)}: broadcasting {list(a.shape)} with "
                                 f"{list(b.shape)} is not supported; shapes must match")
    if n.target in (A.add.Tensor, A.add_.Tensor) and _arg(n, 2, "alpha", 1) != 1:
        raise UnsupportedOpError(f"{source_of(n)}: add with alpha != 1")
    op = "add" if n.target in (A.add.Tensor, A.add_.Tensor) else "mul"
    lf.emit(op, [a, b], out, {"act": act}, n)


def _activation(lf: Lifter, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    lo, hi = _act_range(_bounds(n), out.scale, out.zero_point)
    act = (max(lo, act[0]), min(hi, act[1]))
    lf.emit("rescale", [x], out, {"act": act}, n)


def _pool(lf: Lifter, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    is_max = n.target == A.max_pool2d.default
    kernel = _pair(n.args[1])
    stride = _pair(_arg(n, 2, "stride", None) or kernel)
    ph, pw = _pair(_arg(n, 3, "padding", 0))
    if is_max:
        if _pair(_arg(n, 4, "dilation", 1)) != (1, 1):
            raise UnsupportedOpError(f"{source_of(n)}: dilated max pooling")
        ceil = bool(_arg(n, 5, "ceil_mode", False))
        include_pad, divisor = False, 0
    else:
        ceil = bool(_arg(n, 4, "ceil_mode", False))
        include_pad = bool(_arg(n, 5, "count_include_pad", True))
        divisor = int(_arg(n, 6, "divisor_override", None) or 0)
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


def _global_pool(lf: Lifter, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    if len(x.shape) != 4:
        raise UnsupportedOpError(f"{source_of(n)}: pooling needs a 4-D input")
    h, w = x.shape[2:]
    if n.target == A.mean.dim:
        dims = sorted(d % 4 for d in n.args[1])
        if dims != [2, 3]:
            raise UnsupportedOpError(f"{source_of(n)}: mean over dims {n.args[1]} (only H, W)")
        oh = ow = 1
    else:
        oh, ow = _pair(n.args[1])
    if h % oh or w % ow:
        raise UnsupportedOpError(f"{source_of(n)}: adaptive pooling {h}x{w} -> {oh}x{ow} "
                                 "with uneven windows")
    pooled_shape = (x.shape[0], x.shape[1], oh, ow)
    pooled = out if tuple(out.shape) == pooled_shape else lf.new_tensor(
        out.name + "_pool", pooled_shape, out.scale, out.zero_point, layout="NCHW")
    k = (h // oh, w // ow)
    attrs = {"kernel": k, "stride": k, "padding": (0, 0, 0, 0), "act": act,
             "count_include_pad": 0, "divisor": 0}
    lf.emit("avg_pool2d", [x], pooled, attrs, n)
    if pooled is not out:  # mean without keepdim
        lf.emit("reshape", [pooled], out, {}, n)


def _reshape(lf: Lifter, n: FxNode, out: Tensor, act) -> None:
    lf.emit("reshape", [lf.operand(n.args[0], n)], out, {}, n)


def _permute(lf: Lifter, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    rank = len(x.shape)
    if n.target == A.transpose.int:
        perm = list(range(rank))
        i, j = int(n.args[1]) % rank, int(n.args[2]) % rank
        perm[i], perm[j] = perm[j], perm[i]
    else:
        perm = [int(p) % rank for p in n.args[1]]
    lf.emit("transpose", [x], out, {"perm": tuple(perm)}, n)


def _cat(lf: Lifter, n: FxNode, out: Tensor, act) -> None:
    xs = [lf.operand(v, n) for v in n.args[0]]
    axis = int(_arg(n, 1, "dim", 0)) % len(out.shape)
    lf.emit("concat", xs, out, {"axis": axis}, n)


def _pad(lf: Lifter, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    mode = _arg(n, 2, "mode", "constant") if n.target == A.pad.default else "constant"
    value = _arg(n, 3 if n.target == A.pad.default else 2, "value", 0.0) or 0.0
    if mode != "constant":
        raise UnsupportedOpError(f"{source_of(n)}: {mode} padding (only constant)")
    flat = list(n.args[1])
    rank = len(x.shape)
    before, after = [0] * rank, [0] * rank
    for i in range(len(flat) // 2):  # torch lists the last dim first
        before[rank - 1 - i], after[rank - 1 - i] = int(flat[2 * i]), int(flat[2 * i + 1])
    if min(before + after) < 0:
        raise UnsupportedOpError(f"{source_of(n)}: negative padding (cropping)")
    qvalue = int(np.clip(np.round(np.float32(value) / np.float32(x.scale)) + x.zero_point,
                         -128, 127))
    lf.emit("pad", [x], out, {"before": tuple(before), "after": tuple(after), "value": qvalue}, n)


def _softmax(lf: Lifter, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    dim = int(n.args[1]) % len(x.shape)
    lf.emit("softmax", [x], out, {"dim": dim}, n)


def _lut(lf: Lifter, n: FxNode, out: Tensor, act) -> None:
    fn = ops.SOURCES[str(n.target)][1].fn
    lf.emit("lut", [lf.operand(n.args[0], n)], out, {"fn": fn, "act": act}, n)


def _avg_pool(lf: Lifter, n: FxNode, out: Tensor, act) -> None:
    pool = _pool if n.target == A.avg_pool2d.default else _global_pool
    pool(lf, n, out, act)


def _minmax(lf: Lifter, n: FxNode, out: Tensor, act) -> None:
    a, b = (lf.operand(v, n) for v in n.args[:2])
    if a.shape != b.shape or a.shape != out.shape:
        raise UnsupportedOpError(f"{source_of(n)}: broadcasting {list(a.shape)} with "
                                 f"{list(b.shape)} is not supported; shapes must match")
    lf.emit(ops.SOURCES[str(n.target)][0].name, [a, b], out, {"act": act}, n)


# One builder per op of the registry that has aten sources (mcutorch.ops: OpDef.sources).
BUILDERS = {
    "conv2d": _conv, "fully_connected": _linear, "add": _binary, "mul": _binary,
    "max_pool2d": _pool, "avg_pool2d": _avg_pool, "clamp": _activation, "lut": _lut,
    "softmax": _softmax, "transpose": _permute, "concat": _cat, "pad": _pad,
    "maximum": _minmax, "minimum": _minmax, "reshape": _reshape,
}
SUPPORTED_NAMES = sorted({s.removeprefix("aten.").split(".")[0] for s in ops.SOURCES})


def builder_of(node: FxNode):
    """The lift builder of an aten node (via the registry), or UnsupportedOpError naming it."""
    found = ops.SOURCES.get(str(node.target))
    if found is None:
        raise UnsupportedOpError(f"{source_of(node)} has no int8 lowering in mcutorch "
                                 f"(supported: {', '.join(SUPPORTED_NAMES)})")
    return BUILDERS[found[0].name]


def check_supported(gm: GraphModule) -> None:
    """Fail fast (before calibration) on aten ops mcutorch cannot lower, naming op and source."""
    for node in gm.graph.nodes:
        if node.op == "call_function":
            builder_of(node)
        if node.op == "call_module":
            raise UnsupportedOpError(f"call_module {node.target} left in the exported graph")


def lift(gm: GraphModule) -> Graph:
    """Converted PT2E GraphModule -> IR Graph (NCHW, float scales)."""
    return Lifter(gm).run()
