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


def test_export_c_helper_is_the_converted_models(twice, tmp_path):
    """model_config.h's model_quantize / model_dequantize, built with gcc (ISO C99 and GNU C
    with FP contraction allowed), against the quantize/dequantize nodes of the converted model."""
    from mcutorch.device.export_c import export_c

    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("gcc not found")
    qmodel, program, q0, x = twice
    out = export_c(program.program, tmp_path / "out")
    config = (out / "model_config.h").read_text()
    assert "#define MODEL_INPUT0_INV_SCALE" in config and "model_quantize" in config
    flat = x.reshape(-1).numpy()
    want = q0.target(torch.from_numpy(flat), *q0.args[1:]).numpy()
    back = QD.dequantize_per_tensor(torch.from_numpy(want), *q0.args[1:]).numpy()
    values = ",\n".join(f"{float(v).hex()}f" for v in flat)
    (tmp_path / "t.c").write_text(f"""#include <stdio.h>
#include "model_config.h"
static const float x[] = {{{values}}};
int main(void)
{{
    for (unsigned i = 0; i < sizeof x / sizeof x[0]; i++) {{
        int8_t q = model_quantize(x[i], MODEL_INPUT0_INV_SCALE, MODEL_INPUT0_ZERO_POINT);
        float y = model_dequantize(q, MODEL_INPUT0_SCALE, MODEL_INPUT0_ZERO_POINT);
        printf("%d %a\\n", q, (double)y);
    }}
    return 0;
}}
""")
    for flags in (["-std=c99", "-O2"], ["-std=gnu11", "-O3", "-ffp-contract=fast"]):
        exe = tmp_path / "t"
        subprocess.run([gcc, *flags, "-Wall", "-Werror", f"-I{out}", str(tmp_path / "t.c"),
                        "-o", str(exe)], check=True)
        lines = subprocess.run([str(exe)], check=True, capture_output=True,
                               text=True).stdout.split("\n")
        got = np.array([int(ln.split()[0]) for ln in lines if ln], np.int8)
        deq = np.array([float.fromhex(ln.split()[1]) for ln in lines if ln], np.float32)
        assert np.array_equal(got, want), flags
        assert np.array_equal(deq, back), flags
