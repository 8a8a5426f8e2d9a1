"""Exact guest instruction counts from a QEMU TCG plugin (``tools/qemu_plugin/mt_exact.c``).

SysTick under ``-icount shift=0`` counts instructions to within one tick (31.25 to 50
instructions, see `mcutorch.device.boards`). For exact counts, this module runs the same firmware
with a small TCG plugin that adds 1 to a counter for every executed guest instruction (an inline
add, no callback) and snapshots that counter when a *marker* instruction executes:

* op regions: from the first instruction of ``begin_symbol`` (included) to the first
  instruction of ``end_symbol`` (excluded). In an MT_PROFILE build these are
  ``mt_port_op_begin`` / ``mt_port_op_end`` around every op, so an op's exact count holds
  its kernel, the dispatch, the begin hook's body (its SysTick read) and the call of the end
  hook: the "hook overhead", a few dozen instructions per op.
* the total: from the first instruction of ``total_symbol`` (``mt_invoke``) to the instruction
  after each call of it (its return sites, found with ``arm-none-eabi-objdump``); every
  instruction executed in between counts, interrupt handlers included.

QEMU 7.2's plugin API (version 1; it refuses version 2 and up) cannot read guest registers,
so the op index a hook receives in r0 is out of reach: op regions are numbered by occurrence,
the k-th begin..end pair being ``op<k>`` in execution order. `profile_exact` maps occurrences
to op indices by replaying `mt_invoke`'s order (`execution_order`).

Debian's qemu-system-arm 7.2 is built with plugin support (``-plugin`` in ``-help``, the
``qemu_plugin_*`` API exported by the binary); Debian ships no ``qemu-plugin.h``, so the
plugin declares the stable C ABI itself. It is built with the host gcc into
``build/qemu_plugin/`` (`plugin_path`, cached by content).

    >>> counts = exact_counts("build/fw.elf", "mps3-an547", ["model.mtp", "in0.bin"],
    ...                       cwd="run")                                 # doctest: +SKIP
    >>> counts["total"], counts["per_op"][0]                             # doctest: +SKIP
    (412345, 60321)
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from mcutorch.device import qemu, toolchain
from mcutorch.device.boards import Board, get_board
from mcutorch.device.qemu import RunResult
from mcutorch.device import paths
from mcutorch.errors import McutorchError, ToolchainError

PLUGIN_SOURCE = paths.QEMU_PLUGIN / "mt_exact.c"
PLUGIN_BUILD_DIR = paths.build_dir("qemu_plugin")
PLUGIN_CFLAGS = ("-shared", "-fPIC", "-O2", "-std=gnu11", "-Wall", "-Wextra")
OBJDUMP = "arm-none-eabi-objdump"

# The line format of the plugin's output file (see mt_exact.c).
_EXACT_RE = re.compile(r"^mt_exact (\S+) (\d+)\s*$", re.MULTILINE)

# ---------------------------------------------------------------------------------------
# Building the plugin

def plugin_path(rebuild: bool = False) -> Path:
    """The plugin shared library, built with the host gcc if needed; returns its path.

    The file name carries a hash of the source and flags (``build/qemu_plugin/
    mt_exact-<hash>.so``), so an edited source rebuilds and concurrent builds (pytest -n)
    cannot hand QEMU a half-written file (each builds to a temporary name, then renames).
    Raises `ToolchainError` with the compiler output if the build fails, or if no host C
    compiler is found (``CC`` overrides ``gcc``).

    >>> plugin_path().suffix                                           # doctest: +SKIP
    '.so'
    """
    if not PLUGIN_SOURCE.is_file():
        raise ToolchainError(f"QEMU plugin source missing: {PLUGIN_SOURCE}")
    cc = os.environ.get("CC") or "gcc"
    cc_path = shutil.which(cc)
    if cc_path is None:
        raise ToolchainError(
            f"host C compiler {cc!r} not found (it builds the QEMU plugin "
            f"{PLUGIN_SOURCE.name}); on Debian/Ubuntu: apt-get install -y gcc"
        )
    key = hashlib.sha256(PLUGIN_SOURCE.read_bytes() + repr((cc, PLUGIN_CFLAGS)).encode())
    so = PLUGIN_BUILD_DIR / f"mt_exact-{key.hexdigest()[:12]}.so"
    if so.is_file() and not rebuild:
        return so
    PLUGIN_BUILD_DIR.mkdir(parents=True, exist_ok=True)
    tmp = so.with_name(f".{so.name}.{os.getpid()}.tmp")
    cmd = [cc_path, *PLUGIN_CFLAGS, "-o", str(tmp), str(PLUGIN_SOURCE)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise ToolchainError(
            f"building the QEMU plugin failed:\n$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}"
        )
    os.replace(tmp, so)
    return so

# ---------------------------------------------------------------------------------------
# Symbols of the firmware

def symbols(elf: str | Path) -> dict[str, int]:
    """Name -> address of the ELF's symbols (``arm-none-eabi-nm``), Thumb bit cleared.

    >>> hex(symbols("build/fw.elf")["mt_invoke"])                      # doctest: +SKIP
    '0x2f6'
    """
    proc = subprocess.run([toolchain.find_tool(toolchain.NM), str(elf)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise ToolchainError(f"{toolchain.NM} failed on {elf}: {proc.stderr}")
    out: dict[str, int] = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3:
            out.setdefault(parts[2], int(parts[0], 16) & ~1)
    return out

_CALL_RE = re.compile(
    r"^\s*([0-9a-f]+):\s+((?:[0-9a-f]{4,8} ?)+)\s+(\S+)\s+[0-9a-f]+ <([^>+]+)>", re.MULTILINE
)

def return_sites(elf: str | Path, symbol: str) -> list[int]:
    """Addresses of the instructions right after each direct call (``bl``/``blx``) of
    `symbol`: where it returns to. A tail call (``b``/``b.w`` to it) has no return site in
    the caller, so it is refused (`McutorchError`), as is a symbol nobody calls directly.

    >>> [hex(a) for a in return_sites("build/fw.elf", "mt_invoke")]     # doctest: +SKIP
    ['0x128e']
    """
    tool = shutil.which(OBJDUMP)
    if tool is None:
        raise ToolchainError(f"{OBJDUMP} not found on PATH; install it with: "
                             f"apt-get install -y {toolchain.APT_PACKAGES}")
    proc = subprocess.run([tool, "-d", str(elf)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ToolchainError(f"{OBJDUMP} failed on {elf}: {proc.stderr}")
    sites = []
    for m in _CALL_RE.finditer(proc.stdout):
        addr, raw, mnemonic, target = m.groups()
        if target != symbol:
            continue
        op = mnemonic.split(".")[0]
        size = len(raw.replace(" ", "")) // 2
        if op in ("bl", "blx"):
            sites.append(int(addr, 16) + size)
        elif op.startswith("b") and op not in ("bic", "bics", "bkpt"):
            raise McutorchError(f"{symbol} is tail-called at 0x{addr} ({mnemonic}): no return site")
    if not sites:
        raise McutorchError(f"no direct call of {symbol} in {elf}")
    return sorted(set(sites))

# ---------------------------------------------------------------------------------------
# Running with the plugin

def _plugin_value(value: object) -> str:
    text = str(value)
    return text.replace(",", ",,")  # QEMU's option syntax: a doubled comma is a literal one

def plugin_option(so: Path, out: Path, begin: Sequence[int] = (), end: Sequence[int] = (),
                  tbegin: Sequence[int] = (), tend: Sequence[int] = ()) -> str:
    """The value of QEMU 7.2's ``-plugin`` option: ``<so>,out=<file>,begin=0x..,...``.

    QEMU 7.2 takes ``-plugin [file=]<lib>[,<name>=<value>...]`` and hands every
    ``name=value`` to the plugin as one argv string (the older ``arg=<name>=<value>`` form
    still works in 7.2 but prints a deprecation warning).

    >>> plugin_option(Path("p.so"), Path("o.txt"), begin=[0x10], end=[0x20])
    'file=p.so,out=o.txt,begin=0x10,end=0x20'
    """
    parts = [f"file={_plugin_value(so)}", f"out={_plugin_value(out)}"]
    for name, addrs in (("begin", begin), ("end", end), ("tbegin", tbegin), ("tend", tend)):
        parts += [f"{name}=0x{a & ~1:x}" for a in addrs]
    return ",".join(parts)

def parse_output(text: str) -> dict:
    """The plugin's output file as ``{"per_op": {k: n}, "total": n, "totals": m, "all": n,
    "unmatched": u}`` (k = occurrence number of the op region).

    >>> parse_output("mt_exact op0 12\\nmt_exact op1 7\\nmt_exact total 30\\n")["per_op"]
    {0: 12, 1: 7}
    """
    out: dict = {"per_op": {}}
    for name, value in _EXACT_RE.findall(text):
        if name.startswith("op") and name[2:].isdigit():
            out["per_op"][int(name[2:])] = int(value)
        else:
            out[name] = int(value)
    return out

def exact_counts(
    elf: str | Path,
    board: str | Board,
    args: Sequence[str] = (),
    cwd: str | Path | None = None,
    begin_symbol: str | None = "mt_port_op_begin",
    end_symbol: str | None = "mt_port_op_end",
    total_symbol: str | None = "mt_invoke",
    *,
    files: Mapping[str, bytes] | None = None,
    timeout: float = 120.0,
    check: bool = True,
    regions: tuple[Sequence[int], Sequence[int]] | None = None,
    uart: bool = False,
) -> dict:
    """Run firmware under QEMU with the counting plugin; returns exact instruction counts.

    The run is `qemu.run_elf`'s (`qemu.qemu_command`: ``-icount shift=0``, semihosting
    console, `args` as argv[1:]) plus ``-plugin``. The firmware runs in `cwd` (default: a
    fresh temporary directory), where `files` (name -> bytes) are written first.

    Returns a dict:
      ``per_op``: occurrence k -> instructions of the k-th ``begin_symbol``..``end_symbol``
        region (first instruction of begin_symbol included, first instruction of end_symbol
        excluded; see the module doc); empty when `begin_symbol` is None.
      ``total``: instructions from the entry of `total_symbol` to its return sites, summed
        over its calls (None when `total_symbol` is None); ``totals``: the number of calls.
      ``all``: every instruction of the run (start-up, I/O and exit included).
      ``unmatched``: begin/end markers that did not pair up (0 in a sound run).
      ``result``: the `qemu.RunResult` of the run (console, exit status, SysTick counts).
    `regions` = (begin addresses, end addresses) replaces the two marker symbols. `uart`:
    standalone firmware (no semihosting; `qemu.run_uart`, stopped at its ``mt_exit`` line;
    `args` and `files` unused).

    Raises `ToolchainError` if the firmware fails (`check`), QEMU refuses the plugin, or a
    symbol is missing from the ELF.

    >>> c = exact_counts(elf, "mps2-an385", ["5"], begin_symbol="mark_begin",
    ...                  end_symbol="mark_end", total_symbol=None)        # doctest: +SKIP
    >>> c["per_op"]                                                       # doctest: +SKIP
    {0: 12}
    """
    b = get_board(board)
    elf = Path(elf)
    if not elf.is_file():
        raise FileNotFoundError(f"firmware not found: {elf}")
    syms = symbols(elf)

    def addr(name: str) -> int:
        if name not in syms:
            raise ToolchainError(f"symbol {name} not found in {elf} (built without it?)")
        return syms[name]

    begin = [addr(begin_symbol)] if begin_symbol else []
    end = [addr(end_symbol)] if end_symbol else []
    if regions is not None:  # op regions given as (begin addresses, end addresses)
        begin, end = list(regions[0]), list(regions[1])
    if bool(begin) != bool(end):
        raise ValueError("begin_symbol and end_symbol go together")
    tbegin = [addr(total_symbol)] if total_symbol else []
    tend = return_sites(elf, total_symbol) if total_symbol else []
    so = plugin_path()
    with tempfile.TemporaryDirectory(prefix="mcutorch-exact-") as tmp:
        out_file = Path(tmp) / "exact.txt"
        option = plugin_option(so, out_file, begin, end, tbegin, tend)
        workdir = Path(cwd) if cwd is not None else Path(tmp) / "run"
        workdir.mkdir(parents=True, exist_ok=True)
        for name, content in (files or {}).items():
            dest = workdir / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(bytes(content))
        if uart:
            result = qemu.run_uart(elf, b, timeout=timeout, qemu_args=["-plugin", option])
        else:
            result = qemu.run_elf(elf, b, [str(a) for a in args], cwd=workdir, timeout=timeout,
                                  qemu_args=["-plugin", option])
        if "Could not load plugin" in result.stderr or "mt_exact:" in result.stderr:
            raise ToolchainError(f"QEMU refused the plugin {so.name}:\n{result.stderr}")
        if check:
            result.check()
        if not out_file.is_file():
            raise ToolchainError(
                f"the QEMU plugin wrote no counts (QEMU status {result.exit_code})\n"
                f"{result.stderr[-2000:]}"
            )
        counts = parse_output(out_file.read_text())
    counts.setdefault("total", 0)
    if not total_symbol:
        counts["total"] = None
    counts["result"] = result
    return counts

# ---------------------------------------------------------------------------------------
# Programs: exact per-op profile (mcutorch run --profile --exact)

def execution_order(program) -> list[int]:
    """Op indices in the order `mt_invoke` calls the profiling hooks on a board without an
    NPU: the main ops in order; a ``delegate`` op first gets its own pair (around the NPU hook,
    which reports no NPU), then each op of its CPU version.

    >>> execution_order(program)                                       # doctest: +SKIP
    [0, 1, 2, 3, 4, 5]
    """
    order = []
    for i in program.main_ops():
        order.append(i)
        op = program.ops[i]
        if op.name == "delegate":
            d = program.delegates[int(op.attrs["index"])]
            if d.cpu_ops:
                order += list(range(d.cpu_ops[0], d.cpu_ops[0] + d.cpu_ops[1]))
    return order

@dataclass
class ExactProfile:
    """Exact instruction counts of one inference (`profile_exact`).

    per_op: op index -> instructions from the entry of ``mt_port_op_begin`` to the entry of
    ``mt_port_op_end`` (the kernel plus a few dozen instructions of hook overhead).
    total: instructions of `mt_invoke` (its call to return), hooks included.
    occurrences: the per-op counts in execution order (`execution_order`).
    systick_per_op / systick_total: the SysTick counts the same run printed (coarse: one tick
    is 31.25-50 instructions).
    all: every instruction of the run. outputs: the inference's int8 outputs.
    """

    board: str
    total: int
    per_op: dict[int, int]
    occurrences: list[int]
    systick_per_op: dict[int, int] = field(default_factory=dict)
    systick_total: int | None = None
    all: int = 0
    outputs: list[np.ndarray] = field(default_factory=list)

    @property
    def interpreter(self) -> int:
        """Instructions of mt_invoke outside the op regions (its loop, views, hook tails)."""
        return self.total - sum(self.occurrences)

def profile_exact(program, inputs: Sequence[np.ndarray], board: str,
                  timeout: float = 300.0) -> ExactProfile:
    """Exact per-op instruction counts of one inference of `program` on `board`.

    Builds the MT_PROFILE runner firmware (`mcutorch.device.firmware.build(program, board,
    profile=True)`, cached), runs it once under QEMU with the counting plugin, and maps the
    k-th ``mt_port_op_begin``..``mt_port_op_end`` region to the k-th op of
    `execution_order`. The same run's SysTick counts come along for comparison. This is what
    ``mcutorch run --board B --profile --exact`` reports.

    Raises `TargetError` when the board cannot run the program, `ToolchainError` when the
    build, the run or the plugin fails, and `McutorchError` when the number of op regions
    does not match the program's op order.

    >>> p = profile_exact(program, [x], "mps3-an547")                  # doctest: +SKIP
    >>> p.total, p.per_op[0], p.systick_per_op[0]                      # doctest: +SKIP
    (1234567, 45678, 45688)
    """
    from mcutorch.device import firmware

    elf = firmware.build(program, board, profile=True)  # TargetError if the board cannot run it
    files, args = firmware.runner_files(program, inputs)
    with tempfile.TemporaryDirectory(prefix="mcutorch-exact-run-") as tmp:
        counts = exact_counts(elf, board, args, cwd=tmp, files=files, timeout=timeout)
        outputs = firmware.read_outputs(program, Path(tmp))
    occurrences = [counts["per_op"][k] for k in sorted(counts["per_op"])]
    order = execution_order(program)
    if len(occurrences) != len(order) or counts.get("unmatched", 0) or counts.get("totals") != 1:
        raise McutorchError(
            f"the plugin saw {len(occurrences)} op regions ({counts.get('unmatched')} unmatched "
            f"markers, {counts.get('totals')} mt_invoke calls); the program runs {len(order)} ops"
        )
    per_op: dict[int, int] = {}
    for i, n in zip(order, occurrences):
        per_op[i] = per_op.get(i, 0) + n
    result: RunResult = counts["result"]
    systick = {int(label[2:]): n for label, n in result.counts.items()
               if label.startswith("op") and label[2:].isdigit()}
    return ExactProfile(board=get_board(board).name, total=counts["total"], per_op=per_op,
                        occurrences=occurrences, systick_per_op=systick,
                        systick_total=result.instructions, all=counts.get("all", 0),
                        outputs=outputs)

# ---------------------------------------------------------------------------------------
# Dispatch: mt_invoke's instructions outside the kernel bodies (bench/dispatch.py)

_FUNC_RE = re.compile(r"^[0-9a-f]+ <([^>]+)>:$")
_INDIRECT_RE = re.compile(
    r"^\s*([0-9a-f]+):\s+((?:[0-9a-f]{4,8} ?)+)\s+(blx|bx)\s+(r\d+|ip)\s*$")
INTERPRETER_FUNCTIONS = ("mt_invoke", "mt_run_op", "mt_run_delegate")  # mt_invoke.c's loop


def kernel_return_sites(elf: str | Path) -> list[int]:
    """Where a kernel called through the table returns to: the address after each indirect
    call (``blx rN``) in the functions of `INTERPRETER_FUNCTIONS` (gcc's clones included), or,
    where such a function tail-calls the kernel (``bx rN``), its own return sites."""
    proc = subprocess.run([shutil.which(OBJDUMP) or OBJDUMP, "-d", str(elf)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise ToolchainError(f"{OBJDUMP} failed on {elf}: {proc.stderr}")
    sites, function = [], None
    for line in proc.stdout.splitlines():
        head = _FUNC_RE.match(line)
        if head:
            name = head.group(1)
            function = name if name.split(".")[0] in INTERPRETER_FUNCTIONS else None
        elif function and (m := _INDIRECT_RE.match(line)):
            if m.group(3) == "blx":
                sites.append(int(m.group(1), 16) + len(m.group(2).replace(" ", "")) // 2)
            else:
                sites += return_sites(elf, function)
    if not sites:
        raise McutorchError(f"no indirect kernel call found in mt_invoke's code in {elf}")
    return sorted(set(sites))


@dataclass
class DispatchCount:
    """Exact instructions of one inference, split into kernel bodies and dispatch.

    total: `mt_invoke`, entry to return. kernels: the sum over ops of each kernel's body, from
    the kernel function's first instruction to the interpreter's instruction after the call
    (its callees and return included). dispatch = total - kernels: the interpreter loop,
    operand views, argument set-up and the call sequence. No profiling hooks are linked.
    """

    board: str
    total: int
    kernels: int
    per_op: list[int]

    @property
    def dispatch(self) -> int:
        return self.total - self.kernels

    @property
    def share(self) -> float:
        return self.dispatch / self.total if self.total else 0.0


def dispatch_exact(program, inputs: Sequence[np.ndarray], board: str, opt: str = "-O3",
                   timeout: float = 600.0) -> DispatchCount:
    """Exact kernel and dispatch instructions of one inference of `program` on `board`.

    Builds the plain runner firmware (no MT_PROFILE hooks) and counts with the plugin: total
    from the first instruction of `mt_invoke` to its return sites; op regions from the entry
    of any kernel the model links to the instruction after the interpreter's indirect call
    (`kernel_return_sites`). Raises `McutorchError` when the regions do not pair up one per
    kernel call (a kernel calling another kernel would).

    >>> d = dispatch_exact(program, [x], "mps3-an547")                   # doctest: +SKIP
    >>> d.total, d.kernels, d.dispatch                                    # doctest: +SKIP
    (72206, 71900, 306)
    """
    from mcutorch.device import firmware
    from mcutorch.device.kernels import KERNELS, NO_KERNEL

    elf = firmware.build(program, board, opt=opt)
    syms = symbols(elf)
    entries = sorted({syms[KERNELS[(op.name, op.variant)].function]
                      for op in program.ops if op.name not in NO_KERNEL})
    files, args = firmware.runner_files(program, inputs)
    counts = exact_counts(elf, board, args, files=files, timeout=timeout, begin_symbol=None,
                          end_symbol=None, regions=(entries, kernel_return_sites(elf)))
    per_op = [counts["per_op"][k] for k in sorted(counts["per_op"])]
    calls = sum(1 for i in execution_order(program) if program.ops[i].name not in NO_KERNEL)
    if counts.get("unmatched", 0) or len(per_op) != calls or counts.get("totals") != 1:
        raise McutorchError(f"{len(per_op)} kernel regions ({counts.get('unmatched')} "
                            f"unmatched markers) for {calls} kernel calls")
    return DispatchCount(board=get_board(board).name, total=counts["total"],
                         kernels=sum(per_op), per_op=per_op)

__all__ = ["DispatchCount", "ExactProfile", "dispatch_exact", "exact_counts", "execution_order",
           "kernel_return_sites", "parse_output", "plugin_option", "plugin_path", "profile_exact",
           "return_sites", "symbols"]
