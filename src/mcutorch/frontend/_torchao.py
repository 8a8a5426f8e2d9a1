"""Import torchao's PT2E quietly (its import logs about optional GPU kernels we never use)."""
from __future__ import annotations

import logging
import warnings


def pt2e():
    """(prepare_pt2e, convert_pt2e); also registers the quantized_decomposed ops."""
    for name in ("torchao", "torch.utils._pytree"):
        logging.getLogger(name).setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    return prepare_pt2e, convert_pt2e
