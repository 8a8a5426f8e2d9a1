"""Lift a PT2E-converted graph (quantize/dequantize around aten ops) into mcutorch IR.

Any correctly converted PT2E module lifts, whoever quantized it (mcutorch's Quantizer, torchao's
XNNPACK/x86/Arm quantizers, a user's own), as long as its scheme is one the numerics contract
covers (docs/numerics.md): per-tensor int8 activations (uint8 ones are converted exactly:
q - 128, zp - 128), int8 symmetric weights per channel (axis 0) or per tensor (-128 allowed),
int32 bias at s_in * s_w (any other bias, float included, is quantized to that, exactly as the
derived bias spec of mcutorch's Quantizer does). Anything else is an UnsupportedOpError naming
the node and the scheme found.

`prepare` first tidies a copy of the graph (the user's module is left as it is): the `_guards_fn`
call_module of `ExportedProgram.module()` goes, eval-mode dropout and other identities go,
quantize nodes on constants (convert_pt2e(fold_quantize=False)) are folded, and identical
quantize nodes of one value are merged. What stays out of scope is refused there, naming the op:
a model writing its buffers, control flow, FFT, scatter/index_put, integer or bool values,
transpose/pad/concat of more than 4 dims.

Every `quantize_per_tensor` node then becomes one int8 IR tensor (`Lifter.lift_value`). The
float computation feeding it is an op whose operands are dequantized int8 tensors, possibly
followed by ops that commute with quantization exactly, which the quantizer left float: clamps
(ReLU, ReLU6, hardtanh, clamp: q(clamp(v, lo, hi)) = clamp(q(v), q(lo), q(hi)), folded into the
op's output clamp), data movement (reshape, flatten, permute, ...), concat and max pooling
(quantization is element-wise and monotone), which are emitted on the int8 values of their
inputs, each quantized with the quantize node's qparams. A dequantized tensor requantized with
other qparams becomes a `rescale`. Data movement applied to a dequantized tensor with no quantize
node after it (a model output such as `flatten(dq(q))`) is lifted on the int8 tensor the same
way. Any other float value left in the graph is an error naming it. The result is still in
torch's NCHW layout with float scales; passes/ turn it into program-ready NHWC integer ops.
"""
from __future__ import annotations

import functools
import math

import numpy as np
import torch
from torch.fx import GraphModule, Node as FxNode

from mcutorch.errors import UnsupportedOpError
from mcutorch.frontend.capture import module_of, remove_identities, source_of
from mcutorch.frontend.fold import check_stateless
from mcutorch.ir import Graph, Node, Tensor, compose_act, verify
from mcutorch import ops
from mcutorch.frontend._torchao import pt2e
from mcutorch.quant import quantize as quantize_float

pt2e()  # registers torch.ops.quantized_decomposed

A = torch.ops.aten
QD = torch.ops.quantized_decomposed
Q_OPS = {QD.quantize_per_tensor.default, QD.quantize_per_tensor.tensor}
DQ_OPS = {QD.dequantize_per_tensor.default, QD.dequantize_per_tensor.tensor,
          QD.dequantize_per_channel.default}
CONST_Q_OPS = Q_OPS | {QD.quantize_per_channel.default}
ACT_BOUNDS = {A.relu.default: (0.0, math.inf), A.relu_.default: (0.0, math.inf),
              A.relu6.default: (0.0, 6.0)}
HARDTANH = {A.hardtanh.default, A.hardtanh_.default}
FULL = (-128, 127)
MOVES = ("reshape", "transpose")  # registry ops that only move int8 values (commute with q)
MONOTONE = {A.cat.default, A.concat.default, A.max_pool2d.default, A.maximum.default,
            A.minimum.default}
ACT_DTYPES = {torch.int8: 0, torch.uint8: -128}  # activation dtype -> zero-point shift to int8


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


def _move(node) -> str | None:
    """"reshape"/"transpose" for an aten data-movement node, else None."""
    if not (isinstance(node, FxNode) and node.op == "call_function"):
        return None
    found = ops.SOURCES.get(str(node.target))
    return found[0].name if found and found[0].name in MOVES else None


def _commutes(node: FxNode) -> bool:
    """Whether quantize(node(v...)) == node'(quantize(v)...) exactly: a clamp or a data move
    (quantize is element-wise), a concat, or a max (quantize is monotone)."""
    return node.op == "call_function" and (_bounds(node) is not None or _move(node) is not None
                                           or node.target in MONOTONE)


def _tensor_args(node: FxNode) -> list[FxNode]:
    """The tensor inputs of a node, in order (cat's list expanded)."""
    found = []
    for arg in node.args:
        for a in (arg if isinstance(arg, (list, tuple)) else [arg]):
            if isinstance(a, FxNode) and a.op in ("call_function", "placeholder"):
                found.append(a)
    return found


def _arg(node: FxNode, i: int, name: str, default=None):
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def _pair(v, n=2) -> tuple[int, ...]:
    return tuple(v) * (n // len(v)) if isinstance(v, (list, tuple)) else (int(v),) * n


# --- tidying a converted module ---------------------------------------------------------------
def prepare(gm: GraphModule) -> GraphModule:
    """A tidied copy of a converted module (same weights, own graph; see the module docstring)."""
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(gm.graph, {}))
    gm = GraphModule(gm, graph)
    for node in list(gm.graph.nodes):
        if node.op == "call_module" and node.target == "_guards_fn" and not node.users:
            gm.graph.erase_node(node)  # torch.export's input guards: nothing to compute
    check_stateless(gm)
    remove_identities(gm)
    refuse_out_of_scope(gm)
    _fold_constant_quantize(gm)
    _merge_quantize(gm)
    gm.graph.eliminate_dead_code()
    return gm


def _fold_constant_quantize(gm: GraphModule) -> None:
    """quantize(constant) -> the int constant (what convert_pt2e does with fold_quantize=True)."""
    for i, node in enumerate(list(gm.graph.nodes)):
        if node.op != "call_function" or node.target not in CONST_Q_OPS:
            continue
        args = [_get_attr(gm, a) if isinstance(a, FxNode) and a.op == "get_attr" else a
                for a in node.args]
        if any(isinstance(a, FxNode) for a in args):
            continue
        name = f"_mcutorch_folded_{i}"
        gm.register_buffer(name, node.target(*args, **node.kwargs))
        with gm.graph.inserting_before(node):
            const = gm.graph.get_attr(name)
        node.replace_all_uses_with(const)
        gm.graph.erase_node(node)


def _merge_quantize(gm: GraphModule) -> None:
    """One quantize node per (value, qparams): PT2E may quantize a value once per user."""
    seen: dict[tuple, FxNode] = {}
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in Q_OPS:
            continue
        key = (node.target, node.args, tuple(sorted(node.kwargs.items())))
        if key in seen:
            node.replace_all_uses_with(seen[key])
            gm.graph.erase_node(node)
        else:
            seen[key] = node


def _get_attr(gm: GraphModule, node: FxNode) -> torch.Tensor:
    obj = gm
    for part in node.target.split("."):
        obj = getattr(obj, part)
    return obj.detach() if isinstance(obj, torch.Tensor) else torch.as_tensor(obj)


def _where(q: FxNode) -> str:
    """A quantize/dequantize node named by the value it (de)quantizes."""
    src = q.args[0]
    of = source_of(src) if isinstance(src, FxNode) and src.op == "call_function" else (
        f"model input {src.name}" if isinstance(src, FxNode) and src.op == "placeholder"
        else _describe(src))
    return f"{q.name} (of {of})"


class Lifter:
    def __init__(self, gm: GraphModule):
        self.gm = prepare(gm)
        self.values: dict[FxNode, Tensor] = {}  # q node / constant node / moved dq -> IR tensor
        self.local: dict[FxNode, Tensor] = {}  # the chain being lifted: float node -> int8
        self.used: set[FxNode] = set()  # fx nodes lifted (every op must end up here)
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

    def _scalar(self, v, q: FxNode, what: str):
        if isinstance(v, FxNode):
            if v.op != "get_attr":
                raise UnsupportedOpError(
                    f"quantize node {_where(q)}: its {what} is computed at run time (dynamic "
                    "quantization); mcutorch needs static qparams (calibrated, per tensor)")
            t = self._attr(v)
            if t.numel() != 1:
                raise UnsupportedOpError(f"quantize node {_where(q)}: {t.numel()} {what}s")
            return t.item()
        return v

    def qparams(self, q: FxNode) -> tuple[float, int]:
        """(scale, int8 zero point) of an activation quantize/dequantize node, checking that its
        scheme is one mcutorch computes: int8 (or uint8, shifted by -128 exactly), full range."""
        scale = float(self._scalar(q.args[1], q, "scale"))
        zp = int(self._scalar(q.args[2], q, "zero point"))
        qmin, qmax, dtype = (int(q.args[3]), int(q.args[4]), q.args[5])
        if dtype not in ACT_DTYPES:
            raise UnsupportedOpError(
                f"quantize node {_where(q)}: activation dtype {dtype}; mcutorch computes int8 "
                "activations (uint8 ones are converted exactly)")
        info = torch.iinfo(dtype)
        if (qmin, qmax) != (info.min, info.max):
            raise UnsupportedOpError(
                f"quantize node {_where(q)}: activation range [{qmin}, {qmax}] of {dtype}; "
                f"mcutorch supports the full range [{info.min}, {info.max}]")
        if not (math.isfinite(scale) and scale > 0):
            raise UnsupportedOpError(f"quantize node {_where(q)}: scale {scale}")
        return scale, zp + ACT_DTYPES[dtype]

    def _attr(self, node: FxNode) -> torch.Tensor:
        if node.op != "get_attr":
            raise UnsupportedOpError(f"expected a constant, got {node.format_node()}")
        return _get_attr(self.gm, node)

    def operand(self, arg, user: FxNode) -> Tensor:
        """IR tensor behind an op's argument: a dequantized tensor (or data movement of one)."""
        if isinstance(arg, FxNode) and arg in self.local:
            return self.local[arg]
        if isinstance(arg, FxNode) and arg in self.values:
            return self.values[arg]
        if isinstance(arg, FxNode) and arg.op == "call_function" and arg.target in DQ_OPS:
            self.used.add(arg)
            src = arg.args[0]
            if src in self.values and src.op == "call_function":  # an activation
                t = self.values[src]
                if arg.target == QD.dequantize_per_channel.default:
                    raise UnsupportedOpError(
                        f"per-channel dequantize of an activation: {_where(arg)}")
                if self.qparams(arg) != (t.scale, t.zero_point) or arg.args[5] != src.args[5]:
                    raise UnsupportedOpError(f"dequantize node {_where(arg)} does not match "
                                             f"its quantize node {src.name}")
                return t
            if isinstance(src, FxNode) and src.op == "get_attr":
                return self.constant(arg, user)
            raise UnsupportedOpError(f"cannot trace the input of {source_of(user)}")
        if _move(arg) is not None:  # move(dq(t)) == dq(move(t)): lift it on the int8 tensor
            t = self.operand(arg.args[0], arg)
            out = self.new_tensor(arg.name, arg.meta["val"].shape, t.scale, t.zero_point,
                                  layout=_layout(arg.meta["val"].shape))
            builder_of(arg)(self, arg, out, FULL)
            self.values[arg] = out
            self.used.add(arg)
            return out
        raise UnsupportedOpError(f"{source_of(user)} takes {_what(arg)}; mcutorch "
                                 "programs are int8 end to end")

    def constant(self, dq: FxNode, user: FxNode) -> Tensor:
        src = dq.args[0]
        if src in self.values:
            return self.values[src]
        data = self._attr(src).numpy()
        if dq.target == QD.dequantize_per_channel.default:
            scale = self._attr(dq.args[1]).numpy().astype(np.float64)
            zps = self._attr(dq.args[2]).numpy()
            axis = int(dq.args[3])
            if axis != 0:
                raise UnsupportedOpError(f"{source_of(user)}: constant {src.target} quantized "
                                         f"per channel along axis {axis} (mcutorch: axis 0)")
            if np.any(zps != 0):
                raise UnsupportedOpError(
                    f"{source_of(user)}: constant {src.target} quantized per channel with zero "
                    f"points {sorted(set(zps.tolist()))[:4]}: per-channel tensors must be "
                    "symmetric (zero point 0)")
            zp = 0
        else:
            scale = float(self._scalar(dq.args[1], dq, "scale"))
            zp = int(self._scalar(dq.args[2], dq, "zero point"))
        if data.dtype == np.uint8:  # exact: (q - 128) - (zp - 128) == q - zp
            if dq.target == QD.dequantize_per_channel.default:
                raise UnsupportedOpError(f"{source_of(user)}: uint8 per-channel constant "
                                         f"{src.target}")
            data, zp = (data.astype(np.int16) - 128).astype(np.int8), zp - 128
        dtype = {np.int8: "int8", np.int32: "int32"}.get(data.dtype.type)
        if dtype is None:
            raise UnsupportedOpError(f"constant {src.target} of dtype {data.dtype} at "
                                     f"{source_of(user)}")
        t = self.new_tensor(src.name, data.shape, scale, zp, dtype=dtype, data=data)
        self.values[src] = t
        return t

    def weight(self, arg, user: FxNode) -> Tensor:
        """A conv/linear weight: a constant int8 tensor, symmetric (zero point 0)."""
        if not (isinstance(arg, FxNode) and arg.target in DQ_OPS
                and arg.args[0].op == "get_attr"):
            raise UnsupportedOpError(
                f"{source_of(user)}: its weight is {_what(arg)}; mcutorch needs int8 "
                "weights (annotate the weight in the quantizer)")
        w = self.operand(arg, user)
        if w.dtype != "int8" or w.zero_point != 0:
            raise UnsupportedOpError(
                f"{source_of(user)}: weight {arg.args[0].target} is {w.dtype} with zero point "
                f"{w.zero_point}; mcutorch weights are int8 symmetric (zero point 0), per "
                "channel or per tensor")
        return w

    def bias(self, arg, user: FxNode, x: Tensor, w: Tensor) -> Tensor:
        """An int32 bias at scale s_in * s_w[c]. A bias given otherwise (float, or quantized at
        another scale) is quantized to that exactly as the derived bias spec of mcutorch's
        Quantizer makes torchao do: quantize_per_channel(b, s_in * s_w, 0) in float32."""
        cout = w.shape[0]
        if arg is None:
            return _zero_bias(self, w, x)
        want = np.broadcast_to(np.float32(x.scale) * np.asarray(w.scale, np.float32), (cout,))
        if isinstance(arg, FxNode) and arg.target in DQ_OPS and arg.args[0].op == "get_attr":
            b = self.operand(arg, user)
            name = str(arg.args[0].target)
            if (b.dtype == "int32" and b.zero_point == 0 and b.shape == (cout,)
                    and np.array_equal(np.broadcast_to(np.float32(b.scale), (cout,)), want)):
                return b
            value = (b.data.astype(np.float32) - np.float32(b.zero_point)) * np.float32(b.scale)
        elif isinstance(arg, FxNode) and arg.op == "get_attr":
            name = str(arg.target)
            value = self._attr(arg).numpy().astype(np.float32)
        else:
            raise UnsupportedOpError(f"{source_of(user)}: its bias is {_what(arg)}; "
                                     "mcutorch needs a constant bias")
        if value.shape != (cout,) or not np.isfinite(value).all():
            raise UnsupportedOpError(f"{source_of(user)}: bias {name} has shape "
                                     f"{list(value.shape)} or non-finite values")
        scale, v = torch.from_numpy(np.array(want)), torch.from_numpy(np.array(value))
        if (torch.round(v * (1.0 / scale)).abs() >= 2**31).any():
            raise UnsupportedOpError(f"{source_of(user)}: bias {name} does not fit int32 at "
                                     "scale s_in * s_w")
        data = QD.quantize_per_channel(v, scale, torch.zeros(cout, dtype=torch.int64), 0,
                                       -(2**31), 2**31 - 1, torch.int32).numpy()
        return self.new_tensor(name.replace(".", "_") + "_int32", (cout,), want.astype(np.float64),
                               0, dtype="int32", data=data)

    # --- graph --------------------------------------------------------------------------------
    def run(self) -> Graph:
        for node in self.gm.graph.nodes:  # ops mcutorch lacks first: the root cause of the rest
            if node.op == "call_function" and node.target not in Q_OPS | DQ_OPS:
                if "choose_qparams" in str(node.target):
                    raise UnsupportedOpError(
                        f"{source_of(node)}: dynamic quantization (qparams chosen at run time); "
                        "mcutorch needs static, calibrated qparams")
                if str(node.target).startswith("quantized_decomposed."):
                    raise UnsupportedOpError(
                        f"{source_of(node)}: a quantization scheme mcutorch does not compute "
                        "(it takes static per-tensor int8/uint8 activations, int8 symmetric "
                        "weights per channel or per tensor, int32 or float bias)")
                builder_of(node)
        inputs, outputs = [], []
        meta = {"inputs": [], "outputs": [], "qnodes": self.qnodes}
        for node in self.gm.graph.nodes:
            if node.op == "placeholder":
                t = self.lift_input(node)
                inputs.append(t)
                meta["inputs"].append({"name": node.name, "shape": list(t.shape),
                                       "dtype": str(node.meta["val"].dtype)})
            elif node.op == "call_function" and node.target in Q_OPS and node not in self.values:
                self.lift_quantize(node)
            elif node.op == "call_module":
                raise UnsupportedOpError(f"call_module {node.target} left in the exported graph")
            elif node.op == "output":
                for i, ret in enumerate(_flatten(node.args[0])):
                    if not (isinstance(ret, FxNode) and (ret in self.values or _move(ret)
                                                         or ret.target in DQ_OPS)):
                        raise UnsupportedOpError(
                            f"model output {i} is {_what(ret)}; mcutorch programs "
                            "have int8 outputs (the quantizer must quantize the last op's output)")
                    t = self.operand(ret, node)
                    outputs.append(t)
                    meta["outputs"].append({"name": t.name, "shape": list(t.shape)})
        for node in self.gm.graph.nodes:
            if node.op == "call_function" and node not in self.used and node.target not in DQ_OPS:
                raise UnsupportedOpError(
                    f"{source_of(node)} is not quantized: no quantize node follows it, so the "
                    "converted model computes it in float; mcutorch programs are int8 end to end")
        return verify(Graph(self.nodes, inputs, outputs, meta), stage="lift")

    def lift_input(self, node: FxNode) -> Tensor:
        val = node.meta.get("val")
        if not (isinstance(val, torch.Tensor) and val.dtype.is_floating_point):
            raise UnsupportedOpError(f"model input {node.name} is not a float tensor ({val!r:.60})")
        users = list(node.users)
        floats = [u for u in users if u.target not in Q_OPS]
        if floats or not users:
            raise UnsupportedOpError(
                f"model input {node.name} " + (f"feeds {source_of(floats[0])} in float, not "
                                               "through a quantize node" if floats else "is unused")
                + "; mcutorch programs take int8 inputs")
        qps = sorted({self.qparams(q) for q in users})
        if len(qps) > 1:
            raise UnsupportedOpError(
                f"model input {node.name} is quantized with {len(qps)} different qparams "
                f"(scale, zero point) {qps}; a program input has one")
        s, zp = qps[0]
        if float(np.float32(s)) != s:
            raise UnsupportedOpError(f"model input {node.name}: scale {s!r} is not a float32")
        shape = tuple(val.shape)
        t = self.new_tensor(node.name, shape, s, zp, layout=_layout(shape))
        for q in users:
            self.values[q] = t
            self.used.add(q)
        self.qnodes[t.name] = users[0].name
        return t

    def lift_quantize(self, q: FxNode) -> None:
        s, zp = self.qparams(q)
        self.used.add(q)
        out = self.lift_value(q.args[0], s, zp, FULL, q, top=True)
        self.values[q] = out
        self.qnodes[out.name] = q.name

    def lift_value(self, v, s: float, zp: int, act, q: FxNode, top: bool = False) -> Tensor:
        """The int8 tensor clamp(quantize(v, s, zp), act) for the float value v of the converted
        graph. Ops that commute with quantize exactly (clamps, data moves, concat, max pooling)
        are lifted on the quantized values of their float inputs; the op they end in (or a
        dequantized tensor, which gets a rescale) gets the qparams and the clamp."""
        if not (isinstance(v, FxNode) and v.op == "call_function"):
            raise UnsupportedOpError(f"quantize node {_where(q)} quantizes {_what(v)}")
        self.used.add(v)
        if v.target in DQ_OPS:  # q(dq(x)): requantize an existing int8 tensor
            src = self.operand(v, q)
            if act == FULL and (src.scale, src.zero_point) == (s, zp):
                return src  # q(dq(t)) with t's own qparams is t
            out = self.new_tensor(q.name if top else f"{src.name}_rq", src.shape, s, zp,
                                  layout=src.layout)
            self.emit("rescale", [src], out, {"act": act}, q)
            return out
        floats = [a for a in _tensor_args(v) if a.op == "call_function" and a.target not in DQ_OPS]
        if _commutes(v) and floats:
            if _bounds(v) is not None:  # q(clamp(x)) = clamp(q(x), q(lo), q(hi))
                own = _act_range(_bounds(v), s, zp)
                return self.lift_value(v.args[0], s, zp, compose_act(own, act), q, top)
            local = {a: self.lift_value(a, s, zp, act, q) for a in _tensor_args(v)}
            shape = tuple(v.meta["val"].shape)
            out = self.new_tensor(v.name, shape, s, zp, layout=_layout(shape))
            self.local = local
            try:
                builder_of(v)(self, v, out, FULL)
            finally:
                self.local = {}
            return out
        shape = tuple(v.meta["val"].shape)
        out = self.new_tensor(v.name, shape, s, zp, layout=_layout(shape))
        builder = builder_of(v)
        if act != FULL and builder not in ACT_BUILDERS:  # the op has no clamp: add one
            tmp = self.new_tensor(v.name + "_pre", shape, s, zp, layout=out.layout)
            builder(self, v, tmp, FULL)
            self.emit("rescale", [tmp], out, {"act": act}, q)
        else:
            builder(self, v, out, act)
        return out

    def emit(self, op: str, inputs: list[Tensor], out: Tensor, attrs: dict, src: FxNode) -> None:
        self.nodes.append(Node(op, inputs, [out], attrs, source_of(src)))


def _act_range(bounds, s: float, zp: int) -> tuple[int, int]:
    """The int8 clamp of float bounds: q(lo), q(hi) as PyTorch's quantize computes them
    (quantize is monotone, so q(clamp(v, lo, hi)) == clamp(q(v), q(lo), q(hi)) exactly)."""
    if bounds is None:
        return FULL
    lo, hi = bounds
    qlo = -128 if lo == -math.inf else int(quantize_float(np.float32(lo), s, zp))
    qhi = 127 if hi == math.inf else int(quantize_float(np.float32(hi), s, zp))
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


def _what(arg) -> str:
    """What an op reads instead of a dequantized int8 tensor, for error messages."""
    if not isinstance(arg, FxNode):
        return repr(arg)
    if arg.op == "placeholder":
        return f"the float model input {arg.name} (not quantized)"
    if arg.op == "get_attr":
        return f"the float constant {arg.target} (not quantized)"
    if arg.target in Q_OPS:
        return f"the int8 tensor of quantize node {arg.name} (no dequantize)"
    return (f"the float output of {source_of(arg)} (the quantizer left it unquantized: no "
            "quantize node follows it)")


# --- builders: one per aten op family ---------------------------------------------------------
def _conv(lf: Lifter, n: FxNode, out: Tensor, act) -> None:
    x, w = lf.operand(n.args[0], n), lf.weight(n.args[1], n)
    b = lf.bias(n.args[2] if len(n.args) > 2 else None, n, x, w)
    stride = _pair(_arg(n, 3, "stride", 1))
    padding = _arg(n, 4, "padding", 0)
    dilation = _pair(_arg(n, 5, "dilation", 1))
    groups = int(_arg(n, 6, "groups", 1))
    if isinstance(padding, str):
        padding = _same_padding(x.shape[2:], w.shape[2:], stride, dilation, padding, n)
    else:
        ph, pw = _pair(padding)
        padding = (ph, pw, ph, pw)
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
    x, w = lf.operand(n.args[0], n), lf.weight(n.args[1], n)
    b = lf.bias(n.args[2] if len(n.args) > 2 else None, n, x, w)
    if len(x.shape) != 2:
        raise UnsupportedOpError(f"{source_of(n)}: linear on a {len(x.shape)}-D input; flatten "
                                 "it to [N, features] first")
    lf.emit("fully_connected", [x, w, b], out, {"act": act}, n)


def _same_shape_operands(lf: Lifter, n: FxNode, out: Tensor) -> tuple[Tensor, Tensor]:
    """The two int8 operands of an element-wise op, which must have the output's shape."""
    a, b = (lf.operand(v, n) for v in n.args[:2])
    if a.shape != b.shape or a.shape != out.shape:
        raise UnsupportedOpError(f"{source_of(n)}: broadcasting {list(a.shape)} with "
                                 f"{list(b.shape)} is not supported; shapes must match")
    return a, b


def _binary(lf: Lifter, n: FxNode, out: Tensor, act) -> None:
    if not all(isinstance(v, FxNode) for v in n.args[:2]):  # x + 1, x * 0.5: a function of x
        return _lut(lf, n, out, act)
    a, b = _same_shape_operands(lf, n, out)
    if n.target in (A.add.Tensor, A.add_.Tensor) and _arg(n, 2, "alpha", 1) != 1:
        raise UnsupportedOpError(f"{source_of(n)}: add with alpha != 1")
    op = "add" if n.target in (A.add.Tensor, A.add_.Tensor) else "mul"
    lf.emit(op, [a, b], out, {"act": act}, n)


def _activation(lf: Lifter, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    act = compose_act(_act_range(_bounds(n), out.scale, out.zero_point), act)
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


def _mean_all(lf: Lifter, n: FxNode, x: Tensor, out: Tensor, act) -> None:
    """The mean of every element: one avg_pool2d window over x reshaped to [1, 1, size/W, W]."""
    window = (math.prod(x.shape) // x.shape[-1], x.shape[-1]) if x.shape else (1, 1)
    flat = lf.new_tensor(out.name + "_flat", (1, 1, *window), x.scale, x.zero_point,
                         layout="NCHW")
    pooled = lf.new_tensor(out.name + "_pool", (1, 1, 1, 1), out.scale, out.zero_point,
                           layout="NCHW")
    lf.emit("reshape", [x], flat, {}, n)
    lf.emit("avg_pool2d", [flat], pooled, {"kernel": window, "stride": window, "act": act,
                                           "padding": (0, 0, 0, 0), "count_include_pad": 0,
                                           "divisor": 0}, n)
    lf.emit("reshape", [pooled], out, {}, n)


def _global_pool(lf: Lifter, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    rank, mean = len(x.shape), n.target in (A.mean.dim, A.mean.default)
    dims = sorted({d % max(rank, 1) for d in _arg(n, 1, "dim", None) or range(rank)} if mean
                  else ())
    if mean and dims == list(range(rank)):
        return _mean_all(lf, n, x, out, act)
    if mean and (rank != 4 or dims != [2, 3]):
        raise UnsupportedOpError(
            f"{source_of(n)}: mean over dims {n.args[1]} of a {rank}-D tensor: mcutorch lowers "
            "the mean over H, W of [N, C, H, W] (dim=(2, 3) or (-2, -1)) and the mean of all "
            "elements (dim=None)")
    if rank != 4:
        raise UnsupportedOpError(f"{source_of(n)}: pooling needs a 4-D input")
    h, w = x.shape[2:]
    if n.target == A.mean.dim:
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
    qvalue = int(quantize_float(np.float32(value), x.scale, x.zero_point))
    lf.emit("pad", [x], out, {"before": tuple(before), "after": tuple(after), "value": qvalue}, n)


def _softmax(lf: Lifter, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    dim = int(n.args[1]) % len(x.shape)
    lf.emit("softmax", [x], out, {"dim": dim}, n)


def _lut(lf: Lifter, n: FxNode, out: Tensor, act) -> None:
    x, fn = lut_function(n)
    lf.emit("lut", [lf.operand(x, n)], out, {"fn": fn, "act": act}, n)


def lut_function(n: FxNode):
    """(the tensor argument, the float64 function of it) of a node lifted as a `lut`: the
    registry's Source.fn with the node's constant arguments bound, read by aten schema name
    (schema defaults for the ones left out); a tensor where fn needs a constant is refused."""
    src = ops.SOURCES[str(n.target)][1]
    values = {}
    for i, a in enumerate(n.target._schema.arguments):
        if i < len(n.args):
            values[a.name] = n.args[i]
        elif a.name in n.kwargs:
            values[a.name] = n.kwargs[a.name]
        elif a.has_default_value():
            values[a.name] = a.default_value
    kw = {name: values[name] for name in src.args}
    for name, v in kw.items():
        if not (v is None or isinstance(v, (bool, int, float, str))):
            what = f"the tensor {v.name}" if isinstance(v, FxNode) else type(v).__name__
            raise UnsupportedOpError(
                f"{source_of(n)}: its {name} is {what}; mcutorch computes this op as a "
                f"256-entry table of one int8 tensor, so {name} must be a constant number (of "
                "two tensors it computes add, mul, maximum and minimum)")
    return values[src.operand], functools.partial(src.fn, **kw) if kw else src.fn


def _avg_pool(lf: Lifter, n: FxNode, out: Tensor, act) -> None:
    pool = _pool if n.target == A.avg_pool2d.default else _global_pool
    pool(lf, n, out, act)


def _minmax(lf: Lifter, n: FxNode, out: Tensor, act) -> None:
    a, b = _same_shape_operands(lf, n, out)
    lf.emit(ops.SOURCES[str(n.target)][0].name, [a, b], out, {"act": act}, n)


# One builder per op of the registry that has aten sources (mcutorch.ops: OpDef.sources).
BUILDERS = {
    "conv2d": _conv, "fully_connected": _linear, "add": _binary, "mul": _binary,
    "max_pool2d": _pool, "avg_pool2d": _avg_pool, "clamp": _activation, "lut": _lut,
    "softmax": _softmax, "transpose": _permute, "concat": _cat, "pad": _pad,
    "maximum": _minmax, "minimum": _minmax, "reshape": _reshape,
}
# Builders that apply `act` (the output clamp); after any other op a clamp is a rescale of its own.
ACT_BUILDERS = {_conv, _linear, _binary, _activation, _pool, _avg_pool, _lut, _minmax}
SUPPORTED_NAMES = sorted({s.removeprefix("aten.").split(".")[0].rstrip("_") for s in ops.SOURCES})


HINTS = {  # why an aten op mcutorch lacks is in a graph, when there is a usual reason
    "aten.convolution.default": " (a decomposed conv2d: pass the graph before "
                                "run_decompositions)",
    "aten.addmm.default": " (a decomposed linear: pass the graph before run_decompositions)",
    **dict.fromkeys(("aten._native_batch_norm_legit_no_training.default",
                     "aten.batch_norm.default"),
                    " (a BatchNorm not folded into a conv before it: fold it, or put it after a "
                    "conv)"),
    **dict.fromkeys((f"aten.{op}" for op in (
        "zeros.default", "ones.default", "full.default", "arange.default", "arange.start",
        "arange.start_step", "eye.default", "eye.m", "linspace.default", "scalar_tensor.default",
        "zeros_like.default", "ones_like.default", "full_like.default")),
        " (a constant computed in forward: mcutorch.quantize folds constants before "
        "quantization; in your own PT2E flow, capture the model with "
        "mcutorch.frontend.capture.capture(model, example_inputs) instead of "
        "torch.export.export(...).module())"),
}


def builder_of(node: FxNode):
    """The lift builder of an aten node (via the registry), or UnsupportedOpError naming it."""
    found = ops.SOURCES.get(str(node.target))
    if found is None:
        name, _, kind = module_of(node).partition(": ")
        inside = (f"; {kind} computes it internally: mcutorch has no int8 lowering for that "
                  "module" if kind.startswith("torch.nn.") else "")
        hint = HINTS.get(str(node.target), inside)
        raise UnsupportedOpError(f"{source_of(node)} has no int8 lowering in mcutorch{hint} "
                                 f"(supported: {', '.join(SUPPORTED_NAMES)})")
    return BUILDERS[found[0].name]


SCATTERS = ("scatter", "index_put", "index_add", "index_copy", "index_fill", "masked_scatter",
            "put")
MAX_RANK = {"transpose": 4, "pad": 4, "concat": 4}  # the program's perm/before/after attributes


def _out_of_scope(node: FxNode) -> str:
    """Why an aten node is out of mcutorch's scope, or ""."""
    name, val = str(node.target), node.meta.get("val")
    base = name.removeprefix("aten.").split(".")[0].strip("_")
    if "fft" in base or base in ("stft", "istft"):
        return "FFT (torch.fft) is not supported: it computes complex values"
    if base.startswith(SCATTERS):
        return ("scatter / index_put (stores at computed indices) is not supported: int8 programs "
                "index their tensors statically")
    if not (name.startswith("aten.") and isinstance(val, torch.Tensor)):
        return ""
    if not (val.is_floating_point() or val.is_complex()):
        return (f"its output is a {val.dtype} tensor: integer and bool values (argmax, "
                "comparisons, masks) cannot reach a quantized op or the model output, mcutorch "
                "programs compute quantized real numbers (return the scores, take the argmax or "
                "compare on the host)")
    op = ops.SOURCES.get(name, (None,))[0]
    if op is not None and val.dim() > MAX_RANK.get(op.name, val.dim()):
        return (f"{op.name} of a {val.dim()}-D tensor: the program's {op.name} attributes cover "
                f"ranks up to {MAX_RANK[op.name]} (merge or squeeze dims first)")
    return ""


def refuse_out_of_scope(gm: GraphModule) -> None:
    """UnsupportedOpError naming op and source for what stays out of scope: control flow first
    (the root cause of what its branches compute), then FFT, scatter/index_put, integer or bool
    values, transpose/pad/concat of rank > 4."""
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    for node in nodes:
        if isinstance(node.target, torch._ops.HigherOrderOperator):
            raise UnsupportedOpError(
                f"{source_of(node)}: control flow is not supported: mcutorch compiles one "
                "straight-line graph (take the branch or the loop out of the model, or unroll "
                "it)")
    for node in nodes:
        reason = _out_of_scope(node)
        if reason:
            raise UnsupportedOpError(f"{source_of(node)}: {reason}")


def check_supported(gm: GraphModule) -> None:
    """Fail fast (before calibration) on aten ops mcutorch cannot lower, naming op and source."""
    refuse_out_of_scope(gm)
    for node in gm.graph.nodes:
        if node.op == "call_function" and builder_of(node) is _lut:
            lut_function(node)  # a tensor where a constant is needed (x - y, x / y)
        if node.op == "call_module":
            raise UnsupportedOpError(f"call_module {node.target} left in the exported graph")


def lift(gm: GraphModule) -> Graph:
    """Converted PT2E GraphModule -> IR Graph (NCHW, float scales)."""
    return Lifter(gm).run()
