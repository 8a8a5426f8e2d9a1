"""The C runtime from Python: its sources, a host build of the runner, firmware build values.

The runner (`runtime/harness/mt_run.c`) loads a program file, reads raw int8 input files, runs
the program once (or `-n COUNT` times over COUNT input sets stored back to back) and writes the
outputs; `mt_run --check` only validates; `runner_failure` says what a non-zero exit means. On
the host it is built with gcc and AddressSanitizer + UBSan and cached in
``build/host/<hash of the sources>/``;
on a board the same runner is firmware (`mcutorch.device.firmware.build` uses `core_sources`,
`runner_sources`, `firmware_defines`).

    >>> runner = build_host_runner()                        # doctest: +SKIP
    >>> (y,) = run_host(program.to_bytes(), [x_int8_nhwc])  # doctest: +SKIP
    >>> check_host([blob])                                  # doctest: +SKIP
    [0]
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

from mcutorch.device import paths as P
from mcutorch.errors import McutorchError, RunError, ToolchainError
from mcutorch.program import schema as S
from mcutorch.program.model import Program

BUILD = P.build_dir("host")
HOST_FLAGS = ("-std=c99", "-Wall", "-Wextra", "-Werror", "-O1", "-g")
SANITIZE_FLAGS = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                  "-fno-omit-frame-pointer")
MAX_ARENAS = 4  # arenas the firmware runner can hold (mt_run_board.c)
STATUS_NAMES = ("ok", *S.ERRORS)  # load statuses 0..; run-time statuses in RUNTIME_STATUSES
RUNTIME_STATUSES = {64: "bad_argument", 65: "no_kernel", 66: "bad_state",
                    67: "arena_too_small", 68: "npu_failed", 69: "no_npu", 70: "bad_input"}


EXIT_IO, EXIT_USAGE = 100, 101  # mt_run.h: MT_RUN_EXIT_IO, MT_RUN_EXIT_USAGE


def status_name(code: int) -> str:
    """Name of an mt_status code (the C runtime's mt_status_name)."""
    if 0 <= code < len(STATUS_NAMES):
        return STATUS_NAMES[code]
    return RUNTIME_STATUSES.get(code, f"unknown status {code}")


_SANITIZER_RE = re.compile(r"^(?:==\d+==)?ERROR: (\w+Sanitizer): (.*)$", re.M)
_UBSAN_RE = re.compile(r"^(\S+): runtime error: (.*)$", re.M)
_STATUS_RE = re.compile(r"^mt_status (\d+) (\S+)", re.M)


def runner_failure(code: int | None, stdout: str = "", stderr: str = "") -> str:
    """What a non-zero exit of the runner (mt_run.c, host or firmware) means, in one line.

    The runner exits with its run's mt_status (1..63 a load error of schema.ERRORS, 64.. a
    runtime status) after printing "mt_status <code> <name>", with EXIT_IO after a file it
    could not read or write ("mt_run: ..."), with EXIT_USAGE on a bad command line. Other
    exits are not the runner's: a sanitizer abort (AddressSanitizer and UBSan exit 1 after
    their report, LeakSanitizer 23), a signal (negative `code` from subprocess), a board fault
    (240 + exception number) or no exit at all (None: timed out).

    >>> runner_failure(2, "mt_status 2 bad_magic\\n")
    'load error 2 (bad_magic): the C runtime refused the program'
    >>> runner_failure(-11)
    'killed by signal 11 (SIGSEGV)'
    """
    from mcutorch.device.boards import FAULT_EXIT_CODES

    if code is None:
        return "no exit status (timed out)"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "unknown signal"
        return f"killed by signal {-code} ({name})"
    m = _SANITIZER_RE.search(stderr)
    if m:
        where = re.search(r"^SUMMARY: \w+Sanitizer: (.*)$", stderr, re.M)
        return (f"{m.group(1)} abort (exit {code}): {m.group(2).strip()}"
                + (f"; {where.group(1).strip()}" if where else ""))
    m = _UBSAN_RE.search(stderr)
    if m:
        return (f"UndefinedBehaviorSanitizer abort (exit {code}): runtime error: "
                f"{m.group(2).strip()} at {m.group(1)}")
    status = {int(a): b for a, b in _STATUS_RE.findall(stdout)}
    if code == EXIT_IO and code not in status:
        line = re.search(r"^mt_run: (.*)$", stdout, re.M)
        return f"the runner could not read or write a file (exit {code}): " \
               f"{line.group(1).strip() if line else 'no detail'}"
    if code == EXIT_USAGE and code not in status:
        return f"the runner refused its command line (usage error, exit {code})"
    if code in status or 0 < code < len(STATUS_NAMES) or code in RUNTIME_STATUSES:
        name = status.get(code, status_name(code))
        if 0 < code < len(STATUS_NAMES):
            return f"load error {code} ({name}): the C runtime refused the program"
        return f"runtime status {code} ({name})"
    if code in FAULT_EXIT_CODES:
        return f"the board faulted ({FAULT_EXIT_CODES[code]}, exit {code})"
    return f"unknown exit status {code}"


# ---------------------------------------------------------------------------------------------
# sources


def include_dirs() -> list[Path]:
    """Include folders of the runtime core, its port hooks, the kernels and the runner."""
    return [P.RUNTIME / d for d in ("include", "port", "kernels", "harness")]


def core_sources() -> list[Path]:
    """The runtime core: loader/validator, interpreter, CRC, status names, weak port hooks."""
    return sorted((P.RUNTIME / "src").glob("*.c")) + sorted((P.RUNTIME / "port").glob("*.c"))


def kernel_sources() -> list[Path]:
    """Every kernel plus the full kernel table (runtime/kernels/**/*.c)."""
    if not (P.RUNTIME / "kernels" / "mt_kernels_all.c").is_file():
        raise McutorchError(f"the C kernels are missing: {P.RUNTIME / 'kernels'} has no "
                            "mt_kernels_all.c (the table of every kernel), so the runtime can "
                            "validate programs (build_host_runner(kernels=False)) but not run them")
    return sorted((P.RUNTIME / "kernels").rglob("*.c"))


def runner_sources(board: bool = False) -> list[Path]:
    """The runner's own files: mt_run.c plus the host or the board implementation."""
    return [P.RUNTIME / "harness" / "mt_run.c",
            P.RUNTIME / "harness" / ("mt_run_board.c" if board else "mt_run_host.c")]


# ---------------------------------------------------------------------------------------------
# host build


def _hash(paths: Sequence[Path], flags: Sequence[str]) -> str:
    h = hashlib.sha256("\0".join(flags).encode())
    headers = [p for d in include_dirs() for p in sorted(d.rglob("*.h"))]
    headers += sorted((P.RUNTIME / "src").glob("*.h"))
    headers += sorted({h for p in paths for h in Path(p).parent.glob("*.h")} - set(headers))
    for p in [*paths, *headers]:  # a header next to a source is part of its build
        h.update(str(p.relative_to(P.SOURCES)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:16]


def compile_host(sources: Sequence[Path], out_name: str, flags: Sequence[str] = (),
                 cc: str = "gcc") -> Path:
    """Compile and link C sources into a host program cached under build/host/<hash>/."""
    tool = shutil.which(cc)
    if tool is None:
        raise ToolchainError(f"{cc} not found on PATH: the host C runtime needs a C compiler")
    sources = [Path(s).resolve() for s in sources]
    flags = [*flags, *(f"-I{d}" for d in include_dirs())]
    out = BUILD / _hash(sources, [cc, *flags]) / out_name
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out_name}.{os.getpid()}")
    cmd = [tool, *flags, *map(str, sources), "-o", str(tmp)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ToolchainError(f"building {out_name} failed:\n$ {' '.join(cmd)}\n"
                             f"{proc.stdout}{proc.stderr}")
    os.replace(tmp, out)  # atomic: parallel test workers may build the same runner
    return out


def build_host_runner(sanitize: bool = True, kernels: bool = True) -> Path:
    """Build (or reuse) the host runner; returns its path.

    `sanitize` adds AddressSanitizer and UBSan (any finding aborts the run). Without `kernels`
    the runner only validates (`mt_run --check`), which needs no kernel sources.

    >>> build_host_runner(kernels=False).name                    # doctest: +SKIP
    'mt_run'
    """
    sources = core_sources() + runner_sources()
    flags = [*HOST_FLAGS, *(SANITIZE_FLAGS if sanitize else ())]
    if kernels:
        sources += kernel_sources()
    else:
        flags.append("-DMT_RUN_NO_KERNELS")
    return compile_host(sources, "mt_run", flags)


def _program_bytes(program) -> bytes:
    if isinstance(program, (bytes, bytearray, memoryview)):
        return bytes(program)
    if isinstance(program, Program):
        return program.to_bytes()
    if hasattr(program, "program") and isinstance(program.program, Program):  # CompiledModel
        return program.program.to_bytes()
    return Path(program).read_bytes()


def run_host(program, inputs: Sequence[np.ndarray], runner: Path | None = None) -> list[np.ndarray]:
    """Run a program once with the C runtime on the host; returns its int8 outputs.

    `program`: bytes, a path, a Program or a CompiledModel. `inputs`: the program's inputs as
    arrays of the program's dtypes and shapes (NHWC). Raises McutorchError with the runtime's
    status name when the C runtime refuses the program or a kernel fails.
    """
    return run_host_sequence(program, [inputs], runner)[0][0]


def run_host_sequence(program, sets: Sequence[Sequence[np.ndarray]], runner: Path | None = None,
                      state: bytes | None = None,
                      reset_every: int = 0) -> tuple[list[list[np.ndarray]], bytes]:
    """Run len(sets) inferences in ONE C runtime session on the host (a stateful program keeps
    its persistent tensors across them); `state`: the persistent buffer to start from (None:
    the initial values); `reset_every` k > 0: mt_reset before every k-th inference. Returns the
    output sets and the persistent buffer after the last."""
    blob = _program_bytes(program)
    p = Program.from_bytes(blob)
    for inputs in sets:
        if len(inputs) != len(p.inputs):
            raise McutorchError(f"the program takes {len(p.inputs)} inputs, got {len(inputs)}")
    runner = runner or build_host_runner()
    with tempfile.TemporaryDirectory(prefix="mcutorch-crt-") as tmp:
        d = Path(tmp)
        (d / "program.mtp").write_bytes(blob)
        args = [str(runner), "program.mtp"]
        for i, idx in enumerate(p.inputs):
            t = p.tensors[idx]
            data = [np.asarray(s[i]) for s in sets]
            for x in data:
                if x.shape != t.shape or x.dtype != np.dtype(S.DTYPE_NUMPY[t.dtype]):
                    raise McutorchError(f"input {i} must be {t.dtype}{list(t.shape)}, "
                                        f"got {x.dtype}{list(x.shape)}")
            (d / f"in{i}.bin").write_bytes(b"".join(np.ascontiguousarray(x).tobytes()
                                                    for x in data))
            args.append(f"in{i}.bin")
        args += ["-o", *(f"out{i}.bin" for i in range(len(p.outputs))), "-n", str(len(sets))]
        if reset_every:
            args += ["-r", str(int(reset_every))]
        if p.persistent:
            init = bytearray(p.persistent_size)
            for r in p.persistent:
                t = p.tensors[r.tensor]
                init[t.offset:t.offset + t.extent] = p.persistent_init(r).tobytes()
            (d / "state.bin").write_bytes(bytes(init) if state is None else state)
            args += ["-p", "state.bin"]
        proc = subprocess.run(args, cwd=d, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RunError(f"C runtime failed: "
                           f"{runner_failure(proc.returncode, proc.stdout, proc.stderr)}\n"
                           f"{proc.stdout}{proc.stderr}")
        outs = []
        for i, idx in enumerate(p.outputs):
            t = p.tensors[idx]
            data = np.fromfile(d / f"out{i}.bin", np.dtype(S.DTYPE_NUMPY[t.dtype]))
            outs.append(data.reshape(len(sets), *t.shape))
        after = (d / "state.bin").read_bytes() if p.persistent else b""
        return [[o[k] for o in outs] for k in range(len(sets))], after


def check_host(programs: Sequence, runner: Path | None = None) -> list[int]:
    """mt_load's status for each program (bytes or paths), in one runner process."""
    runner = runner or build_host_runner(kernels=False)
    with tempfile.TemporaryDirectory(prefix="mcutorch-crt-") as tmp:
        names = []
        for i, prog in enumerate(programs):
            (Path(tmp) / f"p{i}.mtp").write_bytes(_program_bytes(prog))
            names.append(f"p{i}.mtp")
        proc = subprocess.run([str(runner), "--check", *names], cwd=tmp, capture_output=True,
                              text=True)
        lines = [ln.split() for ln in proc.stdout.splitlines() if ln.startswith("mt_status ")]
        if proc.returncode != 0 or len(lines) != len(names):
            raise McutorchError(f"mt_run --check failed (exit {proc.returncode}):\n"
                                f"{proc.stdout[-2000:]}{proc.stderr[-4000:]}")
        return [int(ln[1]) for ln in lines]


# ---------------------------------------------------------------------------------------------
# firmware


def state_size(program: Program, pointer_size: int = 4) -> int:
    """Bytes of C runtime state (mt_state_size) for `program` on a CPU with `pointer_size`-byte
    pointers: a pointer per region, an mt_tensor per program input and output and per operand
    of every op, an mt_op_args per op (the kernel arguments mt_bind_state builds once;
    mt_tensor: two pointers, the data and the tensor's record in the program, 8 bytes with
    4-byte pointers, 16 with 8; mt_op_args: 28, 48)."""
    tensor, args = (2 * pointer_size, 28 if pointer_size == 4 else 48)
    operands = sum(len(op.inputs) + len(op.outputs) for op in program.ops)
    n_views = len(program.inputs) + len(program.outputs) + operands
    return len(program.regions) * pointer_size + n_views * tensor + len(program.ops) * args


def firmware_defines(program: Program, board) -> dict[str, object]:
    """-D values for the firmware runner (mt_run_board.c): buffer sizes for `program`, arenas
    placed in the board regions of the same name (else in .bss, the board's rank-0 RAM), the
    program buffer in the board's slowest region when it has several."""
    from mcutorch.device.boards import get_board

    b = get_board(board)
    if len(program.regions) > MAX_ARENAS:
        raise McutorchError(f"the firmware runner holds {MAX_ARENAS} arenas; the program has "
                            f"{len(program.regions)} regions")
    names = {r.name for r in b.regions}
    size = len(program.to_bytes())
    defines: dict[str, object] = {
        "MT_PROGRAM_SIZE": size + (-size % 16),
        "MT_STATE_SIZE": state_size(program, 4),
        "MT_ARENA_ALIGN": max([16, *(r.alignment for r in program.regions)]),
    }
    if program.persistent:
        defines["MT_PERSIST_SIZE"] = program.persistent_size
    if len(b.regions) > 1:
        defines["MT_PROGRAM_REGION"] = f'"{b.regions[-1].name}"'
    for k, r in enumerate(program.regions):
        defines[f"MT_ARENA{k}_SIZE"] = max(r.size, 16)
        if r.name in names:
            defines[f"MT_ARENA{k}_REGION"] = f'"{r.name}"'
    return defines

