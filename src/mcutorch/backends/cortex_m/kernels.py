"""The C kernels of the Cortex-M backend: which function and file implement each (op, variant),
how much scratch each needs, and the per-model kernel table the compiler emits.

Layout (``runtime/kernels/``, C99): one family per folder, one public function per file, named
``mt_<op>_s8`` for the portable "ref" variant (``mt_<op>_<variant>_s8`` for later ones, in their
own file or, listed in SHARED_FILE, in the "ref" file: fully_connected "folded")::

    conv/         conv2d, depthwise_conv2d, fully_connected
    elementwise/  add, mul, clamp, lut, rescale          (the output may be placed over an input)
    pool/         max_pool2d, avg_pool2d
    softmax/      softmax
    movement/     transpose, concat, pad, copy

Every kernel includes ``mt_kernel_util.h`` (shared inline helpers; the MAC kernels also
``mt_kernel_mac.h``) and ``mt_kernels.h`` (prototypes), so a build needs `INCLUDE_DIRS`.
``delegate`` has no kernel: the interpreter runs it. `scratch_bytes` is the planner's twin of each
kernel's scratch contract: none takes scratch (conv2d and fully_connected keep at most 64 output
channels' accumulators, and conv2d a gathered window of up to 1 KiB, on the stack).

ISA levels live inside each kernel file, picked at compile time from the target's gcc flags:
MVE (``__ARM_FEATURE_MVE``: Cortex-M55/M85), DSP (``__ARM_FEATURE_DSP``: M4/M7/M33/M35P), or
pure C (M0/M0+/M3/M23 and the host). So one "ref" variant serves every target, the firmware's
``-mcpu`` selects the code, and the numerics are identical everywhere (the kernels are bit-exact
with `mcutorch.ref` at every level). ``bench/kernels.py`` prints per-layer instruction counts.

>>> kernel("conv2d").function
'mt_conv2d_s8'
>>> [p.name for p in sources_for({("softmax", "ref"), ("fully_connected", "ref")})]
['mt_fully_connected_s8.c', 'mt_softmax_s8.c']
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from mcutorch import ops

from mcutorch.device.paths import INCLUDE_DIRS, KERNELS as KERNELS_DIR  # noqa: F401
ALL_TABLE_SOURCE = KERNELS_DIR / "mt_kernels_all.c"  # defines mt_kernels_all (every kernel)

FAMILIES = {
    "conv": ("conv2d", "depthwise_conv2d", "fully_connected"),
    "elementwise": ("add", "mul", "clamp", "lut", "rescale"),
    "pool": ("max_pool2d", "avg_pool2d"),
    "softmax": ("softmax",),
    "movement": ("transpose", "concat", "pad", "copy"),
}
FAMILY_OF = {op: family for family, names in FAMILIES.items() for op in names}
NO_KERNEL = ("delegate",)  # run by the interpreter itself


@dataclass(frozen=True)
class Kernel:
    """One C kernel: the function implementing (op, variant) and its source files."""

    op: str
    variant: str
    function: str
    sources: tuple[Path, ...]


def _kernel(op: ops.OpDef, variant: str) -> Kernel:
    suffix = "" if variant == "ref" else f"_{variant}"
    function = f"mt_{op.name}{suffix}_s8"
    file = f"mt_{op.name}_s8.c" if (op.name, variant) in SHARED_FILE else f"{function}.c"
    return Kernel(op.name, variant, function, (KERNELS_DIR / FAMILY_OF[op.name] / file,))


# variants whose function lives in the op's "ref" file (sharing its argument checks)
SHARED_FILE = {("fully_connected", "folded")}


assert all(len(op.variants) <= 4 for op in ops.OPS), "mt_kernel_row holds 4 variants"

KERNELS: dict[tuple[str, str], Kernel] = {
    (op.name, v): _kernel(op, v) for op in ops.OPS if op.name not in NO_KERNEL for v in op.variants
}


def kernel(op: str, variant: str = "ref") -> Kernel:
    """The `Kernel` of (op, variant); KeyError names the known ones."""
    try:
        return KERNELS[(op, variant)]
    except KeyError:
        known = ", ".join(f"{o}/{v}" for o, v in KERNELS)
        raise KeyError(f"no C kernel for op {op!r} variant {variant!r}; known: {known}") from None


def scratch_bytes(op: str, shapes: Sequence[Sequence[int]], attrs: Mapping[str, int],
                  variant: str = "ref") -> int:
    """Scratch bytes the kernel of (op, variant) needs for these input shapes and attributes.

    The planner reserves this much in `mt_op_args.scratch`; 0 means the kernel takes none.
    Every kernel ("ref", all ISA levels) accumulates in registers or in bounded stack buffers
    (at most ~1.5 KiB, conv2d), so all are 0.

    >>> scratch_bytes("depthwise_conv2d", [(1, 25, 5, 64), (3, 3, 64)], {"depth_multiplier": 1})
    0
    """
    kernel(op, variant)  # unknown (op, variant): KeyError
    return 0


def _used_kernels(used: Iterable[tuple[str, str]]) -> list[Kernel]:
    found = {kernel(op, variant) for op, variant in used if op not in NO_KERNEL}
    return sorted(found, key=lambda k: (ops.get(k.op).opcode, k.variant))


def sources_for(used: Iterable[tuple[str, str]]) -> list[Path]:
    """The C files to compile for a model using these (op, variant) pairs (sorted, unique)."""
    return sorted({src for k in _used_kernels(used) for src in k.sources})


def kernel_table_c(used: Iterable[tuple[str, str]]) -> str:
    """C source defining ``const mt_kernel_table mt_kernels_model`` with only the used kernels.

    Rows are indexed by opcode (all MT_OP_COUNT rows, unused ones NULL), each variant at its
    index in ops.py; the delegate row stays NULL. Compile it with `sources_for(used)`.

    >>> print(kernel_table_c({("softmax", "ref")}).splitlines()[5])
        [MT_OP_SOFTMAX] = {{mt_softmax_s8, NULL, NULL, NULL}},
    """
    rows: dict[str, list[str]] = {}
    for k in _used_kernels(used):
        op = ops.get(k.op)
        slots = rows.setdefault(op.c_name, ["NULL"] * 4)
        slots[op.variants.index(k.variant)] = k.function
    lines = [
        "/* mt_kernels_model.c - the kernels this model uses, indexed by opcode.",
        " * Generated by mcutorch.backends.cortex_m.kernels.kernel_table_c; do not edit. */",
        '#include "mt_kernels.h"',
        "",
        "static const mt_kernel_row mt_model_rows[MT_OP_COUNT] = {",
    ]
    lines += [f"    [{name}] = {{{{{', '.join(slots)}}}}}," for name, slots in rows.items()]
    if not rows:  # C99 has no empty initializer
        lines.append("    {{NULL, NULL, NULL, NULL}},")
    lines += ["};", "",
              "const mt_kernel_table mt_kernels_model = {mt_model_rows, MT_OP_COUNT};", ""]
    return "\n".join(lines)
