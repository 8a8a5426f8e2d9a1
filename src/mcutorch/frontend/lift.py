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

import math

import numpy as np
import torch
from torch.fx import GraphModule, Node as FxNode

from mcutorch.errors import UnsupportedOpError
from mcutorch.frontend.builders import ACT_BUILDERS, BUILDERS, PRECHECKS, movement, pool, select
from mcutorch.frontend.builders._common import FULL, A, act_range, bounds
from mcutorch.frontend.capture import module_of, remove_identities, source_of
from mcutorch.frontend.fold import check_stateless
from mcutorch.ir import Graph, Node, Tensor, compose_act, verify
from mcutorch import ops
from mcutorch.frontend._torchao import pt2e

pt2e()  # registers torch.ops.quantized_decomposed

QD = torch.ops.quantized_decomposed
Q_OPS = {QD.quantize_per_tensor.default, QD.quantize_per_tensor.tensor}
DQ_OPS = {QD.dequantize_per_tensor.default, QD.dequantize_per_tensor.tensor,
          QD.dequantize_per_channel.default}
CONST_Q_OPS = Q_OPS | {QD.quantize_per_channel.default}
MOVES = ("reshape", "transpose", "strided_slice")  # ops that only move int8 values (commute)
MONOTONE = {A.cat.default, A.concat.default, A.stack.default, A.roll.default, *pool.MAX,
            A.maximum.default, A.minimum.default}
ACT_DTYPES = {torch.int8: 0, torch.uint8: -128, torch.int16: 0}  # dtype -> zero-point shift
FULLS = {"int8": FULL, "int16": (-32767, 32767)}  # an activation's range (numerics.md 6)


def _dtype(q: FxNode) -> str:
    return "int16" if q.args[5] == torch.int16 else "int8"  # the tensor a quantize node makes


def _move(node) -> str | None:
    """The MOVES op of an aten data-movement node, else None."""
    if not (isinstance(node, FxNode) and node.op == "call_function"):
        return None
    found = ops.SOURCES.get(str(node.target))
    return found[0].name if found and found[0].name in MOVES else None


def _commutes(node: FxNode) -> bool:
    """Whether quantize(node(v...)) == node'(quantize(v)...) exactly: a clamp or a data move
    (quantize is element-wise), a concat, or a max (quantize is monotone)."""
    return node.op == "call_function" and (bounds(node) is not None or _move(node) is not None
                                           or node.target in MONOTONE)


def _tensor_args(node: FxNode) -> list[FxNode]:
    """The tensor inputs of a node, in order (cat's list expanded)."""
    found = []
    for arg in node.args:
        for a in (arg if isinstance(arg, (list, tuple)) else [arg]):
            if isinstance(a, FxNode) and a.op in ("call_function", "placeholder"):
                found.append(a)
    return found


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
    movement.split_tuples(gm)
    refuse_out_of_scope(gm)
    pool.take_values(gm)
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
        lo = -32767 if dtype == torch.int16 else info.min  # int16: symmetric (numerics.md 6)
        if (qmin, qmax) != (lo, info.max) or (dtype == torch.int16 and zp != 0):
            raise UnsupportedOpError(
                f"quantize node {_where(q)}: activation range [{qmin}, {qmax}] of {dtype}; "
                f"mcutorch supports [{lo}, {info.max}] (int16: zero point 0, got {zp})")
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
                                  layout=_layout(arg.meta["val"].shape), dtype=t.dtype)
            builder_of(arg)(self, arg, out, FULLS[t.dtype])
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
        dtype = {np.int8: "int8", np.int16: "int16", np.int32: "int32"}.get(data.dtype.type)
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
        if x.dtype == "int16":  # int48 at s_in * s_w, stored int64 (docs/numerics.md section 6)
            s64 = np.float64(x.scale) * np.broadcast_to(np.asarray(w.scale, np.float64), (cout,))
            data = np.clip(np.round(value / s64), 1 - 2**47, 2**47 - 1).astype(np.int64)
            return self.new_tensor(name.replace(".", "_") + "_int48", (cout,), s64, 0,
                                   dtype="int64", data=data)
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
        check_int16(self.nodes)
        return verify(Graph(self.nodes, inputs, outputs, meta), stage="lift")

    def lift_input(self, node: FxNode) -> Tensor:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and val.dtype in (torch.int64, torch.int32):
            return self.lift_ids(node, val)
        if not (isinstance(val, torch.Tensor) and val.dtype.is_floating_point):
            raise UnsupportedOpError(f"model input {node.name} is not a float tensor ({val!r:.60})")
        users = list(node.users)
        floats = [u for u in users if u.target not in Q_OPS]
        if floats or not users:
            raise UnsupportedOpError(
                f"model input {node.name} " + (f"feeds {source_of(floats[0])} in float, not "
                                               "through a quantize node" if floats else "is unused")
                + "; mcutorch programs take int8 inputs")
        qps = sorted({(*self.qparams(q), _dtype(q)) for q in users})
        if len(qps) > 1:
            raise UnsupportedOpError(
                f"model input {node.name} is quantized with {len(qps)} different qparams "
                f"(scale, zero point, dtype) {qps}; a program input has one")
        s, zp, dt = qps[0]
        if float(np.float32(s)) != s:
            raise UnsupportedOpError(f"model input {node.name}: scale {s!r} is not a float32")
        shape = tuple(val.shape)
        t = self.new_tensor(node.name, shape, s, zp, layout=_layout(shape), dtype=dt)
        for q in users:
            self.values[q] = t
            self.used.add(q)
        self.qnodes[t.name] = users[0].name
        return t

    def lift_ids(self, node: FxNode, val: torch.Tensor) -> Tensor:
        """An integer model input: int32 token ids (scale 0, zero point 0; format 1.6), read
        only by embeddings (their `indices`)."""
        bad = [u for u in node.users if u.target != A.embedding.default or u.args[0] is node]
        if bad or not node.users:
            raise UnsupportedOpError(
                f"model input {node.name} ({val.dtype}) " + (
                    f"feeds {source_of(bad[0])}: an integer model input is token ids, read only "
                    "by nn.Embedding / F.embedding" if bad else "is unused"))
        t = self.new_tensor(node.name, tuple(val.shape), 0.0, 0, dtype="int32")
        self.values[node] = t
        self.qnodes[t.name] = node.name  # compare.layer_by_layer feeds the ids themselves
        return t

    def lift_quantize(self, q: FxNode) -> None:
        s, zp = self.qparams(q)
        self.used.add(q)
        out = self.lift_value(q.args[0], s, zp, FULLS[_dtype(q)], q, top=True)
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
        dt = _dtype(q)
        if v.target in DQ_OPS:  # q(dq(x)): requantize an existing int8 tensor
            src = self.operand(v, q)
            if act == FULLS[dt] and (src.scale, src.zero_point, src.dtype) == (s, zp, dt):
                return src  # q(dq(t)) with t's own qparams is t
            out = self.new_tensor(q.name if top else f"{src.name}_rq", src.shape, s, zp,
                                  layout=src.layout, dtype=dt)
            self.emit("rescale", [src], out, {"act": act}, q)
            return out
        floats = [a for a in _tensor_args(v) if a.op == "call_function" and a.target not in DQ_OPS]
        if _commutes(v) and floats:
            if bounds(v) is not None:  # q(clamp(x)) = clamp(q(x), q(lo), q(hi))
                own = act_range(bounds(v), s, zp, dt)
                return self.lift_value(v.args[0], s, zp, compose_act(own, act), q, top)
            local = {a: self.lift_value(a, s, zp, act, q) for a in _tensor_args(v)}
            shape = tuple(v.meta["val"].shape)
            out = self.new_tensor(v.name, shape, s, zp, layout=_layout(shape), dtype=dt)
            self.local = local
            try:
                builder_of(v)(self, v, out, FULLS[dt])
            finally:
                self.local = {}
            return out
        shape = tuple(v.meta["val"].shape)
        out = self.new_tensor(v.name, shape, s, zp, layout=_layout(shape), dtype=dt)
        builder = builder_of(v)
        if act != FULLS[dt] and builder not in ACT_BUILDERS:  # the op has no clamp: add one
            tmp = self.new_tensor(v.name + "_pre", shape, s, zp, layout=out.layout, dtype=dt)
            builder(self, v, tmp, FULLS[dt])
            self.emit("rescale", [tmp], out, {"act": act}, q)
        else:
            builder(self, v, out, act)
        return out

    def emit(self, op: str, inputs: list[Tensor], out: Tensor, attrs: dict, src: FxNode) -> None:
        x = inputs[0] if inputs else None  # a builder's view of an int16 tensor is int16 too
        if op in SAME_DTYPE and x is not None and x.dtype == "int16" and out.dtype == "int8" \
                and out.data is None and out.scale == x.scale:
            out.dtype = "int16"
        self.nodes.append(Node(op, inputs, [out], attrs, source_of(src)))


SAME_DTYPE = frozenset({"reshape", "strided_slice", "transpose", "pad", "copy", "concat"})


def check_int16(nodes: list[Node]) -> None:
    """Every op touching an int16 activation must have that (input, output) dtype pair in its
    OpDef.dtypes (reshape is a free alias of any dtype); otherwise an error naming the op."""
    defs = {d.name: d for d in ops.REGISTRY}
    for node in nodes:
        d = defs[node.op]
        idx = d.activation_inputs()
        acts = node.inputs if idx == (-1,) else [node.inputs[i] for i in idx]
        dts = {t.dtype for t in (*acts, *node.outputs)}
        if "int16" not in dts or node.op == "reshape":
            continue
        pairs = {(x.dtype, y.dtype) for x in acts for y in node.outputs}
        if d.dtypes is not None and not pairs <= set(d.dtypes):
            raise UnsupportedOpError(
                f"{node.source}: {node.op} with int16 activations {sorted(pairs)}: no int16 "
                f"kernel (its dtypes: {list(d.dtypes)}); leave it out of int16_layers")


def _zero_bias(lf, w: Tensor, x: Tensor) -> Tensor:
    cout = w.shape[0]
    dtype = "int64" if x.dtype == "int16" else "int32"
    return lf.new_tensor(w.name + "_bias", (cout,), x.scale * np.asarray(w.scale), 0,
                         dtype=dtype, data=np.zeros(cout, dtype))


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


SUPPORTED_NAMES = sorted({s.removeprefix("aten.").split(".")[0].rstrip("_") for s in ops.SOURCES})


RECURRENT = tuple(f"aten.{op}.input" for op in ("lstm", "gru", "rnn_tanh", "rnn_relu"))
HINTS = {  # why an aten op mcutorch lacks is in a graph, when there is a usual reason
    "aten.convolution.default": " (a decomposed conv2d: pass the graph before "
                                "run_decompositions)",
    "aten.addmm.default": " (a decomposed linear: pass the graph before run_decompositions)",
    **dict.fromkeys(("aten._native_batch_norm_legit_no_training.default",
                     "aten.batch_norm.default"),
                    " (a BatchNorm not folded into a conv before it: fold it, or put it after a "
                    "conv)"),
    **dict.fromkeys(RECURRENT,
                    " (mcutorch unrolls nn.LSTM / GRU / RNN into ops it lowers when it captures "
                    "the model itself: pass the float model to mcutorch.quantize, or capture it "
                    "with mcutorch.frontend.capture.capture(model, example_inputs) instead of "
                    "torch.export.export(...).module() in your own PT2E flow)"),
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
MAX_RANK = {"transpose": 6, "pad": 6, "concat": 6, "strided_slice": 6}  # what lift lowers


def _out_of_scope(node: FxNode) -> str:
    """Why an aten node is out of mcutorch's scope, or ""."""
    name, val = str(node.target), node.meta.get("val")
    base = name.removeprefix("aten.").split(".")[0].strip("_")
    if pool.indices_used(node):
        return pool.INDICES
    if "fft" in base or base in ("stft", "istft"):
        return "FFT (torch.fft) is not supported: it computes complex values"
    if base.startswith(SCATTERS):
        return ("scatter / index_put (stores at computed indices) is not supported: int8 programs "
                "index their tensors statically")
    if not (name.startswith("aten.") and isinstance(val, torch.Tensor)):
        return ""
    if not all(isinstance(d, int) for d in val.shape):
        return "its output shape depends on the data (a boolean mask?): shapes must be static"
    if val.dtype == torch.bool and select.is_comparison(node):
        return select.mask_refusal(node)  # "" for the mask of a where / masked_fill
    if not (val.is_floating_point() or val.is_complex()):
        return (f"its output is a {val.dtype} tensor: integer and bool values (argmax, "
                "comparisons, masks) cannot reach a quantized op or the model output, mcutorch "
                "programs compute quantized real numbers (return the scores, take the argmax or "
                "compare on the host)")
    op = ops.SOURCES.get(name, (None,))[0]
    if op is not None and val.dim() > MAX_RANK.get(op.name, val.dim()):
        return (f"{op.name} of a {val.dim()}-D tensor: mcutorch lowers {op.name} of ranks up to "
                f"{MAX_RANK[op.name]} (merge or squeeze dims first)")
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
        if pool.is_values(node):
            continue  # getitem(adaptive max pool, 0): its values (refuse_out_of_scope)
        if node.op == "call_function" and builder_of(node) in PRECHECKS:
            PRECHECKS[builder_of(node)](node)  # builders/<family>.py PRECHECK
        if node.op == "call_module":
            raise UnsupportedOpError(f"call_module {node.target} left in the exported graph")


def lift(gm: GraphModule) -> Graph:
    """Converted PT2E GraphModule -> IR Graph (NCHW, float scales)."""
    return Lifter(gm).run()
