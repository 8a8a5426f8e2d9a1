"""Exact instruction counts from the QEMU TCG plugin (mcutorch.device.exact, tools/qemu_plugin).

A region of known length between two marker functions counts exactly on every board, with
MMIO loads and interrupts inside it; two runs count the same; on a compiled model the per-op
counts fit inside mt_invoke's total and agree with the coarse SysTick per-op counts.
Needs arm-none-eabi-gcc, qemu-system-arm (built with plugin support) and a host gcc.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess

import pytest

from mcutorch.device import exact, toolchain
from mcutorch.device.boards import BOARDS
from mcutorch.device.toolchain import build_elf
from mcutorch.errors import ToolchainError

pytestmark = pytest.mark.qemu

if any(shutil.which(t) is None for t in (toolchain.GCC, toolchain.QEMU, exact.OBJDUMP, "gcc")):
    pytest.fail("needs arm-none-eabi-gcc/objdump, qemu-system-arm and gcc: run `make toolchain`",
                pytrace=False)

BUILDS = [("mps2-an385", "cortex-m3"), ("mps2-an385", "cortex-m0plus"),
          ("mps2-an386", "cortex-m4"), ("mps2-an500", "cortex-m7"),
          ("mps2-an505", "cortex-m33"), ("mps3-an547", "cortex-m55")]
IDS = [f"{b}-{t}" for b, t in BUILDS]

# Marker functions and the measured regions in assembly (Thumb-1 encodings: Armv6-M too), so
# the instruction counts are known. Op region = mt_mark_begin's first instruction (included)
# .. mt_mark_end's first instruction (excluded):
#   mt_region(n):    [bx lr] + n * [subs, bne] + [bl mt_mark_end]         = 2n + 2
#   mt_region_io(n): [bx lr] + n * [ldr (SysTick CVR, MMIO), subs, bne] + [bl] = 3n + 2
# Total region = mt_region's entry .. its return site in main:
#   push, mov, bl, [op region], pop                                     = 2n + 7 per call
# Arguments: "N" runs mt_region(N), "iN" mt_region_io(N), "tR" starts SysTick with reload R
# and its interrupt (the handler then runs inside the regions), "s" stops it.
MARKERS_C = r"""
#include "board.h"

__asm__(".syntax unified\n"
        ".thumb\n"
        ".section .text.mt_mark_begin,\"ax\",%progbits\n"
        ".global mt_mark_begin\n.type mt_mark_begin, %function\n.thumb_func\n"
        "mt_mark_begin:\n\tbx lr\n"
        ".size mt_mark_begin, .-mt_mark_begin\n"
        ".section .text.mt_mark_end,\"ax\",%progbits\n"
        ".global mt_mark_end\n.type mt_mark_end, %function\n.thumb_func\n"
        "mt_mark_end:\n\tbx lr\n"
        ".size mt_mark_end, .-mt_mark_end\n"
        ".section .text.mt_region,\"ax\",%progbits\n"
        ".global mt_region\n.type mt_region, %function\n.thumb_func\n"
        "mt_region:\n"
        "\tpush {r4, lr}\n"
        "\tmov r4, r0\n"
        "\tbl mt_mark_begin\n"
        "1:\n\tsubs r4, r4, #1\n"
        "\tbne 1b\n"
        "\tbl mt_mark_end\n"
        "\tpop {r4, pc}\n"
        ".size mt_region, .-mt_region\n"
        ".section .text.mt_region_io,\"ax\",%progbits\n"
        ".global mt_region_io\n.type mt_region_io, %function\n.thumb_func\n"
        "mt_region_io:\n"
        "\tpush {r4, lr}\n"
        "\tmov r4, r0\n"
        "\tldr r2, =0xE000E018\n"
        "\tbl mt_mark_begin\n"
        "2:\n\tldr r1, [r2]\n"
        "\tsubs r4, r4, #1\n"
        "\tbne 2b\n"
        "\tbl mt_mark_end\n"
        "\tpop {r4, pc}\n"
        ".ltorg\n"
        ".size mt_region_io, .-mt_region_io\n"
        ".text\n");

void mt_region(uint32_t n);
void mt_region_io(uint32_t n);

#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)

static uint32_t parse_u32(const char *s)
{
    uint32_t v = 0;
    while (*s >= '0' && *s <= '9') {
        v = v * 10u + (uint32_t)(*s++ - '0');
    }
    return v;
}

int main(int argc, char **argv)
{
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] == 'i') {
            mt_region_io(parse_u32(a + 1));
        } else if (a[0] == 't') {
            SYST_CSR = 0;
            SYST_RVR = parse_u32(a + 1);
            SYST_CVR = 0;
            SYST_CSR = 7; /* processor clock, interrupt, enable */
        } else if (a[0] == 's') {
            SYST_CSR = 0;
        } else {
            mt_region(parse_u32(a));
        }
    }
    SYST_CSR = 0;
    mt_sh_write0("done\n");
    return 0;
}
"""

MARKS = dict(begin_symbol="mt_mark_begin", end_symbol="mt_mark_end", total_symbol="mt_region")


@pytest.fixture(scope="module")
def markers_elf(tmp_path_factory):
    root = tmp_path_factory.mktemp("exact")
    src = root / "markers.c"
    src.write_text(MARKERS_C)
    cache = {}

    def _build(board, target):
        if (board, target) not in cache:
            cache[board, target] = build_elf([src], [], board, target,
                                             root / f"markers-{board}-{target}.elf")
        return cache[board, target]

    return _build


def test_debian_qemu_has_plugin_support_and_api_version_1():
    help_text = subprocess.run([toolchain.QEMU, "-help"], capture_output=True, text=True).stdout
    assert "-plugin" in help_text
    so = exact.plugin_path()
    assert so.is_file() and so.parent == exact.PLUGIN_BUILD_DIR
    assert exact.plugin_path() == so  # cached
    dyn = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True,
                         text=True).stdout
    assert re.search(r" [BD] qemu_plugin_version$", dyn, re.M)
    assert re.search(r" T qemu_plugin_install$", dyn, re.M)


@pytest.mark.parametrize("board, target", BUILDS, ids=IDS)
def test_known_region_counts_exactly(markers_elf, board, target):
    elf = markers_elf(board, target)
    ns = [1, 7, 1000, 123_457]
    c = exact.exact_counts(elf, board, [*map(str, ns), "i1", "i10", "i4321"], **MARKS)
    assert c["result"].stdout == "done\n"
    assert c["per_op"] == {0: 4, 1: 16, 2: 2002, 3: 246_916, 4: 5, 5: 32, 6: 12_965}
    assert [c["per_op"][k] for k in range(len(ns))] == [2 * n + 2 for n in ns]
    assert c["total"] == sum(2 * n + 7 for n in ns) and c["totals"] == len(ns)
    assert c["unmatched"] == 0
    assert c["all"] > c["total"] + 3 * (1 + 10 + 4321)  # start-up, main, exit: outside


def _handler_instructions(elf) -> int:
    """Instructions of the straight-line SysTick handler (counter.c: mt_wraps++)."""
    text = subprocess.run([exact.OBJDUMP, "-d", str(elf)], capture_output=True, text=True).stdout
    body = re.search(r"<mt_systick_handler>:\n(.*?)\n\n", text, re.S).group(1)
    n = 0
    for line in body.splitlines():
        if ".word" in line:
            continue
        n += 1
        assert not re.search(r"\tb(?:eq|ne|cs|cc|mi|pl|hi|ls|ge|lt|gt|le)?(?:\.[nw])?\t", line)
        if re.search(r"\tbx\tlr", line) or re.search(r"\tpop\t.*pc", line):
            return n
    raise AssertionError(body)


@pytest.mark.parametrize("board, target", BUILDS, ids=IDS)
def test_interrupts_inside_a_region_count_and_runs_are_deterministic(markers_elf, board,
                                                                     target):
    """SysTick fires every 100 ticks inside the regions: its handler's instructions count
    (an exact multiple of the handler's length), MMIO loads count once, and a second run
    gives the very same numbers."""
    elf = markers_elf(board, target)
    args = ["t99", "10000", "i5000", "s", "10000"]
    first = exact.exact_counts(elf, board, args, **MARKS)
    second = exact.exact_counts(elf, board, args, **MARKS)
    strip = lambda c: {k: v for k, v in c.items() if k != "result"}  # noqa: E731
    assert strip(first) == strip(second)
    h = _handler_instructions(elf)
    period = 100 * BOARDS[board].instructions_per_tick  # instructions between interrupts
    for k, base in ((0, 20_002), (1, 15_002)):
        extra = first["per_op"][k] - base
        assert extra > 0 and extra % h == 0, (extra, h)
        assert math.floor(base / period) <= extra // h <= math.ceil((base + extra) / period)
    assert first["per_op"][2] == 20_002  # interrupts stopped
    assert first["unmatched"] == 0


def test_missing_symbol_is_a_toolchain_error(markers_elf):
    elf = markers_elf("mps2-an385", "cortex-m3")
    with pytest.raises(ToolchainError, match="no_such_marker"):
        exact.exact_counts(elf, "mps2-an385", ["1"], begin_symbol="no_such_marker",
                           end_symbol="mt_mark_end", total_symbol=None)


@pytest.fixture(scope="module")
def kws():
    import torch

    import mcutorch
    from mcutorch.models.catalog import example_input

    torch.manual_seed(0)
    m = mcutorch.models.build("kws").eval()
    x = example_input(m)
    cm = mcutorch.compile(mcutorch.quantize(m, (x,), calibration=[x]), (x,),
                          target="cortex-m55", board="mps3-an547")
    return cm.program, cm.quantize_inputs([x])


def test_model_per_op_exact_counts_agree_with_systick(kws):
    """Per-op exact counts (plugin) vs SysTick per-op counts (firmware.run, profile=True).

    Tolerance per op: one SysTick tick (31.25 instructions on mps3-an547) for the quantisation
    of the two SysTick reads, plus 16 instructions for the hooks: the exact region runs from
    mt_port_op_begin's entry to mt_port_op_end's entry, SysTick from the CVR load inside the
    begin hook to the one inside the end hook, so the hook instructions before each load fall
    on different sides (6 vs 9 instructions in this build: -3). Exactness is the plugin's;
    SysTick is the coarse one.
    """
    from mcutorch.device import firmware

    program, inputs = kws
    board = "mps3-an547"
    ipt = BOARDS[board].instructions_per_tick
    systick = firmware.run(program, inputs, board, profile=True)
    p = exact.profile_exact(program, inputs, board)
    again = exact.profile_exact(program, inputs, board)
    assert (p.per_op, p.total, p.all) == (again.per_op, again.total, again.all)

    order = exact.execution_order(program)
    assert sorted(p.per_op) == sorted(order) and len(p.occurrences) == len(order)
    # the plugin does not disturb the guest: the same run's SysTick counts are firmware.run's
    assert p.systick_per_op == systick.per_op and p.systick_total == systick.instructions
    for a, b in zip(p.outputs, systick.outputs):
        assert (a == b).all()

    # Per-op counts sum to the total minus the interpreter's own instructions (operand
    # views, dispatch, the end hook): positive, a few hundred per op, well under 1 %.
    interp = p.total - sum(p.per_op.values())
    assert p.interpreter == interp
    assert 0 < interp <= 1000 * len(order) and interp < 0.01 * p.total
    assert abs(p.total - systick.instructions) <= ipt + 64

    tolerance = ipt + 16
    for i in order:
        assert abs(p.per_op[i] - systick.per_op.get(i, 0)) <= tolerance, (i, p.per_op[i],
                                                                         systick.per_op.get(i))


def test_dispatch_exact_splits_mt_invoke_into_kernel_bodies_and_dispatch(kws):
    """dispatch_exact's kernel regions (kernel entry .. the instruction after the interpreter's
    call) are exactly the kernel bodies: on the same -Os code, each MT_PROFILE hook region
    (profile_exact) is that body plus one constant hook overhead, the same for every op."""
    program, inputs = kws
    board = "mps3-an547"
    d = exact.dispatch_exact(program, inputs, board, opt="-Os")
    p = exact.profile_exact(program, inputs, board)
    assert len(d.per_op) == len(p.occurrences) == len(program.ops) and min(d.per_op) > 0
    assert d.kernels == sum(d.per_op) and d.dispatch == d.total - d.kernels > 0
    overhead = {hooked - body for hooked, body in zip(p.occurrences, d.per_op)}
    assert len(overhead) == 1 and 0 < overhead.pop() < 64, overhead
    fast = exact.dispatch_exact(program, inputs, board)  # the -O3 build the bench counts
    assert len(fast.per_op) == len(program.ops) and 0 < fast.dispatch < fast.total


def test_state_size_is_the_c_runtimes_exactly(kws, monkeypatch):
    """crt.state_size (the firmware's MT_STATE_SIZE) is mt_state_size on a 32-bit board: the
    runner binds a buffer of exactly that many bytes; with 4 bytes less its mt_run_state has
    no buffer to give (NULL: mt_bind_state's bad_argument; a short size is arena_too_small,
    tests/c/test_loader.c). Both sizes are multiples of 4, so they are equal."""
    from mcutorch.device import crt, firmware
    from mcutorch.errors import McutorchError

    program, inputs = kws
    need = crt.state_size(program, 4)
    assert need % 4 == 0
    defines = firmware.firmware_defines
    monkeypatch.setattr(firmware, "firmware_defines",
                        lambda p, b: {**defines(p, b), "MT_STATE_SIZE": need - 4})
    with pytest.raises(McutorchError, match="bad_argument"):
        firmware.run(program, inputs, "mps3-an547")
    monkeypatch.setattr(firmware, "firmware_defines",
                        lambda p, b: {**defines(p, b), "MT_STATE_SIZE": need})
    firmware.run(program, inputs, "mps3-an547")
