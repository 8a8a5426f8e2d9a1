"""QEMU runs of firmware: the command line, exit codes, faults, SysTick counts."""

from __future__ import annotations

import os
import re
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from mcutorch.device.boards import Board, get_board, require_can_run
from mcutorch.device.toolchain import ADDR2LINE, QEMU, find_tool
from mcutorch.errors import ToolchainError
from mcutorch.targets import Target

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
    ``timed_out=True``. With `target`, `boards.require_can_run` checks first that the
    board can run it (TargetError).

    >>> r = run_elf(elf, "mps2-an385", ["in.bin", "out.bin"],
    ...             files={"in.bin": b"\\x01\\x02"})                   # doctest: +SKIP
    >>> r.exit_code, r.files["out.bin"], r.instructions               # doctest: +SKIP
    (0, b'...', 1234)
    """
    b = get_board(board) if target is None else require_can_run(board, target)
    elf = Path(elf)
    if not elf.is_file():
        raise FileNotFoundError(f"firmware not found: {elf}")
    cmd = qemu_command(elf, b, args) + list(qemu_args)
    find_tool(QEMU)
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
    return _result(elf, b, code, stdout_b, stderr_b, timed_out, out_files)


def _result(elf: Path, b: Board, code: int | None, stdout_b: bytes, stderr_b: bytes,
            timed_out: bool, out_files: dict[str, bytes]) -> RunResult:
    """A `RunResult` from a run's exit status and output: counts, fault, QEMU's messages."""
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


_EXIT_RE = re.compile(rb"^mt_exit (-?\d+)\r?\n", re.M)  # the whole line: output comes in chunks


def run_uart(elf: str | Path, board: str | Board, *, timeout: float = 30.0,
             target: str | Target | None = None, qemu_args: Sequence[str] = ()) -> RunResult:
    """Run standalone firmware (``-DMT_STANDALONE``: no semihosting) with its UART on stdout.

    QEMU starts without semihosting, so a semihosting call would fault; the firmware ends by
    printing ``mt_exit <status>`` and halting (boards/common/uart.h), which is when QEMU is
    stopped: `RunResult.exit_code` is that status (None when the line never came before
    `timeout`). A fault prints ``mt_fault: ...`` and its ``mt_exit`` the same way.
    `qemu_args` go on QEMU's command line (a counting ``-plugin``: QEMU is then stopped with
    SIGTERM, a clean shutdown, so that the plugin writes its counts).

    >>> r = run_uart("model.elf", "mps3-an547")                        # doctest: +SKIP
    >>> r.exit_code, r.stdout.splitlines()[0]                          # doctest: +SKIP
    (0, 'mt_status 0 ok')
    """
    b = get_board(board) if target is None else require_can_run(board, target)
    elf = Path(elf)
    if not elf.is_file():
        raise FileNotFoundError(f"firmware not found: {elf}")
    cmd = [find_tool(QEMU), "-M", b.qemu_machine, "-nographic", "-monitor", "none",
           "-serial", "stdio", "-icount", "shift=0", *qemu_args, "-kernel", str(elf.resolve())]
    out, code = b"", None
    with subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as proc:
        deadline = time.monotonic() + timeout
        while code is None:
            left = deadline - time.monotonic()
            ready = select.select([proc.stdout], [], [], max(left, 0))[0] if left > 0 else []
            chunk = os.read(proc.stdout.fileno(), 65536) if ready else b""
            if not chunk:  # timed out, or QEMU ended (a lockup)
                break
            out += chunk
            m = _EXIT_RE.search(out)
            code = int(m.group(1)) if m else None
        timed_out = code is None and proc.poll() is None
        if qemu_args and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        proc.kill()
        err = proc.stderr.read()
        status = proc.wait()
        if code is None and not timed_out:
            code = status  # QEMU ended by itself (negative: killed by a signal)
    return _result(elf, b, code, out.replace(b"\r\n", b"\n"), err, timed_out, {})
