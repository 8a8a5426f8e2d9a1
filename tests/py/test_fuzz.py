"""Structure-aware fuzzing of load and invoke (tests/py/fuzzing.py; `make fuzz` runs it long):
short runs of the 64- and 32-bit libFuzzer builds, then the differential check of the Python
reader + interpreter against the C runtime on the programs they found."""
from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

import fuzzing
from mcutorch.program import schema as S

SHORT_SECONDS = 12  # each build; the two run side by side
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
    print(r.line())
    assert not r.crash, f"{r.line()}\n{r.crash}"
    assert r.runs >= 1000 and r.new_files > 0, r.line()


def test_fuzzed_programs_reach_the_validator(short):
    """CRC and file_size are fixed after every mutation: the files are read past the header
    checks, many load, and they fail on every kind of record."""
    _, root = short
    files = [p for b in fuzzing.BITS for p in (root / f"corpus{b}").iterdir()]
    verdicts = Counter(fuzzing.python_load(p.read_bytes())[0] for p in files)
    named = {("ok", *S.ERRORS)[c]: n for c, n in verdicts.items()}
    print(f"{len(files)} fuzzed programs, Python verdicts: {named}")
    assert S.ERROR_CODES["bad_crc"] not in verdicts
    assert verdicts[0] >= len(files) // 5
    assert len(verdicts) >= 8, named


def test_seeds_agree():
    """The seed programs: same outputs in Python and in C (64- and 32-bit)."""
    seeds = sorted((fuzzing.BUILD / "seeds").glob("*/*.mtp")) or None
    if seeds is None:
        fuzzing.seed_programs()
        seeds = sorted((fuzzing.BUILD / "seeds").glob("*/*.mtp"))
    findings, counts = fuzzing.differential(seeds)
    print(counts)
    assert not findings, "\n".join(f.line() for f in findings)


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
