"""The C runtime (runtime/): C unit tests, the loader against the Python reader on thousands of
corrupt programs, libFuzzer, the MLPerf Tiny models bit-exact on the host (ASan + UBSan) and as
Cortex-M55 firmware, warning-free builds and the core's flash size."""
from __future__ import annotations

import random
import re
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path
from unittest import mock

import numpy as np
import pytest

from mcutorch.device import crt, firmware
from mcutorch.errors import ProgramError
from mcutorch.program import Program, reader
from mcutorch.program import schema as S
from mcutorch.ref.interpreter import Interpreter
from test_program import (ADD, CORRUPT, SWITCH_CASES, _add, _apply, _sweep, build_program,
                          copy_program, CONV, LIFETIME_CASES, OVERLAP_CASES, POOL,
                          every_target_name, io_program, lifetime_files, limit_files,
                          one_op_program, overlap_files, patch, regions_program, switch_case_files,
                          unchecked_bytes)

ROOT = Path(__file__).resolve().parents[2]
TESTS_C = ROOT / "tests" / "c"
CORE_FILES = ("mt_load.c", "mt_validate.c", "mt_invoke.c", "mt_crc32.c", "mt_port_default.c")
# core runtime text + rodata on Cortex-M55 at -Os: 8 KiB until format 1.6's ring windows
# (+680 B measured: the loader's ring checks and block extents, mt_ring_views) made it 8.5 KiB;
# format 1.8's lstm / gru made it 9,199 B measured (+15 their op table rows, +480 the loader's
# mt_check_recurrent: shapes, step range, tables, gate scratch), 9,216 (9 KiB) with a little room;
# with format 1.8's alias kind overlap 10,337 B measured (+1,150: mt_overlap_delta's least delta
# of a depthwise / 1x1 conv from every attribute, mt_lead's clamped piecewise-linear maximum in
# int64, 32-bit divisions) and the int16 matmul bound (-26 after its rewrite): 10,368; format
# 1.9's rnn_tanh / rnn_relu 10,381 B measured (+13: their two op table rows, mt_check_recurrent's
# G = 1 and table position): 10,400; two-pointer views 10,317 (-64: mt_view sets two fields); the
# lifetime check across ops made it 11,477 B measured (+1,160: mt_check_lifetimes' run orders with
# and without the NPU, ranges 16 tensors at a time, views, op and Vela scratch areas): 11,520;
# the ahead-of-time binding (mt_bind_static), the delegate scratch rule and the interpreter's
# fast path: 11,811 B measured (+258 mt_invoke.c: mt_view / mt_args_of / mt_overlap shared
# with mt_bind_static.c, views of the named operand records only, each op's dispatch kind
# built at bind time, the inline plain-op call beside the general path, one ring view per ring
# input, the runnable flag kept by every binding call; +76 mt_validate.c: a delegate's fast
# scratch apart from its scratch): 11,840.
FLASH_BUDGET = 11840
# mt_bind_static.c alone, linked only by firmware that binds ahead of time (export-c, build
# --standalone): 822 B measured (the I/O and every named operand view, every args entry
# compared; arenas, persistent buffer and tables apart; the ring ops' RAM views filled): 832
STATIC_BIND_FILE, STATIC_BIND_BUDGET = "mt_bind_static.c", 832
MODELS = ("kws", "vww", "ic", "ad", "sww")


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} not found: run `make toolchain`")
    return path


def compile_model(name: str) -> tuple:
    import mcutorch
    from mcutorch.models import build, example_input

    m = build(name).eval()
    x = example_input(m)
    cm = mcutorch.compile(mcutorch.quantize(m, (x,), calibration=[x]), (x,), target="cortex-m55")
    return cm, cm.quantize_inputs([x])


@pytest.fixture(scope="module")
def kws():
    return compile_model("kws")


@pytest.fixture(scope="module")
def tiny() -> Program:
    """conv2d -> delegate (CPU version: lut) -> clamp, two regions, metadata (test_program)."""
    return build_program()


# ----------------------------------------------------------------------------------------------
# C unit tests, builds, size


def test_c_unit_tests():
    need("gcc")
    exe = crt.compile_host(crt.core_sources() + [TESTS_C / "test_loader.c"], "test_loader",
                           [*crt.HOST_FLAGS, *crt.SANITIZE_FLAGS, "-pedantic", "-DMT_PROFILE"])
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.startswith("ok"), run.stdout + run.stderr


def test_status_names_match_python():
    out = subprocess.run([str(crt.build_host_runner(kernels=False)), "--status-names"],
                         capture_output=True, text=True, check=True).stdout
    names = dict(line.split() for line in out.splitlines())
    assert names == {str(i): crt.status_name(i) for i in [*range(len(crt.STATUS_NAMES)),
                                                          *crt.RUNTIME_STATUSES]}
    assert crt.STATUS_NAMES[1:] == S.ERRORS


def _arm_objects(tmp_path: Path, flags: list[str], sources: list[Path]) -> list[Path]:
    gcc = need("arm-none-eabi-gcc")
    objs = []
    for src in sources:
        obj = tmp_path / (src.stem + ".o")
        cmd = [gcc, *flags, "-std=c99", "-Os", "-Wall", "-Wextra", "-Werror", "-pedantic",
               "-ffunction-sections", "-fdata-sections", *(f"-I{d}" for d in crt.include_dirs()),
               "-c", str(src), "-o", str(obj)]
        run = subprocess.run(cmd, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        objs.append(obj)
    return objs


def text_and_rodata(obj: Path) -> int:
    out = subprocess.run([need("arm-none-eabi-size"), "-A", str(obj)], capture_output=True,
                         text=True, check=True).stdout
    return sum(int(n) for name, n in re.findall(r"^(\.\S+)\s+(\d+)", out, re.M)
               if name.startswith((".text", ".rodata")))


@pytest.mark.qemu
@pytest.mark.parametrize("cpu", ["cortex-m0plus", "cortex-m4", "cortex-m55"])
def test_runtime_builds_for_cortex_m(tmp_path, cpu):
    """-Wall -Wextra -Werror -pedantic clean for Armv6-M to Armv8.1-M; the core (loader,
    validator, interpreter, CRC, weak hooks) fits its flash budget on the M55."""
    fp = "-mfloat-abi=hard" if cpu == "cortex-m55" else "-mfloat-abi=soft"
    harness = ROOT / "runtime" / "harness"
    sources = crt.core_sources() + [harness / "mt_run.c", harness / "mt_run_board.c"]
    objs = _arm_objects(tmp_path, [f"-mcpu={cpu}", "-mthumb", fp, f"-I{ROOT / 'boards/common'}"],
                        sources)
    size = sum(text_and_rodata(o) for o in objs if o.stem + ".c" in CORE_FILES)
    static = sum(text_and_rodata(o) for o in objs if o.stem + ".c" == STATIC_BIND_FILE)
    print(f"{cpu}: core runtime {size} bytes text+rodata at -Os, {STATIC_BIND_FILE} {static}")
    if cpu == "cortex-m55":
        assert size <= FLASH_BUDGET, f"core runtime is {size} bytes, budget {FLASH_BUDGET}"
        assert 0 < static <= STATIC_BIND_BUDGET, (static, STATIC_BIND_BUDGET)


# ----------------------------------------------------------------------------------------------
# the C loader and the Python reader agree on every corrupt file


def python_code(buf) -> int:
    """The Python reader's verdict as a C status (0 = loads)."""
    try:
        reader.read(buf)
    except ProgramError as e:
        return S.ERROR_CODES[e.reason]
    return 0


def python_codes_without_metadata(bufs) -> list[int]:
    """Verdicts of a reader that skips METADATA like the C runtime does."""
    with mock.patch.object(reader, "_metadata", lambda v: None):
        return [python_code(b) for b in bufs]


def random_mutations(blob: bytes, n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    values = [0, 1, 16, 255, 0x7FFF, 0xFFFF, 2**31 - 1, 2**32 - 1, -1, -2**31]
    out = []
    for _ in range(n):
        muts = []
        for _ in range(rng.randint(1, 4)):
            kind, pos = rng.choice(["flip", "flip", "write", "truncate"]), rng.randrange(10**6)
            if kind == "flip":
                muts.append(("flip", pos, rng.randrange(8)))
            elif kind == "write":
                muts.append(("write", pos, rng.choice(["<B", "<H", "<I", "<i"]),
                             rng.choice(values)))
            elif rng.random() < 0.1:
                muts.append(("truncate", pos))
        out.append(_apply(blob, muts, fix_size=rng.random() < 0.5))
    return out


@pytest.fixture(scope="module")
def verdicts(tiny, kws) -> list[tuple[int, int]]:
    """(Python, C) verdict pairs on: every field of the tiny program overwritten with extreme
    values, 2000 random multi-mutations of it and of KWS (CRC fixed), the targeted corruptions
    of test_program and their stripped twins, the TARGET switch-bit cases, and a program for
    every target name with every value of its TARGET switches field swept."""
    blobs = [tiny.to_bytes(), tiny.stripped().to_bytes(), kws[0].to_bytes()]
    files = list(_sweep(blobs[0]))
    files += random_mutations(blobs[0], 1000, seed=1) + random_mutations(blobs[2], 1000, seed=2)
    files += [corrupt(b) for corrupt in CORRUPT.values() for b in blobs[:2]
              if not (corrupt is CORRUPT["bad_metadata"] and b is blobs[1])]
    files += [blob for blob, _ in switch_case_files()]
    for name in every_target_name():
        blob = copy_program(name).to_bytes()
        files += [patch(blob, "target", 0, "switches", bits) for bits in range(16)]
    return list(zip(python_codes_without_metadata(files), crt.check_host(files)))


def test_c_and_python_verdicts_agree(verdicts):
    wrong = [(i, p, c) for i, (p, c) in enumerate(verdicts) if p != c]
    counts = Counter(crt.status_name(c) for _, c in verdicts)
    print(f"{len(verdicts)} files, verdicts: {dict(counts)}")
    assert not wrong, f"{len(wrong)} disagreements (index, python, C): {wrong[:20]}"


def test_c_loader_checks_target_switches():
    """The C loader takes every valid target's program and refuses, as the Python reader does,
    unknown switch bits, switches the CPU lacks and ISA levels the switches do not give."""
    assert crt.check_host([copy_program(n).to_bytes() for n in every_target_name()]) == [0] * len(
        every_target_name())
    cases = switch_case_files()
    expected = [S.ERROR_CODES[reason] if reason else 0 for _, reason in cases]
    assert crt.check_host([blob for blob, _ in cases]) == expected, SWITCH_CASES
    assert [python_code(blob) for blob, _ in cases] == expected


def test_tflite_rounding_is_refused_by_both_readers(tiny):
    """The reserved `tflite` rounding: no executor implements it, so neither reader loads it."""
    blob = patch(tiny.to_bytes(), "target", 0, "rounding", S.ROUNDINGS.index("tflite"))
    assert python_code(blob) == S.ERROR_CODES["bad_target"]
    assert crt.check_host([blob]) == [S.ERROR_CODES["bad_target"]]


def test_c_loader_enforces_the_limits():
    """At each count bound (schema.MAX_*) the C loader loads the program, one past it refuses
    it with the Python reader's reason; a concat of the most inputs runs alike in both."""
    files = limit_files()
    got = crt.check_host([f for _, at, past, _ in files for f in (at, past)])
    want = [c for _, _, _, reason in files for c in (0, S.ERROR_CODES[reason])]
    assert got == want, [name for name, *_ in files]
    p = io_program(1, 1, S.MAX_VARIADIC)
    xs = [np.full((1, 1), 7, np.int8)]
    (got,), (want,) = crt.run_host(p, xs), Interpreter(p).invoke(xs)
    np.testing.assert_array_equal(want, np.full((1, S.MAX_VARIADIC), 7))
    np.testing.assert_array_equal(got, want)


def _alike_in_both_executors(files, cases, seed: int, skip: str = "") -> None:
    """Both readers give each hand-built program the same verdict (the reason the case names);
    every accepted one (but those named `skip`...) runs alike in the reference and host C."""
    want = [S.ERROR_CODES[reason] if reason else 0 for _, _, reason in files]
    assert crt.check_host([blob for _, blob, _ in files]) == want, [n for n, *_ in files]
    assert [python_code(blob) for _, blob, _ in files] == want
    rng = np.random.default_rng(seed)
    for name, make, reason in cases:
        p = make()
        if reason is None and not (skip and name.startswith(skip)):
            xs = [rng.integers(-128, 128, p.tensors[i].shape, dtype=np.int8) for i in p.inputs]
            if len(p.inputs) == 2 and p.tensors[0].offset == p.tensors[1].offset:
                xs[1] = xs[0]  # the same bytes: the same values
            for g, w in zip(crt.run_host(p, xs), Interpreter(p).invoke(xs)):
                np.testing.assert_array_equal(g, w, err_msg=name)


def test_overlapping_operands_alike_in_both_executors():
    """The C loader gives each hand-built overlap the Python reader's verdict (bad_op unless in
    place, or a delegate); the accepted programs run alike in both executors (in place too)."""
    _alike_in_both_executors(overlap_files(), OVERLAP_CASES, 5, skip="delegate_output")


def test_lifetimes_alike_in_both_executors():
    """The C loader gives each hand-built lifetime case the Python reader's verdict (bad_op: a
    live tensor or scratch overwritten, a read before the write); the accepted programs (views,
    in place, a delegate's CPU version) run alike in both executors."""
    _alike_in_both_executors(lifetime_files(), LIFETIME_CASES, 6)


def _typed(p: Program, dtypes: dict) -> Program:
    """`p` with tensor i of dtype dtypes[i] (arena tensors, shapes and offsets kept)."""
    import dataclasses as dc

    return dc.replace(p, tensors=[dc.replace(t, dtype=dtypes.get(i, t.dtype))
                                  for i, t in enumerate(p.tensors)])


def _ids(p: Program, k: int) -> Program:
    """`p` with arena tensor k holding int32 token ids (scale 0, zero point 0; format 1.6)."""
    import dataclasses as dc

    return dc.replace(p, tensors=[dc.replace(t, dtype="int32", scale=0.0, zero_point=0)
                                  if i == k else t for i, t in enumerate(p.tensors)])


def _with_int64(p: Program, values=None, arena: bool = False) -> Program:
    """`p` with one more (unused) int64 tensor: a constant of `values`, or an arena tensor."""
    import dataclasses as dc

    from mcutorch.program import TensorInfo

    if arena:
        return dc.replace(p, tensors=[*p.tensors, TensorInfo.arena("int64", (2,), 0, 64, 1.0)])
    at = len(p.constants) + -len(p.constants) % S.ALIGN
    blob = p.constants + bytes(at - len(p.constants)) + np.asarray(values, "<i8").tobytes()
    t = TensorInfo.const("int64", (len(values),), at, 1.0, 0)
    return dc.replace(p, tensors=[*p.tensors, t], constants=blob)


INT48 = 2**47


# (name, program, reason): format 1.5's int64 constants (int48 values only) and the per-op
# activation dtype rule (ops.OpDef.dtypes; add takes int16 -> int16 since its int16 kernel,
# never a mix of int8 and int16).
DTYPE_CASES = [
    ("add_int8", lambda: _add(0, 16, 32), None),
    ("add_int16", lambda: _typed(_add(0, 16, 32), {0: "int16", 1: "int16", 2: "int16"}), None),
    ("add_mixed_inputs", lambda: _typed(_add(0, 16, 32), {1: "int16"}), "bad_op"),
    ("add_int16_output", lambda: _typed(_add(0, 16, 32), {2: "int16"}), "bad_op"),
    ("add_uint8", lambda: _typed(_add(0, 16, 32), {0: "uint8", 1: "uint8", 2: "uint8"}),
     "bad_op"),
    ("concat_int16", lambda: _typed(one_op_program("concat", [((1, 4), 0), ((1, 4), 16)],
                                                   ((1, 8), 32), {"axis": 3}),
                                    {0: "int16", 1: "int16", 2: "int16"}), None),
    ("concat_mixed", lambda: _typed(one_op_program("concat", [((1, 4), 0), ((1, 4), 16)],
                                                   ((1, 8), 32), {"axis": 3}), {1: "int16"}),
     "bad_op"),
    *((f"rescale_to_{d}", lambda d=d: _typed(one_op_program(
        "rescale", [((1, 4), 0)], ((1, 4), 16), {"in_zp": 0, "out_zp": 0, "mult": 1 << 30,
                                                 "shift": 30, "act_min": -128, "act_max": 127}),
        {1: d}), None if d == "int16" else "bad_op") for d in ("int16", "uint8")),
    # an int32 arena tensor is token ids (1.6): qparams refused, then the dtype rule applies
    ("rescale_to_int32", lambda: _typed(one_op_program(
        "rescale", [((1, 4), 0)], ((1, 4), 16), {"in_zp": 0, "out_zp": 0, "mult": 1 << 30,
                                                 "shift": 30, "act_min": -128, "act_max": 127}),
        {1: "int32"}), "bad_tensor"),
    ("add_of_token_ids", lambda: _ids(_add(0, 16, 32), 0), "bad_op"),
    ("embedding_int32_ids", lambda: _ids(one_op_program(
        "embedding", [((1, 3), 0), np.zeros((4, 2), np.int8)], ((1, 3, 2), 16)), 0), None),
    ("embedding_int8_ids", lambda: one_op_program(
        "embedding", [((1, 3), 0), np.zeros((4, 2), np.int8)], ((1, 3, 2), 16)), "bad_op"),
    ("int64_within_int48", lambda: _with_int64(_add(0, 16, 32), [INT48 - 1, -INT48, 0]), None),
    ("int64_above_int48", lambda: _with_int64(_add(0, 16, 32), [0, INT48]), "bad_tensor"),
    ("int64_below_int48", lambda: _with_int64(_add(0, 16, 32), [-INT48 - 1]), "bad_tensor"),
    ("int64_in_arena", lambda: _with_int64(_add(0, 16, 32), arena=True), "bad_tensor"),
    ("int64_activation", lambda: one_op_program("add", [((1, 4), 0), np.ones((1, 4), np.int64)],
                                                ((1, 4), 16), ADD), "bad_op"),
]


def test_dtype_rule_and_int64_constants_alike_in_both_readers():
    """Both readers give each case the same verdict; the writer refuses the same programs with
    a reason naming the op's dtypes or the int48 range."""
    files = [unchecked_bytes(make()) for _, make, _ in DTYPE_CASES]
    want = [S.ERROR_CODES[reason] if reason else 0 for _, _, reason in DTYPE_CASES]
    assert [python_code(b) for b in files] == want, [n for n, *_ in DTYPE_CASES]
    assert crt.check_host(files) == want, [n for n, *_ in DTYPE_CASES]
    with pytest.raises(ProgramError, match=r"op 0 \(add\): int16 / int8 inputs -> int8 output: "
                                           "its kernels take int8 -> int8"):
        _typed(_add(0, 16, 32), {1: "int16"}).to_bytes()
    with pytest.raises(ProgramError, match=r"tensor 3: an int64 value outside int48"):
        _with_int64(_add(0, 16, 32), [INT48]).to_bytes()
    p = _with_int64(_add(0, 16, 32), [INT48 - 1, -INT48])  # loads, and the values read back
    np.testing.assert_array_equal(Program.from_bytes(p.to_bytes()).const_array(3),
                                  [INT48 - 1, -INT48])


def test_huge_counts_are_refused_quickly():
    """65 536 regions or 120 000 outputs (a quadratic check took seconds): refused at once."""
    crt.build_host_runner(kernels=False)
    outputs = io_program(1, 1, 1)
    outputs.outputs = [0] * 120_000
    files = [unchecked_bytes(regions_program(65_536)), unchecked_bytes(outputs)]
    want = [S.ERROR_CODES["bad_region"], S.ERROR_CODES["bad_io"]]
    start = time.perf_counter()
    assert [python_code(f) for f in files] == want
    middle = time.perf_counter()
    assert crt.check_host(files) == want
    end = time.perf_counter()
    assert middle - start < 0.5 and end - middle < 0.5, (middle - start, end - middle)


def test_every_named_error_is_reached(verdicts):
    reached = {c for _, c in verdicts}
    missing = set(range(1, len(S.ERRORS) + 1)) - reached - {S.ERROR_CODES["bad_metadata"]}
    assert not missing, [S.ERRORS[c - 1] for c in missing]


def test_metadata_is_skipped_by_the_c_runtime(tiny):
    """METADATA is skippable: bad JSON or a dangling source index is a Python-only error."""
    blob = tiny.to_bytes()
    bad = [CORRUPT["bad_metadata"](blob), blob.replace(b'"sources"', b'"sourcez"')]
    bad[1] = _apply(bad[1], [], fix_size=False)
    assert [python_code(b) for b in bad] == [S.ERROR_CODES["bad_metadata"]] * 2
    assert crt.check_host(bad) == [0, 0]


# ----------------------------------------------------------------------------------------------
# fuzzing


def build_fuzzer(real_kernels: bool) -> Path:
    need("clang")
    sources = crt.core_sources() + [TESTS_C / "fuzz_loader.c"]
    flags = ["-std=c99", "-g", "-O1", "-fsanitize=fuzzer,address,undefined",
             "-fno-sanitize-recover=all", "-DMT_SKIP_CRC"]
    if real_kernels:
        sources += crt.kernel_sources()
        flags.append("-DFUZZ_REAL_KERNELS")
    try:
        return crt.compile_host(sources, "fuzz_kernels" if real_kernels else "fuzz_loader",
                                flags, cc="clang")
    except Exception as e:  # noqa: BLE001 - say what to install
        pytest.fail(f"cannot build the libFuzzer target (clang's libFuzzer runtime comes with "
                    f"the libclang-rt-<version>-dev package on Debian):\n{e}")


def fuzz(exe: Path, tmp_path: Path, seeds: dict[str, bytes], *args: str) -> tuple[int, int]:
    """Run libFuzzer on `seeds`; returns (runs, coverage) or fails with the crash report."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, blob in seeds.items():
        (corpus / f"{name}.mtp").write_bytes(blob)
    run = subprocess.run([str(exe), "-seed=1", *args, str(corpus)], capture_output=True,
                         text=True, cwd=tmp_path)
    done = re.search(r"^#(\d+)\s+DONE\s+cov: (\d+)", run.stderr, re.M)
    assert run.returncode == 0 and done, run.stderr[-4000:]
    return int(done.group(1)), int(done.group(2))


@pytest.fixture(scope="module")
def seeds(tiny, kws) -> dict[str, bytes]:
    return {"tiny": tiny.to_bytes(), "tiny_stripped": tiny.stripped().to_bytes(),
            "kws": kws[0].to_bytes()}


def test_fuzz_loader(tmp_path, seeds):
    """Any bytes: a named load error, or a run whose every view, scratch and delegate area
    lies inside the caller's memory (kernels that touch every byte they are given)."""
    runs, cov = fuzz(build_fuzzer(False), tmp_path, seeds, "-runs=20000", "-max_total_time=30")
    print(f"fuzz (touching kernels): {runs} runs, cov {cov}")


def test_fuzz_real_kernels(tmp_path, seeds):
    """The same with the real kernels: inconsistent operands are refused, never overrun."""
    small = {k: v for k, v in seeds.items() if k.startswith("tiny")}
    runs, cov = fuzz(build_fuzzer(True), tmp_path, small, "-max_total_time=8")
    print(f"fuzz (real kernels): {runs} runs, cov {cov}")


@pytest.mark.slow
def test_fuzz_real_kernels_long(tmp_path, seeds):
    runs, cov = fuzz(build_fuzzer(True), tmp_path, seeds, "-max_total_time=120")
    print(f"fuzz (real kernels, long): {runs} runs, cov {cov}")


# ----------------------------------------------------------------------------------------------
# running programs


def test_delegate_program_runs_its_cpu_version(tiny):
    """No NPU driver linked: the weak hook says no_npu and the delegate's CPU version runs."""
    x = np.random.default_rng(0).integers(-128, 128, (1, 4, 4, 2), dtype=np.int8)
    (want,) = Interpreter(tiny).invoke([x])
    (got,) = crt.run_host(tiny, [x])
    np.testing.assert_array_equal(got, want)


def test_run_host_reports_runtime_errors(tiny):
    with pytest.raises(Exception, match="program takes 1 inputs"):
        crt.run_host(tiny, [])
    no_cpu = build_program()
    no_cpu.delegates[0].cpu_ops = None
    no_cpu.ops = no_cpu.ops[:3]
    with pytest.raises(Exception, match="no_npu"):
        crt.run_host(no_cpu, [np.zeros((1, 4, 4, 2), np.int8)])


def check_model(cm, xs) -> None:
    want = cm.run_int8(xs)
    got = crt.run_host(cm.program, xs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_kws_matches_python_reference(kws):
    check_model(*kws)


@pytest.mark.slow
@pytest.mark.parametrize("name", [m for m in MODELS if m != "kws"])
def test_mlperf_tiny_matches_python_reference(name):
    check_model(*compile_model(name))


@pytest.mark.qemu
def test_kws_firmware_on_cortex_m55(kws, tmp_path):
    from mcutorch.device.qemu import run_elf

    cm, xs = kws
    elf = firmware.build(cm.program, "mps3-an547", tmp_path / "kws.elf", profile=True)
    r = run_elf(elf, "mps3-an547", ["kws.mtp", "in0.bin"],
                files={"kws.mtp": cm.to_bytes(), "in0.bin": xs[0].tobytes()}, timeout=60)
    assert r.ok and "mt_status 0 ok" in r.stdout, r.stdout + r.stderr
    (want,) = cm.run_int8(xs)
    np.testing.assert_array_equal(np.frombuffer(r.files["out0.bin"], np.int8), want.ravel())
    ops = {k: v for k, v in r.counts.items() if k.startswith("op")}
    assert len(ops) == len(cm.program.ops) and r.instructions >= sum(ops.values()) > 0
    print(f"kws on mps3-an547: {r.instructions} instructions in mt_invoke")


@pytest.mark.qemu
@pytest.mark.slow
def test_kws_firmware_on_cortex_m0plus_with_unaligned_traps(tmp_path):
    """Armv6-M on mps2-an385 (unaligned accesses fault), planned for that board's memory."""
    import mcutorch
    from mcutorch.device.qemu import run_elf
    from mcutorch.models import build, example_input

    m = build("kws").eval()
    x = example_input(m)
    cm = mcutorch.compile(mcutorch.quantize(m, (x,), calibration=[x]), (x,),
                          target="cortex-m0plus", board="mps2-an385")
    xs = cm.quantize_inputs([x])
    elf = firmware.build(cm.program, "mps2-an385", tmp_path / "kws.elf")
    r = run_elf(elf, "mps2-an385", ["kws.mtp", "in0.bin"],
                files={"kws.mtp": cm.to_bytes(), "in0.bin": xs[0].tobytes()}, timeout=120)
    assert r.ok, r.stdout + r.stderr
    np.testing.assert_array_equal(np.frombuffer(r.files["out0.bin"], np.int8),
                                  cm.run_int8(xs)[0].ravel())


DIM_MAX = (1 << 30) - 1


def _hostile_conv(y_shape, **attrs) -> Program:
    consts = [np.ones((2, 3, 3, 2), np.int8), np.zeros(2, np.int32), np.full(2, 1 << 30, np.int32),
              np.full(2, 31, np.int32)]
    return one_op_program("conv2d", [((1, 4, 4, 2), 0), *consts], (y_shape, 64),
                          {**CONV, "pad_top": 1, "pad_left": 1, "pad_bottom": 1, "pad_right": 1,
                           **attrs})


def _hostile_fc(n: int) -> Program:
    """fully_connected of x [n, 1] and a weight [n, 1]: an [n, n] result, the output [n, 1]."""
    consts = [np.ones((n, 1), np.int8), np.zeros(n, np.int32), np.full(n, 1 << 30, np.int32),
              np.full(n, 31, np.int32)]
    p = one_op_program("fully_connected", [((n, 1), 0), *consts], ((n, 1), n),
                       {"in_zp": 0, "out_zp": 0, "act_min": -128, "act_max": 127})
    p.regions[0].size = 2 * n
    return p


# (name, program, loads and runs in both executors?): small programs that asked an executor
# for gigabytes or 2^30-iteration loops; either both refuse at once or both run at once, alike
HOSTILE = [
    ("conv_pad_right_6553601", lambda: _hostile_conv((1, 4, 4, 2), pad_right=6553601), False),
    ("conv_stride_int32_max", lambda: _hostile_conv((1, 4, 4, 2), stride_h=0x7FFFFFFF), False),
    ("conv_far_windows", lambda: _hostile_conv((1, 2, 4, 2), stride_h=DIM_MAX, pad_top=DIM_MAX,
                                               pad_bottom=DIM_MAX - 7), True),  # padded 2^31 - 5
    ("fc_square", lambda: _hostile_fc(40_000), False),
    ("max_pool_kernel_2p30", lambda: one_op_program(
        "max_pool2d", [((1, 4, 4, 2), 0)], ((1, 2, 2, 2), 64),
        {**POOL, "kernel_h": DIM_MAX, "pad_top": DIM_MAX - 1, "stride_w": 1, "kernel_w": 3,
         "pad_left": 0, "pad_right": 0}), True),
    ("avg_pool_divisor_int32_max", lambda: one_op_program(
        "avg_pool2d", [((1, 4, 4, 2), 0)], ((1, 2, 2, 2), 64),
        {**POOL, "count_include_pad": 0, "divisor": 0x7FFFFFFF, "in_zp": 0, "out_zp": 0}),
     False),
    ("pad_after_2p31", lambda: one_op_program(
        "pad", [((1, 4), 0)], ((1, 6), 8), {**{f"before{k}": 0 for k in range(4)},
                                            **{f"after{k}": 0 for k in range(3)},
                                            "after3": 0x7FFFFFFF, "value": 0}), False),
]


@pytest.mark.parametrize("name", [h[0] for h in HOSTILE])
def test_hostile_programs_are_refused_or_run_quickly_alike(name):
    """Both executors give the same verdict on each, in well under a second: refused before any
    allocation (the output shape is checked first; ExecutionError / bad_argument), or run with
    the same result without building padding no window reads."""
    from mcutorch.errors import ExecutionError, McutorchError

    _, make, runs = next(h for h in HOSTILE if h[0] == name)
    p = Program.from_bytes(make().to_bytes())
    crt.build_host_runner()
    xs = [np.random.default_rng(3).integers(-128, 128, p.tensors[i].shape, dtype=np.int8)
          for i in p.inputs]
    start = time.perf_counter()
    if runs:
        want = Interpreter(p).invoke(xs)
    else:
        with pytest.raises(ExecutionError, match=r"^op 0 \("):
            Interpreter(p).invoke(xs)
    middle = time.perf_counter()
    if runs:
        for g, w in zip(crt.run_host(p, xs), want):
            np.testing.assert_array_equal(g, w)
    else:
        with pytest.raises(McutorchError, match="bad_argument"):
            crt.run_host(p, xs)
    end = time.perf_counter()
    assert middle - start < 0.5 and end - middle < 0.5, (middle - start, end - middle)


@pytest.mark.parametrize("attr,value", [("stride_h", 0x7FFFFFFF), ("stride_w", 3)])
def test_hostile_attributes_fail_alike_and_name_the_op(attr, value):
    """A loadable program whose conv attributes do not give its output shape: the reference
    names the op and never broadcasts a wrong-shaped result; the C runtime refuses it too."""
    import torch
    from torch import nn

    import mcutorch
    from mcutorch.errors import ExecutionError, McutorchError

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU()).eval()
    x = torch.randn(1, 3, 6, 6)
    cm = mcutorch.compile(mcutorch.quantize(model, (x,)), (x,))
    p = cm.program
    p.ops[0].attrs[attr] = value
    hostile = Program.from_bytes(p.to_bytes())
    xq = cm.quantize_inputs([x])
    with pytest.raises(ExecutionError, match=r"^op 0 \(conv2d"):
        Interpreter(hostile).invoke(xq)
    with pytest.raises(McutorchError, match="bad_argument"):
        crt.run_host(hostile, xq)


MATMUL = {"transpose_b": 1, "a_zp": 3, "b_zp": -5, "out_zp": 0, "mult": 1 << 30, "shift": 40,
          "act_min": -128, "act_max": 127}


@pytest.mark.parametrize("k,mult,shift,reason", [
    (4, 1 << 30, 40, None), (4, (1 << 31) - 1, 2, "bad_op"),  # rq(4 * 255^2 * M) > 2^31
    (16, 1 << 24, 13, None), (16, 1 << 24, 12, "bad_op"),  # 16 * 255^2 * 2^11 <, 2^12 > 2^31
])
def test_matmul_bound_alike_in_both_readers(k, mult, shift, reason):
    """matmul's load-time bound, K * 255 * 255 and its rq in int32, on both sides of the limit
    in both program readers; the accepted programs run alike in both executors."""
    p = one_op_program("matmul", [((1, 2, k), 0), ((1, 3, k), 64)], ((1, 2, 3), 128),
                       {**MATMUL, "mult": mult, "shift": shift})
    want = S.ERROR_CODES[reason] if reason else 0
    blob = unchecked_bytes(p)
    assert python_code(blob) == want and crt.check_host([blob]) == [want]
    if reason is None:
        rng = np.random.default_rng(k)
        xs = [rng.integers(-128, 128, p.tensors[i].shape, dtype=np.int8) for i in p.inputs]
        for g, w in zip(crt.run_host(p, xs), Interpreter(p).invoke(xs)):
            np.testing.assert_array_equal(g, w)


def _attention(cpu: str = "cortex-m55"):
    import mcutorch
    import torch

    class Attention(torch.nn.Module):
        def __init__(self, c=24, d=16):
            super().__init__()
            self.q, self.k, self.v, self.out = (torch.nn.Linear(c, d), torch.nn.Linear(c, d),
                                                torch.nn.Linear(c, d), torch.nn.Linear(d, c))

        def forward(self, x):
            q, k, v = self.q(x), self.k(x), self.v(x)
            return self.out(torch.softmax(q @ k.transpose(-1, -2) * 0.25, dim=-1) @ v)

    torch.manual_seed(11)
    cal = [torch.randn(1, 20, 24) for _ in range(4)]
    q = mcutorch.quantize(Attention().eval(), (cal[0],), calibration=cal)
    cm = mcutorch.compile(q, (cal[0],), target=cpu)
    return cm, cm.quantize_inputs([cal[1]])


def test_attention_matches_python_reference():
    """Both matmuls (K read in place; V transposed into the planned scratch) in the C runtime
    on the host, bit-exact with the Python reference."""
    cm, xs = _attention()
    assert [op.scratch is not None for op in cm.program.ops if op.name == "matmul"] == [False,
                                                                                        True]
    check_model(cm, xs)


@pytest.mark.qemu
@pytest.mark.parametrize("cpu,board", [("cortex-m55", "mps3-an547"),
                                       ("cortex-m33", "mps2-an505")])
def test_attention_firmware(cpu, board, tmp_path):
    from mcutorch.device.qemu import run_elf

    cm, xs = _attention(cpu)
    elf = firmware.build(cm.program, board, tmp_path / "attn.elf", profile=True)
    r = run_elf(elf, board, ["attn.mtp", "in0.bin"],
                files={"attn.mtp": cm.to_bytes(), "in0.bin": xs[0].tobytes()}, timeout=60)
    assert r.ok and "mt_status 0 ok" in r.stdout, r.stdout + r.stderr
    (want,) = cm.run_int8(xs)
    np.testing.assert_array_equal(np.frombuffer(r.files["out0.bin"], np.int8), want.ravel())
    print(f"attention T=20 on {board}: {r.instructions} instructions in mt_invoke")
