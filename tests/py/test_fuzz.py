"""Structure-aware fuzzing of load and invoke (tests/py/fuzzing.py; `make fuzz` runs it long):
short runs of the 64- and 32-bit libFuzzer builds, then the differential check of the Python
reader + interpreter against the C runtime on the programs they found."""
from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

from dataclasses import replace

import fuzzing
import pytest

from mcutorch.errors import ProgramError
from mcutorch.program import schema as S
from mcutorch.program import validate

SHORT_SECONDS = 300  # at most, each build (the two run side by side) for its SHORT_RUNS
REPLAY = 120  # fuzzed programs of each build replayed through Python and C


@pytest.fixture(scope="module")
def short():
    if shutil.which("clang") is None:
        pytest.fail("clang not found: run `make toolchain`")
    return fuzzing.short_campaign(SHORT_SECONDS)


@pytest.mark.parametrize("bits", fuzzing.BITS)
def test_structured_fuzzer_finds_no_crash(short, bits):
    """Mutated records either fail mt_load with a named error or run (real kernels) without
    an AddressSanitizer or UBSan report, refusing inconsistent operands."""
    runs, _ = short
    r = next(r for r in runs if r.bits == bits)
    print(r.line(), *r.known_crashes, sep="\n  ")
    assert not r.crash, f"{r.line()}\n{r.crash}"
    assert r.runs >= fuzzing.SHORT_RUNS and r.new_files > 0, r.line()


def test_fuzzed_programs_reach_the_validator(short):
    """CRC and file_size are fixed after every mutation: the files are read past the header
    checks, many load, and they fail on every kind of record."""
    _, root = short
    files = [p for b in fuzzing.BITS for p in (root / f"corpus{b}").iterdir()]
    verdicts = Counter(fuzzing.python_load(p.read_bytes())[0] for p in files)
    named = {("ok", *S.ERRORS)[c]: n for c, n in verdicts.items()}
    print(f"{len(files)} fuzzed programs, Python verdicts: {named}")
    assert S.ERROR_CODES["bad_crc"] not in verdicts
    # libFuzzer keeps the inputs that reach new code, and most of the readers' code refuses:
    # with format 1.4's five more attribute domains 16-18 % of the kept files load (was > 20 %)
    assert verdicts[0] >= len(files) // 10
    assert len(verdicts) >= 8, named


def test_seeds_agree(tmp_path):
    """The seed programs: same outputs in Python and in C (64- and 32-bit)."""
    files = []
    for name, blob in fuzzing.seed_programs().items():
        files.append(tmp_path / f"{name}.mtp")
        files[-1].write_bytes(blob)
    findings, counts = fuzzing.differential(files)
    print(counts)
    assert counts.get("python ok", 0) >= len(files) - 4, counts  # NPU-only: refused by both
    assert not findings, "\n".join(f.line() for f in findings)


def test_a_replay_worker_that_dies_names_the_file(tmp_path):
    """A sanitizer abort in the C replay is a c_crash finding on the file it was running; the
    worker goes on with the files after it."""
    fake = tmp_path / "fake_replay"
    fake.write_text("#!/bin/sh\nfor f; do echo \"run $f\"; case $f in *bad*) "
                    "echo '==1==ERROR: AddressSanitizer: heap-buffer-overflow' >&2; exit 1;; "
                    "esac; echo \"status 9 load $f\"; done\n")
    fake.chmod(0o755)
    got = fuzzing._replay([str(fake)], ["a", "bad", "c"], fuzzing._parse_c)
    assert got["a"].load == got["c"].load == 9 and got["bad"].run == "crash"
    assert "AddressSanitizer" in got["bad"].detail
    finding = fuzzing.compare("bad", fuzzing.Outcome(9), got["bad"], "c64")
    assert finding.kind == "c_crash"


def test_differential_on_fuzzed_programs(short):
    """Python and C agree on every fuzzed program: the same load verdict, and where both load,
    both refuse to run it or give the same outputs. Known findings are listed, not failed."""
    _, root = short
    files = [p for b in fuzzing.BITS for p in fuzzing.sample(root / f"corpus{b}", REPLAY, b)]
    findings, counts = fuzzing.differential(files)
    print(f"{len(files)} programs: {counts}")
    seeds = {p.stem: p.read_bytes() for p in (root / "seeds").glob("*.mtp")}
    for f in findings:
        print(f.line(), "|", fuzzing.explain(Path(f.file).read_bytes(), seeds))
    new = [f for f in findings if not f.known]
    assert not new, "\n".join(f.line() for f in new)


# ----------------------------------------------------------------------------------------------
# the disagreements the fuzzer found, each on one field of the hand-built tiny program
# (test_program.build_program: conv2d -> delegate (CPU version: lut) -> clamp)


def _tiny_with(patches) -> bytes:
    """The tiny program with ("attrs", op, attr name, value) / ("const", tensor, element,
    value) / (section, record, field, value[, element]) changes; CRC fixed."""
    import struct

    from test_program import build_program, patch, recrc, sections

    p = build_program()
    blob = p.to_bytes()
    for where, index, name, value, *element in patches:
        if where == "attrs":
            first = sum(len(op.attrs) for op in p.ops[:index])  # the writer's ATTRS order
            k = first + list(p.ops[index].attrs).index(name) if p.ops[index].name != "clamp" \
                else first + ["act_min", "act_max"].index(name)
            buf = bytearray(blob)
            struct.pack_into("<i", buf, sections(buf)["attrs"][0] + 4 * k, value)
            blob = recrc(buf)
        elif where == "const":
            t = p.tensors[index]
            buf = bytearray(blob)
            off = sections(buf)["const"][0] + t.offset + name * t.elem_size
            struct.pack_into("<" + {1: "b", 2: "h", 4: "i"}[t.elem_size], buf, off, value)
            blob = recrc(buf)
        else:
            blob = patch(blob, where, index, name, value, *element)
    return blob


def _findings(tmp_path, blob: bytes) -> list:
    f = tmp_path / "finding.mtp"
    f.write_bytes(blob)
    findings, _ = fuzzing.differential([f])
    for fd in findings:
        print(fd.line())
    return findings


def test_tiny_program_agrees(tmp_path):
    assert not _findings(tmp_path, _tiny_with([]))


def _load_verdicts(tmp_path, blob: bytes) -> str:
    """The one load verdict both readers give `blob` ('ok' or a reason); no finding either way."""
    assert not _findings(tmp_path, blob)
    code, _ = fuzzing.python_load(blob)
    return "ok" if code == 0 else S.ERRORS[code - 1]


# The tiny conv2d (in_zp -3, so x - in_zp in [-125, 130]): channel 0 has weights [-3, -2] and
# bias 100, so its accumulator spans [100 - 650, 100 + 625]; mult[0] = 2^30, shift[0] = 33.
INT32_MAX = 2**31 - 1


def _smallest_shift(acc: int, mult: int) -> int:
    return next(s for s in range(2, 63) if (acc * mult + (1 << (s - 1))) >> s <= INT32_MAX)


@pytest.mark.parametrize("patches, verdict", [
    ([("const", 2, 0, INT32_MAX - 625)], "ok"),  # the accumulator reaches INT32_MAX
    ([("const", 2, 0, INT32_MAX - 624)], "bad_op"),
    ([("const", 2, 0, -2**31 + 650)], "ok"),  # ... and INT32_MIN
    ([("const", 2, 0, -2**31 + 649)], "bad_op"),
    ([("const", 4, 0, _smallest_shift(725, 1 << 30))], "ok"),  # rq(725) reaches the edge
    ([("const", 4, 0, _smallest_shift(725, 1 << 30) - 1)], "bad_op"),
    ([("const", 4, 0, 2)], "bad_op"),  # the fuzzer's finding: C saturated, Python raised
    ([("const", 3, 0, -1)], "bad_op"),  # mult outside [0, 2^31)
    ([("const", 4, 2, 63)], "bad_op"),  # shift outside [2, 62]
    ([("attrs", 0, "in_zp", 128)], "bad_op"),
    ([("tensors", 2, "dtype", 0), ("tensors", 2, "shape", 12)], "bad_op"),  # an int8 bias
    ([("tensors", 1, "shape", 6), ("tensors", 1, "shape", 1, 3)], "bad_op"),  # 6 channels
])
def test_mac_accumulator_range_is_checked_at_load_by_both(tmp_path, patches, verdict):
    """A MAC op whose accumulator or its rq could leave int32 for some input is refused at load
    (docs/numerics.md, Domain), by both readers, at the exact edge."""
    assert _load_verdicts(tmp_path, _tiny_with(patches)) == verdict


def test_mac_weight_must_be_a_constant(tmp_path):
    from mcutorch.program import Program

    p = Program.from_bytes(_tiny_with([]))
    with pytest.raises(ProgramError, match=r"weight \(tensor 1\) must be a constant int8"):
        validate.validate(replace(p, tensors=[*p.tensors[:1], replace(
            p.tensors[1], storage="arena", region=1, offset=0), *p.tensors[2:]]))


def test_huge_conv_padding_is_refused_by_both(tmp_path):
    assert not _findings(tmp_path, _tiny_with([("attrs", 0, "pad_top", 0x7FFFFFFF)]))


def test_reserved_rounding_is_refused_by_both(tmp_path):
    assert not _findings(tmp_path, _tiny_with([("target", 0, "rounding", 1)]))


def test_partially_overlapping_clamp_agrees(tmp_path):
    blob = _tiny_with([("tensors", 7, "region", 0), ("tensors", 7, "offset", 144)])
    assert not _findings(tmp_path, blob)


def _zoo_with(tmp_path, op_name: str, change, seed: str = "zoo_m4_stripped") -> list:
    """A seed program (default: the zoo for Cortex-M4) with `change` made to its first op
    named `op_name`; the findings on it."""
    from test_program import patch

    from mcutorch.program import Program

    blob = fuzzing.seed_programs()[seed]
    p = Program.from_bytes(blob)
    i = next(i for i, op in enumerate(p.ops) if op.name == op_name)
    return _findings(tmp_path, change(blob, p, i, patch))


def test_partially_overlapping_transpose_agrees(tmp_path):
    def change(blob, p, i, patch):
        x, y = p.ops[i].inputs[0], p.ops[i].outputs[0]
        assert p.tensors[x].offset + 1 + p.tensors[y].nbytes <= p.regions[0].size
        return patch(blob, "tensors", y, "offset", p.tensors[x].offset + 1)

    assert not _zoo_with(tmp_path, "transpose", change)


def test_avg_pool_divisor_range_agrees(tmp_path):
    def change(blob, p, i, patch):
        import struct

        from test_program import recrc, sections

        k = sum(len(op.attrs) for op in p.ops[:i]) + list(p.ops[i].attrs).index("divisor")
        buf = bytearray(blob)
        struct.pack_into("<i", buf, sections(buf)["attrs"][0] + 4 * k, 0x7FFFFFFF)
        return recrc(buf)

    assert not _zoo_with(tmp_path, "avg_pool2d", change)


def test_fully_connected_in_place_agrees(tmp_path):
    def change(blob, p, i, patch):
        x, y = p.ops[i].inputs[0], p.ops[i].outputs[0]
        assert p.tensors[x].region == p.tensors[y].region
        return patch(blob, "tensors", y, "offset", p.tensors[x].offset)

    assert not _zoo_with(tmp_path, "fully_connected", change, seed="small_stripped")


def test_huge_dilation_of_a_1x1_conv_agrees(tmp_path):
    assert not _findings(tmp_path, _tiny_with([("attrs", 0, "dilation_w", 0x7FFFFFFF)]))


@pytest.mark.slow
def test_structured_fuzzing_long(tmp_path):
    """`make test-all`: two minutes per build, then the replay of 400 of the programs found
    (`make fuzz` is the long version: 10 minutes per build, every program replayed)."""
    runs, seeds_dir = fuzzing.campaign(120, tmp_path)
    for r in runs:
        print(r.line())
    assert not any(r.crash for r in runs), "\n".join(r.crash for r in runs if r.crash)
    files = [p for b in fuzzing.BITS for p in fuzzing.sample(tmp_path / f"corpus{b}", 200, b)]
    findings, counts = fuzzing.differential(files)
    print(counts, *fuzzing.summary(findings), sep="\n")
    new = [f for f in findings if not f.known]
    assert not new, "\n".join(f.line() for f in new)


@pytest.mark.parametrize("bits", fuzzing.BITS)
@pytest.mark.parametrize("finding", [
    "conv1x1-rq-overflow-ub",  # rq(acc) + zp overflowed int32 (now adds with wrap-around)
    "conv1x1-stride-row-pointer-overflow",  # the next image's row walked back from past the input
])
def test_conv1x1_requantize_overflow_is_not_undefined(bits, finding):
    """Files the fuzzer found crashing the conv 1x1 path (UBSan) now run clean."""
    import subprocess

    f = fuzzing.TESTS_C / "fuzz_findings" / f"{finding}.mtp"
    run = subprocess.run([str(fuzzing.build_fuzzer(bits)), str(f)], capture_output=True,
                         text=True)
    assert run.returncode == 0, fuzzing.crash_signature(run.stderr)
