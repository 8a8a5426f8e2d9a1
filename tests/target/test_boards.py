"""Firmware on every emulated board: build, semihosting file I/O, exit status, faults, counts.

Needs arm-none-eabi-gcc (with newlib) and qemu-system-arm. Each QEMU run takes well under a
second; builds dominate (~0.3 s each).
"""

import random
import shutil
import time
import zlib
from pathlib import Path

import pytest

from mcutorch.device import toolchain
from mcutorch.device.boards import BOARDS, can_run
from mcutorch.device.toolchain import build_elf, size_of
from mcutorch.device.qemu import run_elf
from mcutorch.errors import TargetError, ToolchainError

pytestmark = pytest.mark.qemu

if shutil.which(toolchain.GCC) is None or shutil.which(toolchain.QEMU) is None:
    pytest.fail(f"needs {toolchain.GCC} and {toolchain.QEMU}: run `make toolchain`", pytrace=False)

PROGRAMS = Path(__file__).parent / "programs"

# (board, target): every board with its own core, plus the builds other boards stand in for.
BUILDS = [(name, b.cpu) for name, b in BOARDS.items()] + [
    ("mps2-an385", "cortex-m0plus"),  # Armv6-M on the M3 board, unaligned accesses trap
    ("mps2-an505", "cortex-m23"),  # Armv8-M Baseline on the M33 board
    ("mps3-an547", "cortex-m55+nomve"),  # DSP code path on the M55 board
]
IDS = [f"{b}-{t}" for b, t in BUILDS]


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """build(program, board, target, **kw) -> ELF path, cached per module."""
    root = tmp_path_factory.mktemp("fw")
    cache = {}

    def _build(program, board, target, defines=None):
        key = (program, board, target, tuple(sorted((defines or {}).items())))
        if key not in cache:
            out = root / f"{len(cache)}-{Path(program).stem}-{board}-{target}.elf"
            cache[key] = build_elf([PROGRAMS / program], [], board, target, out, defines)
        return cache[key]

    return _build


def expected_checksum_output(data: bytes) -> bytes:
    body = bytes(b ^ ((i * 131 + 7) & 0xFF) for i, b in enumerate(data))
    s = sum(data)
    return body + b"".join(v.to_bytes(4, "little") for v in (zlib.crc32(data), s, s // 2))


@pytest.mark.parametrize("board, target", BUILDS, ids=IDS)
def test_checksum_file_io_and_exit_status(build, board, target):
    i = BUILDS.index((board, target))
    status = 0 if i == 0 else 40 + i  # 0 once, a distinct non-zero status elsewhere
    data = random.Random(i).randbytes(3001)  # not a multiple of 4 or 16: exercises tails
    elf = build("checksum.c", board, target)
    t0 = time.monotonic()
    r = run_elf(elf, board, ["in,1.bin", "out.bin", str(status)], files={"in,1.bin": data},
                timeout=20)  # fmt: skip
    assert time.monotonic() - t0 < 5
    assert r.exit_code == status, r.stdout + r.stderr
    assert r.fault is None and not r.timed_out
    assert r.files["out.bin"] == expected_checksum_output(data)
    assert "in,1.bin" not in r.files  # inputs the firmware did not touch are not returned
    assert "checksum: 3001 bytes" in r.stdout
    assert r.instructions is not None and 10_000 < r.instructions < 1_000_000
    assert r.ok == (status == 0)


def test_run_in_a_given_directory(build, tmp_path):
    elf = build("checksum.c", "mps2-an385", "cortex-m3")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "in.bin").write_bytes(b"abc")
    r = run_elf(elf, "mps2-an385", ["sub/in.bin", "sub/out.bin", "0"], cwd=tmp_path)
    assert r.check() is r and r.files == {}
    assert (tmp_path / "sub" / "out.bin").read_bytes() == expected_checksum_output(b"abc")


def test_missing_input_file_is_reported(build):
    r = run_elf(build("checksum.c", "mps2-an385", "cortex-m3"), "mps2-an385",
                ["nope.bin", "out.bin", "0"])  # fmt: skip
    assert r.exit_code == 4 and "cannot open input" in r.stdout
    with pytest.raises(ToolchainError, match="exited with status 4"):
        r.check()


@pytest.mark.parametrize(
    "board, target, faults",
    [
        ("mps2-an385", "cortex-m0plus", True),
        ("mps2-an505", "cortex-m23", True),
        ("mps2-an385", "cortex-m3", False),
        ("mps3-an547", "cortex-m55", False),
    ],
)
def test_unaligned_load(build, board, target, faults):
    """Baseline builds trap a word load at an odd address (reported, no hang); others don't."""
    t0 = time.monotonic()
    r = run_elf(build("unaligned.c", board, target), board, timeout=10)
    assert not r.timed_out and time.monotonic() - t0 < 5
    assert "unaligned: loading" in r.stdout
    if faults:
        assert r.exit_code == 243, r.stdout + r.stderr
        assert r.fault.startswith("HardFault pc=0x"), r.fault
        assert "in main at unaligned.c" in r.fault  # located with addr2line
        assert "no fault" not in r.stdout
        with pytest.raises(ToolchainError, match="faulted: HardFault"):
            r.check()
    else:
        assert r.exit_code == 0 and r.fault is None
        assert "no fault, value 0x05040302" in r.stdout


def test_mve_program_refused_on_the_m33_board(build, tmp_path):
    ok, reason = can_run("mps2-an505", "cortex-m55")
    assert not ok and "MVE" in reason
    with pytest.raises(TargetError, match="MVE"):
        build_elf([PROGRAMS / "checksum.c"], [], "mps2-an505", "cortex-m55", tmp_path / "x.elf")
    elf = build("checksum.c", "mps3-an547", "cortex-m55")
    with pytest.raises(TargetError, match="MVE"):
        run_elf(elf, "mps2-an505", target="cortex-m55")


N_LOOP = 1_000_000  # 2 M instructions: ~0.05 s of QEMU


@pytest.mark.parametrize("board", list(BOARDS))
@pytest.mark.parametrize("reload", [None, 0xFFF], ids=["reload-max", "reload-4096"])
def test_instruction_count_of_a_known_loop(build, board, reload):
    """SysTick ticks x Board.instructions_per_tick must give the loop's 2*N instructions.

    Under -icount shift=0 an instruction is exactly 1 ns of virtual time, so the only
    errors are (a) the counter's own calls inside the measured region, a few dozen
    instructions (the "empty" region measures them: 0 ticks here), (b) quantisation to whole
    ticks (31.25-50 instructions), and (c) with a 4096-tick reload, the ~10 instructions of
    each SysTick interrupt that extends the counter (~12 wraps here). Hence the tolerance of
    2 ticks + 64 instructions + 16 per wrap: 0.01 % of the count. A wrong factor (e.g. 40
    vs 50 instructions per tick) is off by 20 % or more.
    """
    b = BOARDS[board]
    defines = {"MT_COUNTER_RELOAD": hex(reload)} if reload else None
    r = run_elf(build("count_loop.c", board, b.cpu, defines), board, [str(N_LOOP)])
    assert r.exit_code == 0, r.stdout + r.stderr
    expected = 2 * N_LOOP
    wraps = expected / b.instructions_per_tick / (reload + 1) if reload else 0
    tolerance = 2 * b.instructions_per_tick + 64 + 16 * wraps
    assert abs(r.instructions - expected) <= tolerance, (r.instructions, expected, r.stdout)
    assert r.counts["empty"] <= tolerance
    assert r.ticks == pytest.approx(expected / b.instructions_per_tick, abs=3 + wraps)


def test_armv6m_count_on_the_m3_board(build):
    r = run_elf(build("count_loop.c", "mps2-an385", "cortex-m0plus"), "mps2-an385", ["5000"])
    assert r.exit_code == 0 and abs(r.instructions - 10_000) <= 2 * 40 + 64


def test_timeout_kills_qemu(build):
    elf = build("count_loop.c", "mps2-an385", "cortex-m3")
    t0 = time.monotonic()
    r = run_elf(elf, "mps2-an385", ["4000000000"], timeout=0.5)  # ~2 minutes of work
    assert time.monotonic() - t0 < 5
    assert r.timed_out and r.exit_code is None and not r.ok
    with pytest.raises(ToolchainError, match="timed out"):
        r.check()


def test_compile_error_carries_compiler_output(tmp_path):
    src = tmp_path / "broken.c"
    src.write_text("int main(void) { return undefined_name; }\n")
    with pytest.raises(ToolchainError) as e:
        build_elf([src], [], "mps2-an385", "cortex-m3", tmp_path / "broken.elf")
    assert "undefined_name" in str(e.value) and "broken.c" in str(e.value)


@pytest.mark.parametrize("board", list(BOARDS))
def test_region_sections_land_in_their_regions(board, tmp_path):
    """MT_REGION_BSS/MT_REGION_DATA place data at the table's addresses, and QEMU has memory
    there: every region's first and last word is written and read back."""
    b = BOARDS[board]
    lines = ['#include "board.h"']
    body = []
    for r in b.regions:
        n = r.name
        lines.append(f'static uint32_t bss_{n}[256] MT_REGION_BSS("{n}");')
        lines.append(
            f'static uint32_t data_{n}[4] MT_REGION_DATA("{n}") = {{1, 2, 3, 0x{r.base:x}}};'
        )
        body += [
            f"    if (data_{n}[3] != 0x{r.base:x}u || bss_{n}[0] != 0) return 10 + {r.rank};",
            f"    bss_{n}[255] = 0xA5A5A5A5u;",
            f'    mt_sh_write0("{n} "); mt_print_hex32((uint32_t)bss_{n});',
            f'    mt_sh_write0(" "); mt_print_hex32((uint32_t)data_{n}); mt_sh_write0("\\n");',
            f"    *(volatile uint32_t *)0x{r.base:x}u; "
            f"*(volatile uint32_t *)0x{r.base + r.size - 4:x}u = 1;",
        ]
    src = tmp_path / "regions.c"
    src.write_text("\n".join(lines + ["int main(void)", "{", *body, "    return 0;", "}", ""]))
    elf = build_elf([src], [], board, b.cpu, tmp_path / "regions.elf")
    r = run_elf(elf, board)
    assert r.exit_code == 0, r.stdout + r.stderr
    for region in b.regions:
        line = next(x for x in r.stdout.splitlines() if x.startswith(region.name + " "))
        for addr in (int(x, 16) for x in line.split()[1:]):
            assert region.base <= addr < region.base + region.size, (region, hex(addr))


def test_size_of_startup_and_semihosting(tmp_path):
    src = tmp_path / "empty.c"
    src.write_text("int main(void) { return 0; }\n")
    for board, target in [("mps2-an385", "cortex-m0plus"), ("mps3-an547", "cortex-m55")]:
        s = size_of(build_elf([src], [], board, target, tmp_path / f"{board}.elf"))
        # vector table, reset, fault report, semihosting, counter, memcpy/memset: ~1.5 KB
        assert 800 < s["text"] < 2500, s
        assert s["flash"] == s["text"] + s["data"]
        assert s["stack"] == 0x10000
        names = {x.name: x for x in s["symbols"]}
        assert {"mt_reset_handler", "mt_sh_write0", "mt_fault_report", "main"} <= set(names)
        assert names["mt_vectors"].size == 64
        assert [x.size for x in s["symbols"]] == sorted(x.size for x in s["symbols"])
