"""Front end: torch.nn.Module -> mcutorch IR, in three steps.

    capture.py    torch.export (pre-dispatch graph, static shapes, no-ops gone, BatchNorm folded)
    fold.py       constants computed in forward folded; models writing their buffers refused
    quantize.py   PT2E: prepare_pt2e(Quantizer) -> calibrate -> convert_pt2e  (`quantize`)
    quantizer.py  mcutorch's PT2E `Quantizer` (the numerics contract as annotations)
    qat.py        quantization-aware training: prepare_qat_pt2e, `convert`
    lift.py       the converted Q/DQ graph -> IR (integer ops on int8 tensors, NCHW, float scales)
    builders/     lift's builder per registry op, one module per kernel family

`mcutorch.quantize`, `mcutorch.convert` and `mcutorch.Quantizer` are the public names of this
package.
"""
from mcutorch.frontend.qat import convert
from mcutorch.frontend.quantize import quantize
from mcutorch.frontend.quantizer import Quantizer

__all__ = ["Quantizer", "convert", "quantize"]
