"""The float -> int8 boundary is PyTorch's: every executor and helper (mcutorch.quant.quantize,
CompiledModel.run / quantize_inputs, the CLI, the C helper export-c writes) computes, bit for
bit, what the converted model's own first quantize node computes, exact .5 ties included."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
import torch
from torch import nn

import mcutorch
from mcutorch.frontend._torchao import pt2e
from mcutorch.quant import dequantize, inverse_scale, quantize

pt2e()  # registers torch.ops.quantized_decomposed
QD = torch.ops.quantized_decomposed


def first_quantize(qmodel):
    return next(n for n in qmodel.graph.nodes if n.target == QD.quantize_per_tensor.default)


def old_formula(x, s, zp):  # the earlier definition, x / s: rounds some ties the other way
    return np.clip(np.round(np.asarray(x, np.float32) / np.float32(s)) + zp, -128, 127)


def tie_heavy(s: float) -> torch.Tensor:
    """Evenly spaced values over the int8 range (torch.linspace) and the k + 0.5 grid."""
    grid = (torch.arange(-140, 140, dtype=torch.float64) + 0.5) * s
    return torch.cat([torch.linspace(-160 * s, 160 * s, 200_001), grid.float()])


@pytest.mark.parametrize("s, zp", [(0.0157, 0), (0.0235294122, -3), (0.1, 17), (1 / 127.5, -128),
                                   (3.0e-5, 5)])
def test_quantize_is_torchs_quantize_per_tensor(s, zp):
    s = float(np.float32(s))
    x = tie_heavy(s)
    want = QD.quantize_per_tensor(x, s, zp, -128, 127, torch.int8).numpy()
    assert np.array_equal(quantize(x.numpy(), s, zp), want)
    assert np.array_equal(quantize(x.numpy().astype(np.float64), s, zp), want)  # f32 first
    v = x.numpy() * inverse_scale(s)
    assert np.sum(v - np.floor(v) == 0.5) > 0  # exact ties are there
    q = np.array([np.inf, -np.inf, 1e30, -1e30, 0.0, -0.0], np.float32)
    assert np.array_equal(quantize(q, s, zp),
                          QD.quantize_per_tensor(torch.from_numpy(q), s, zp, -128, 127,
                                                 torch.int8).numpy())
    back = QD.dequantize_per_tensor(torch.from_numpy(want), s, zp, -128, 127, torch.int8)
    assert np.array_equal(dequantize(want, s, zp), back.numpy())


def test_the_old_division_disagrees_on_ties():
    """Why the definition changed: x / s and x * (1 / s) round differently on some ties."""
    s = float(np.float32(0.0157))
    x = tie_heavy(s)
    want = QD.quantize_per_tensor(x, s, 0, -128, 127, torch.int8).numpy()
    assert np.sum(old_formula(x.numpy(), s, 0) != want) > 10


class Twice(nn.Module):
    """cat([x, x]): its output shares the input's qparams, so the program's output is the
    quantized input itself, and run() must equal the converted model bit for bit."""

    def forward(self, x):
        return torch.cat([x, x], dim=1)


@pytest.fixture(scope="module")
def twice():
    # calibration range [-2, 2.0035]: an input scale whose ties x / s rounds the other way
    cal = torch.linspace(-2.0, 2.0035, 48).reshape(1, 3, 4, 4)
    qmodel = mcutorch.quantize(Twice(), (cal,), calibration=[cal])
    program = mcutorch.compile(qmodel, (cal,))
    q0 = first_quantize(qmodel)
    x = tie_heavy(q0.args[1])
    x = x[: len(x) // 48 * 48].reshape(-1, 3, 4, 4)
    return qmodel, program, q0, x


def test_program_boundary_is_the_converted_models(twice):
    qmodel, program, q0, x = twice
    s, zp = q0.args[1], q0.args[2]
    want = q0.target(x, *q0.args[1:]).numpy()
    assert np.sum(old_formula(x.numpy(), s, zp) != want) > 0  # the input hits differing ties
    assert np.array_equal(quantize(x.numpy(), s, zp), want)
    t = program.program.tensors[program.program.inputs[0]]
    assert (t.scale, t.zero_point) == (s, zp)
    got = np.concatenate([program.quantize_inputs([x[i:i + 1]])[0] for i in range(len(x))])
    assert np.array_equal(got.transpose(0, 3, 1, 2), want)
    assert torch.equal(program.run(x), qmodel(x))


def test_cli_boundary_is_the_converted_models(twice, tmp_path):
    from mcutorch.cli import main

    qmodel, program, q0, x = twice
    differ = (old_formula(x.numpy(), q0.args[1], q0.args[2]) != q0.target(x, *q0.args[1:]).numpy())
    x = torch.cat([x[differ.reshape(len(x), -1).any(1)], x[:64]])  # rows with differing ties
    program.save(tmp_path / "m.mtp")
    np.save(tmp_path / "x.npy", x.numpy())
    assert main(["run", str(tmp_path / "m.mtp"), "--input", str(tmp_path / "x.npy"),
                 "--output", str(tmp_path / "y.npy")]) == 0
    assert np.array_equal(np.load(tmp_path / "y.npy"), qmodel(x).numpy())


IO_TEST_C = """#include <stdio.h>
#include "twice_config.h"
/* stdin: float32 inputs of whole inferences, then int8 outputs of the same count;
 * stdout: their int8 (quantize_input) and float32 (dequantize_output) conversions */
int main(void)
{
    static float x[TWICE_INPUT0_BYTES], y[TWICE_OUTPUT0_BYTES];
    static int8_t q[TWICE_INPUT0_BYTES], r[TWICE_OUTPUT0_BYTES];
    unsigned long n = 0;
    if (scanf("%lu", &n) != 1 || getchar() != '\\n') {
        return 1;
    }
    for (unsigned long i = 0; i < n; i++) {
        if (fread(x, sizeof x, 1, stdin) != 1) {
            return 2;
        }
        twice_quantize_input(x, q);
        fwrite(q, sizeof q, 1, stdout);
    }
    for (unsigned long i = 0; i < n; i++) {
        if (fread(r, sizeof r, 1, stdin) != 1) {
            return 3;
        }
        twice_dequantize_output(r, y);
        fwrite(y, sizeof y, 1, stdout);
    }
    return 0;
}
"""


def test_export_c_io_helpers_are_the_python_boundary(twice, tmp_path):
    """NAME_quantize_input / NAME_dequantize_output (NAME_io.c), built with gcc (ISO C99 and GNU
    C with FP contraction allowed), against the Python boundary (CompiledModel.quantize_inputs /
    dequantize_outputs: NCHW floats <-> NHWC int8) and the converted model's quantize node, on
    tie-heavy inputs; +-Inf saturates and NaN gives the zero point in both (docs/numerics.md)."""
    from mcutorch.device.export_c import export_c

    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("gcc not found: run `make toolchain`")
    qmodel, program, q0, x = twice
    s, zp = q0.args[1], q0.args[2]
    out = export_c(program.program, tmp_path / "out", name="twice")
    config = (out / "twice_config.h").read_text()
    assert f"#define TWICE_INPUT0_INV_SCALE {float(inverse_scale(s)).hex()}f" in config
    special = torch.tensor([np.inf, -np.inf, np.nan, 1e30, -1e30, 0.0, -0.0, 3e-39, -np.nan])
    x = torch.cat([x.reshape(-1), special.repeat(48)[:48]]).reshape(-1, 3, 4, 4)
    want = np.stack([quantize(a.numpy().transpose(1, 2, 0), s, zp) for a in x])  # NHWC
    finite = torch.isfinite(x).reshape(len(x), -1).all(1)
    torch_q = q0.target(x[finite], *q0.args[1:]).numpy().transpose(0, 2, 3, 1)
    assert np.array_equal(want[finite.numpy()], torch_q)  # PyTorch's own, where it is defined
    assert np.array_equal(np.concatenate([program.quantize_inputs([a[None]])[0]
                                          for a in x[finite][::97]]), torch_q[::97])
    assert set(want[-1].reshape(-1)) == {127, -128, zp}  # +-inf, +-1e30; nan, 0, denormal
    r = np.random.default_rng(0).integers(-128, 128, (len(x), 1, 4, 4, 6)).astype(np.int8)
    back = np.stack([program.dequantize_outputs([a])[0] for a in r])
    (tmp_path / "t.c").write_text(IO_TEST_C)
    data = f"{len(x)}\n".encode() + x.numpy().astype(np.float32).tobytes() + r.tobytes()
    for flags in (["-std=c99", "-O2"], ["-std=gnu11", "-O3", "-ffp-contract=fast"]):
        exe = tmp_path / "t"
        subprocess.run([gcc, *flags, "-Wall", "-Wextra", "-Werror", f"-I{out}",
                        f"-I{out / 'mcutorch' / 'include'}", str(tmp_path / "t.c"),
                        str(out / "twice_io.c"), "-o", str(exe)], check=True)
        res = subprocess.run([str(exe)], input=data, check=True, capture_output=True).stdout
        got = np.frombuffer(res[:want.size], np.int8).reshape(want.shape)
        deq = np.frombuffer(res[want.size:], np.float32).reshape(back.shape)
        assert np.array_equal(got, want), flags
        assert np.array_equal(deq.view(np.uint32), back.view(np.uint32)), flags
