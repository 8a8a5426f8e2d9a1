"""Quantization-aware training: `mcutorch.quantize(..., qat=True)` and `mcutorch.convert`.

The float model is captured in training mode (`capture(..., train=True)`: BatchNorm and dropout
kept) and prepared with `prepare_qat_pt2e` and the quantizer's specs in their fake-quant forms
(`fake_quant_forms`): every observer-based spec (activations, weights, functions) becomes a
torchao `FakeQuantize` around the same observer, so the ranges QAT learns are measured exactly
as calibration measures them; fixed-qparams specs (softmax, sigmoid, tanh) become
`FixedQParamsFakeQuantize` (PT2E does it), a derived bias spec stays derived (the bias is
quantized once, at convert). PT2E fuses each conv1d/conv2d + BatchNorm pair for QAT (the weight
is fake-quantized after scaling by the batch statistics) and folds it at convert.

`convert` takes the trained module to the converted PT2E module `mcutorch.compile` takes:
`move_exported_model_to_eval` (BatchNorm running statistics, dropout off), then `convert_pt2e`,
on a copy (the trainable module stays trainable). `mcutorch.compile` converts a QAT module
itself, so `convert` is needed only to evaluate the int8 model in PyTorch first.
"""
from __future__ import annotations

import copy
import dataclasses
import warnings

import torch
from torch.fx import GraphModule, Node

from mcutorch.errors import QuantizeError, UnsupportedOpError
from mcutorch.frontend._torchao import pt2e
from mcutorch.frontend.quantizer import _rule

pt2e()
from torchao.quantization.pt2e import (  # noqa: E402
    FakeQuantize,
    FakeQuantizeBase,
    move_exported_model_to_eval,
    move_exported_model_to_train,
)
from torchao.quantization.pt2e.quantizer import (  # noqa: E402
    QuantizationAnnotation,
    QuantizationSpec,
)
from torchao.quantization.pt2e.quantizer import Quantizer as _PT2EQuantizer  # noqa: E402

__all__ = ["convert", "is_qat", "move_exported_model_to_eval", "move_exported_model_to_train"]
A = torch.ops.aten
KEY = "quantization_annotation"
QAT_KEY = "mcutorch_qat"  # GraphModule.meta: the example inputs of a QAT-prepared module
FUSED_WITH_BN = {A.conv1d.default, A.conv2d.default}  # PT2E's QAT conv + BatchNorm patterns
BATCH_NORM = A.batch_norm.default


def fake_quant(spec):
    """The QAT form of one spec: a QuantizationSpec's observer wrapped in a FakeQuantize (same
    observer, dtype, range, scheme and axis); other specs unchanged."""
    if not isinstance(spec, QuantizationSpec):
        return spec
    ctr = spec.observer_or_fake_quant_ctr
    wrapped = getattr(ctr, "p", None)
    cls = wrapped.func if wrapped is not None else ctr
    if isinstance(cls, type) and issubclass(cls, FakeQuantizeBase):
        return spec  # already a fake quant
    return dataclasses.replace(spec, observer_or_fake_quant_ctr=FakeQuantize.with_args(
        observer=ctr))


class fake_quant_forms(_PT2EQuantizer):  # noqa: N801 (reads as a function of a quantizer)
    """A quantizer annotating as `quantizer` does, with every spec in its QAT form."""

    def __init__(self, quantizer: _PT2EQuantizer):
        super().__init__()
        self.quantizer = quantizer

    def annotate(self, model: GraphModule) -> GraphModule:
        model = self.quantizer.annotate(model)
        for node in model.graph.nodes:
            if node.op == "call_function" and node.target == BATCH_NORM:
                _annotate_batch_norm(node)
        for node in model.graph.nodes:
            ann = node.meta.get(KEY)
            if ann is None:
                continue
            node.meta[KEY] = dataclasses.replace(
                ann, input_qspec_map={a: fake_quant(s) for a, s in ann.input_qspec_map.items()},
                output_qspec=fake_quant(ann.output_qspec))
        return model

    def validate(self, model: GraphModule) -> None:
        self.quantizer.validate(model)


def _annotate_batch_norm(bn: Node) -> None:
    """conv -> BatchNorm [-> activation] as PT2E's QAT fusion expects: the conv's output not
    observed, the BatchNorm's (or its fused activation's) is."""
    conv = bn.args[0]
    ann = conv.meta.get(KEY)
    if ann is None or ann.output_qspec is None:
        return  # annotated with its activation already, or not at all
    out, ann.output_qspec = ann.output_qspec, None
    users = list(bn.users)
    act = users[0].meta.get(KEY) if len(users) == 1 else None
    if act is not None and act.input_qspec_map.keys() == {bn} and act.output_qspec is not None \
            and getattr(_rule(users[0]), "quant", "") == "activation":
        act.input_qspec_map = {}  # conv -> BatchNorm -> ReLU: one observer, after the ReLU
        out = None
    bn.meta[KEY] = QuantizationAnnotation(input_qspec_map={}, output_qspec=out, _annotated=True)


def drop_batch_counters(gm: GraphModule) -> None:
    """Erase BatchNorm's `num_batches_tracked.add_(1)` (training bookkeeping, read only by a
    BatchNorm with momentum=None, which QAT does not support)."""
    for node in list(gm.graph.nodes):
        if (node.op == "call_function" and node.target == A.add_.Tensor and not node.users
                and isinstance(node.args[0], Node) and node.args[0].op == "get_attr"
                and str(node.args[0].target).endswith("num_batches_tracked")):
            gm.graph.erase_node(node)


def check_batch_norms(gm: GraphModule) -> None:
    """Every BatchNorm follows a conv1d/conv2d it alone reads (PT2E fuses that pair for QAT);
    any other is refused, naming it (PTQ folds it, QAT would train it unquantized)."""
    from mcutorch.frontend.capture import source_of

    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target != BATCH_NORM:
            continue
        prod = node.args[0]
        if not (isinstance(prod, Node) and prod.target in FUSED_WITH_BN and len(prod.users) == 1):
            what = source_of(prod) if isinstance(prod, Node) else "an input"
            raise UnsupportedOpError(
                f"{source_of(node)}: QAT needs each BatchNorm right after a conv1d/conv2d that "
                f"only it reads (PT2E fuses that pair); this one follows {what}: fold it into "
                "the layer before (or drop it) for QAT, or quantize without qat=True")
        momentum = node.args[6] if len(node.args) > 6 else 0.1
        if momentum is None:
            raise UnsupportedOpError(f"{source_of(node)}: BatchNorm(momentum=None) (a running "
                                     "average over all batches) is not supported in QAT")


def prepare(gm: GraphModule, quantizer, args: tuple) -> GraphModule:
    """prepare_qat_pt2e on a training-mode capture; the result remembers its example inputs."""
    from torchao.quantization.pt2e.quantize_pt2e import prepare_qat_pt2e

    check_batch_norms(gm)
    prepared = prepare_qat_pt2e(gm, fake_quant_forms(quantizer))
    prepared.meta[QAT_KEY] = args
    return prepared


def is_qat(module) -> bool:
    """Whether `module` is a QAT-prepared PT2E module (it holds fake-quant modules)."""
    return isinstance(module, GraphModule) and any(
        isinstance(m, FakeQuantizeBase) for m in module.modules())


def _check_trained(module: GraphModule) -> None:
    """Every fake quant's observer saw data: one that never ran has no range (min > max)."""
    for name, m in module.named_modules():
        obs = getattr(m, "activation_post_process", None) if isinstance(
            m, FakeQuantizeBase) else None
        lo, hi = getattr(obs, "min_val", None), getattr(obs, "max_val", None)
        if not (isinstance(lo, torch.Tensor) and isinstance(hi, torch.Tensor)):
            continue
        if lo.numel() == 0 or not (torch.isfinite(lo).all() and torch.isfinite(hi).all()):
            raise QuantizeError(
                f"the QAT module's fake quant {name} never observed a finite value: run "
                "calibration or training batches through the module (in train mode, observers "
                "on) before converting or compiling it")


def convert(module: GraphModule) -> GraphModule:
    """The converted PT2E module of a trained QAT module (a copy; `module` stays trainable).

    Example:
        >>> qat = mcutorch.quantize(model, (x,), calibration=batches, qat=True)
        >>> ...                                   # the training loop, on qat
        >>> qmodel = mcutorch.convert(qat)        # int8 fake-quant, eval mode
        >>> program = mcutorch.compile(qat)       # the same conversion, done by compile
    """
    from mcutorch.frontend.lift import DQ_OPS

    if not is_qat(module):
        quantized = isinstance(module, GraphModule) and any(
            n.target in DQ_OPS for n in module.graph.nodes if n.op == "call_function")
        raise QuantizeError(
            "convert() takes the module mcutorch.quantize(..., qat=True) returned"
            + (" (this one is converted already: compile it as it is)" if quantized else
               f", not a {type(module).__name__}: quantize a float model with "
               "mcutorch.quantize(model, example_inputs, qat=True) first"))
    _check_trained(module)
    _, convert_pt2e = pt2e()
    with warnings.catch_warnings():  # torch's own pytree deprecation, raised by the copy
        warnings.simplefilter("ignore", FutureWarning)
        m = copy.deepcopy(module)
    move_exported_model_to_eval(m)
    with torch.no_grad():
        converted = convert_pt2e(m)
    args = module.meta.get(QAT_KEY)
    converted.meta.pop(QAT_KEY, None)
    if args is not None:
        converted.meta["mcutorch_example_inputs"] = args
    return converted
