"""Cheap guards for the C tree: one clang-format style (.clang-format), a line budget for the
runtime core, at most KERNEL_FILE_MAX lines per kernel file (STYLE.md: "a kernel file <= 300
lines"), and every kernel header seen by the firmware cache key and by export-c. No compiler or
board needed, only Debian's clang-format (`make toolchain`)."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "runtime"
# Written by tools, not by hand: neither formatted nor counted.
GENERATED = {
    RUNTIME / "include" / "mt_program.h",  # python -m mcutorch.program --c-header (make header)
    RUNTIME / "kernels" / "mt_kernels.h",  # the kernel table's declarations
    RUNTIME / "kernels" / "mt_kernels_all.c",  # the table of every kernel
}
FORMATTED = ("runtime", "boards/common", "tests/c", "tests/target/programs", "tools/qemu_plugin")
CLANG_FORMAT_MAJOR = 14  # Debian 12's clang-format; other majors lay some lines out differently

# Lines of the runtime core (runtime/src, runtime/include without mt_program.h, runtime/port):
# the loader, validator, interpreter and port hooks a newcomer reads first. Raise it only in a
# commit that says why the core had to grow.
# 1,412 with the load-time MAC accumulator bound (mt_check_mac); 1,428 with gather's constant
# indices checked at load (mt_check_gather); 1,442 with matmul's accumulator bound of two
# activations, K * 255 * 255, checked at load (mt_check_matmul); 1,550 with persistent tensors
# (format 1.5: PERSISTENT records validated at load, mt_bind_persistent / mt_reset, the
# persistent storage in views and in the overlap rule); 1,551 with the bind-time kernel args
# rebuilt when the persistent buffer is bound; 1,552 with the overlap rule's `residual` kind
# (an output may be exactly the last input's bytes: conv2d_add's skip); +40
# (1,592) with format 1.5's per-op activation dtype rule (mt_check_dtypes), int64 constants
# checked within int48 and the int16 MAC bound (int64 bias, 16-bit multiplier, int48 accumulator).
# +6 (1,598) with format 1.6's int32 token ids (an int32 arena tensor has scale 0 and zero point
# 0, checked at load) and the run-time status MT_STATUS_BAD_INPUT (an id outside the table).
# +85 (1,685 with the above and the merge; 1,677 on its own) with format 1.6's ring windows:
# the loader's checks (TENSOR_FLAG_RING, a block's
# extent in the persistent checks, the initial position, ring_write's frame, OP_FLAG_RING),
# mt_ring_views (an op's views follow the ring's position, refusing a corrupt one) and the
# block in mt_persistent_size / mt_reset.
# +33 (1,718) with format 1.8's lstm / gru records checked at load (mt_check_recurrent: x, weight,
# states and y shapes, the steps inside T, constant tables and bias_n of x's dtype, the gate
# scratch), the same checks as validate.py's _check_recurrent; the kernels are not core.
# +67 (1,752 alone; 1,785 with lstm / gru) with format 1.8's alias kind `overlap`:
# mt_overlap_delta (the least bytes a depthwise or 1x1 conv's output must start below its input,
# from the shapes and attributes, via mt_lead's piecewise-linear maximum, its candidates clamped
# so no product leaves int64) and its case in mt_check_alias.
# +6 (1,691 alone; 1,791 with the two above): mt_check_matmul bounds an int16 matmul too
# (K * 2^30 within int48, zero points 0, a 16-bit multiplier; format 1.8, a16w8 attention);
# +4 (1,795): mt_lead's quotients in 32-bit divisions (no 64-bit division routine in the loader).
# +168 (1,963): lifetimes across ops checked at load (mt_check_lifetimes: the run orders with and
# without the NPU, live ranges 16 arena tensors at a time with no memory of its own, views, the
# handover op, op and Vela scratch areas), the same rule as validate.py's check_lifetimes.
# +205 (2,162 with 1,957 before): the ahead-of-time binding: mt_bind_static.c (107: the I/O and
# every named operand view and every args entry against what mt_bind_state builds, arenas /
# persistent buffer / tables apart, the ring ops' RAM views filled), its API in mcutorch.h
# (28), the helpers shared in mt_internal.h (18: mt_ring_slots inline there, from
# mt_validate.c, -8 there, +6 its rule that a delegate's fast scratch shares no byte with its
# scratch); the interpreter's fast path in mt_invoke.c (50) and mt_kernel.h (4): each op's
# dispatch kind built at bind time, the plain op's kernel called inline, one ring view per
# ring input, the cached runnable flag.
CORE_LINE_BUDGET = 2162
KERNEL_FILE_MAX = 300  # lines per file under runtime/kernels, implementation headers included


def c_files(*dirs: str) -> list[Path]:
    """The hand-written .c and .h files under `dirs` (relative to the repository root)."""
    files = {p for d in dirs for ext in ("*.c", "*.h") for p in (ROOT / d).rglob(ext)}
    return sorted(files - GENERATED)


def core_files() -> list[Path]:
    return sorted({*c_files("runtime/src", "runtime/port"),
                   *(p for p in (RUNTIME / "include").glob("*.h") if p not in GENERATED)})


def lines(p: Path) -> int:
    return p.read_bytes().count(b"\n")  # what `wc -l` counts


def table(files) -> str:
    return "\n".join(f"{lines(p):6d} {p.relative_to(ROOT)}" for p in files)


def test_c_sources_are_clang_formatted():
    tool = shutil.which("clang-format")
    if tool is None:
        pytest.fail("clang-format not found: run `make toolchain` (Debian package clang-format)")
    version = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
    major = re.search(r"version (\d+)", version)
    if major is None or int(major.group(1)) != CLANG_FORMAT_MAJOR:
        pytest.fail(f"the C style is checked with clang-format {CLANG_FORMAT_MAJOR} (Debian 12's; "
                    f"other majors lay some lines out differently), found: {version.strip()}; "
                    "run `make toolchain`")
    files = c_files(*FORMATTED)
    assert len(files) > 40, files
    r = subprocess.run([tool, "--dry-run", "--Werror", *map(str, files)], cwd=ROOT,
                       capture_output=True, text=True)
    bad = sorted({Path(m).resolve().relative_to(ROOT).as_posix()
                  for m in re.findall(r"^(.+?):\d+:\d+: error", r.stderr, re.M)})
    assert r.returncode == 0 and not bad, (
        f"{len(bad)} C files differ from .clang-format:\n  " + "\n  ".join(bad) +
        f"\nfix them with:\n  clang-format -i {' '.join(bad)}\n" + r.stderr[:2000])


def test_core_line_budget():
    files = core_files()
    total = sum(map(lines, files))
    assert total <= CORE_LINE_BUDGET, (
        f"the C runtime core has {total} lines, over its budget of {CORE_LINE_BUDGET} "
        f"(tests/py/test_c_guards.py; raise it only in a commit that says why):\n{table(files)}")


def test_kernel_files_fit_300_lines():
    files = c_files("runtime/kernels")
    long = [p for p in files if lines(p) > KERNEL_FILE_MAX]
    assert not long, (
        f"kernel files over {KERNEL_FILE_MAX} lines (split them into focused headers, e.g. one "
        f"per ISA helper group):\n{table(long)}\nall kernel files:\n{table(files)}")


def test_kernel_headers_reach_every_build():
    """Each header under runtime/kernels is in the firmware cache key (firmware.include_files)
    and sits where export-c copies it from: runtime/kernels itself (an include dir) or the folder
    of a kernel source (a family's private headers, copied with the family)."""
    from mcutorch.device import crt, firmware

    headers = sorted((RUNTIME / "kernels").rglob("*.h"))
    keyed = set(firmware.include_files())
    folders = {RUNTIME / "kernels", *(p.parent for p in crt.kernel_sources())}
    missing = [p.relative_to(ROOT) for p in headers if p not in keyed or p.parent not in folders]
    assert not missing, f"kernel headers no firmware build or export-c would see: {missing}"
