"""Slow set: MobileNetV2 1.0 at 224x224 through the C runtime on the emulated Cortex-M55.

The 3.5 MB program and 1.5 MB of activations fit mps3-an547 (DTCM + SRAM + DDR); the mps2
boards' single 4 MiB data RAM cannot hold the program (read through semihosting) next to the
arena, so they are not part of this case.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import mcutorch
from mcutorch.models import example_input, mobilenet_v2

pytestmark = [pytest.mark.slow, pytest.mark.qemu]


def test_mobilenet_v2_224_bit_exact_on_m55():
    torch.manual_seed(0)
    model = mobilenet_v2(width=1.0, resolution=224).eval()
    cal = [example_input(model, seed=i) for i in range(2)]
    qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal)
    program = mcutorch.compile(qmodel, (cal[0],), target="cortex-m55", board="mps3-an547")
    assert set(program.summary()["regions"]) >= {"SRAM"}  # spilled beyond the 512 KiB DTCM
    q = program.quantize_inputs([cal[1]])
    expected = program.run_int8(q)
    got = program.run_on_board(q, "mps3-an547")
    assert np.array_equal(got[0], expected[0])
