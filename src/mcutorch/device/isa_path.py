"""Which ISA path of each C kernel a program's firmware runs: MVE, DSP or C.

A kernel's ISA levels are compile-time branches (`runtime/kernels/mt_kernel_isa.h`): ``MT_MVE``
follows ``__ARM_FEATURE_MVE``, ``MT_DSP`` follows ``__ARM_FEATURE_DSP``, and the firmware's
``-mcpu`` (the program's recorded target) sets both. The Cortex-M backend picks no ISA variant
(`backends.cortex_m.select_kernels`: one default kernel per op holds every path), so the path an
op runs is the highest level its kernel source has a branch for, up to the target's ISA level.
Not every kernel has one (a copy or a transpose is plain C on every core), so this module asks
the compiler instead of a table that could go stale: each kernel's sources are compiled for the
target as they are, then with the target's MVE (and DSP) feature macro undefined; when the
machine code changes, the kernel has a path for that level:

    target mve:  differs without __ARM_FEATURE_MVE -> "MVE", else differs without DSP -> "DSP"
    target dsp:  differs without __ARM_FEATURE_DSP -> "DSP"
    otherwise (or no difference): "C"

A kernel may still take its scalar tail for some shapes (a channel count below one vector); the
path named is the one its branches select on this target. Results are cached by the content of
the sources, headers and flags (build/isa/).

    >>> isa_paths(mcutorch.load("kws.mtp").program)                  # doctest: +SKIP
    {('conv2d', 'default'): 'MVE', ('softmax', 'default'): 'MVE', ...}
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile

from mcutorch.device import paths
from mcutorch.device.crt import include_dirs
from mcutorch.device.export_c import used_kernels
from mcutorch.device.firmware import include_files
from mcutorch.device.kernels import INT16, NO_KERNEL, kernel
from mcutorch.device.toolchain import GCC, find_tool
from mcutorch.errors import ToolchainError
from mcutorch.targets import Target

CACHE = paths.build_dir("isa")
OBJDUMP = "arm-none-eabi-objdump"
# (level, the macros undefined to take it away) in the order they are tried, per target ISA
LADDER = {"mve": (("MVE", ("__ARM_FEATURE_MVE",)),
                  ("DSP", ("__ARM_FEATURE_MVE", "__ARM_FEATURE_DSP"))),
          "dsp": (("DSP", ("__ARM_FEATURE_DSP",)),)}


def _code(sources, target: Target, undefine=()) -> str:
    """The disassembly (with relocations) of `sources` built like the firmware's kernels."""
    cmd = [find_tool(GCC), *target.gcc_flags, "-std=c99", "-Os", "-ffunction-sections",
           "-fdata-sections", *(f"-I{d}" for d in include_dirs()), *(f"-U{m}" for m in undefine)]
    text = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, src in enumerate(sources):
            obj = f"{tmp}/{i}.o"
            proc = subprocess.run([*cmd, "-c", str(src), "-o", obj], capture_output=True,
                                  text=True)
            if proc.returncode != 0:
                raise ToolchainError(f"ISA path: compiling {src} for {target.name} failed:\n"
                                     f"{proc.stderr}")
            dump = subprocess.run([find_tool(OBJDUMP), "-d", "-r", obj], capture_output=True,
                                  text=True)
            if dump.returncode != 0:
                raise ToolchainError(f"{OBJDUMP} failed on {src}: {dump.stderr}")
            text.append(dump.stdout.split("\n", 2)[-1])  # without the file name line
    return "\n".join(text)


def kernel_isa_path(op: str, variant: str, target: Target) -> str:
    """"MVE", "DSP" or "C": the ISA path kernel (op, variant) runs on `target` (cached)."""
    sources = kernel(op, variant).sources
    key = hashlib.sha256(repr((target.gcc_flags, [p.read_bytes() for p in sources],
                               [p.read_bytes() for p in include_files()])).encode())
    cached = CACHE / f"{op}-{variant}-{key.hexdigest()[:16]}.json"
    if cached.is_file():
        return json.loads(cached.read_text())["path"]
    path = "C"
    ladder = LADDER.get(target.isa, ())
    if ladder:
        full = _code(sources, target)
        path = next((level for level, undefine in ladder
                     if _code(sources, target, undefine) != full), "C")
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(f".{id(cached)}.tmp")
    tmp.write_text(json.dumps({"op": op, "variant": variant, "target": target.name,
                               "path": path}))
    tmp.replace(cached)
    return path


def isa_paths(program) -> dict[tuple[str, str], str]:
    """(op, variant) -> ISA path for every kernel `program` links, on its recorded target."""
    target = program.target.as_target()
    return {(op, v): kernel_isa_path(op, v, target)
            for op, v in sorted(used_kernels(program)) if op not in NO_KERNEL and v != INT16}
