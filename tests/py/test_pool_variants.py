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


# --- max pooling of every shape PyTorch has, and the 1-D pools ------------------------------
class Flat(nn.Module):
    """A 1-D pool on [N, C, L]: the conv's output flattened over H, W."""

    def __init__(self, pool):
        super().__init__()
        self.conv, self.pool = nn.Conv2d(3, 6, 3, padding=1), pool

    def forward(self, x):
        return self.pool(torch.relu(self.conv(x)).flatten(2))


MAX_CASES = {  # name -> (pool module, input shape, 1-D)
    "adaptive_max_10x10_7x7": (nn.AdaptiveMaxPool2d(7), (1, 3, 10, 10), False),
    "adaptive_max_5x5_3x3": (nn.AdaptiveMaxPool2d(3), (1, 3, 5, 5), False),
    "adaptive_max_9x7_4x3": (nn.AdaptiveMaxPool2d((4, 3)), (2, 3, 9, 7), False),
    "adaptive_max_6x6_4x1": (nn.AdaptiveMaxPool2d((4, 1)), (1, 3, 6, 6), False),
    "adaptive_max_even_8x8_4x2": (nn.AdaptiveMaxPool2d((4, 2)), (1, 3, 8, 8), False),
    "dilated_3x3_d2": (nn.MaxPool2d(3, 1, 1, dilation=2), (1, 3, 9, 9), False),
    "dilated_3x3_s2_d2_ceil": (nn.MaxPool2d(3, 2, 1, dilation=2, ceil_mode=True),
                               (1, 3, 10, 10), False),
    "dilated_3x2_d3x2_ceil": (nn.MaxPool2d((3, 2), (2, 1), 1, dilation=(3, 2), ceil_mode=True),
                              (2, 3, 11, 8), False),
    "squeezenet_3x3_s2_ceil": (nn.MaxPool2d(3, 2, ceil_mode=True), (1, 3, 10, 10), False),
    "max_2x2_s2_pad_ceil": (nn.MaxPool2d(2, 2, 1, ceil_mode=True), (1, 3, 7, 7), False),
    "max1d_3_s2_p1_ceil": (nn.MaxPool1d(3, 2, 1, ceil_mode=True), (1, 3, 4, 5), True),
    "max1d_dilated_3_d3": (nn.MaxPool1d(3, 2, 1, dilation=3, ceil_mode=True), (1, 3, 4, 5), True),
    "adaptive_max1d_20_7": (nn.AdaptiveMaxPool1d(7), (1, 3, 4, 5), True),
}
AVG_1D = {
    "avg1d_3_s2_p1_ceil_cip": (nn.AvgPool1d(3, 2, 1, ceil_mode=True), (1, 3, 4, 5)),
    "avg1d_3_s2_p1_ceil_nocip": (nn.AvgPool1d(3, 2, 1, ceil_mode=True, count_include_pad=False),
                                 (1, 3, 4, 5)),
    "avg1d_4_s3_p2": (nn.AvgPool1d(4, 3, 2), (2, 3, 3, 5)),
    "avg1d_2_nocip": (nn.AvgPool1d(2, count_include_pad=False), (1, 3, 3, 3)),
    "adaptive_avg1d_20_7": (nn.AdaptiveAvgPool1d(7), (1, 3, 4, 5)),
    "adaptive_avg1d_12_4": (nn.AdaptiveAvgPool1d(4), (1, 3, 3, 4)),
}


def _compare_model(model, shape, seed=0):
    from test_pipeline import compile_and_compare

    torch.manual_seed(seed)
    cal = [torch.randn(*shape) for _ in range(6)]
    program, ours, theirs = compile_and_compare(model.eval(), cal[1], cal)
    assert ours.shape == theirs.shape
    diff = np.abs(ours - theirs)
    return program, float((diff <= 1).mean()), int(diff.max())


def _host_c_agrees(program, shape):
    from mcutorch.device import crt
    from mcutorch.ref.interpreter import Interpreter

    q = program.quantize_inputs([torch.randn(*shape)])
    for got, want in zip(crt.run_host(program.program, q), Interpreter(program.program).invoke(q)):
        assert np.array_equal(got, want)  # the C runtime on the host: bit-exact


@pytest.mark.parametrize("name", sorted(MAX_CASES))
def test_max_pooling_variants_end_to_end(name):
    pool, shape, one_d = MAX_CASES[name]
    program, within, worst = _compare_model((Flat if one_d else Pool)(pool), shape)
    print(f"{name}: {within:.2%} within 1 LSB, worst {worst}")
    assert within >= 0.99 and worst <= 1
    names = [op.name for op in program.program.ops]
    assert "max_pool2d" in names and names.count("transpose") <= 1, names  # flatten's only
    dilated = getattr(pool, "dilation", 1) not in (1, (1, 1))
    uneven = name.startswith("adaptive") and "even" not in name
    assert ("gather" in names) == (dilated or uneven), names
    _host_c_agrees(program, shape)


@pytest.mark.parametrize("name", sorted(AVG_1D))
def test_avg_pool_1d_end_to_end(name):
    pool, shape = AVG_1D[name]
    program, within, worst = _compare_model(Flat(pool), shape)
    print(f"{name}: {within:.2%} within 1 LSB, worst {worst}")
    assert within >= 0.99 and worst <= 1
    # [N, C, 1, L]: the transposes in and out (and the flatten's)
    assert [op.name for op in program.program.ops].count("transpose") == 3
    _host_c_agrees(program, shape)


class PoolOnly(nn.Module):
    def __init__(self, pool):
        super().__init__()
        self.pool = pool

    def forward(self, x):
        return self.pool(x)


@pytest.mark.parametrize("pool, shape", [
    (nn.AdaptiveMaxPool2d((7, 5)), (2, 4, 10, 9)), (nn.AdaptiveMaxPool2d(3), (1, 5, 5, 5)),
    (nn.MaxPool2d(3, 1, 1, dilation=2), (1, 4, 8, 9)),
    (nn.MaxPool2d((2, 3), (3, 2), (1, 1), dilation=(4, 2), ceil_mode=True), (1, 3, 12, 11)),
    (nn.MaxPool1d(4, 3, 2, dilation=2, ceil_mode=True), (2, 3, 17)),
    (nn.AdaptiveMaxPool1d(6), (1, 4, 15))])
def test_max_compositions_equal_torch_on_the_int8_values(pool, shape):
    """Max pooling commutes with the (shared, monotone) quantization, so the program's int8
    output is exactly torch's pooling of the int8 input values: checked on tie-heavy inputs
    (few distinct values) and on the extremes."""
    from mcutorch.ref.interpreter import Interpreter

    torch.manual_seed(1)
    cal = [torch.randn(*shape) for _ in range(3)]
    qmodel = mcutorch_quantize(PoolOnly(pool).eval(), cal)
    program = compile_program(qmodel, cal[0])
    rng = np.random.default_rng(0)
    for x in (rng.integers(-128, 128, shape), rng.integers(-3, 3, shape),
              np.full(shape, -128), np.full(shape, 127)):
        x = x.astype(np.int8)
        want = pool(torch.from_numpy(x.astype(np.float32))).numpy().astype(np.int8)
        nhwc = (0, 2, 3, 1) if x.ndim == 4 else (0, 1, 2)  # program tensors are NHWC
        got = Interpreter(program.program).invoke([x.transpose(nhwc)])[0]
        assert np.array_equal(got.transpose(np.argsort(nhwc)), want)


def mcutorch_quantize(model, cal):
    import mcutorch

    return mcutorch.quantize(model, (cal[0],), calibration=cal)


def compile_program(qmodel, x, **kw):
    import mcutorch

    return mcutorch.compile(qmodel, (x,), **kw)


def test_return_indices_is_refused_before_calibration():
    import mcutorch
    from mcutorch.errors import UnsupportedOpError

    class Indices(nn.Module):
        def forward(self, x):
            return nn.functional.adaptive_max_pool2d(x, 3, return_indices=True)

    with pytest.raises(UnsupportedOpError, match=r"test_pool_variants.py:\d+.*return_indices"):
        mcutorch.quantize(Indices(), (torch.randn(1, 3, 5, 5),), calibration=[float("nan")])


class Several(nn.Module):
    """Every composition in one model: adaptive max (uneven), dilated max with ceil_mode,
    1-D max / avg / adaptive pools."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        a = nn.functional.adaptive_max_pool2d(y, (7, 5))
        b = nn.functional.max_pool2d(y, 3, 2, 1, dilation=2, ceil_mode=True)
        f = y.flatten(2)
        c = nn.functional.max_pool1d(f, 3, 2, 1, ceil_mode=True)
        d = nn.functional.avg_pool1d(f, 3, 2, 1, ceil_mode=True)
        e = nn.functional.adaptive_max_pool1d(f, 9)
        return torch.cat([a.flatten(1), b.flatten(1), c.flatten(1), d.flatten(1),
                          e.flatten(1)], 1)


def _several(target="cortex-m55", **kw):
    torch.manual_seed(3)
    cal = [torch.randn(1, 3, 10, 10) for _ in range(4)]
    qmodel = mcutorch_quantize(Several().eval(), cal)
    return compile_program(qmodel, cal[0], target=target, **kw), cal


@pytest.mark.qemu
@pytest.mark.parametrize("board,cpu", [("mps2-an385", "cortex-m0plus"), ("mps2-an385", "cortex-m3"),
                                       ("mps2-an386", "cortex-m4"), ("mps2-an500", "cortex-m7"),
                                       ("mps2-an505", "cortex-m23"), ("mps2-an505", "cortex-m33"),
                                       ("mps3-an547", "cortex-m55")])
def test_boards_run_the_compositions(board, cpu):
    from mcutorch.device import firmware

    program, cal = _several(cpu, board=board)
    x = program.quantize_inputs([cal[-1]])
    run = firmware.run(program.program, x, board)
    assert all(np.array_equal(a, b) for a, b in zip(run.outputs, program.run_int8(x)))


@pytest.mark.parametrize("npu", ["ethos-u55-128", "ethos-u85-256"])
def test_compositions_on_the_npu(npu):
    """Compiled with verify (the TOSA graph bit-exact on the TOSA reference model) and Vela:
    the U85 takes the gathers and the 1xK / Kx1 max pools; the U55 has no GATHER, which stays
    on the CPU with its reason."""
    program, cal = _several(f"cortex-m55+{npu}", board="mps3-an547")
    rows = [r for r in program.program.metadata["placement"] if r["on"] in ("CPU", "NPU")]
    on = {(r["op"], r["on"]) for r in rows}
    print(npu, sorted(on))
    assert ("max_pool2d", "NPU") in on
    if npu.startswith("ethos-u55"):
        why = {r["op"]: r["why"] for r in rows if r["on"] == "CPU"}
        assert ("gather", "CPU") in on and "no GATHER" in why["gather"]
    else:
        assert ("gather", "NPU") in on
    x = program.quantize_inputs([cal[-1]])
    cpu, _ = _several()
    assert all(np.array_equal(a, b) for a, b in zip(program.run_int8(x), cpu.run_int8(x)))
