"""mcutorch's PT2E Quantizer: the numerics contract of docs/numerics.md as annotations.

- activations: int8 asymmetric per-tensor (MinMax observer by default);
- weights of conv/linear: int8 symmetric per output channel, range [-127, 127] (a transposed
  conv's: along axis 1 with groups 1, per tensor otherwise);
- bias: int32, scale = input scale * weight scale of the channel, zero point 0;
- softmax/sigmoid output (1/256, -128), tanh (1/128, 0);
- the output of every other function made a table (exp, log, sqrt, x ** 2, ...: `lut` sources)
  is observed over its finite values only (`function_spec`): log(0) = -inf saturates to -128,
  as the table does;
- pooling, reshape, flatten, permute, pad, concat, maximum/minimum share their input's qparams;
- comparisons (gt, ge, lt, le, eq, ne): inputs observed, the bool output not; where(mask, a, b)
  observes a, b and its output; masked_fill and a where with one scalar value share the tensor
  value's qparams (the scalar, -inf included, saturates into them);
- ReLU/ReLU6/clamp after a conv, linear, add or mul is fused: only the activation's output is
  observed;
- int16 activations (a16w8, `activations="int16"` or `int16_layers=[...]`): symmetric per-tensor,
  zero point 0, range [-32767, 32767], for the ops of INT16_OPS only (any other op asked for int16
  is an UnsupportedOpError naming it); the bias of an int16 MAC layer is left float (the compiler
  stores it as int48, docs/numerics.md "int16 activations"). An edge between an int8 and an int16
  layer gets a quantize/dequantize pair of each dtype: a rescale.
Which rule an aten op gets is a fact of the op registry (`mcutorch.ops`, `Source.quant`); the
methods below implement each rule.

Subclass and override `activation_spec`, `weight_spec` or `annotate_node` to change the scheme.
"""
from __future__ import annotations

import dataclasses
import math

import torch
from torch.fx import GraphModule, Node

from mcutorch import ops
from mcutorch.errors import QuantizeError, UnsupportedOpError
from mcutorch.frontend.capture import source_of
from mcutorch.frontend._torchao import pt2e
from mcutorch.ops import Source

pt2e()  # quiet import of torchao before the names below
from torchao.quantization.pt2e import MinMaxObserver, PerChannelMinMaxObserver  # noqa: E402
from torchao.quantization.pt2e.quantizer import (  # noqa: E402
    DerivedQuantizationSpec,
    FixedQParamsQuantizationSpec,
    QuantizationAnnotation,
    QuantizationSpec,
    SharedQuantizationSpec,
)
from torchao.quantization.pt2e.quantizer import Quantizer as _PT2EQuantizer  # noqa: E402

KEY = "quantization_annotation"
A = torch.ops.aten
# Ops whose int16 form docs/numerics.md defines ("int16 activations"); any other op asked for int16
# is refused by name. The MAC ops, element-wise add/sub/mul, pooling, the fused or standalone
# clamp, concat and the movement ops (dtype-agnostic).
INT16_OPS = frozenset({"conv2d", "depthwise_conv2d", "fully_connected", "matmul", "add", "sub",
                       "mul", "max_pool2d", "avg_pool2d", "clamp", "concat", "transpose", "pad",
                       "strided_slice", "reshape", "lut", "reduce_sum", "softmax", "norm", "where"})
INT16_MAX = 2**15 - 1  # symmetric: [-32767, 32767], zero point 0


class FiniteMinMaxObserver(MinMaxObserver):
    """MinMaxObserver of the finite values only: the outputs of functions such as log, sqrt or
    reciprocal hold ±inf/NaN where an input leaves the domain, which the table saturates (±inf)
    or maps to the zero point (NaN); min/max stay ±inf when no value is finite (an error after
    calibration, mcutorch.quantize)."""

    def forward(self, x_orig):
        x = x_orig.detach()
        finite = x[torch.isfinite(x)]
        if finite.numel():
            super().forward(finite)
        return x_orig


def _rule(node: Node) -> Source | None:
    """The registry's Source for an aten node (mcutorch.ops), or None for ops mcutorch lacks."""
    found = ops.SOURCES.get(str(node.target))
    return found[1] if found else None


class Quantizer(_PT2EQuantizer):
    """int8 PT2E quantizer for Cortex-M and Ethos-U targets.

    `per_channel=False` quantizes weights per tensor (one symmetric scale per layer), as many
    TFLite models do: less accurate in general, but the narrower weight values compress better
    for Ethos-U (Vela streams fewer weight bytes from flash).

    `activations="int16"` quantizes every activation to int16 (a16w8: int16 symmetric
    activations, int8 weights); `int16_layers` names the layers that get int16 activations, by
    module name (`"features.3"`, its submodules included) or type (`torch.nn.Conv2d`), the rest
    staying int8. A name or type that matches no module, or an op with no int16 form (INT16_OPS)
    asked for int16, is an error naming it.

    Example:
        >>> qmodel = mcutorch.quantize(model, (x,), calibration=batches,
        ...                            quantizer=Quantizer(per_channel=False))
        >>> a16w8 = mcutorch.quantize(model, (x,), calibration=batches,
        ...                           quantizer=Quantizer(int16_layers=["conv1", nn.Linear]))
    """

    def __init__(self, per_channel: bool = True, activations: str = "int8",
                 int16_layers=()):
        super().__init__()
        if activations not in ("int8", "int16"):
            raise QuantizeError(f"activations={activations!r}: mcutorch quantizes activations "
                                "to 'int8' or 'int16'")
        layers = [int16_layers] if isinstance(int16_layers, (str, type)) else list(int16_layers)
        for layer in layers:
            if not isinstance(layer, (str, type)):
                raise QuantizeError(f"int16_layers entry {layer!r}: give module names (str) or "
                                    "module types (e.g. torch.nn.Conv2d)")
        self.per_channel = per_channel
        self.activations = activations
        self.int16_layers = tuple(_type_name(x) if isinstance(x, type) else x for x in layers)
        self._types = frozenset(_type_name(x) for x in layers if isinstance(x, type))

    def activation16_spec(self) -> QuantizationSpec:
        """int16 activations: symmetric per tensor, zero point 0, range [-32767, 32767]."""
        return QuantizationSpec(dtype=torch.int16, quant_min=-INT16_MAX, quant_max=INT16_MAX,
                                qscheme=torch.per_tensor_symmetric,
                                observer_or_fake_quant_ctr=MinMaxObserver.with_args(
                                    dtype=torch.int16, qscheme=torch.per_tensor_symmetric,
                                    quant_min=-INT16_MAX, quant_max=INT16_MAX, eps=2**-30))

    def is_int16(self, node: Node) -> bool:
        """Whether `node` computes in int16: the whole model, or a node made inside a module
        `int16_layers` names (by name, its submodules included, or by type), or an op that
        shares its input's qparams (a mean, a pool, a view made in forward) with an int16 form
        whose input is int16: it follows its producer, so no rescale is placed around it."""
        if self.activations == "int16":
            return True
        for path, kind in (node.meta.get("nn_module_stack") or {}).values():
            kind = kind if isinstance(kind, str) else _type_name(kind)
            if kind in self._types or any(path == n or path.startswith(n + ".")
                                          for n in self.int16_layers if n not in self._types):
                return True
        rule, src = _rule(node), node.args[0] if node.args else None
        return (getattr(rule, "quant", "") == "shared" and isinstance(src, Node) and
                ops.SOURCES[str(node.target)][0].name in INT16_OPS and self.is_int16(src))

    def _act(self, node: Node) -> QuantizationSpec:
        return self.activation16_spec() if self.is_int16(node) else self.activation_spec()

    def activation_spec(self) -> QuantizationSpec:
        return QuantizationSpec(dtype=torch.int8, quant_min=-128, quant_max=127,
                                qscheme=torch.per_tensor_affine,
                                observer_or_fake_quant_ctr=MinMaxObserver.with_args(eps=2**-20))

    def weight_spec(self) -> QuantizationSpec:
        if not self.per_channel:
            return QuantizationSpec(dtype=torch.int8, quant_min=-127, quant_max=127,
                                    qscheme=torch.per_tensor_symmetric,
                                    observer_or_fake_quant_ctr=MinMaxObserver.with_args(
                                        qscheme=torch.per_tensor_symmetric, eps=2**-20))
        return QuantizationSpec(dtype=torch.int8, quant_min=-127, quant_max=127,
                                qscheme=torch.per_channel_symmetric, ch_axis=0,
                                observer_or_fake_quant_ctr=PerChannelMinMaxObserver.with_args(
                                    eps=2**-20))

    def transposed_weight_spec(self, groups: int) -> QuantizationSpec:
        """A transposed conv's weight [Cin, Cout/G, *K]: per output channel along axis 1
        (groups 1), else per tensor (axis 1 would give output channels of all groups one scale)."""
        if groups == 1 and self.per_channel:
            return dataclasses.replace(self.weight_spec(), ch_axis=1)
        return Quantizer(per_channel=False).weight_spec()

    def bias_spec(self, node: Node) -> DerivedQuantizationSpec:
        x, w = node.args[0], node.args[1]
        return DerivedQuantizationSpec(
            derived_from=[(x, node), (w, node)], derive_qparams_fn=_bias_qparams,
            dtype=torch.int32, quant_min=-(2**31), quant_max=2**31 - 1,
            qscheme=torch.per_channel_symmetric, ch_axis=0)

    def function_spec(self, node: Node | None = None) -> QuantizationSpec:
        """Output spec of a function made a table (`lut`): the activation spec (int16 for an
        int16 node), observing finite values only."""
        spec = self._act(node) if node is not None else self.activation_spec()
        return dataclasses.replace(spec, observer_or_fake_quant_ctr=FiniteMinMaxObserver.with_args(
            eps=2**-20))

    def fixed_spec(self, scale: float, zero_point: int,
                   wide: bool = False) -> FixedQParamsQuantizationSpec:
        """Fixed output qparams (sigmoid, tanh). int16: zero point 0 and the scale 2^k / 32768
        covering the int8 qparams' real range (sigmoid and tanh: 1/32768, docs/numerics.md 6)."""
        if wide:
            top = max(abs(scale * (-128 - zero_point)), abs(scale * (127 - zero_point)))
            return FixedQParamsQuantizationSpec(
                dtype=torch.int16, scale=2.0 ** math.ceil(math.log2(top)) / 32768, zero_point=0,
                quant_min=-INT16_MAX, quant_max=INT16_MAX, qscheme=torch.per_tensor_symmetric)
        return FixedQParamsQuantizationSpec(dtype=torch.int8, scale=scale, zero_point=zero_point,
                                            quant_min=-128, quant_max=127,
                                            qscheme=torch.per_tensor_affine)

    def annotate(self, model: GraphModule) -> GraphModule:
        self._check_layers(model)
        for node in model.graph.nodes:
            if node.op == "call_function" and KEY not in node.meta:
                self.annotate_node(node)
        self.share_state(model)
        self.share_steps(model)
        return model

    def _check_layers(self, model: GraphModule) -> None:
        """Every name and type of `int16_layers` matches a module of the model."""
        stacks = [s for n in model.graph.nodes for s in (n.meta.get("nn_module_stack") or {})
                  .values()]
        paths = {p for p, _ in stacks}
        kinds = {k if isinstance(k, str) else _type_name(k) for _, k in stacks}
        for layer in self.int16_layers:
            found = (layer in kinds if layer in self._types else
                     any(p == layer or p.startswith(layer + ".") for p in paths))
            if not found:
                what = "no module of type" if layer in self._types else "no module named"
                known = sorted(p for p in paths if p) if layer not in self._types else sorted(kinds)
                raise QuantizeError(f"int16_layers: the model has {what} {layer!r}; its "
                                    f"modules: {', '.join(known[:20]) or '(none)'}")

    def _check_int16(self, node: Node, rule: Source, scalar: bool = False) -> bool:
        """True when `node` is int16 and its op has an int16 form; an int16 node without one is
        an UnsupportedOpError naming it."""
        if not self.is_int16(node):
            return False
        op = "lut" if scalar or rule.fn is not None and rule.quant in ("fixed", "free") else \
            ops.SOURCES[str(node.target)][0].name
        if op not in INT16_OPS:
            raise UnsupportedOpError(
                f"{source_of(node)}: int16 activations were asked for this op ({op}), which has "
                f"no int16 form in mcutorch; int16 ops: {', '.join(sorted(INT16_OPS))}. Leave "
                "its module out of Quantizer(int16_layers=[...]) to keep it int8")
        return True

    def share_state(self, model: GraphModule) -> None:
        """A stateful model's state (frontend/state.py): the value written gets the qparams
        of the buffer's read, one SharedQuantizationSpec, so the write is a byte copy."""
        from mcutorch.frontend.state import STATE_KEY

        reads = {n.meta[STATE_KEY]: n for n in model.graph.nodes
                 if n.op == "placeholder" and STATE_KEY in n.meta}
        out = next(n for n in model.graph.nodes if n.op == "output")
        rets = out.args[0] if isinstance(out.args[0], (list, tuple)) else [out.args[0]]
        for j, k in out.meta.get(STATE_KEY, {}).items():
            read, new = reads.get(k), rets[j]
            users = [u for u in (read.users if read is not None else ())
                     if read in getattr(u.meta.get(KEY), "input_qspec_map", {})]
            ann = new.meta.get(KEY) if isinstance(new, Node) else None
            if not users or ann is None or ann.output_qspec is None:
                continue
            ann.output_qspec = SharedQuantizationSpec((read, users[0]))

    def share_steps(self, model: GraphModule) -> None:
        """An unrolled LSTM / GRU / RNN (frontend/builders/recurrent.py): the n-th node of each
        step of a layer and direction takes the output qparams of the n-th node of its first
        step (the first step apart when it starts from no state), so the constants of every step
        are the same bytes, which the program stores once."""
        from mcutorch.frontend.builders.recurrent import STEP_KEY

        first, seen, place = {}, None, 0
        for node in model.graph.nodes:
            tag = (node.meta.get("custom") or {}).get(STEP_KEY)
            if node.op != "call_function" or tag is None:
                continue
            place = place + 1 if tag == seen else 0
            seen, ann, key = tag, node.meta.get(KEY), (tag[0], tag[2], place)
            if ann is None or type(ann.output_qspec) is not QuantizationSpec:
                continue
            if key in first:
                ann.output_qspec = SharedQuantizationSpec(first[key])
            else:
                first[key] = node

    def validate(self, model: GraphModule) -> None:
        """Nothing to check beyond what annotate enforces."""

    # --- per-op annotation -------------------------------------------------------------------
    def annotate_node(self, node: Node) -> None:
        """Annotate one node (and a fused activation after it); unknown ops are left float."""
        rule = _rule(node)
        if rule is None:
            return
        scalar = rule.quant == "binary" and not all(isinstance(a, Node) for a in node.args[:2])
        wide = self._check_int16(node, rule, scalar)
        act = self._act(node)
        if rule.quant == "mac":
            w = (self.weight_spec() if "transpose" not in str(node.target) else
                 self.transposed_weight_spec(int(node.args[6]) if len(node.args) > 6 else 1))
            qmap = {node.args[0]: self.input_spec(node.args[0], node), node.args[1]: w}
            if len(node.args) > 2 and isinstance(node.args[2], Node) and not wide:
                qmap[node.args[2]] = self.bias_spec(node)  # int16: float, stored as int48
            self._annotate_with_activation(node, qmap)
        elif rule.quant == "binary":
            qmap = {a: self.input_spec(a, node) for a in node.args[:2] if _is_float_tensor(a)}
            # x * 0.5: a table
            self._annotate_with_activation(node, qmap,
                                           self.function_spec(node) if scalar else None)
        elif rule.quant == "activation":  # standalone: its own output range
            _set(node, {node.args[0]: act}, act)
        elif rule.quant == "shared":
            self._annotate_shared(node)
        elif rule.quant == "compare":  # the bool output feeds a where's mask: no observer
            _set(node, {a: self.input_spec(a, node) for a in _tensor_inputs(node)}, None)
        elif rule.quant == "select":  # where(mask, a, b), masked_fill(x, mask, value)
            values = node.args[:1] if node.target == A.masked_fill.Scalar else node.args[1:3]
            tensors = [a for a in values if _is_float_tensor(a)]
            _set(node, {a: self.input_spec(a, node) for a in tensors},
                 act if len(tensors) != 1 else _same_as(tensors[0], node, act))
        elif rule.quant in ("fixed", "free"):  # one tensor (pow.Scalar: its exponent)
            qmap = {a: self.input_spec(a, node) for a in _tensor_inputs(node)}
            out = (self.fixed_spec(*rule.qparams, wide) if rule.quant == "fixed" else
                   self.function_spec(node) if rule.fn is not None else act)
            _set(node, qmap, out)

    def input_spec(self, arg: Node, node: Node):
        """Activation spec for an input edge; reuse a fixed-qparams or derived producer's (no
        requant, and a masked_fill's -inf is not observed again) when it is of the node's dtype."""
        ann = arg.meta.get(KEY)
        spec = self._act(node)
        if ann is not None and isinstance(ann.output_qspec, (FixedQParamsQuantizationSpec,
                                                             DerivedQuantizationSpec)):
            if ann.output_qspec.dtype == spec.dtype:
                return SharedQuantizationSpec(arg)
        return spec

    def _annotate_with_activation(self, node: Node, qmap: dict, out=None) -> None:
        users = list(node.users)
        fused = len(users) == 1 and getattr(_rule(users[0]), "quant", "") == "activation"
        if fused and KEY not in users[0].meta:  # the clamp computes in its producer's dtype
            _set(node, qmap, None)
            _set(users[0], {}, self._act(node))
        else:
            _set(node, qmap, out or self._act(node))

    def _annotate_shared(self, node: Node) -> None:
        inputs = _tensor_inputs(node)
        first = inputs[0]
        qmap = {first: self.input_spec(first, node)}
        shared = SharedQuantizationSpec((first, node))
        qmap.update({other: shared for other in inputs[1:]})
        if isinstance(node.meta.get("val"), tuple):  # (values, indices): its one getitem 0
            _set(node, qmap, None)
            node, qmap = next(iter(node.users)), {}
        _set(node, qmap, shared)


def _set(node: Node, qmap: dict, out) -> None:
    node.meta[KEY] = QuantizationAnnotation(input_qspec_map=qmap, output_qspec=out, _annotated=True)


def _tensor_inputs(node: Node) -> list[Node]:
    """The float tensor inputs of a node, in order (a list argument such as cat's expanded)."""
    found = []
    for arg in node.args:
        for a in (arg if isinstance(arg, (list, tuple)) else [arg]):
            if _is_float_tensor(a) and a not in found:
                found.append(a)
    return found


def _is_float_tensor(arg) -> bool:
    if not isinstance(arg, Node):
        return False
    val = arg.meta.get("val")
    return isinstance(val, torch.Tensor) and val.dtype.is_floating_point


def _same_as(arg: Node, node: Node, like: QuantizationSpec) -> DerivedQuantizationSpec:
    """The qparams of the edge (arg, node), derived from its observer alone: a where's output
    beside a scalar (masked_fill's fill value, -inf included) is not observed, it saturates;
    dtype and range those of `like` (int8, or int16)."""
    return DerivedQuantizationSpec(derived_from=[(arg, node)],
                                   derive_qparams_fn=lambda obs: obs[0].calculate_qparams(),
                                   dtype=like.dtype, quant_min=like.quant_min,
                                   quant_max=like.quant_max, qscheme=like.qscheme)


def _type_name(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


def _bias_qparams(observers):
    (s_in, _), (s_w, _) = (obs.calculate_qparams() for obs in observers)
    scale = (s_in * s_w).to(torch.float32)
    return scale, torch.zeros_like(scale, dtype=torch.int32)

