"""Peer figures: TFLite Micro measured side by side when its wheel is installed; ExecuTorch's
published runs on this machine kind (its Cortex-M flow is not installed here)."""
from __future__ import annotations

import ctypes
import os
import re
import tempfile
from pathlib import Path

# ExecuTorch 1.5.1 Cortex-M flow, random weights, this machine kind: planned bytes, compile s.
EXECUTORCH = {
    "ds_cnn_kws": (20464, 2.9), "mobilenet_v1_vww": (138240, 7.1), "resnet8": (49728, 3.0),
    "fc_autoencoder": (3200, 2.4), "ds_cnn_sww": (32272, 4.0), "mobilenet_v2": (142704, 13.2),
}
# tflite-micro wheel on x86-64, print_allocations total (published figures, used if not installed)
TFLM_PUBLISHED = {"ds_cnn_kws": 24272, "mobilenet_v1_vww": 103680, "resnet8": 55984,
                  "fc_autoencoder": 3984, "ds_cnn_sww": 16640}


def tflm_arena(tflite: Path) -> tuple[int, int, str]:
    """(total, head) arena bytes TFLite Micro allocates for a .tflite model, and the source."""
    try:
        from tflite_micro import runtime
    except ImportError:
        return 0, 0, "n/a"
    with tempfile.TemporaryFile(mode="w+") as cap:
        saved = [os.dup(1), os.dup(2)]
        os.dup2(cap.fileno(), 1)
        os.dup2(cap.fileno(), 2)
        try:
            it = runtime.Interpreter.from_file(str(tflite), arena_size=4 << 20)
            it.print_allocations()
            ctypes.CDLL(None).fflush(None)  # the C++ side prints through C stdio
        finally:
            for fd, old in zip((1, 2), saved):
                os.dup2(old, fd)
                os.close(old)
        cap.seek(0)
        text = cap.read()
    total = re.search(r"allocation total (\d+)", text)
    head = re.search(r"allocation head (\d+)", text)
    return (int(total.group(1)) if total else 0, int(head.group(1)) if head else 0, "measured")
