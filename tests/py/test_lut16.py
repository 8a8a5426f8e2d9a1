"""Functions as int16 tables (docs/numerics.md section 6, "Tables"): TOSA TABLE's 513-entry
interpolated int16 lookup. The definition against an independent formula on every int16 input;
the tables' measured error against the exact function; sigmoid and tanh with their fixed int16
output qparams (1/32768, 0); an all-int16 program of table functions bit-exact between the
reference, the host C runtime, the emulated boards and the TOSA reference model; Vela takes it."""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest
import torch
from scipy.special import erf
from torch import nn

import mcutorch
from mcutorch.device import crt
from mcutorch.ref import KERNELS, make_lut16
from mcutorch.ref.interpreter import Interpreter

ALL16 = np.arange(-32768, 32768).astype(np.int16)
FUNCTIONS = {"sigmoid": (lambda v: 1 / (1 + np.exp(-v)), 1 / 32768),
             "tanh": (np.tanh, 1 / 32768),
             "gelu": (lambda v: 0.5 * v * (1 + erf(v / np.sqrt(2))), None)}


def tosa_table_formula(x: int, table) -> int:
    """TOSA 1.0 TABLE (int16) in Python integers, then the output stage (acc + 32) >> 6."""
    index, fraction = (x + 32768) >> 7, x & 0x7F
    base, slope = int(table[index]), int(table[index + 1]) - int(table[index])
    return max(-32768, min(32767, ((base << 7) + slope * fraction + 32) >> 6))


def test_definition_is_tosa_table_on_every_int16_input():
    rng = np.random.default_rng(0)
    table = rng.integers(-16383, 16384, 513).astype(np.int16)
    table[:3] = [-16383, 16383, 0]  # the steepest slopes a compiled table can have
    y = KERNELS["lut"](ALL16, table)
    assert y.dtype == np.int16
    want = np.array([tosa_table_formula(int(v), table) for v in ALL16[::7]])
    np.testing.assert_array_equal(y[::7], want)
    assert np.abs(y.astype(np.int32)).max() <= 32766


def test_a_hostile_table_saturates_and_a_wrong_size_is_refused():
    table = np.full(513, 32767, np.int16)
    table[1::2] = -32768
    y = KERNELS["lut"](ALL16, table)
    assert y.min() == -32768 and y.max() == 32767
    with pytest.raises(ValueError, match="513"):
        KERNELS["lut"](ALL16, np.zeros(256, np.int16))


# measured over every int16 input: (function, input range): (max LSB, min share within 1 LSB)
BOUNDS = {("sigmoid", 4.0): (2, 0.9999), ("sigmoid", 8.0): (2, 0.999),
          ("sigmoid", 16.0): (2, 0.995),
          ("tanh", 1.0): (2, 0.9999), ("tanh", 4.0): (2, 0.997), ("tanh", 8.0): (3, 0.98),
          ("tanh", 16.0): (7, 0.92), ("gelu", 4.0): (2, 0.999), ("gelu", 16.0): (2, 0.999)}


@pytest.mark.parametrize("name,reach", list(BOUNDS))
def test_table_error_against_the_exact_function(name, reach):
    """The interpolated table against round(f(s_in x) / s_out): the bound is the segments' 128-
    step linear interpolation of a curved function (error ~ h^2 f''/8), stated in numerics.md."""
    f, s_out = FUNCTIONS[name]
    s_in = reach / 32767
    s_out = s_out or float(np.abs(f(np.array([-reach, reach]))).max()) / 32767
    x = ALL16[1:]
    y = KERNELS["lut"](x, make_lut16(f, s_in, s_out)).astype(np.int64)
    exact = np.clip(np.rint(f(s_in * x.astype(np.float64)) / s_out), -32767, 32767)
    d = np.abs(y - exact)
    worst, share = BOUNDS[(name, reach)]
    assert int(d.max()) <= worst and float((d <= 1).mean()) >= share


class Tables(nn.Module):
    def forward(self, x):
        return torch.cat([torch.sigmoid(x), torch.tanh(x), nn.functional.gelu(x)], 1)


@lru_cache(maxsize=None)
def program(width: int = 4096):
    torch.manual_seed(0)
    x = torch.linspace(-8, 8, width)[None]
    q = mcutorch.quantize(Tables(), (x,), [x, -x],
                          quantizer=mcutorch.Quantizer(activations="int16"))
    return q, mcutorch.compile(q, (x,), target="cortex-m55")


def test_sigmoid_and_tanh_get_the_fixed_int16_qparams():
    q, _ = program()
    scales = {n.args[0].name: (float(n.args[1]), int(n.args[2])) for n in q.graph.nodes
              if "quantize_per_tensor" in str(n.target) and n.args[0].op == "call_function"
              and str(n.args[0].target).startswith(("aten.sigmoid", "aten.tanh"))}
    assert set(scales.values()) == {(1 / 32768, 0)} and len(scales) == 2


def test_int16_tables_in_the_reference_and_host_c_on_every_input():
    _, p = program()
    for row in np.array_split(ALL16[1:], 16):  # 65,535 values in 16 sets (the input is [1, 4096])
        xs = [np.resize(row, (1, 4096)).astype(np.int16)]
        (want,) = Interpreter(p.program).invoke(xs)
        (got,) = crt.run_host(p.program, xs)
        np.testing.assert_array_equal(got, want)


def test_int16_tables_agree_with_pytorch_fake_quant():
    q, _ = program()
    x = torch.linspace(-8, 8, 4096)[None]
    from mcutorch.compare import layer_by_layer

    rows = [r for r in layer_by_layer(q, (x,)) if r["op"] == "lut"]
    assert len(rows) == 3
    # the table bounds above at an input range of +-8: tanh's curvature costs it 2 % at 2-3 LSB
    floor = {"sigmoid": 0.999, "tanh": 0.98, "gelu": 0.999}
    assert all(r["within_1lsb"] >= floor[r["output"]] and r["max_lsb"] <= 3 for r in rows), rows


def test_int16_tables_on_the_tosa_reference_model_and_vela():
    import needs

    needs.module("tosa_reference_model")
    needs.module("ethosu.vela")
    q, cpu = program()
    x = torch.linspace(-8, 8, 4096)[None]
    npu = mcutorch.compile(q, (x,), target="cortex-m55+ethos-u55-128")  # verified at compile
    assert [o.name for o in npu.program.ops][0] == "delegate"
    xs = [np.resize(ALL16[1:], (1, 4096)).astype(np.int16)]
    from mcutorch.backends import tosa
    from mcutorch.compiler import build_graph

    graph = build_graph(q, (x,))
    tosa.verify_program_graph(graph, rng_inputs=2, inputs=xs)
    np.testing.assert_array_equal(Interpreter(npu.program).invoke(xs)[0],
                                  Interpreter(cpu.program).invoke(xs)[0])


@pytest.mark.slow
@pytest.mark.parametrize("target,board", [("cortex-m55", "mps3-an547"),
                                          ("cortex-m0plus", "mps2-an385")])
def test_int16_tables_as_firmware(target, board):
    from mcutorch.device import firmware

    q, _ = program(1024)
    p = mcutorch.compile(q, (torch.zeros(1, 1024),), target=target)
    xs = [ALL16[1::64][:1024].reshape(1, 1024).copy()]
    run = firmware.run(p.program, xs, board)
    np.testing.assert_array_equal(run.outputs[0], Interpreter(p.program).invoke(xs)[0])
