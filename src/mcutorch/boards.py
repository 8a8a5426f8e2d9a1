"""Emulated boards: memory maps, firmware builds (arm-none-eabi-gcc) and QEMU runs.

A board is a QEMU machine with one Cortex-M core and a memory map::

    board        core        code region                 data regions (rank: 0 = fastest)
    mps2-an385   cortex-m3   code 0x00000000 4 MiB       data 0x20000000 4 MiB
    mps2-an386   cortex-m4   code 0x00000000 4 MiB       data 0x20000000 4 MiB
    mps2-an500   cortex-m7   code 0x00000000 4 MiB       data 0x20000000 4 MiB
    mps2-an505   cortex-m33  code 0x10000000 4 MiB       data 0x38000000 2 MiB
    mps3-an547   cortex-m55  ITCM 0x00000000 512 KiB     DTCM 0x20000000 512 KiB,
                                                         SRAM 0x21000000 4 MiB (NPU),
                                                         DDR  0x60000000 16 MiB (NPU)

`BOARDS` is the one source of truth for these addresses: ``boards/<board>/link.ld`` is
generated from it (`linker_script`, ``python -m mcutorch.boards``) and a test checks the
checked-in files are up to date.

Firmware = the caller's C sources + ``boards/common`` (start-up code, semihosting, SysTick
counter) linked with the board's script (`build_elf`). `run_elf` runs it under
``qemu-system-arm -icount shift=0``: every guest instruction is 1 ns of virtual time, so the
SysTick ticks the firmware prints (``mt_ticks [label] <n>``) convert to instructions by a
fixed factor per board, ``Board.instructions_per_tick`` = 1e9 / SysTick clock (Hz). QEMU
gives instruction counts, not cycles: they rank kernels, they are not a cycle model.

Armv6-M (M0/M0+) builds run on mps2-an385 and Armv8-M Baseline (M23) builds on mps2-an505;
their start-up code sets CCR.UNALIGN_TRP so unaligned accesses fault as on the real cores.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, NamedTuple, Sequence

from mcutorch.errors import TargetError, ToolchainError
from mcutorch.plan import Region
from mcutorch.targets import ARCH_CONTAINS, CPUS, FEATURES, Target, parse_target

KiB = 1024
MiB = 1024 * 1024

APT_PACKAGES = "gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm"
GCC = "arm-none-eabi-gcc"
SIZE = "arm-none-eabi-size"
NM = "arm-none-eabi-nm"
ADDR2LINE = "arm-none-eabi-addr2line"
QEMU = "qemu-system-arm"

# Fault exit statuses of boards/common/startup.c (see board.h): 240 + exception number.
FAULT_EXIT_BASE = 240
FAULT_EXIT_CODES = {
    242: "NMI",
    243: "HardFault",
    244: "MemManage",
    245: "BusFault",
    246: "UsageFault",
    247: "SecureFault",
    248: "unexpected interrupt",
    251: "SVCall",
    252: "DebugMonitor",
    254: "PendSV",
}


@dataclass(frozen=True)
class CodeRegion:
    """Where code, constants and the initial values of .data live (not planned)."""

    name: str
    base: int
    size: int


@dataclass(frozen=True)
class Board:
    """One emulated board (an entry of `BOARDS`)."""

    name: str
    qemu_machine: str
    cpu: str  # a key of mcutorch.targets.CPUS
    systick_hz: int  # SysTick clock with CLKSOURCE = processor clock
    code: CodeRegion
    regions: tuple[Region, ...]  # data regions, fastest (rank 0) first
    notes: str = ""

    @property
    def instructions_per_tick(self) -> float:
        """Instructions per SysTick tick under ``-icount shift=0`` (1 instruction = 1 ns).

        >>> BOARDS["mps2-an385"].instructions_per_tick
        40.0
        """
        return 1e9 / self.systick_hz

    @property
    def ram(self) -> Region:
        """The rank-0 data region: .data, .bss and the stack go there."""
        return self.regions[0]


def _r(name, size, rank, base, npu=False):
    return Region(name=name, size=size, rank=rank, npu=npu, base=base)


_MPS2_CODE = CodeRegion("code", 0x0000_0000, 4 * MiB)

BOARDS: dict[str, Board] = {
    b.name: b
    for b in (
        Board(
            "mps2-an385", "mps2-an385", "cortex-m3", 25_000_000, _MPS2_CODE,
            (_r("data", 4 * MiB, 0, 0x2000_0000),),
            "also runs Armv6-M (M0/M0+) builds, with unaligned-access trapping",
        ),
        Board(
            "mps2-an386", "mps2-an386", "cortex-m4", 25_000_000, _MPS2_CODE,
            (_r("data", 4 * MiB, 0, 0x2000_0000),),
        ),
        Board(
            "mps2-an500", "mps2-an500", "cortex-m7", 25_000_000, _MPS2_CODE,
            (_r("data", 4 * MiB, 0, 0x2000_0000),),
        ),
        Board(
            "mps2-an505", "mps2-an505", "cortex-m33", 20_000_000,
            CodeRegion("code", 0x1000_0000, 4 * MiB),
            (_r("data", 2 * MiB, 0, 0x3800_0000),),
            "runs in the Secure state; also runs Armv8-M Baseline (M23) builds",
        ),
        Board(
            "mps3-an547", "mps3-an547", "cortex-m55", 32_000_000,
            CodeRegion("ITCM", 0x0000_0000, 512 * KiB),
            (
                _r("DTCM", 512 * KiB, 0, 0x2000_0000),
                _r("SRAM", 4 * MiB, 1, 0x2100_0000, npu=True),
                _r("DDR", 16 * MiB, 2, 0x6000_0000, npu=True),
            ),
        ),
    )
}  # fmt: skip


def get_board(name: str | Board) -> Board:
    """Look a board up by name; raises `TargetError` listing the boards.

    >>> get_board("mps3-an547").cpu
    'cortex-m55'
    """
    if isinstance(name, Board):
        return name
    key = str(name).strip().lower()
    if key not in BOARDS:
        raise TargetError(f"unknown board {name!r}; boards: {', '.join(BOARDS)}")
    return BOARDS[key]


# ---------------------------------------------------------------------------------------
# Which board runs which program


_FEATURE_NAMES = {
    "dsp": "DSP",
    "mve": "MVE (Helium)",
    "mve.fp": "MVE floating point",
    "fp": "an FPU",
    "fp.dp": "a double-precision FPU",
}


def can_run(board: str | Board, target: str | Target) -> tuple[bool, str]:
    """Can `board` run a program compiled for `target`? Returns (ok, reason).

    The board's core must implement the program's architecture (Armv6-M is a subset of
    Armv7-M, Armv8-M Baseline of Mainline, ...) and every feature the build uses (DSP, MVE,
    single/double-precision FPU). On refusal the reason says what is missing; when the
    program runs on a bigger core than its own, the reason says how it is emulated.

    >>> ok, reason = can_run("mps2-an505", "cortex-m55+nomve")
    >>> ok, reason.split(": ")[1]
    (False, 'needs armv8.1-m.main, a double-precision FPU')
    >>> can_run("mps2-an385", "cortex-m0plus")[0]
    True
    """
    b = get_board(board)
    t = parse_target(target)
    core = CPUS[b.cpu]
    missing = []
    if t.arch not in ARCH_CONTAINS[core.arch]:
        missing.append(t.arch)
    lacking = t.features - core.features
    if "mve" in lacking:
        lacking -= {"mve.fp"}  # "needs MVE" says it all
    missing += [_FEATURE_NAMES[f] for f in FEATURES if f in lacking]
    if missing:
        return False, (
            f"{b.name} ({core.name}, {core.arch}) cannot run {t.name} programs: "
            f"needs {', '.join(missing)}"
        )
    if t.cpu == core.name:
        return True, ""
    note = f"{b.name} runs this {t.cpu} ({t.arch}) program on its {core.name}"
    if t.unaligned_faults and not core.baseline:
        note += ", with unaligned-access trapping on (CCR.UNALIGN_TRP)"
    return True, note


def board_for(target: str | Target) -> str:
    """The board that runs `target` programs: the one with the same core, else the
    first board (smallest core first) that can run them.

    >>> board_for("cortex-m0plus"), board_for("m23"), board_for("cortex-m85")
    ('mps2-an385', 'mps2-an505', 'mps3-an547')
    """
    t = parse_target(target)
    for b in BOARDS.values():
        if b.cpu == t.cpu and can_run(b, t)[0]:
            return b.name
    for b in BOARDS.values():
        if can_run(b, t)[0]:
            return b.name
    raise TargetError(f"no emulated board runs {t.name} programs; boards: {', '.join(BOARDS)}")


# ---------------------------------------------------------------------------------------
# Files: boards/ directory and linker scripts


def boards_dir() -> Path:
    """The ``boards/`` folder (start-up code, linker scripts); MCUTORCH_BOARDS_DIR overrides.

    >>> (boards_dir() / "common" / "startup.c").is_file()
    True
    """
    env = os.environ.get("MCUTORCH_BOARDS_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "boards"


COMMON_SOURCES = ("startup.c", "semihost.c", "counter.c")


def _fmt_size(n: int) -> str:
    if n % MiB == 0:
        return f"{n // MiB}M"
    if n % KiB == 0:
        return f"{n // KiB}K"
    return str(n)


def _region_sections(r: Region) -> str:
    # Load address = run address (AT(ADDR(...))): the ELF loader puts .mt_data in place and
    # zero-fills .mt_bss in its own region rather than after the code image.
    return (
        f"    .mt_data.{r.name} : AT(ADDR(.mt_data.{r.name})) ALIGN(16)\n"
        f"    {{\n        *(.mt_data.{r.name} .mt_data.{r.name}.*)\n    }} > {r.name}\n\n"
        f"    .mt_bss.{r.name} (NOLOAD) : AT(ADDR(.mt_bss.{r.name})) ALIGN(16)\n"
        f"    {{\n        *(.mt_bss.{r.name} .mt_bss.{r.name}.*)\n    }} > {r.name}\n"
    )


def linker_script(board: str | Board) -> str:
    """The GNU ld script of `board`, from ``boards/common/link.ld.in`` and `BOARDS`.

    >>> "ORIGIN = 0x38000000" in linker_script("mps2-an505")
    True
    """
    b = get_board(board)
    template = (boards_dir() / "common" / "link.ld.in").read_text()
    # Drop the template's own header comment; the generated file gets its own.
    template = template[template.index("*/") + 2 :].lstrip("\n")
    c = b.code
    mem = [f"    {c.name} (rx) : ORIGIN = 0x{c.base:08X}, LENGTH = {_fmt_size(c.size)}"]
    for r in b.regions:
        role = "rank 0: .data .bss stack" if r.rank == 0 else f"rank {r.rank}"
        npu = ", NPU" if r.npu else ""
        mem.append(
            f"    {r.name} (rwx) : ORIGIN = 0x{r.base:08X}, LENGTH = {_fmt_size(r.size)}"
            f"  /* {role}{npu} */"
        )
    header = (
        f"/* link.ld - {b.name} ({b.cpu}) memory map for mcutorch firmware.\n"
        f" * Generated by `python -m mcutorch.boards` from mcutorch.boards.BOARDS and\n"
        f" * boards/common/link.ld.in: edit those, not this file. */\n"
    )
    text = (
        template.replace("@MEMORY@", "\n".join(mem))
        .replace("@CODE@", b.code.name)
        .replace("@RAM@", b.ram.name)
        .replace("@RAM_SECTIONS@", _region_sections(b.ram).rstrip("\n"))
        .replace(
            "@REGION_SECTIONS@",
            "\n".join(_region_sections(r) for r in b.regions[1:]).rstrip("\n"),
        )
    )
    return header + text


def linker_script_path(board: str | Board) -> Path:
    """``boards/<board>/link.ld``, the script `build_elf` links with.

    >>> linker_script_path("mps3-an547").parts[-2:]
    ('mps3-an547', 'link.ld')
    """
    return boards_dir() / get_board(board).name / "link.ld"


def write_linker_scripts() -> list[Path]:
    """(Re)generate ``boards/<board>/link.ld`` for every board; returns the paths.

    >>> [p.parent.name for p in write_linker_scripts()]                 # doctest: +SKIP
    ['mps2-an385', 'mps2-an386', 'mps2-an500', 'mps2-an505', 'mps3-an547']
    """
    paths = []
    for b in BOARDS.values():
        p = linker_script_path(b)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(linker_script(b))
        paths.append(p)
    return paths


# ---------------------------------------------------------------------------------------
# Building


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ToolchainError(
            f"{name} not found on PATH; on Debian/Ubuntu install it with: "
            f"apt-get install -y --no-install-recommends {APT_PACKAGES}"
        )
    return path


def build_elf(
    sources: Sequence[str | Path],
    include_dirs: Sequence[str | Path],
    board: str | Board,
    target: str | Target,
    out: str | Path,
    defines: Mapping[str, object] | None = None,
    opt: str = "-Os",
    extra_flags: Sequence[str] = (),
) -> Path:
    """Compile and link C sources into firmware for `board`; returns the ELF path.

    Uses the target's gcc flags, C99, ``-ffunction-sections -fdata-sections
    -Wl,--gc-sections``, newlib-nano's libc for string functions, and links
    ``boards/common`` (start-up, semihosting, counter; include ``board.h``) with
    ``boards/<board>/link.ld``. A map file is written next to the ELF. Raises
    `TargetError` if the board cannot run the target, `ToolchainError` if gcc is missing
    or the build fails (with the compiler output).

    >>> elf = build_elf(["hello.c"], [], "mps2-an385", "cortex-m0plus", "build/hello.elf",
    ...                 defines={"N": 16})                           # doctest: +SKIP
    """
    b = get_board(board)
    t = parse_target(target)
    ok, reason = can_run(b, t)
    if not ok:
        raise TargetError(reason)
    gcc = _tool(GCC)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    common = boards_dir() / "common"
    cmd = [gcc, *t.gcc_flags, "-std=c99", opt, "-g", "-Wall", "-Wextra",
           "-ffunction-sections", "-fdata-sections", f"-I{common}"]  # fmt: skip
    cmd += [f"-I{Path(d)}" for d in include_dirs]
    for key, value in (defines or {}).items():
        cmd.append(f"-D{key}" if value is None else f"-D{key}={value}")
    cmd += list(extra_flags)
    cmd += [str(Path(s)) for s in sources]
    cmd += [str(common / s) for s in COMMON_SOURCES]
    cmd += ["-nostartfiles", "--specs=nano.specs", f"-T{linker_script_path(b)}",
            "-Wl,--gc-sections", f"-Wl,-Map={out.with_suffix('.map')}",
            "-o", str(out)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ToolchainError(
            f"building {out.name} for {b.name} ({t.name}) failed:\n"
            f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}"
        )
    return out


# ---------------------------------------------------------------------------------------
# Running

_TICKS_RE = re.compile(r"^mt_ticks(?: (\S+))? (\d+)\s*$", re.MULTILINE)
_FAULT_RE = re.compile(r"^mt_fault: (.*)$", re.MULTILINE)


@dataclass(frozen=True)
class RunResult:
    """What a QEMU run produced.

    exit_code: the firmware's exit status (main's return value; 240 + exception number
    after a fault, see `FAULT_EXIT_CODES`); None if the run timed out; negative if QEMU
    died on a signal (-6 after a core lockup, a fault inside a fault handler).
    stdout: the semihosting console. stderr: QEMU's own messages.
    instructions: from the last unlabelled ``mt_ticks <n>`` line, else the last labelled
    one, else None; ticks: the same line's raw SysTick ticks. counts: label ->
    instructions of every ``mt_ticks`` line (unlabelled: "").
    fault: the ``mt_fault:`` line without its prefix plus the faulting function and line
    when the ELF has debug info, or QEMU's lockup message; None without a fault.
    files: when run in a temporary directory, the files the firmware created or changed.
    """

    exit_code: int | None
    stdout: str
    instructions: int | None
    ticks: int | None = None
    counts: dict[str, int] = field(default_factory=dict)
    fault: str | None = None
    timed_out: bool = False
    stderr: str = ""
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.fault is None and not self.timed_out

    def check(self) -> RunResult:
        """Return self if the run exited 0, else raise `ToolchainError` with the details."""
        if self.ok:
            return self
        if self.timed_out:
            what = "timed out (QEMU killed)"
        elif self.fault:
            what = f"faulted: {self.fault}"
        else:
            what = f"exited with status {self.exit_code}"
        raise ToolchainError(f"firmware {what}\n--- console ---\n{self.stdout}{self.stderr}")


def qemu_command(
    elf: str | Path, board: str | Board, args: Sequence[str] = ()
) -> list[str]:
    """The qemu-system-arm command line `run_elf` uses (semihosting console on stdout).

    >>> qemu_command("a.elf", "mps2-an385")[:4]
    ['qemu-system-arm', '-M', 'mps2-an385', '-nographic']
    """
    b = get_board(board)
    elf = Path(elf).resolve()
    sh = ["enable=on", "target=native", "chardev=mt_console", f"arg={elf.name}"]
    for a in args:
        a = str(a)
        if not a or any(c.isspace() for c in a):
            raise ValueError(f"firmware arguments cannot be empty or contain spaces: {a!r}")
        sh.append("arg=" + a.replace(",", ",,"))
    return [
        QEMU, "-M", b.qemu_machine, "-nographic", "-monitor", "none", "-serial", "null",
        "-icount", "shift=0",
        "-chardev", "stdio,id=mt_console",
        "-semihosting-config", ",".join(sh),
        "-kernel", str(elf),
    ]  # fmt: skip


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file()
    }


def _locate(elf: Path, address: int) -> str | None:
    """``function at file:line`` of a code address, via arm-none-eabi-addr2line."""
    tool = shutil.which(ADDR2LINE)
    if tool is None:
        return None
    proc = subprocess.run(
        [tool, "-f", "-s", "-e", str(elf), f"0x{address:x}"], capture_output=True, text=True
    )
    lines = proc.stdout.split()
    if proc.returncode != 0 or len(lines) < 2 or lines[0] == "??":
        return None
    return f"in {lines[0]} at {lines[1]}"


def run_elf(
    elf: str | Path,
    board: str | Board,
    args: Sequence[str] = (),
    *,
    files: Mapping[str, bytes | str | Path] | None = None,
    cwd: str | Path | None = None,
    timeout: float = 30.0,
    target: str | Target | None = None,
    qemu_args: Sequence[str] = (),
) -> RunResult:
    """Run firmware on an emulated board and collect its console, status and counts.

    `qemu_args` are appended to the QEMU command line (e.g. ``-plugin ...``).

    The firmware sees `args` as argv[1:] (argv[0] is the ELF's file name) and opens host
    files by path relative to the working directory: `cwd`, or a fresh temporary
    directory. `files` (name -> bytes, or a path to copy) are put there first. In a
    temporary directory, every file the firmware creates or changes is returned in
    `RunResult.files`. After `timeout` seconds QEMU is killed and the result has
    ``timed_out=True``. With `target`, `can_run` is checked first (TargetError).

    >>> r = run_elf(elf, "mps2-an385", ["in.bin", "out.bin"],
    ...             files={"in.bin": b"\\x01\\x02"})                   # doctest: +SKIP
    >>> r.exit_code, r.files["out.bin"], r.instructions               # doctest: +SKIP
    (0, b'...', 1234)
    """
    b = get_board(board)
    if target is not None:
        ok, reason = can_run(b, target)
        if not ok:
            raise TargetError(reason)
    elf = Path(elf)
    if not elf.is_file():
        raise FileNotFoundError(f"firmware not found: {elf}")
    cmd = qemu_command(elf, b, args) + list(qemu_args)
    _tool(QEMU)
    with tempfile.TemporaryDirectory(prefix="mcutorch-run-") as tmp:
        workdir = Path(cwd) if cwd is not None else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for name, content in (files or {}).items():
            dest = workdir / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, (bytes, bytearray, memoryview)):
                dest.write_bytes(bytes(content))
            else:
                shutil.copyfile(content, dest)
        before = _snapshot(workdir) if cwd is None else {}
        timed_out = False
        try:
            proc = subprocess.run(
                cmd, cwd=workdir, stdin=subprocess.DEVNULL, capture_output=True,
                timeout=timeout,
            )  # fmt: skip
            stdout_b, stderr_b, code = proc.stdout, proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as e:  # subprocess.run has killed QEMU
            timed_out = True
            stdout_b, stderr_b, code = e.stdout or b"", e.stderr or b"", None
        out_files: dict[str, bytes] = {}
        if cwd is None:
            for name, stamp in _snapshot(workdir).items():
                if before.get(name) != stamp:
                    out_files[name] = (workdir / name).read_bytes()
    stdout = stdout_b.decode("utf-8", "replace")
    stderr = stderr_b.decode("utf-8", "replace")
    if code is not None and code < 0:  # QEMU itself died on a signal (e.g. core lockup)
        stderr += f"\nqemu-system-arm killed by signal {-code}"
    ipt = b.instructions_per_tick
    counts: dict[str, int] = {}
    last_any = last_unlabelled = None
    for m in _TICKS_RE.finditer(stdout):
        label, n = m.group(1) or "", int(m.group(2))
        counts[label] = round(n * ipt)
        last_any = n
        if label == "":
            last_unlabelled = n
    ticks = last_unlabelled if last_unlabelled is not None else last_any
    fault_m = list(_FAULT_RE.finditer(stdout))
    fault = fault_m[-1].group(1).strip() if fault_m else None
    if fault is not None:
        pc = re.search(r"\bpc=(0x[0-9a-fA-F]+)", fault)
        where = _locate(elf, int(pc.group(1), 16)) if pc else None
        if where:
            fault += f" ({where})"
    else:
        # A fault while handling a fault locks the core up; QEMU then aborts.
        fatal = re.search(r"^qemu: fatal: (.*)$", stderr, re.MULTILINE)
        if fatal:
            fault = fatal.group(1).strip()
    return RunResult(
        exit_code=code,
        stdout=stdout,
        instructions=None if ticks is None else round(ticks * ipt),
        ticks=ticks,
        counts=counts,
        fault=fault,
        timed_out=timed_out,
        stderr=stderr,
        files=out_files,
    )


# ---------------------------------------------------------------------------------------
# Sizes


class SymbolSize(NamedTuple):
    """One symbol of an ELF: nm type letter (T/t code, R/r constants, D/d data, B/b bss)."""

    name: str
    size: int
    kind: str
    address: int


def size_of(elf: str | Path) -> dict:
    """Code and data sizes of firmware, in bytes, and every sized symbol.

    Returns ``{"text", "data", "bss", "stack", "flash", "sections", "symbols"}``: text =
    code + constants (+ vectors, exidx), data = initialised RAM (its initial values also
    take flash), bss = zeroed RAM, stack = the reserved stack, flash = text + data,
    sections = ``arm-none-eabi-size -A`` per section, symbols = `SymbolSize` list from
    ``arm-none-eabi-nm --size-sort -S``, largest last.

    >>> s = size_of("build/hello.elf")                                  # doctest: +SKIP
    >>> s["text"], s["symbols"][-1].name                                # doctest: +SKIP
    (1204, 'main')
    """
    elf = Path(elf)
    proc = subprocess.run([_tool(SIZE), "-A", "-d", str(elf)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ToolchainError(f"{SIZE} failed on {elf}: {proc.stderr}")
    sections: dict[str, int] = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit() and parts[0].startswith("."):
            sections[parts[0]] = int(parts[1])
    text = sections.get(".text", 0) + sections.get(".ARM.exidx", 0)
    data = sections.get(".data", 0)
    bss = sections.get(".bss", 0)
    proc = subprocess.run(
        [_tool(NM), "--size-sort", "-S", str(elf)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise ToolchainError(f"{NM} failed on {elf}: {proc.stderr}")
    symbols = []
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4:
            addr, size, kind, name = parts
            symbols.append(SymbolSize(name, int(size, 16), kind, int(addr, 16)))
    return {
        "text": text,
        "data": data,
        "bss": bss,
        "stack": sections.get(".stack", 0),
        "flash": text + data,
        "sections": sections,
        "symbols": symbols,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mcutorch.boards``: regenerate boards/<board>/link.ld from `BOARDS`."""
    for p in write_linker_scripts():
        print(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
