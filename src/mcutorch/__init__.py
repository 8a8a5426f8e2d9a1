"""mcutorch: run PyTorch models on Arm microcontrollers.

    import mcutorch
    qmodel = mcutorch.quantize(model, example_inputs, calibration=batches)
    program = mcutorch.compile(qmodel, example_inputs, target="cortex-m55")
    program.save("model.mtp")
    outputs = mcutorch.load("model.mtp").run(inputs)
    report = mcutorch.validate("model.mtp", "test.npz", model=model, qmodel=qmodel)

The public names load lazily, so tools that only need targets, boards or the program format do
not pay for importing torch.
"""
from __future__ import annotations

import importlib

from mcutorch.errors import McutorchError

_LAZY = {"CompiledModel": "api", "load": "api", "compile": "compiler", "Quantizer": "frontend",
         "convert": "frontend",
         "quantize": "frontend", "validate": "analysis.validate",
         "load_dataset": "analysis.dataset", "mixed_precision": "analysis.mixed",
         "analyze": "analysis"}
__all__ = ["CompiledModel", "McutorchError", "Quantizer", "analyze", "compile", "convert", "load",
           "load_dataset", "mixed_precision", "quantize", "validate"]
__version__ = "0.1.0"


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mcutorch' has no attribute {name!r}")
