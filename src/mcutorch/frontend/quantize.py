"""PT2E quantization: export -> prepare_pt2e(our Quantizer) -> calibrate -> convert_pt2e.

`mcutorch.quantize` is the `quantize` function of this package."""
from __future__ import annotations


from collections.abc import Iterable

import torch

from mcutorch.errors import QuantizeError
from mcutorch.frontend.capture import as_tuple, capture
from mcutorch.frontend._torchao import pt2e
from mcutorch.frontend.quantizer import Quantizer

__all__ = ["Quantizer", "quantize"]


def quantize(model: torch.nn.Module, example_inputs, calibration: Iterable | None = None,
             quantizer: Quantizer | None = None, progress: bool = False) -> torch.fx.GraphModule:
    """Quantize `model` to int8 with PT2E; returns the converted (fake-quant) module.

    `calibration` is an iterable of batches (a tensor or a tuple of tensors each); without it the
    example inputs calibrate, which gives poor ranges: pass real data.

    Example:
        >>> qmodel = mcutorch.quantize(model, (x,), calibration=[x1, x2, x3])
        >>> y = qmodel(x)            # simulated int8, float in and out
    """
    from mcutorch.frontend.lift import check_supported

    prepare_pt2e, convert_pt2e = pt2e()
    args = as_tuple(example_inputs)
    gm = capture(model, args)
    check_supported(gm)
    prepared = prepare_pt2e(gm, quantizer or Quantizer())
    batches = list(calibration) if calibration is not None else [args]
    with torch.no_grad():
        for i, batch in enumerate(batches):
            batch = as_tuple(batch)
            _check_finite(batch, i)
            prepared(*batch)
            if progress:
                print(f"\rcalibrating {i + 1}/{len(batches)}", end="", flush=True)
    if progress:
        print()
    converted = convert_pt2e(prepared)
    converted.meta["mcutorch_example_inputs"] = args
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

