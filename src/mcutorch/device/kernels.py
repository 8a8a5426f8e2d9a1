"""The C kernels: which function and files implement each (op, variant) of the op registry, the
generated kernel headers, and the per-model kernel table the compiler emits.

Layout (``runtime/kernels/``, C99): one family per folder (`OpDef.family`), one public function per
file, named ``mt_<op>_s8`` for the default variant and ``mt_<op>_<variant>_s8`` for the others
(`OpDef.kernel_function`), in the files `OpDef.kernel_sources` lists (a variant may share the
default's file: fully_connected "folded")::

    conv/         conv2d, depthwise_conv2d, fully_connected
    elementwise/  add, mul, clamp, lut, rescale, maximum, minimum  (output may be over an input)
    pool/         max_pool2d, avg_pool2d
    softmax/      softmax
    movement/     transpose, concat, pad, copy, strided_slice, gather

Every kernel includes ``mt_kernel_util.h`` (shared inline helpers; the MAC kernels also
``mt_kernel_mac.h``) and ``mt_kernels.h`` (prototypes), so a build needs `INCLUDE_DIRS`.
``mt_kernels.h`` and ``mt_kernels_all.c`` are generated from the registry (`kernels_header_c`,
`all_table_c`; ``python -m mcutorch.device.generate`` writes them). ``delegate`` has no kernel:
the interpreter runs it.

ISA levels live inside each kernel file, picked at compile time from the target's gcc flags:
MVE (``__ARM_FEATURE_MVE``: Cortex-M55/M85), DSP (``__ARM_FEATURE_DSP``: M4/M7/M33/M35P), or
pure C (M0/M0+/M3/M23 and the host). So one default variant serves every target, the firmware's
``-mcpu`` selects the code, and the numerics are identical everywhere (the kernels are bit-exact
with `mcutorch.ref` at every level). ``bench/kernels.py`` prints per-layer instruction counts.

>>> kernel("conv2d").function
'mt_conv2d_s8'
>>> [p.name for p in sources_for({("softmax", "default"), ("fully_connected", "default")})]
['mt_fully_connected_s8.c', 'mt_softmax_s8.c']
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from mcutorch import ops
from mcutorch.device.paths import INCLUDE_DIRS, KERNELS as KERNELS_DIR

ALL_TABLE_SOURCE = KERNELS_DIR / "mt_kernels_all.c"  # defines mt_kernels_all (every kernel)
HEADER = KERNELS_DIR / "mt_kernels.h"
SLOTS = 4  # variants per mt_kernel_row


@dataclass(frozen=True)
class Kernel:
    """One C kernel: the function implementing (op, variant) and its source files."""

    op: str
    variant: str
    function: str
    sources: tuple[Path, ...]


KERNELS: dict[tuple[str, str], Kernel] = {
    (op.name, v): Kernel(op.name, v, op.kernel_function(v),
                         tuple(KERNELS_DIR / s for s in op.kernel_sources(v)))
    for op in ops.OPS if op.has_kernel for v in op.variants
}
NO_KERNEL = tuple(op.name for op in ops.OPS if not op.has_kernel)  # run by the interpreter


def kernel(op: str, variant: str = ops.DEFAULT_VARIANT) -> Kernel:
    """The `Kernel` of (op, variant); KeyError names the known ones."""
    try:
        return KERNELS[(op, variant)]
    except KeyError:
        known = ", ".join(f"{o}/{v}" for o, v in KERNELS)
        raise KeyError(f"no C kernel for op {op!r} variant {variant!r}; known: {known}") from None


# A used-kernels entry (op, INT16): the model runs op on int16 activations (a16w8), so the
# op's int16 body (its *_s16.c files, which the int8 kernel calls through a weak symbol) links too.
INT16 = "int16"


def _used_kernels(used: Iterable[tuple[str, str]]) -> list[Kernel]:
    found = {kernel(op, v) for op, v in used if op not in NO_KERNEL and v != INT16}
    return sorted(found, key=lambda k: (ops.get(k.op).opcode, k.variant))


def sources_for(used: Iterable[tuple[str, str]]) -> list[Path]:
    """The C files to compile for a model using these (op, variant) pairs (sorted, unique); an
    op's *_s16.c files only with an (op, INT16) entry."""
    used = set(used)
    wide = {op for op, v in used if v == INT16}
    return sorted({src for k in _used_kernels(used) for src in k.sources
                   if not src.stem.endswith("_s16") or k.op in wide})


def _rows(kernels: list[Kernel]) -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}
    for k in kernels:
        op = ops.get(k.op)
        slots = rows.setdefault(op.c_name, ["NULL"] * SLOTS)
        slots[op.variants.index(k.variant)] = k.function
    return rows


def _table(name: str, rows_name: str, rows: dict[str, list[str]], head: list[str]) -> str:
    lines = [*head, '#include "mt_kernels.h"', "",
             f"static const mt_kernel_row {rows_name}[MT_OP_COUNT] = {{"]
    lines += [f"    [{op}] = {{{{{', '.join(slots)}}}}}," for op, slots in rows.items()]
    if not rows:  # C99 has no empty initializer
        lines.append("    {{NULL, NULL, NULL, NULL}},")
    lines += ["};", "", f"const mt_kernel_table {name} = {{{rows_name}, MT_OP_COUNT}};", ""]
    return "\n".join(lines)


def kernel_table_c(used: Iterable[tuple[str, str]], table: str = "mt_kernels_model",
                   rows: str = "mt_model_rows", file: str = "mt_kernels_model.c") -> str:
    """C source defining ``const mt_kernel_table <table>`` with only the used kernels.

    Rows are indexed by opcode (all MT_OP_COUNT rows, unused ones NULL), each variant at its
    index in the registry; the delegate row stays NULL. Compile it with `sources_for(used)`.
    `export-c` names the table after the model (``NAME_kernels``).

    >>> print(kernel_table_c({("softmax", "default")}).splitlines()[5])
        [MT_OP_SOFTMAX] = {{mt_softmax_s8, NULL, NULL, NULL}},
    """
    head = [f"/* {file} - the kernels this model uses, indexed by opcode.",
            " * Generated by mcutorch.device.kernels.kernel_table_c; do not edit. */"]
    return _table(table, rows, _rows(_used_kernels(used)), head)


def all_table_c() -> str:
    """``runtime/kernels/mt_kernels_all.c``: a kernel table with every kernel of the registry."""
    head = ["/*",
            " * mt_kernels_all.c - a kernel table with every kernel, indexed by opcode (tests, and",
            " * firmware that does not want a per-model table). Rows of ops without a kernel",
            " * (delegate: the interpreter runs it) stay NULL.",
            " * Generated from the op registry (src/mcutorch/ops) by `python -m",
            " * mcutorch.device.generate`; do not edit.",
            " */"]
    return _table("mt_kernels_all", "mt_all_rows", _rows(list(KERNELS.values())), head)


def kernels_header_c() -> str:
    """``runtime/kernels/mt_kernels.h``: the prototype of every kernel, family by family."""
    families: dict[str, list[str]] = {}
    for op in ops.OPS:
        if op.has_kernel:
            families.setdefault(op.family, []).append(op.name)
    width = max(len(f) for f in families) + 2
    lines = ["/*",
             " * mt_kernels.h - every int8 kernel of mcutorch: one mt_kernel_fn per (op, variant).",
             " *",
             " * Kernel tables (mt_kernels_all.c, or the per-model table the compiler emits with",
             " * mcutorch.device.kernels.kernel_table_c) point at these; the interpreter calls"
             " them",
             " * through the table only. Each kernel holds its MVE, DSP and portable C paths.",
             " * Generated from the op registry (src/mcutorch/ops) by `python -m",
             " * mcutorch.device.generate`; do not edit.",
             " *"]
    lines += [f" *   {(family + '/').ljust(width)}{', '.join(names)}"
              for family, names in families.items()]
    lines += [" */", "#ifndef MT_KERNELS_H", "#define MT_KERNELS_H", "",
              '#include "mt_kernel.h"', "", "#ifdef __cplusplus", 'extern "C" {', "#endif", ""]
    for k in KERNELS.values():
        doc = ops.get(k.op).doc if k.variant != ops.DEFAULT_VARIANT else ""
        note = f" /* {k.variant}: {doc} */" if doc else ""
        lines.append(f"mt_status {k.function}(const mt_op_args *args);{note}")
    lines += ["",
              "/* Every kernel above, indexed by opcode (rows of ops without a kernel are"
              " NULL). */",
              "extern const mt_kernel_table mt_kernels_all;", "",
              "/* Only the kernels one model uses: the C file the compiler emits",
              " * (mcutorch.device.kernels.kernel_table_c) defines it. */",
              "extern const mt_kernel_table mt_kernels_model;", "",
              "#ifdef __cplusplus", "}", "#endif", "#endif /* MT_KERNELS_H */", ""]
    return "\n".join(lines)


__all__ = ["ALL_TABLE_SOURCE", "HEADER", "INCLUDE_DIRS", "KERNELS", "NO_KERNEL", "Kernel",
           "all_table_c", "kernel", "kernel_table_c", "kernels_header_c", "sources_for"]
