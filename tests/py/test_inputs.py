"""No silent wrong answers at the program boundary: every run checks its inputs against the
program (count, type, dtype, rank, shape, layout, batch, NaN/Inf), stripped programs keep the
layout facts the host needs, `inspect` reads any valid program, `--memory` names what is wrong,
and the host C runner's exits are named for what they are (statuses, I/O, usage, sanitizers)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import mcutorch
from mcutorch.api import CompiledModel
from mcutorch.device import crt
from mcutorch.device import paths as P
from mcutorch.errors import InputError, McutorchError, ProgramError, RunError, TargetError
from mcutorch.plan.regions import parse_memory
from mcutorch.program import Program
from mcutorch.report import describe, render
from test_program import build_program

ROOT = Path(__file__).resolve().parents[2]


class TwoInputs(nn.Module):
    """Two image inputs, a 4-D (NCHW) output and a flat one."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(2, 4, 1)
        self.fc = nn.Linear(4 * 6 * 6, 3)

    def forward(self, x, y):
        z = torch.relu(self.a(x) + self.b(y))
        return z, self.fc(z.flatten(1))


def _compile(model, example, **kw) -> CompiledModel:
    g = torch.Generator().manual_seed(1)
    cal = [tuple(torch.randn(e.shape, generator=g) for e in example) for _ in range(6)]
    return mcutorch.compile(mcutorch.quantize(model.eval(), example, calibration=cal), example,
                            **kw)


@pytest.fixture(scope="module")
def conv():
    """Conv2d + ReLU + Linear on [1, 3, 8, 8]: NCHW in, a flat [1, 5] out."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                      nn.Linear(4 * 8 * 8, 5))
    return _compile(m, (torch.zeros(1, 3, 8, 8),), target="cortex-m55")


@pytest.fixture(scope="module")
def two():
    torch.manual_seed(0)
    return _compile(TwoInputs(), (torch.zeros(1, 3, 6, 6), torch.zeros(1, 2, 6, 6)),
                    target="cortex-m4")


@pytest.fixture(scope="module")
def mlp():
    """No image layout at all: [1, 10] -> [1, 4]."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 4))
    return _compile(m, (torch.zeros(1, 10),), target="cortex-m33")


def _reload(cm: CompiledModel, stripped: bool = False) -> CompiledModel:
    p = cm.program.stripped() if stripped else cm.program
    return CompiledModel(Program.from_bytes(p.to_bytes()))


def _x(*shape, seed=0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


# ----------------------------------------------------------------------------------------------
# 1. shapes, layouts, dtypes, batches


def test_an_nhwc_array_is_refused_with_the_transpose_to_use(conv):
    x = _x(1, 3, 8, 8)
    want = ("input 0 (input_1): expected float [1, 3, 8, 8] (NCHW, the model's layout), got "
            "[1, 8, 8, 3]; an NHWC array? transpose it with x.transpose(0, 3, 1, 2)")
    for nhwc in (x.permute(0, 2, 3, 1), x.numpy().transpose(0, 2, 3, 1)):
        with pytest.raises(InputError) as e:
            conv.run(nhwc)
        assert str(e.value) == want
    # and the transpose it names is the right one
    fixed = x.numpy().transpose(0, 2, 3, 1).transpose(0, 3, 1, 2)
    assert torch.equal(conv.run(fixed), conv.run(x))


@pytest.mark.parametrize("shape,words", [
    ((3, 8, 8), "got [3, 8, 8] (rank 3, expected rank 4); missing the batch axis? use x[None]"),
    ((1, 3, 8, 9), "got [1, 3, 8, 9]"),
    ((1, 1, 3, 8, 8), "rank 5, expected rank 4"),
    ((1, 192), "got [1, 192] (rank 2"),
    ((0, 3, 8, 8), "a batch of 0 is not a positive multiple of the compiled batch 1"),
])
def test_wrong_shapes_name_what_was_expected(conv, shape, words):
    with pytest.raises(InputError, match=r"input 0 \(input_1\): expected float \[1, 3, 8, 8\]") \
            as e:
        conv.run(torch.zeros(shape))
    assert words in str(e.value)


def test_float_dtypes_are_cast_and_others_refused(conv):
    x = _x(1, 3, 8, 8)
    want = conv.run(x)
    for ok in (x.double(), x.numpy().astype(np.float64), x.numpy().astype(np.float16),
               x.half()):
        y = conv.run(ok)
        assert y.dtype == torch.float32 and y.shape == (1, 5)
    assert torch.equal(conv.run(x.double()), want)  # float64 -> float32 first, as in quantize
    for bad, name in ((x.long(), "int64"), (x.numpy().astype(np.int8), "int8"),
                      (x.numpy() > 0, "bool"), (x.to(torch.complex64), "complex64"),
                      (x.numpy().astype(np.uint8), "uint8"),
                      (np.full((1, 3, 8, 8), "a"), "string")):
        with pytest.raises(InputError, match=rf"expected float \[1, 3, 8, 8\].*got an? {name}"):
            conv.run(bad)


def test_run_int8_takes_exactly_the_programs_dtype_and_nhwc_shape(conv):
    x = _x(1, 3, 8, 8)
    (q,) = conv.quantize_inputs([x])
    assert q.dtype == np.int8 and q.shape == (1, 8, 8, 3)
    np.testing.assert_array_equal(conv.run_int8([q])[0], conv.run_int8([torch.from_numpy(q)])[0])
    with pytest.raises(InputError, match=r"expected int8 \[1, 8, 8, 3\] \(NHWC, the program's "
                                         r"layout\), got \[1, 3, 8, 8\]; an NCHW array\? "
                                         r"transpose it with x.transpose\(0, 2, 3, 1\)"):
        conv.run_int8([q.transpose(0, 3, 1, 2)])
    for bad, name in ((q.astype(np.int16), "int16"), (q.astype(np.float32), "float32"),
                      (q.view(np.uint8), "uint8")):
        with pytest.raises(InputError, match=rf"expected int8 \[1, 8, 8, 3\].*got an? {name}"):
            conv.run_int8([bad])
    with pytest.raises(InputError, match="int8 I/O is one inference"):
        conv.run_int8([np.concatenate([q, q])])
    with pytest.raises(InputError, match=r"run_int8\(\) takes a list of 1 arrays \(input_1\), "
                                         r"got a numpy array of shape \[1, 8, 8, 3\]"):
        conv.run_int8(q)


def test_a_batch_loops_over_the_compiled_batch(conv, two):
    xs = _x(4, 3, 8, 8)
    y = conv.run(xs)
    assert y.shape == (4, 5)
    for k in range(4):
        assert torch.equal(y[k:k + 1], conv.run(xs[k:k + 1]))
    a, b = _x(3, 3, 6, 6), _x(3, 2, 6, 6, seed=1)
    z, f = two.run(a, b)
    assert z.shape == (3, 4, 6, 6) and f.shape == (3, 3)
    z1, f1 = two.run(a[1:2], b[1:2])
    assert torch.equal(z[1:2], z1) and torch.equal(f[1:2], f1)
    with pytest.raises(InputError, match="different batches: input 0 .* 3, input 1 .* 2"):
        two.run(a, b[:2])
    with pytest.raises(InputError, match=r"quantize_inputs\(\) takes one inference"):
        conv.quantize_inputs([xs])


def test_layouts_of_two_inputs_and_an_image_output(two, mlp):
    ins, outs = two.ports("inputs"), two.ports("outputs")
    assert [(p.name, p.model_shape, p.layout, p.shape) for p in ins] == [
        ("x", (1, 3, 6, 6), "NCHW", (1, 6, 6, 3)), ("y", (1, 2, 6, 6), "NCHW", (1, 6, 6, 2))]
    assert [(p.model_shape, p.layout) for p in outs] == [((1, 4, 6, 6), "NCHW"), ((1, 3), "none")]
    with pytest.raises(InputError, match=r"input 1 \(y\): expected float \[1, 2, 6, 6\] "
                                         r"\(NCHW, the model's layout\), got \[1, 6, 6, 2\]; an "
                                         "NHWC array"):
        two.run(_x(1, 3, 6, 6), _x(1, 6, 6, 2))
    with pytest.raises(InputError, match=r"input 0 \(input_1\): expected float \[1, 10\], got "
                                         r"\[10\] \(rank 1, expected rank 2\); missing the batch"):
        mlp.run(torch.zeros(10))


# ----------------------------------------------------------------------------------------------
# 4. counts, types, NaN / Inf


def test_wrong_number_and_kind_of_inputs(conv, two):
    x = _x(1, 3, 8, 8)
    with pytest.raises(InputError, match=r"the model takes 2 inputs \(x, y\), got 1"):
        two.run(_x(1, 3, 6, 6))
    with pytest.raises(InputError, match=r"takes 2 inputs \(x, y\), got 1; pass the inputs as "
                                         r"separate arguments: run\(\*inputs\)"):
        two.run([_x(1, 3, 6, 6), _x(1, 2, 6, 6)])
    with pytest.raises(InputError, match=r"the model takes 1 input \(input_1\), got 2"):
        conv.run(x, x)
    with pytest.raises(InputError, match=r"input 0 \(input_1\): .*got a list of 1 items instead "
                                         "of a torch.Tensor or numpy array"):
        conv.run([x])
    with pytest.raises(InputError, match=r"input 0 \(input_1\): .*got a dict .*positionally"):
        conv.run({"input_1": x})
    with pytest.raises(InputError, match="got a float instead"):
        conv.run(1.0)
    assert issubclass(InputError, McutorchError)


@pytest.mark.parametrize("value,words", [(float("nan"), "2 NaN"), (float("inf"), "2 Inf"),
                                         (-float("inf"), "2 Inf")])
def test_nan_and_inf_inputs_are_refused(conv, two, value, words):
    x = _x(1, 3, 8, 8)
    x[0, 1, 2, 3] = x[0, 2, 0, 0] = value
    with pytest.raises(InputError, match=rf"input 0 \(input_1\) holds {words} values \(the first "
                                         r"at index \[0, 1, 2, 3\]\)"):
        conv.run(x)
    with pytest.raises(InputError, match=r"input 0 \(input_1\) holds"):
        conv.quantize_inputs([x])
    b = _x(2, 2, 6, 6)
    b[1, 0, 0, 0] = value
    with pytest.raises(InputError, match=r"input 1 \(y\) holds 1 (NaN|Inf)"):
        two.run(_x(2, 3, 6, 6), b)


def test_float64_beyond_float32_is_refused(conv):
    x = np.zeros((1, 3, 8, 8))
    x[0, 0, 0, 0] = 1e39
    with pytest.raises(InputError, match="1 beyond float32's range"):
        conv.run(x)


# ----------------------------------------------------------------------------------------------
# 2. stripped programs


@pytest.mark.parametrize("name", ["conv", "two", "mlp"])
def test_stripped_programs_run_exactly_like_the_full_ones(name, request):
    cm = request.getfixturevalue(name)
    full, bare = _reload(cm), _reload(cm, stripped=True)
    assert set(bare.program.metadata) == {"io"} and bare.io == cm.io
    assert all(op.source is None for op in bare.program.ops)
    assert len(bare.to_bytes()) < len(full.to_bytes())
    assert bare.ports("inputs") == full.ports("inputs")
    assert bare.ports("outputs") == full.ports("outputs")
    example = [_x(2, *p.model_shape[1:], seed=k) for k, p in enumerate(cm.ports("inputs"))]
    a, b = full.run(*example), bare.run(*example)
    for u, v in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        assert torch.equal(u, v)
    # the C runtime reads the stripped program the same way (METADATA skipped)
    assert crt.check_host([bare.to_bytes()]) == [0]
    q = bare.quantize_inputs([e[:1] for e in example])
    for u, v in zip(crt.run_host(bare.program, q), full.run_int8(q)):
        np.testing.assert_array_equal(u, v)


def test_a_program_without_io_strips_bare_and_runs_its_own_layout():
    p = build_program()
    assert "io" not in p.metadata and p.stripped().metadata is None
    cm = CompiledModel(Program.from_bytes(p.stripped().to_bytes()))
    (port,) = cm.ports("inputs")
    assert (port.name, port.model_shape, port.layout) == ("t0", (1, 4, 4, 2), "NHWC")
    with pytest.raises(InputError, match=r"expected float \[1, 4, 4, 2\] \(NHWC, the program's "
                                         r"layout\)"):
        cm.run(torch.zeros(1, 2, 4, 4))


def test_metadata_io_is_checked_against_the_tensors(conv):
    from dataclasses import replace

    p = conv.program
    io = p.metadata["io"]
    bad = [
        {**io, "inputs": []},
        {**io, "inputs": [{**io["inputs"][0], "shape": [1, 3, 8, 9]}]},
        {**io, "inputs": [{**io["inputs"][0], "shape": [1, 8, 8, 3]}]},  # NHWC claimed NCHW
        {**io, "outputs": [{**io["outputs"][0], "nchw_as_nhwc": True}]},
        {**io, "outputs": [{**io["outputs"][0], "nchw_as_nhwc": 1}]},
    ]
    for b in bad:
        with pytest.raises(ProgramError, match="bad_metadata"):
            replace(p, metadata={**p.metadata, "io": b}).to_bytes()


@pytest.mark.parametrize("name", ["conv", "two", "mlp", "hand-built"])
def test_inspect_reads_stripped_and_hand_built_programs(name, request, tmp_path, capsys):
    from mcutorch.cli import main

    p = build_program() if name == "hand-built" else request.getfixturevalue(name).program
    for program in (p, p.stripped()):
        info = describe(Program.from_bytes(program.to_bytes()))
        text = render(info)
        assert "memory plan:" in text and "total MACs" in text
        if program is not p:
            assert info["lower_bound"] is None and "live lower bound unknown" in text
            assert info["stripped"]
        path = tmp_path / f"{name}.mtp"
        path.write_bytes(program.to_bytes())
        assert main(["inspect", str(path)]) == 0 and main(["inspect", str(path), "--json"]) == 0
    if name == "two":
        assert "input x: float [1, 3, 6, 6] NCHW <-> int8[1, 6, 6, 3]" in text
    if name == "hand-built":
        assert "delegate 0:" in text  # an Ethos-U delegate record, without Vela's metadata
    assert "Traceback" not in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------
# 3. memory specs and the runner's exit codes


@pytest.mark.parametrize("spec,words", [
    ("SRAM:4K,SRAM:8K", "memory region SRAM appears twice"),
    ("SRAM:5G", "'SRAM:5G' is 5 GiB; a region can be at most 4 GiB - 1"),
    ("SRAM:4G", "is 4 GiB; a region can be at most 4 GiB - 1"),
    ("ABCDEFGHIJKLMNOP:4K", "name 'ABCDEFGHIJKLMNOP' has 16 characters; the program format holds "
                            "at most 8"),
    ("9SRAM:4K", "a name is a letter or _"),
    ("SRAM:4Q", "expected NAME:SIZE"),
    ("SRAM", "expected NAME:SIZE"),
    ("", "empty memory description"),
])
def test_memory_specs_say_what_is_wrong(spec, words):
    with pytest.raises(TargetError) as e:
        parse_memory(spec)
    assert words in str(e.value)


def test_memory_specs_that_fit_the_format():
    r = parse_memory("DTCM:512K, SRAM:4095M+npu,ABCDEFGH:1G")
    assert [(x.name, x.size, x.rank, x.npu) for x in r] == [
        ("DTCM", 512 << 10, 0, False), ("SRAM", 4095 << 20, 1, True), ("ABCDEFGH", 1 << 30, 2,
                                                                        False)]


def test_runner_exits_are_named_for_what_they_are(conv, tmp_path):
    runner = crt.build_host_runner()
    mtp = tmp_path / "m.mtp"
    mtp.write_bytes(conv.to_bytes())
    (tmp_path / "short.bin").write_bytes(b"\0" * 5)
    (tmp_path / "junk.mtp").write_bytes(b"JUNK" * 16)

    def failure(*args):
        r = subprocess.run([str(runner), *args], cwd=tmp_path, capture_output=True, text=True)
        return r.returncode, crt.runner_failure(r.returncode, r.stdout, r.stderr)

    assert failure() == (crt.EXIT_USAGE, "the runner refused its command line (usage error, "
                                         "exit 101)")
    code, text = failure("m.mtp", "short.bin")
    assert code == crt.EXIT_IO and "could not read or write a file" in text \
        and "short.bin" in text
    assert failure("junk.mtp", "short.bin") == (2, "load error 2 (bad_magic): the C runtime "
                                                   "refused the program")
    assert failure("m.mtp", "short.bin", "-n", "0")[0] == crt.EXIT_USAGE
    assert crt.runner_failure(-11) == "killed by signal 11 (SIGSEGV)"
    assert crt.runner_failure(-6) == "killed by signal 6 (SIGABRT)"
    assert crt.runner_failure(69, "mt_status 69 no_npu\n") == "runtime status 69 (no_npu)"
    assert crt.runner_failure(243) == "the board faulted (HardFault, exit 243)"


def test_the_host_runner_runs_several_input_sets(conv, tmp_path):
    xs = [conv.quantize_inputs([_x(1, 3, 8, 8, seed=k)])[0] for k in range(3)]
    (tmp_path / "m.mtp").write_bytes(conv.to_bytes())
    (tmp_path / "in0.bin").write_bytes(b"".join(x.tobytes() for x in xs))
    r = subprocess.run([str(crt.build_host_runner()), "m.mtp", "in0.bin", "-n", "3"],
                       cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.count("mt_status 0 ok") == 1, r.stdout + r.stderr
    got = np.fromfile(tmp_path / "out0.bin", np.int8).reshape(3, 1, 5)
    for k in range(3):
        np.testing.assert_array_equal(got[k], conv.run_int8([xs[k]])[0])
    r = subprocess.run([str(crt.build_host_runner()), "m.mtp", "in0.bin", "-n", "2"],
                       cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == crt.EXIT_IO  # 3 sets in the file, 2 asked for: refused


def test_an_asan_abort_is_named_as_such(conv):
    """A runner whose port layer hands out arenas one byte short (tests/c): the real run ends
    in a real AddressSanitizer report, which run_host names instead of calling exit 1
    `truncated`."""
    sources = crt.core_sources() + [P.RUNTIME / "harness" / "mt_run.c",
                                    ROOT / "tests" / "c" / "mt_run_host_short_arena.c"]
    runner = crt.compile_host(sources + crt.kernel_sources(), "mt_run_short_arena",
                              [*crt.HOST_FLAGS, *crt.SANITIZE_FLAGS])
    q = conv.quantize_inputs([_x(1, 3, 8, 8)])
    with pytest.raises(RunError) as e:
        crt.run_host(conv.program, q, runner=runner)
    first = str(e.value).splitlines()[0]
    assert first.startswith("C runtime failed: AddressSanitizer abort (exit 1): "
                            "heap-buffer-overflow"), first
    assert "truncated" not in first
