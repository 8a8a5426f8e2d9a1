"""Pooling that PyTorch defines with windows of different sizes or counts: adaptive average
pooling with uneven windows and ceil_mode average pooling that counts padding, composed from
gather / pad / avg_pool2d / concat, against PyTorch's fake-quant model."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from mcutorch.frontend.builders.pool import adaptive_windows


class Pool(nn.Module):
    def __init__(self, pool):
        super().__init__()
        self.conv, self.pool = nn.Conv2d(3, 6, 3, padding=1), pool

    def forward(self, x):
        return self.pool(torch.relu(self.conv(x)))


def _compare(pool, shape, seed=0):
    from test_pipeline import compile_and_compare

    torch.manual_seed(seed)
    model = Pool(pool).eval()
    cal = [torch.randn(*shape) for _ in range(6)]
    program, ours, theirs = compile_and_compare(model, cal[1], cal)
    assert ours.shape == theirs.shape
    diff = np.abs(ours - theirs)
    return program, float((diff <= 1).mean()), int(diff.max())


def test_adaptive_windows_are_pytorchs():
    x = torch.arange(10.0).reshape(1, 1, 1, 10)
    for out in (1, 3, 4, 6, 7, 9, 10):
        want = nn.functional.adaptive_avg_pool2d(x, (1, out)).flatten().tolist()
        got = [float(np.mean(range(a, b))) for a, b in adaptive_windows(10, out)]
        assert got == pytest.approx(want), out


@pytest.mark.parametrize("hw, out", [((10, 10), (7, 7)), ((9, 7), (4, 3)), ((5, 8), (3, 8)),
                                     ((7, 7), (7, 5)), ((6, 6), (4, 1))])
def test_uneven_adaptive_avg_pool(hw, out):
    program, within, worst = _compare(nn.AdaptiveAvgPool2d(out), (1, 3, *hw))
    print(f"adaptive {hw} -> {out}: {within:.2%} within 1 LSB, worst {worst}")
    assert within >= 0.99 and worst <= 1
    names = [op.name for op in program.program.ops]
    assert "avg_pool2d" in names and "gather" in names, names
    from mcutorch.device import crt
    from mcutorch.ref.interpreter import Interpreter

    q = program.quantize_inputs([torch.randn(1, 3, *hw)])
    for got, want in zip(crt.run_host(program.program, q), Interpreter(program.program).invoke(q)):
        assert np.array_equal(got, want)  # the C runtime on the host: bit-exact


@pytest.mark.parametrize("kw", [dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=2, stride=2, padding=1),
                                dict(kernel_size=3, stride=2, padding=0),
                                dict(kernel_size=3, stride=2, padding=1, divisor_override=4)])
def test_ceil_mode_avg_pool_counting_padding(kw):
    pool = nn.AvgPool2d(ceil_mode=True, count_include_pad=True, **kw)
    x = torch.zeros(1, 6, 8, 8)
    assert pool(x).shape[-1] * kw["stride"] > 8 + 2 * kw["padding"] - kw["kernel_size"] + 1
    program, within, worst = _compare(pool, (1, 3, 8, 8), seed=2)
    print(f"{kw}: {within:.2%} within 1 LSB, worst {worst}")
    assert within >= 0.99 and worst <= 1
