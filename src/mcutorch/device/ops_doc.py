"""docs/supported_ops.md, generated from the op registry (`python -m mcutorch.device.generate`).

Per op: the aten overloads lifted into it, the ISA paths its C kernel has (read from the kernel's
sources and the headers they include: `#if MT_MVE` / `#if MT_DSP` blocks next to the pure-C
path), whether it lowers to TOSA 1.0 for the Ethos-U (or why not), and the activation dtypes.
"""
from __future__ import annotations

import re
from pathlib import Path

from mcutorch import ops
from mcutorch.device import paths
from mcutorch.device.kernels import KERNELS_DIR

PATH = paths.SOURCES / "docs" / "supported_ops.md"
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
_ISA = {name: re.compile(rf"^\s*#\s*(?:el)?if\b[^\n]*(?<!!)\b{name}\b", re.M)
        for name in ("MT_MVE", "MT_DSP")}
# the ISA switches, the prototypes and the generic helpers every kernel includes (their own
# #if MT_MVE blocks are not a path of the op that includes them)
SHARED = {"mt_kernel_isa.h", "mt_kernels.h", "mt_kernel.h", "mt_kernel_util.h", "mt_kernel_mve.h",
          "mt_kernel_dsp.h"}


def _files(sources: list[Path]) -> list[Path]:
    """The kernel's sources and every project header they include, transitively."""
    seen, todo = [], list(sources)
    while todo:
        f = todo.pop()
        if f in seen or not f.is_file():
            continue
        seen.append(f)
        for name in _INCLUDE.findall(f.read_text()):
            if name in SHARED:
                continue
            for folder in (f.parent, KERNELS_DIR):
                if (folder / name).is_file():
                    todo.append(folder / name)
                    break
    return seen


def isa_paths(op: ops.OpDef) -> str:
    """"MVE, DSP, C" (the paths the op's kernels have), "C", or "interpreter" (no kernel)."""
    if not op.has_kernel:
        return "— (no kernel: a view or a delegate)"
    text = "".join(f.read_text() for f in _files(
        [KERNELS_DIR / s for v in op.variants for s in op.kernel_sources(v)]))
    found = [isa for isa, key in (("MVE", "MT_MVE"), ("DSP", "MT_DSP")) if _ISA[key].search(text)]
    return ", ".join([*found, "C"])


def _sources(op: ops.OpDef) -> str:
    names = sorted({s.aten.removeprefix("aten.") for s in op.sources})
    if len(names) > 12:
        return f"{len(names)} overloads: " + ", ".join(n.split(".")[0] for n in names)
    return ", ".join(f"`{n}`" for n in names) or "— (made by the compiler)"


def generate() -> str:
    rows = ["# Supported ops", "",
            "Generated from the op registry (`src/mcutorch/ops/`) by `python -m "
            "mcutorch.device.generate`; do not edit. Each op's integer definition is in "
            "`docs/numerics.md`; how to add one is in `docs/adding_an_op.md`.", "",
            "- **aten sources**: the PyTorch overloads lifted into the op (a `lut` is any "
            "function of one int8 tensor, computed as a 256-entry table).",
            "- **CPU paths**: the ISA paths of its C kernel — MVE (Helium: Cortex-M55/M85), "
            "DSP (Cortex-M4/M7/M33/M35P), C (every core, Armv6-M included); the build picks the "
            "best the target has.",
            "- **Ethos-U**: lowered to TOSA 1.0 INT and compiled by Vela, or the reason it stays "
            "on the CPU (in the same program).",
            "- **dtypes**: activation dtypes the op computes.", "",
            "| op | aten sources | CPU paths | Ethos-U (TOSA 1.0) | dtypes |",
            "|---|---|---|---|---|"]
    for op in ops.REGISTRY:
        if op.name == "delegate":
            continue
        npu = "yes" if not op.tosa else op.tosa.replace("|", "\\|")
        if op.opcode is None:
            npu = "— (a view: no data moves)"
        rows.append(f"| `{op.name}` | {_sources(op)} | {isa_paths(op)} | {npu} | int8 |")
    return "\n".join(rows) + "\n"
