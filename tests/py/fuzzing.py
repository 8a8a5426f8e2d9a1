"""Structure-aware fuzzing of the C runtime, and the differential check against Python.

The fuzzer is libFuzzer over tests/c/fuzz_loader.c (load, then invoke with the real kernels)
with the structure-aware mutator tests/c/fuzz_mutator.c: it mutates record fields, ATTRS and
OPERANDS ints, section table entries and CONST bytes, then fixes file_size and the CRC, so the
loader runs with its CRC check and every file the fuzzer keeps is a program the Python reader
reads too. It is built with AddressSanitizer + UBSan for 64-bit and 32-bit (-m32: Cortex-M's
size_t) hosts, and starts from a seed corpus of real programs (`seed_programs`).

The differential check (`differential`) replays program files through the Python reader and
reference interpreter and through the C runtime (tests/c/fuzz_replay.c, 64- and 32-bit, ASan +
UBSan) on the same inputs: same load verdict (ProgramError reason = MT_ERR_<REASON>), and on
every program both load, both refuse to run it or both give the same output bytes.

    python tests/py/fuzzing.py --seconds 600     # `make fuzz`: long runs, then the replay
    python tests/py/fuzzing.py --minimize FILE   # a finding cut down to the fields it needs
    python tests/py/fuzzing.py --trace FILE      # the first op after which the arenas differ

Every disagreement is a `Finding`; the ones already reported are tagged with their name in
`KNOWN` (and have an xfail test in test_fuzz.py), so only new ones fail. tests/py/test_fuzz.py
runs the short version (`short_campaign`) in `make test`.
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import random
import re
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import time
import uuid
import zlib
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from unittest import mock

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mcutorch.device import crt, paths  # noqa: E402
from mcutorch.errors import McutorchError, ProgramError  # noqa: E402
from mcutorch.program import reader  # noqa: E402
from mcutorch.program import schema as S  # noqa: E402

TESTS_C = ROOT / "tests" / "c"
BUILD = paths.build_dir("fuzz")
BUILD.mkdir(parents=True, exist_ok=True)  # every temporary folder below is made inside it
SEED_FORMAT = 3  # bump when the seed models below change (the cache is keyed by it)
MAX_ARENA = 16 << 20  # bytes of all arenas of a program that is still run (fuzz_replay.c)
MAX_REGIONS = 64
PY_TIMEOUT = int(os.environ.get("FUZZ_PY_TIMEOUT", "20"))  # s for one program in Python
PY_MEMORY = 4 << 30  # address space of the Python replay worker
FLAGS = ("-std=c99", "-g", "-O1", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
         "-fno-omit-frame-pointer", "-Wall", "-Wextra", "-Werror")
BITS = (64, 32)
RUN_ID = os.environ.get("PYTEST_XDIST_TESTRUNUID") or uuid.uuid4().hex


# ----------------------------------------------------------------------------------------------
# builds


def _flags(bits: int) -> list[str]:
    return [*FLAGS, *(["-m32"] if bits == 32 else [])]


def build_fuzzer(bits: int = 64) -> Path:
    """libFuzzer + the structure-aware mutator over load and invoke (real kernels); programs
    that hit a known, reported crash are not run (fuzz_invoke.c, FUZZ_SKIP_KNOWN)."""
    sources = [*crt.core_sources(), *crt.kernel_sources(), TESTS_C / "fuzz_invoke.c",
               TESTS_C / "fuzz_mutator.c"]
    flags = [*_flags(bits), "-fsanitize=fuzzer", "-DFUZZ_SKIP_KNOWN"]
    return crt.compile_host(sources, f"fuzz_structured{bits}", flags, cc="clang")


def build_replay(bits: int = 64, trace: bool = False) -> Path:
    """The C half of the differential check (tests/c/fuzz_replay.c); `trace`: with the
    per-op arena CRCs (MT_PROFILE)."""
    sources = [*crt.core_sources(), *crt.kernel_sources(), TESTS_C / "fuzz_replay.c"]
    flags = [*_flags(bits), *(["-DMT_PROFILE"] if trace else [])]
    return crt.compile_host(sources, f"fuzz_replay{bits}", flags, cc="clang")


def trace(path: Path, bits: int = 64) -> str:
    """The first op after which Python's and C's arenas differ (CRC32 of each arena after
    every op, in program order; delegates' CPU versions op by op), or why there is none."""
    return _trace(path, bits)[1]


def _trace(path: Path, bits: int = 64) -> tuple[int | None, str]:
    from mcutorch.ref.interpreter import Interpreter

    blob = Path(path).read_bytes()
    _, p = python_load(blob)
    if p is None:
        return None, "the Python reader refuses it"
    it = Interpreter(p)
    for idx, x in zip(p.inputs, inputs_for(p, blob)):
        it.views[idx][...] = x
    py = []

    def run(steps):
        for step in steps:
            if isinstance(step, list):
                run(step)
                continue
            i, _, kernel, ins, attrs, out, rings = step
            for k, t in rings:  # ring windows where their position puts them now
                ins[k] = it._ring_view(t)
            out[...] = kernel(*ins, **attrs)
            py.append((i, [zlib.crc32(a.tobytes()) for a in it.arenas]))

    run(it.steps)
    with tempfile.TemporaryDirectory(dir=BUILD) as tmp:
        f = Path(tmp) / "p.mtp"
        f.write_bytes(blob)
        f.with_name("p.mtp.in").write_bytes(b"".join(x.tobytes() for x in inputs_for(p, blob)))
        out = subprocess.run([str(build_replay(bits, trace=True)), str(f)], capture_output=True,
                             text=True, env={**os.environ, "FUZZ_REPLAY_TRACE": "1"}).stdout
    c: dict[int, list[int]] = {}
    order = []
    for line in out.splitlines():
        m = re.match(r"op (\d+) (\d+) ([0-9a-f]+)$", line)
        if m and p.ops[int(m.group(1))].name != "delegate":  # the NPU hook's own op
            i = int(m.group(1))
            if i not in c:
                order.append(i)
            c.setdefault(i, []).append(int(m.group(3), 16))
    for (i, crcs), j in zip(py, order):
        if i != j or crcs != c[j]:
            op = p.ops[i]
            return i, (f"arenas differ after op {i} ({op.name}, inputs {list(op.inputs)}, "
                       f"outputs {list(op.outputs)}, attrs {dict(op.attrs)}); C ran op {j} there")
    return None, f"same arenas after all {len(py)} ops (C: {len(order)})"


# ----------------------------------------------------------------------------------------------
# the seed corpus: real programs


def _source_hash() -> str:
    """The compiler's sources and test_program.py (the tiny program); SEED_FORMAT stands for
    the seed models of this file."""
    h = hashlib.sha256(str(SEED_FORMAT).encode())
    for p in [*sorted((ROOT / "src" / "mcutorch").rglob("*.py")),
              Path(__file__).parent / "test_program.py"]:
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _compile(model, x, **kw):
    import mcutorch

    q = mcutorch.quantize(model, (x,), calibration=[x])
    return mcutorch.compile(q, (x,), **kw).program


def _zoo():
    """A small model with most ops: conv, depthwise, pad, add, mul, lut, clamp, pools, concat,
    transpose, maximum, minimum, fully connected, softmax."""
    import torch
    from torch import nn

    class Zoo(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
            self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
            self.c2 = nn.Conv2d(8, 8, 1)
            self.fc = nn.Linear(16 * 2 * 2, 6)

        def forward(self, x):
            y = torch.relu(self.c1(nn.functional.pad(x, (0, 1, 0, 1))))
            y = nn.functional.relu6(self.dw(y))
            z = self.c2(y)
            z = z + torch.sigmoid(z) * torch.tanh(z)
            z = torch.maximum(z, y) + torch.minimum(z, nn.functional.hardswish(y))
            z = nn.functional.avg_pool2d(z, 3, stride=1, padding=1, count_include_pad=True)
            z = nn.functional.max_pool2d(z, 2)
            z = torch.cat([z, torch.clamp(z, -0.5, 0.5)], dim=1)
            z = nn.functional.pad(z.permute(0, 1, 3, 2), (1, 1, 0, 1))
            z = nn.functional.adaptive_avg_pool2d(z, (2, 2))
            return torch.softmax(self.fc(torch.flatten(z, 1)), dim=-1)

    torch.manual_seed(0)
    return Zoo().eval(), torch.randn(1, 3, 9, 11)


def _small():
    import torch
    from torch import nn

    torch.manual_seed(1)
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                      nn.Linear(4 * 4 * 4, 5), nn.Softmax(-1)).eval()
    return m, torch.randn(1, 3, 8, 8)


def _wide():
    """Activations of 64 KiB and more: with memory "DTCM:64K,SRAM:1M" the plan needs both."""
    import torch
    from torch import nn

    torch.manual_seed(2)
    m = nn.Sequential(nn.Conv2d(3, 16, 1), nn.ReLU(), nn.AvgPool2d(4),
                      nn.Conv2d(16, 8, 3, padding=1),
                      nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4)).eval()
    return m, torch.randn(1, 3, 64, 64)


def seed_programs() -> dict[str, bytes]:
    """The seed corpus: the MLPerf Tiny models (random weights), small models, an Ethos-U
    program (with and without CPU versions), a two-region program and the hand-built tiny
    program of test_program, full and stripped. Cached in build/fuzz/seeds/<hash of the
    compiler's sources>/."""
    folder = BUILD / "seeds" / _source_hash()
    done = folder / "done"
    if not done.is_file():
        BUILD.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".seeds-", dir=BUILD))
        for name, blob in _make_seeds().items():
            (tmp / f"{name}.mtp").write_bytes(blob)
        (tmp / "done").write_text("")
        for old in folder.parent.glob("*"):  # seeds of older compiler sources
            subprocess.run(["rm", "-rf", str(old)], check=False)
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            os.rename(tmp, folder)  # atomic: parallel test workers may both make them
        except OSError:
            subprocess.run(["rm", "-rf", str(tmp)], check=False)
    return {p.stem: p.read_bytes() for p in sorted(folder.glob("*.mtp"))}


def _make_seeds() -> dict[str, bytes]:
    import torch
    from test_program import build_program

    from mcutorch.models import build, example_input

    out: dict[str, bytes] = {}

    def add(name, program):
        out[name] = program.to_bytes()
        out[f"{name}_stripped"] = program.stripped().to_bytes()

    add("tiny", build_program())
    for name in ("kws", "vww", "ic", "ad", "sww"):
        torch.manual_seed(0)
        m = build(name).eval()
        add(name, _compile(m, example_input(m), target="cortex-m55"))
    zoo, x = _zoo()
    add("zoo_m55", _compile(zoo, x, target="cortex-m55"))
    add("zoo_m0plus", _compile(zoo, x, target="cortex-m0plus"))
    add("zoo_m4", _compile(zoo, x, target="cortex-m4"))
    small, x = _small()
    add("small", _compile(small, x, target="cortex-m55"))
    add("ethos_u55", _compile(small, x, target="cortex-m55+ethos-u55-128"))
    add("ethos_u55_npu_only", _compile(small, x, target="cortex-m55+ethos-u55-128",
                                       npu_fallback=False))
    zoo, x = _zoo()
    add("ethos_u55_zoo", _compile(zoo, x, target="cortex-m55+ethos-u55-128"))
    wide, x = _wide()
    two = _compile(wide, x, target="cortex-m4", memory="DTCM:64K,SRAM:1M")
    assert len(two.regions) == 2 and all(r.size for r in two.regions), two.regions
    add("two_regions", two)
    stream, x = _streaming()  # format 1.6 ring windows: ring_write and readers of the window
    add("ring_stream", _compile(stream, x, target="cortex-m55"))
    return out


def _streaming():
    """A 5-frame history (a ring window) in front of a (5,1) depthwise and a pointwise conv."""
    import torch
    from test_ring import DepthwiseHistory

    torch.manual_seed(3)
    return DepthwiseHistory(8, 5).eval(), torch.randn(1, 8, 1, 1)


# ----------------------------------------------------------------------------------------------
# running libFuzzer


@dataclass
class FuzzRun:
    bits: int
    seconds: float
    runs: int = 0
    cov: int = 0
    ft: int = 0
    corpus: int = 0
    exec_per_s: int = 0
    new_files: int = 0
    ran: int = 0  # programs that loaded and ran
    skipped_known: int = 0  # programs not run: they hit a known finding (fuzz_invoke.c)
    crash: str = ""  # the report of a new crash (the run stopped there)
    artifact: str = ""
    known_crashes: list = field(default_factory=list)  # "name: signature (artifact)"

    def line(self) -> str:
        return (f"{self.bits}-bit: {self.runs} executions in {self.seconds:.0f} s "
                f"({self.exec_per_s} exec/s), cov {self.cov}, ft {self.ft}, corpus {self.corpus}"
                f" files ({self.new_files} new), {self.ran} programs ran, {self.skipped_known} "
                f"skipped (known finding), {len(self.known_crashes)} known crashes"
                + (f", NEW CRASH {self.artifact}" if self.crash else ""))


_DONE_RE = re.compile(r"^#(\d+)\s+DONE\s+cov: (\d+) ft: (\d+) corp: (\d+)/\S+ .*?exec/s: (\d+)",
                      re.M)
_STATS_RE = re.compile(r"^stat::number_of_executed_units: (\d+)", re.M)
_LAST_RE = re.compile(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/\S+ .*?exec/s: (\d+)",
                      re.M)


# Crashes already reported: name -> predicate on the signature (`crash_signature`). A run goes
# on after one of these (a new libFuzzer session on the same corpus); any other ends it.
KNOWN_CRASHES = {
    # UBSan: rq(acc) + zp in the 1x1 conv fast path overflows int32 when a CONST shift of 2
    # makes rq(acc) wrap to near INT32_MIN / INT32_MAX (outside the numerics domain the kernels
    # promise "some int8 value, never trap", mt_kernel_util.h).
    "conv1x1-rq-overflow-ub": lambda sig: "mt_conv_1x1.h" in sig
    and "signed integer overflow" in sig,
    # ASan memcpy-param-overlap (see KNOWN "overlap-memcpy"; fuzz_invoke.c skips most).
    "overlap-memcpy": lambda sig: "memcpy-param-overlap" in sig,
}


def crash_signature(log: str) -> str:
    """Where and what: "file.c:LINE runtime error: KIND" (UBSan) or "ASan KIND in FUNCTION"."""
    m = re.search(r"^(\S+?):(\d+):\d+: runtime error: ([a-z -]+)", log, re.M)
    if m:
        return f"{Path(m.group(1)).name}:{m.group(2)} runtime error: {m.group(3).strip()}"
    m = re.search(r"ERROR: AddressSanitizer: (\S+)", log)
    if m:
        frames = re.findall(r"^\s+#\d+ 0x[0-9a-f]+ in (\w+)", log, re.M)
        own = next((f for f in frames if not f.startswith("__")), "?")
        return f"AddressSanitizer {m.group(1)} in {own}"
    return "crash: " + (log.strip().splitlines() or ["?"])[-1][:200]


def _known_crash(sig: str) -> str:
    return next((name for name, pred in KNOWN_CRASHES.items() if pred(sig)), "")


def run_fuzzer(bits: int, corpus: Path, seeds: Path, seconds: float, seed: int = 1,
               extra: tuple[str, ...] = ()) -> FuzzRun:
    """libFuzzer for `seconds`: new programs go to `corpus` (which it also starts from, with
    `seeds`). After a known crash (KNOWN_CRASHES) a new session goes on from the corpus; a new
    crash ends the run. Returns the figures libFuzzer printed and the crashes."""
    exe = build_fuzzer(bits)
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts = BUILD / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    before = len(list(corpus.iterdir()))
    max_len = max(p.stat().st_size for p in seeds.glob("*.mtp"))
    t0 = time.monotonic()
    r = FuzzRun(bits, 0)
    session = 0
    while True:
        left = seconds - (time.monotonic() - t0)
        if session and left < 5:
            break
        proc = subprocess.run(
            [str(exe), f"-seed={seed + 1000 * session}", f"-max_total_time={max(1, int(left))}",
             f"-max_len={max_len}", "-print_final_stats=1", "-timeout=30", "-rss_limit_mb=2560",
             "-entropic_scale_per_exec_time=1",  # the small programs more often: 10x exec/s
             f"-artifact_prefix={artifacts}/{bits}-", *extra, str(corpus), str(seeds)],
            capture_output=True, text=True, cwd=BUILD)
        session += 1
        log = proc.stderr
        (BUILD / f"last-{bits}.log").write_text(log)
        m = _DONE_RE.search(log) or (_LAST_RE.findall(log) or [None])[-1]
        runs = 0
        if m is not None:
            g = m.groups() if hasattr(m, "groups") else m
            runs, r.cov, r.ft, r.corpus, _ = map(int, g)
        stats = _STATS_RE.search(log)
        r.runs += int(stats.group(1)) if stats else runs
        ran = re.search(r"^fuzz_invoke: ran (\d+) programs, skipped (\d+)", log, re.M)
        if ran:
            r.ran += int(ran.group(1))
            r.skipped_known += int(ran.group(2))
        if proc.returncode == 0:
            break
        sig = crash_signature(log)
        art = re.search(r"Test unit written to (\S+)", log)
        where = art.group(1) if art else "(no artifact)"
        name = _known_crash(sig)
        if not name:
            r.crash, r.artifact = f"{sig}\n{log[-6000:]}", where
            break
        r.known_crashes.append(f"{name}: {sig} ({where})")
    r.seconds = time.monotonic() - t0
    r.exec_per_s = int(r.runs / max(r.seconds, 1e-9))
    r.new_files = len(list(corpus.iterdir())) - before
    return r


def campaign(seconds: float, corpus_root: Path, bits=BITS,
             extra: tuple[str, ...] = ()) -> tuple[list[FuzzRun], Path]:
    """Run the 64- and 32-bit fuzzers side by side for `seconds` each (`extra`: more libFuzzer
    flags); returns their figures and the folder of the seed corpus."""
    seeds_dir = corpus_root / "seeds"
    seeds_dir.mkdir(parents=True, exist_ok=True)
    for name, blob in seed_programs().items():
        (seeds_dir / f"{name}.mtp").write_bytes(blob)
    with ThreadPoolExecutor(2) as pool:  # build first (two cores)
        list(pool.map(build_fuzzer, bits))
    with ThreadPoolExecutor(len(bits)) as pool:
        runs = list(pool.map(lambda b: run_fuzzer(b, corpus_root / f"corpus{b}", seeds_dir,
                                                  seconds, seed=b, extra=extra), bits))
    return runs, seeds_dir


SHORT_RUNS = 3000  # executions of the `make test` run: a count, so a busy machine is no failure


def short_campaign(seconds: float = 300) -> tuple[list[FuzzRun], Path]:
    """The `make test` version, once per test session (test workers share it): SHORT_RUNS
    executions per build, `seconds` at most."""
    root = BUILD / "short" / RUN_ID
    for old in (BUILD / "short").glob("*"):  # earlier sessions' runs
        if old != root and time.time() - old.stat().st_mtime > 3600:
            subprocess.run(["rm", "-rf", str(old)], check=False)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = root / "result.json"
        if not result.is_file():
            runs, _ = campaign(seconds, root, extra=(f"-runs={SHORT_RUNS}",))
            result.write_text(json.dumps([asdict(r) for r in runs]))
        runs = [FuzzRun(**d) for d in json.loads(result.read_text())]
    return runs, root


# ----------------------------------------------------------------------------------------------
# the differential check


@dataclass
class Outcome:
    """What one executor did with one file: `load` is its load verdict (0 or MT_ERR_*), `run`
    "ok" (then `out` holds the output bytes), "refused" (a kernel or the interpreter said no:
    `detail` says why), "skipped" (arenas too large to replay), "crash", or "" (not run)."""

    load: int
    run: str = ""
    detail: str = ""
    out: bytes = b""


@dataclass
class Finding:
    file: str
    kind: str  # verdict, outputs, c_refuses, python_refuses, c_crash, python_crash
    executor: str  # which C build (c64 / c32) disagreed with Python
    python: str
    c: str
    known: str = ""  # the KNOWN finding it is an instance of

    def line(self) -> str:
        tag = f" [known: {self.known}]" if self.known else ""
        return f"{self.kind}{tag} {self.file}: python {self.python}; {self.executor} {self.c}"


def python_load(blob: bytes):
    """(verdict, Program or None): the reader's verdict with METADATA skipped as in C."""
    with mock.patch.object(reader, "_metadata", lambda v: None):
        try:
            return 0, reader.read(blob)
        except ProgramError as e:
            return S.ERROR_CODES[e.reason], None


def inputs_for(program, blob: bytes) -> list[np.ndarray]:
    """Random bytes for every input (the dtype and shape of its record), fixed per file."""
    rng = np.random.default_rng(zlib.crc32(blob))
    xs = []
    for idx in program.inputs:
        t = program.tensors[idx]
        raw = rng.integers(0, 256, t.nbytes, dtype=np.uint8).tobytes()
        xs.append(np.frombuffer(raw, np.dtype(S.DTYPE_NUMPY[t.dtype])).reshape(t.shape).copy())
    return xs


def _too_big(program) -> bool:
    return len(program.regions) > MAX_REGIONS or sum(r.size for r in program.regions) > MAX_ARENA


class _Timeout(Exception):
    pass


def _op_of(e: BaseException, program) -> str:
    """ "op 3 (conv2d) at pad.py:12: " for an exception raised under Interpreter._run."""
    tb, op, where = e.__traceback__, "", ""
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "_run" and "i" in tb.tb_frame.f_locals:
            i = tb.tb_frame.f_locals["i"]
            op = f"op {i} ({program.ops[i].name}) "
        where = f"at {Path(code.co_filename).name}:{tb.tb_lineno}: "
        tb = tb.tb_next
    return op + where


def python_outcome(blob: bytes) -> Outcome:
    """Load with the reader, run once with the reference Interpreter."""
    from mcutorch.ref.interpreter import Interpreter

    code, p = python_load(blob)
    if p is None:
        return Outcome(code)
    if _too_big(p):
        return Outcome(0, "skipped")

    def alarm(*_):
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(PY_TIMEOUT)
    try:
        outs = Interpreter(p).invoke(inputs_for(p, blob))
    except McutorchError as e:
        return Outcome(0, "refused", f"{type(e).__name__}: {e}"[:300])
    except _Timeout:
        return Outcome(0, "crash", f"no result in {PY_TIMEOUT} s")
    except Exception as e:
        return Outcome(0, "crash", f"{_op_of(e, p)}{type(e).__name__}: {e}"[:400])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return Outcome(0, "ok", out=b"".join(np.ascontiguousarray(o).tobytes() for o in outs))


def _python_worker(files: list[str]) -> None:
    """`fuzzing.py --python-worker FILE...`: python_outcome of each file as JSON lines, in a
    process of bounded memory (a hostile program may ask numpy for anything)."""
    resource.setrlimit(resource.RLIMIT_AS, (PY_MEMORY, PY_MEMORY))
    for f in files:
        print(json.dumps({"run": f}), flush=True)
        o = python_outcome(Path(f).read_bytes())
        if o.out:
            Path(f + ".py.out").write_bytes(o.out)
        print(json.dumps({"file": f, "load": o.load, "run": o.run, "detail": o.detail}),
              flush=True)


def _replay(cmd: list[str], files: list[str], parse, env=None) -> dict[str, Outcome]:
    """Run a replay worker over `files`; a worker that dies is restarted after the file it
    died on, which gets a "crash" outcome."""
    got: dict[str, Outcome] = {}
    todo = list(files)
    while todo:
        proc = subprocess.run([*cmd, *todo], capture_output=True, text=True, env=env)
        current = None
        for line in proc.stdout.splitlines():
            current = parse(line, got, current)
        if proc.returncode == 0 and all(f in got for f in todo):
            break
        if current is None or current in got:  # died outside a file: give up on the rest
            for f in todo:
                got.setdefault(f, Outcome(-1, "crash", f"worker exit {proc.returncode}: "
                                                       f"{proc.stderr[-1500:]}"))
            break
        got[current] = Outcome(got.get(current, Outcome(-1)).load, "crash",
                               crt.runner_failure(proc.returncode, proc.stdout, proc.stderr)
                               + "\n" + proc.stderr[-3000:])
        todo = todo[todo.index(current) + 1:]
    return got


def _parse_c(line: str, got: dict, current):
    if line.startswith("run "):
        return line[4:]
    m = re.match(r"status (-?\d+) (\w+) (.*)$", line)
    if m:
        code, step, f = int(m.group(1)), m.group(2), m.group(3)
        if step == "load":
            got[f] = Outcome(code)
        elif code == -2:
            got[f] = Outcome(0, "skipped")
        elif code == 0:
            got[f] = Outcome(0, "ok", out=Path(f + ".out").read_bytes())
        else:
            got[f] = Outcome(0, "refused", crt.status_name(code) if code >= 0 else "bad inputs")
    return current


def _parse_py(line: str, got: dict, current):
    d = json.loads(line)
    if "run" in d and "file" not in d:
        return d["run"]
    f = d["file"]
    out = Path(f + ".py.out").read_bytes() if d["run"] == "ok" else b""
    got[f] = Outcome(d["load"], d["run"], d["detail"], out)
    return current


def _describe(o: Outcome) -> str:
    if o.load != 0:
        return f"load error {o.load} ({crt.status_name(o.load) if o.load > 0 else '?'})"
    if o.run == "ok":
        return f"ok, outputs {o.out[:16].hex()}{'...' if len(o.out) > 16 else ''}"
    return f"{o.run}: {o.detail.splitlines()[0] if o.detail else ''}"


def compare(f: str, py: Outcome, c: Outcome, executor: str) -> Finding | None:
    if c.run == "crash":
        return Finding(f, "c_crash", executor, _describe(py), c.detail)
    if py.run == "crash":
        return Finding(f, "python_crash", executor, f"crash: {py.detail}", _describe(c))
    if py.load != c.load:
        return Finding(f, "verdict", executor, _describe(py), _describe(c))
    if py.load != 0 or "skipped" in (py.run, c.run) or py.run == c.run == "refused":
        return None
    if py.run == "ok" and c.run == "ok":
        if py.out == c.out:
            return None
        diff = next(i for i, (a, b) in enumerate(zip(py.out, c.out)) if a != b) \
            if len(py.out) == len(c.out) else -1
        return Finding(f, "outputs", executor, _describe(py),
                       _describe(c) + f" (first difference at output byte {diff})")
    kind = "c_refuses" if py.run == "ok" else "python_refuses"
    return Finding(f, kind, executor, _describe(py), _describe(c))


# Findings already reported (see the report of the fuzzing issue); `differential` tags them so
# that only new ones fail a test. Each: name -> predicate(finding, program bytes).
def _target_rounding(blob: bytes) -> int:
    h = S.HEADER.unpack(blob)
    for e in S.SECTION.unpack_all(blob, h["section_table"], h["section_count"]):
        if e["kind"] == S.KIND_BY_NAME["target"].id:
            return S.TARGET.unpack(blob, e["offset"])["rounding"]
    return -1


ELEMENTWISE = {"clamp", "lut", "rescale", "add", "mul", "maximum", "minimum"}  # may run in place
WINDOW_ATTRS = {f"{a}_{b}" for a in ("kernel", "stride", "dilation") for b in "hw"} | {
    f"pad_{s}" for s in ("top", "left", "bottom", "right")}
DIM_MAX = 0x3FFFFFFF  # the C kernels' bound on sizes, kernels, strides, pads (mt_kernel_util.h)


def partial_overlap(program, i: int) -> bool:
    """Does an output of op `i` share bytes with one of its inputs, other than in place (the
    same bytes, on an element-wise op: mt_kernel.h)?"""
    op = program.ops[i]
    for o in op.outputs:
        a = program.tensors[o]
        for j, x in enumerate(op.inputs):
            b = program.tensors[x]
            if not (a.storage == b.storage == "arena" and a.region == b.region
                    and a.offset < b.offset + b.nbytes and b.offset < a.offset + a.nbytes):
                continue
            if j == 0 and "overlap" in op.opdef.alias and _legal_overlap(program, op, b, a):
                continue  # alias kind overlap: a divergence there is a real finding
            if not (op.name in ELEMENTWISE and a.offset == b.offset and a.nbytes == b.nbytes):
                return True
    return False


def _legal_overlap(program, op, x, y) -> bool:
    """y at least the op's least delta below x (alias kind overlap, validate._check_overlap)."""
    from mcutorch.errors import ProgramError
    from mcutorch.program import validate

    try:
        validate._check_overlap(program, "", op, (x.region, x.offset, x.nbytes),
                                (y.region, y.offset, y.nbytes))
    except ProgramError:
        return False
    return True


def _diverges_at_overlap(blob: bytes) -> bool:
    with tempfile.TemporaryDirectory(dir=BUILD) as tmp:
        f = Path(tmp) / "p.mtp"
        f.write_bytes(blob)
        i, _ = _trace(f)
    _, p = python_load(blob)
    return i is not None and p is not None and partial_overlap(p, i)


def _max_window_attr(blob: bytes) -> int:
    _, p = python_load(blob)
    return max((v for op in (p.ops if p else []) for k, v in op.attrs.items()
                if k in WINDOW_ATTRS), default=-1)


def _avg_pool_divisor(blob: bytes) -> int:
    """The largest avg_pool2d divisor of a program the reader takes (-1 otherwise)."""
    _, p = python_load(blob)
    divisors = [op.attrs["divisor"] for op in (p.ops if p else []) if op.name == "avg_pool2d"]
    return max(divisors, default=-1)


KNOWN: dict[str, object] = {
    # Outside the numerics domain (an accumulator or rq(acc) beyond int32, e.g. a CONST shift
    # of 2) the reference raises; the C kernels return saturated int8 values by design
    # (runtime/kernels/mt_kernel_util.h) - a silent wrong answer on the device.
    "domain-overflow-runs-in-c": lambda fd, blob: fd.kind == "python_refuses"
    and "overflows int32" in fd.python,
    # Huge pads (conv2d / pools / pad attributes ~2^21..2^31): the reference pads first and
    # dies with MemoryError (or runs for minutes); the C kernels refuse (bad_argument).
    "python-huge-padding": lambda fd, blob: fd.kind == "python_crash"
    and ("MemoryError" in fd.python or "no result in" in fd.python)
    and fd.c.startswith("refused"),
    # An op of the memcpy kernels (transpose, concat, pad, max_pool2d) whose output partially
    # overlaps an input: the loader accepts it, memcpy of overlapping bytes is undefined (ASan:
    # memcpy-param-overlap). fuzz_invoke.c -DFUZZ_SKIP_KNOWN does not run such programs.
    "overlap-memcpy": lambda fd, blob: fd.kind == "c_crash"
    and "memcpy-param-overlap" in fd.c,
    # The same for the other kernels (only element-wise ones may run in place, out == in:
    # mt_kernel.h): the C kernel overwrites input bytes it has not read yet, the reference reads
    # all first, so the outputs differ (at the first op where the arenas part, an overlap).
    "overlap-wrong-outputs": lambda fd, blob: fd.kind == "outputs"
    and _diverges_at_overlap(blob),
    # A window attribute (kernel, stride, dilation, pad) above 2^30 - 1 that does not change
    # the output shape (e.g. dilation_w 2^31 - 1 on a 1x1 kernel): the reference computes, the
    # C kernels refuse every such value (MT_DIM_MAX).
    "window-attr-range": lambda fd, blob: fd.kind == "c_refuses"
    and _max_window_attr(blob) > DIM_MAX,
    # avg_pool2d divisor in (2^30, 2^31): the reference computes, the C kernel refuses
    # (AVG_MAX_COUNT = 2^30 in mt_avg_pool2d_s8.c).
    "avg-pool-divisor-range": lambda fd, blob: fd.kind == "c_refuses"
    and _avg_pool_divisor(blob) > 1 << 30,
    # TARGET.rounding = tflite ("reserved"): the reference refuses, the C runtime runs it.
    "tflite-rounding-runs-in-c": lambda fd, blob: fd.kind == "python_refuses"
    and "rounding mode" in fd.python and _target_rounding(blob) == 1,
}


def summary(findings: list[Finding]) -> list[str]:
    """One line per kind of finding (numbers and file names left out), with its count and one
    example file."""
    groups: dict[str, list[Finding]] = {}
    for fd in findings:
        key = re.sub(r"(?<![A-Za-z_\d])\d+(?![A-Za-z_\d])", "N",
                     f"{fd.kind} [{fd.known or 'NEW'}] {fd.executor}: python "
                     f"{fd.python.splitlines()[0][:120]}; C {fd.c.splitlines()[0][:80]}")
        key = re.sub(r"outputs [0-9a-f.]+", "outputs ...", key)
        groups.setdefault(key, []).append(fd)
    return [f"{len(v):5d} x {k}  (e.g. {v[0].file})" for k, v in sorted(groups.items())]


def differential(files: list[Path], bits=BITS, py_timeout: int = PY_TIMEOUT
                 ) -> tuple[list[Finding], dict]:
    """Replay `files` through Python and the C builds; returns the findings and counts of
    what happened (verdicts, runs) for the report. A program the Python interpreter has not
    finished in `py_timeout` seconds is a python_crash finding."""
    work = Path(tempfile.mkdtemp(prefix="replay-", dir=BUILD))
    names = []
    for i, src in enumerate(files):
        blob = Path(src).read_bytes()
        dst = work / f"{i:05d}-{Path(src).name[:24]}"
        dst.write_bytes(blob)
        _, p = python_load(blob)
        if p is not None and not _too_big(p):
            dst.with_name(dst.name + ".in").write_bytes(
                b"".join(x.tobytes() for x in inputs_for(p, blob)))
        names.append(str(dst))
    with ThreadPoolExecutor(2) as pool:
        exes = dict(zip((f"c{b}" for b in bits), pool.map(build_replay, bits)))
    py_cmd = [sys.executable, str(Path(__file__).resolve()), "--python-worker"]
    with ThreadPoolExecutor(2) as pool:
        env = {**os.environ, "FUZZ_PY_TIMEOUT": str(py_timeout)}
        py_job = pool.submit(_replay, py_cmd, names, _parse_py, env)
        c_res = {k: _replay([str(exe)], names, _parse_c) for k, exe in exes.items()}
        py_res = py_job.result()
    findings = []
    counts = Counter()
    for f, src in zip(names, files):
        py = py_res[f]
        counts[f"python {_describe(py).split(',')[0].split(':')[0]}"] += 1
        for k, res in c_res.items():
            fd = compare(f, py, res[f], k)
            if fd is None:
                continue
            fd.file = str(src)
            blob = Path(f).read_bytes()
            fd.known = next((name for name, pred in KNOWN.items() if pred(fd, blob)), "")
            findings.append(fd)
    subprocess.run(["rm", "-rf", str(work)], check=False)
    return findings, dict(counts)


# ----------------------------------------------------------------------------------------------
# what the fuzzer changed: a program against the seed it came from


_RECORDS = {"target": S.TARGET, "regions": S.REGION, "tensors": S.TENSOR, "ops": S.OP,
            "delegates": S.DELEGATE, "bindings": S.BINDING, "persistent": S.PERSISTENT}


def _fields_at(blob: bytes, offsets: list[int]) -> dict[str, tuple[int, str]]:
    """Name of the field at each byte offset of `blob` (its own section table) -> (start, fmt)."""
    h = S.HEADER.unpack(blob)
    table = S.SECTION.unpack_all(blob, h["section_table"], h["section_count"])
    secs = {S.KIND_BY_ID[e["kind"]].name: e for e in table if e["kind"] in S.KIND_BY_ID}
    ops_ = S.OP.unpack_all(blob, secs["ops"]["offset"], secs["ops"]["size"] // S.OP.size)
    tensors = S.TENSOR.unpack_all(blob, secs["tensors"]["offset"],
                                  secs["tensors"]["size"] // S.TENSOR.size)
    out: dict[str, tuple[int, str]] = {}

    def struct_field(st, base, index, name, off):
        for f in st.fields:
            a = st.offsets[f.name]
            if a <= off - base < a + f.size:
                width = S._TYPES[f.type][1]
                k = (off - base - a) // width
                char = S._TYPES[f.type][2] if f.type != "char" else "4s"
                label = f"{name}[{index}].{f.name}" + (f"[{k}]" if f.is_array else "")
                return label, base + a + (k * width if f.type != "char" else 0), char
        return None

    for off in offsets:
        got = None
        if off < S.HEADER.size:
            got = struct_field(S.HEADER, 0, 0, "header", off)
        elif h["section_table"] <= off < h["section_table"] + len(table) * S.SECTION.size:
            i = (off - h["section_table"]) // S.SECTION.size
            got = struct_field(S.SECTION, h["section_table"] + i * S.SECTION.size, i, "section",
                               off)
        for name, e in secs.items():
            if got is not None or not e["offset"] <= off < e["offset"] + e["size"]:
                continue
            rel = off - e["offset"]
            if name in _RECORDS:
                st = _RECORDS[name]
                got = struct_field(st, e["offset"] + rel // st.size * st.size, rel // st.size,
                                   name, off)
            elif name in ("attrs", "operands", "io"):
                k = rel // 4
                label = f"{name}[{k}]"
                if name == "io":
                    label = "io.header" if rel < S.IO.size else f"io[{(rel - S.IO.size) // 4}]"
                for i, r in enumerate(ops_):
                    if name == "attrs" and r["first_attr"] <= k < r["first_attr"] + r["n_attrs"]:
                        from mcutorch import ops as O
                        d = O.BY_OPCODE.get(r["opcode"])
                        attr = d.attrs[k - r["first_attr"]] if d else "?"
                        label += f" (op {i} {d.name if d else '?'} {attr})"
                    n = r["n_inputs"] + r["n_outputs"]
                    if name == "operands" and r["first_operand"] <= k < r["first_operand"] + n:
                        label += f" (op {i} operand {k - r['first_operand']})"
                got = label, e["offset"] + (rel // 4) * 4, "i"
            elif name == "const":
                owner = next((f"tensor {j}" for j, t in enumerate(tensors) if t["storage"] == 1
                              and t["offset"] <= rel < t["offset"] + t["size"]), "no tensor")
                got = f"const byte {rel} ({owner})", off, "B"
            else:
                got = f"{name} byte {rel}", off, "B"
        if got is None:
            got = f"byte {off}", off, "B"
        out.setdefault(got[0], (got[1], got[2]))
    return out


def explain(blob: bytes, seeds: dict[str, bytes]) -> str:
    """The fields in which `blob` differs from the seed it most likely came from (same size,
    fewest different bytes), e.g. "kws: ops[3].n_attrs 13 -> 0; attrs[40] (op 3 conv2d
    stride_h) 1 -> 2147483647". Header CRC and file_size are left out."""
    same = [(name, s) for name, s in seeds.items() if len(s) == len(blob)]
    if not same:
        return "no seed of the same size"
    a = np.frombuffer(blob, np.uint8)
    name, seed = min(same, key=lambda ns: int(np.count_nonzero(np.frombuffer(ns[1], np.uint8)
                                                                != a)))
    diff = [int(i) for i in np.flatnonzero(np.frombuffer(seed, np.uint8) != a)
            if not 8 <= i < 16]
    parts = []
    try:
        fields = _fields_at(seed, diff)
    except Exception as e:
        return f"{name}: bytes {diff[:20]} ({e})"
    for label, (off, char) in fields.items():
        fmt = "<" + char
        old, new = struct.unpack_from(fmt, seed, off)[0], struct.unpack_from(fmt, blob, off)[0]
        parts.append(f"{label} {old!r} -> {new!r}")
    return f"{name}: " + ("; ".join(parts) if parts else "identical")


def _field_size(char: str) -> int:
    return struct.calcsize("<" + char)


def minimize(path: Path, seeds: dict[str, bytes], bits=(64,)) -> tuple[bytes, str]:
    """The smallest set of changed fields (against the seed `explain` picks) that still gives
    the same kind of finding as `path`: each changed field is put back in turn, and kept back
    when the finding stays. Returns the program and its `explain`."""
    blob = bytearray(Path(path).read_bytes())
    first, _ = differential([Path(path)], bits)
    if not first:
        return bytes(blob), "no finding"
    kind = first[0].kind
    name = explain(bytes(blob), seeds).split(":")[0]
    seed = seeds[name]
    diff = [int(i) for i in np.flatnonzero(np.frombuffer(seed, np.uint8)
                                           != np.frombuffer(bytes(blob), np.uint8))
            if not 8 <= i < 16]
    tmp = Path(tempfile.mkdtemp(prefix="minimize-", dir=BUILD)) / Path(path).name
    for off, char in _fields_at(seed, diff).values():
        trial = bytearray(blob)
        trial[off:off + _field_size(char)] = seed[off:off + _field_size(char)]
        struct.pack_into("<I", trial, 12, zlib.crc32(trial[S.CRC_START:]))
        tmp.write_bytes(trial)
        found, _ = differential([tmp], bits)
        if any(f.kind == kind for f in found):
            blob = trial
    subprocess.run(["rm", "-rf", str(tmp.parent)], check=False)
    return bytes(blob), explain(bytes(blob), seeds)


def sample(folder: Path, n: int, seed: int = 0) -> list[Path]:
    files = sorted(p for p in folder.iterdir() if p.is_file())
    random.Random(seed).shuffle(files)
    return sorted(files[:n])


# ----------------------------------------------------------------------------------------------
# make fuzz


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=600,
                    help="libFuzzer time of each build (64- and 32-bit run side by side)")
    ap.add_argument("--corpus", type=Path, default=BUILD / "long",
                    help="folder of the corpora (kept: later runs go on from them)")
    ap.add_argument("--replay", type=int, default=3000,
                    help="programs of the corpora to replay through Python and C")
    ap.add_argument("--minimize", nargs="+", type=Path, metavar="FILE",
                    help="only shrink these findings to their essential fields and say them")
    ap.add_argument("--trace", nargs="+", type=Path, metavar="FILE",
                    help="only say after which op the Python and C arenas first differ")
    ap.add_argument("--python-worker", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.python_worker is not None:
        _python_worker(a.python_worker)
        return 0
    if a.trace:
        for path in a.trace:
            print(f"{path}: {trace(path)}")
        return 0
    if a.minimize:
        seeds = seed_programs()
        for path in a.minimize:
            blob, what = minimize(path, seeds)
            out = BUILD / "findings" / (path.name + ".min.mtp")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(blob)
            findings, _ = differential([out])
            print(f"{path}: {what}\n  -> {out}")
            for fd in findings:
                print(f"  {fd.line()}")
        return 0
    runs, seeds_dir = campaign(a.seconds, a.corpus)
    for r in runs:
        print(r.line())
        for k in r.known_crashes:
            print(f"  known crash {k}")
        if r.crash:
            print(r.crash)
    print(f"total: {sum(r.runs for r in runs)} executions")
    files = sorted(seeds_dir.glob("*.mtp"))
    for b in BITS:
        files += sample(a.corpus / f"corpus{b}", a.replay // len(BITS), seed=b)
    findings, counts = differential(files)
    print(f"differential: {len(files)} programs, {counts}")
    for line in summary(findings):
        print(line)
    new = [fd for fd in findings if not fd.known]
    print(f"{len(findings)} findings ({len(new)} new), "
          f"{sum(bool(r.crash) for r in runs)} crashes")
    return 1 if new or any(r.crash for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
