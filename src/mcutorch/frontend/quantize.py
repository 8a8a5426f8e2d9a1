"""PT2E quantization: export -> prepare_pt2e(our Quantizer) -> calibrate -> convert_pt2e, or
for QAT (`qat=True`, frontend/qat.py) export in training mode -> prepare_qat_pt2e -> calibrate.

`mcutorch.quantize` is the `quantize` function of this package."""
from __future__ import annotations


import copy
from collections.abc import Iterable

import torch

from mcutorch.errors import QuantizeError
from mcutorch.frontend.capture import as_tuple, capture
from mcutorch.frontend._torchao import pt2e
from mcutorch.frontend.quantizer import Quantizer
from mcutorch.frontend.state import STATE_KEY, calibrate
from mcutorch.ui.progress import track

__all__ = ["Quantizer", "quantize"]


def quantize(model: torch.nn.Module, example_inputs, calibration: Iterable | None = None,
             quantizer: Quantizer | None = None, progress: bool = False,
             qat: bool = False) -> torch.fx.GraphModule:
    """Quantize `model` to int8 with PT2E; returns the converted (fake-quant) module.

    `calibration` is an iterable of batches (a tensor or a tuple of tensors each, shaped like the
    example inputs except, possibly, the batch dimension); without it the example inputs
    calibrate, which gives poor ranges: pass real data. An empty calibration, a batch of another
    shape, NaN/Inf in a batch or in the model's parameters are QuantizeErrors.

    `qat=True` returns a trainable module instead (quantization-aware training, docs/pt2e.md):
    the model captured in training mode and prepared with `prepare_qat_pt2e`, the quantizer's
    specs as fake quants, its own copy of the parameters (training it leaves `model` as it
    is); `calibration` (optional here) initializes their ranges. Train it
    with an ordinary loop (`torchao.quantization.pt2e.move_exported_model_to_train/eval` switch
    BatchNorm and dropout), then `mcutorch.compile` it or `mcutorch.convert` it.

    Example:
        >>> qmodel = mcutorch.quantize(model, (x,), calibration=[x1, x2, x3])
        >>> y = qmodel(x)            # simulated int8, float in and out
    """
    from mcutorch.frontend.lift import check_supported

    prepare_pt2e, convert_pt2e = pt2e()
    args = as_tuple(example_inputs)
    _check_parameters(model)
    batches = list(calibration) if calibration is not None else [] if qat else [args]
    if not batches and not qat:
        raise QuantizeError("calibration is empty: pass at least one batch (or leave it out to "
                            "calibrate on the example inputs); an empty calibration would give "
                            "every activation the scale 1.0")
    gm = capture(model, args)
    records = gm.meta.get(STATE_KEY, [])
    check_supported(gm)  # QAT too: the eval-mode graph (BatchNorm folded) is the one compiled
    if qat and records:
        raise QuantizeError("qat=True on a stateful model (one writing its buffers in forward) "
                            "is not supported yet: quantize it post-training (qat=False)")
    if qat:  # on a copy: training the QAT module leaves the float model's weights alone
        from mcutorch.frontend import qat as qat_flow

        gm = capture(copy.deepcopy(model), args, train=True)
        prepared = qat_flow.prepare(gm, quantizer or Quantizer(), args)
        qat_flow.move_exported_model_to_eval(prepared)  # calibrate on running statistics
    else:
        prepared = prepare_pt2e(gm, quantizer or Quantizer())

    def run(batch, i):
        try:
            return prepared(*batch)
        except Exception as exc:  # torch raises many types; all mean "this batch is wrong"
            raise QuantizeError(f"calibration batch {i} ({_shapes(batch)}) does not run "
                                f"through the model (example inputs {_shapes(args)}): "
                                f"{type(exc).__name__}: {exc}") from exc

    checked = []
    for i, batch in enumerate(track(batches, "calibrating", enabled=progress)):
        batch = as_tuple(batch)
        _check_finite(batch, i)
        _check_shapes(batch, args, i, isinstance(calibration, torch.Tensor))
        checked.append(batch)
        if not records:
            with torch.no_grad():
                run(batch, i)
    if records:  # in order, the state carried from batch to batch (frontend/state.py)
        with torch.no_grad():
            calibrate(prepared, checked, records, run)
    if qat:
        return qat_flow.move_exported_model_to_train(prepared)
    _check_ranges(prepared)
    converted = convert_pt2e(prepared)
    converted.meta["mcutorch_example_inputs"] = args
    converted.meta[STATE_KEY] = records
    return converted


def _check_finite(batch: tuple, index: int) -> None:
    for t in batch:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and not torch.isfinite(t).all():
            bad = (~torch.isfinite(t)).sum().item()
            raise QuantizeError(f"calibration batch {index} has {bad} NaN/Inf values; "
                                "calibration data must be finite")
        if not isinstance(t, torch.Tensor):
            raise QuantizeError(f"calibration batch {index} holds a {type(t).__name__}, "
                                "expected tensors")



def _check_ranges(prepared: torch.fx.GraphModule) -> None:
    """Every observed range finite: an activation that calibration saw as ±inf/NaN only (or,
    with MinMaxObserver, at all) has no int8 scale."""
    from mcutorch.frontend.capture import source_of

    for node in prepared.graph.nodes:
        obs = getattr(prepared, str(node.target), None) if node.op == "call_module" else None
        lo, hi = getattr(obs, "min_val", None), getattr(obs, "max_val", None)
        if not (isinstance(lo, torch.Tensor) and isinstance(hi, torch.Tensor)):
            continue
        if torch.isfinite(lo).all() and torch.isfinite(hi).all():
            continue
        src, lo, hi = node.args[0], lo.min().item(), hi.max().item()
        what = (f"model input {src.name}" if src.op == "placeholder" else
                source_of(src) if src.op == "call_function" else src.name)
        saw = "no finite value" if lo > hi else f"the range [{lo}, {hi}]"
        raise QuantizeError(
            f"calibration saw {saw} at {what}: no int8 scale fits; its inputs leave the "
            "function's domain (log or sqrt of values <= 0, division by 0, overflow): keep them "
            "inside it (clamp, add an epsilon), or calibrate with data that does")


def _shapes(ts) -> str:
    return ", ".join(f"{list(t.shape)}" if isinstance(t, torch.Tensor) else type(t).__name__
                     for t in ts)


def _check_shapes(batch: tuple, example: tuple, index: int, from_tensor: bool) -> None:
    """Each batch: as many tensors as the example inputs, each of the example's shape (its batch
    dimension may differ)."""
    hint = (" (calibration is an iterable of batches: a single tensor iterates over its rows; "
            "pass [tensor] or tensor.split(n))" if from_tensor else "")
    if len(batch) != len(example):
        raise QuantizeError(f"calibration batch {index} has {len(batch)} tensors, the model takes "
                            f"{len(example)} (example inputs {_shapes(example)}){hint}")
    for k, (t, e) in enumerate(zip(batch, example)):
        if isinstance(e, torch.Tensor) and (t.dim() != e.dim() or t.shape[1:] != e.shape[1:]):
            which = f"input {k} " if len(example) > 1 else ""
            raise QuantizeError(
                f"calibration batch {index} {which}has shape {list(t.shape)}; expected the "
                f"example input's shape {list(e.shape)} (the batch size may differ){hint}")


def _check_parameters(model: torch.nn.Module) -> None:
    """NaN/Inf in a weight (or a BatchNorm statistic) would make no sensible int8 model."""
    named = [*model.named_parameters(), *model.named_buffers()]
    for name, t in named:
        if t.is_floating_point() and not torch.isfinite(t).all():
            bad = (~torch.isfinite(t)).sum().item()
            raise QuantizeError(f"model parameter {name} {list(t.shape)} has {bad} NaN/Inf "
                                "values; the model's weights must be finite")


def quantize_like(model: torch.nn.Module, example_inputs, reference: torch.nn.Module,
                  reference_inputs, calibration: Iterable,
                  quantizer: Quantizer | None = None) -> tuple:
    """Quantize `reference` on `calibration`, and `model` with the qparams `reference` got,
    layer by layer (the same module paths; frontend/state.transfer_qparams): e.g. a streaming
    model cut from a windowed one, whose programs then compute bit-identical outputs. Returns
    (converted reference, converted model). `model` may be stateful; it is run once, from its
    initial state, only to observe its (shared) weights.

    Example:
        >>> q30, qstream = quantize_like(ds_cnn_sww_streaming(), (frame,), ds_cnn_sww(),
        ...                              (window,), windows)
    """
    from mcutorch.frontend.state import transfer_qparams

    prepare_pt2e, convert_pt2e = pt2e()
    gm_ref = capture(reference, as_tuple(reference_inputs))
    prep_ref = prepare_pt2e(gm_ref, quantizer or Quantizer())
    args = as_tuple(example_inputs)
    gm = capture(model, args)
    records = gm.meta.get(STATE_KEY, [])
    prep = prepare_pt2e(gm, quantizer or Quantizer())
    with torch.no_grad():
        for batch in calibration:
            prep_ref(*as_tuple(batch))
        prep(*args, *(r["init"] for r in records))
    transfer_qparams(prep_ref, prep)
    _check_ranges(prep_ref)
    _check_ranges(prep)
    converted_ref, converted = convert_pt2e(prep_ref), convert_pt2e(prep)
    converted.meta[STATE_KEY] = records
    converted.meta["mcutorch_example_inputs"] = args
    return converted_ref, converted
