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

UART0 (a CMSDK APB UART, QEMU's ``-serial``) is the console of standalone firmware
(``mcutorch build --standalone``): 0x40004000 on the mps2 boards, 0x50200000 on mps2-an505 and
0x59303000 on mps3-an547 (the Secure aliases: the firmware runs Secure).

`BOARDS` is the one source of truth for these addresses: ``boards/<board>/link.ld`` is
generated from it (`toolchain.linker_script`, ``python -m mcutorch.device.toolchain``) and a test
checks the checked-in files are up to date.

Firmware (`toolchain.py`) = the caller's C sources + ``boards/common`` (start-up code,
semihosting, SysTick counter) linked with the board's script (`build_elf`). `qemu.run_elf` runs
it under ``qemu-system-arm -icount shift=0``: every guest instruction is 1 ns of virtual time, so
the SysTick ticks the firmware prints (``mt_ticks [label] <n>``) convert to instructions by a
fixed factor per board, ``Board.instructions_per_tick`` = 1e9 / SysTick clock (Hz). QEMU
gives instruction counts, not cycles: they rank kernels, they are not a cycle model.

Armv6-M (M0/M0+) builds run on mps2-an385 and Armv8-M Baseline (M23) builds on mps2-an505;
their start-up code sets CCR.UNALIGN_TRP so unaligned accesses fault as on the real cores.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcutorch.errors import TargetError
from mcutorch.plan import Region
from mcutorch.targets import ARCH_CONTAINS, CPUS, FEATURES, Target, parse_target

KiB = 1024
MiB = 1024 * 1024


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
    uart: int = 0x4000_4000  # UART0 (CMSDK APB UART): the console of standalone firmware

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
            uart=0x5020_0000,  # the Secure alias (the firmware runs Secure)
        ),
        Board(
            "mps3-an547", "mps3-an547", "cortex-m55", 32_000_000,
            CodeRegion("ITCM", 0x0000_0000, 512 * KiB),
            (
                _r("DTCM", 512 * KiB, 0, 0x2000_0000),
                _r("SRAM", 4 * MiB, 1, 0x2100_0000, npu=True),
                _r("DDR", 16 * MiB, 2, 0x6000_0000, npu=True),
            ),
            uart=0x5930_3000,  # the Secure alias
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


def require_can_run(board: str | Board, target: str | Target) -> Board:
    """`can_run`, raising `TargetError` with its reason when the board cannot run `target`.

    This is what every refusal goes through (compile with a board, `toolchain.build_elf` and
    so `firmware.build`, `qemu.run_elf` with a target); the decision itself is `can_run`'s.

    >>> require_can_run("mps2-an505", "cortex-m55")
    Traceback (most recent call last):
    ...
    mcutorch.errors.TargetError: mps2-an505 (cortex-m33, armv8-m.main) cannot run cortex-m55 ...
    """
    ok, reason = can_run(board, target)
    if not ok:
        raise TargetError(reason)
    return get_board(board)


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


