"""mcutorch: run PyTorch models on Arm microcontrollers.

    import mcutorch
    qmodel = mcutorch.quantize(model, example_inputs, calibration=batches)
    program = mcutorch.compile(qmodel, example_inputs, target="cortex-m55")
    program.save("model.mtp")
    outputs = mcutorch.load("model.mtp").run(inputs)
"""
from .api import CompiledModel, load
from .compiler import compile
from .errors import McutorchError
from .quantize import Quantizer, quantize

__all__ = ["CompiledModel", "McutorchError", "Quantizer", "compile", "load", "quantize"]
__version__ = "0.1.0"
