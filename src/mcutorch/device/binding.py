"""NAME_binding.c: a model's memory bound ahead of time (``mt_bind_static``, mcutorch.h 2b).

export-c and ``build --standalone`` place every arena (and the persistent buffer of a stateful
program) at an address fixed at link time, so the views and kernel args that ``mt_bind_state``
would build in RAM are known when the firmware is linked: this file writes them as ``const``
tables (flash), read from the very bytes of ``NAME_program`` (its records, in place). The model
then needs no state buffer: RAM is the arenas, the persistent buffer and, for a program with
ring ops (streaming state), one small writable table: the ring ops' views (a ring op points
its window operand at the ring's current position on every call).

``mt_bind_static`` checks every entry against what the runtime would build from the same
pointers, so a table that does not belong to the program is refused, never run.

Linker sections: ``-DNAME_ARENA<k>_SECTION='".mt_bss.SRAM"'`` puts arena k there (default
``.bss``), ``NAME_PERSIST_SECTION`` the persistent buffer; the tables are ``.rodata``.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from mcutorch import ops
from mcutorch.program import schema as S

NONE16 = 0xFFFF
DELEGATE = ops.get("delegate").opcode
DISPATCH_OTHER = 0xFFFF  # mt_kernel.h MT_DISPATCH_OTHER: a delegate or a CPU-version op
STORAGE = {name: k for k, name in enumerate(S.STORAGES)}


@dataclass(frozen=True)
class Layout:
    """Where the runtime finds things in a program's bytes: section offsets and the records
    mt_bind_state reads (ops, operand and I/O tensor indices, tensors)."""

    offsets: dict[str, int]
    tensors: list[dict]
    ops: list[dict]
    operands: list[int]
    io: list[int]

    @classmethod
    def of(cls, data: bytes) -> Layout:
        h = S.HEADER.unpack(data)
        entries = S.SECTION.unpack_all(data, h["section_table"], h["section_count"])
        found = {S.KIND_BY_ID[e["kind"]].name: e for e in entries if e["kind"] in S.KIND_BY_ID}

        def records(kind: str) -> list[dict]:
            e = found.get(kind)
            rec = S.KIND_BY_NAME[kind].record
            return rec.unpack_all(data, e["offset"], e["size"] // rec.size) if e else []

        def ints(kind: str, skip: int = 0) -> list[int]:
            e = found[kind]
            n = (e["size"] - skip) // S.I32
            return list(struct.unpack_from(f"<{n}i", data, e["offset"] + skip))

        head = S.IO.unpack(data, found["io"]["offset"])
        io = ints("io", S.IO.size)[:head["n_inputs"] + head["n_outputs"]]
        return cls({k: e["offset"] for k, e in found.items()}, records("tensors"),
                   records("ops"), ints("operands"), io)


def _ring_op(op: dict) -> bool:
    return bool(op["flags"] & S.OP_FLAG_RING)


def ring_views(layout: Layout) -> int:
    """Views of every ring op (their operands, in op order): the writable table's length."""
    return sum(op["n_inputs"] + op["n_outputs"] for op in layout.ops if _ring_op(op))


def binding_source(name: str, data: bytes, region_sizes: list[int], persistent_size: int) -> str:
    """The text of NAME_binding.c for the program bytes `data` (exactly NAME_program's) with
    regions of `region_sizes` bytes (a region of 0 bytes gets no array: its base is NULL)."""
    lay = Layout.of(data)
    n_regions = len(region_sizes)
    up = name.upper()
    prog = f"{name}_program"

    def at(section: str, offset: int, ctype: str) -> str:
        return f"({ctype})(const void *)&{prog}[{lay.offsets[section] + offset}]"

    def arena(region: int, offset: int) -> str:
        return f"(void *)&{name}_arena{region}[{offset}]" if region < n_regions else "NULL"

    def view(index: int) -> str:
        t = lay.tensors[index]
        if t["storage"] == STORAGE["const"]:
            data_ptr = f"(void *)&{prog}[{lay.offsets['const'] + t['offset']}]"
        elif t["storage"] == STORAGE["persistent"]:
            data_ptr = f"(void *)&{name}_persist[{t['offset']}]"
        else:
            data_ptr = arena(t["region"], t["offset"])
        rec = at("tensors", index * S.TENSOR.size, "const mt_tensor_t *")
        return f"    {{{data_ptr}, {rec}}}, /* tensor {index} */"

    n_io = len(lay.io)
    named = {k for op in lay.ops
             for k in range(op["first_operand"], op["first_operand"] + op["n_inputs"]
                            + op["n_outputs"])}  # an operand record no op names is never read
    views = [view(i) for i in lay.io] + [view(t) if k in named else "    {NULL, NULL},"
                                         for k, t in enumerate(lay.operands)]
    n_ring = ring_views(lay)
    args = []
    ring = 0  # views of the ring ops so far: each has its own in the ring table
    for i, op in enumerate(lay.ops):
        if _ring_op(op):
            base, first = f"{name}_ring_views", ring
            ring += op["n_inputs"] + op["n_outputs"]
        else:
            base, first = f"{name}_views", n_io + op["first_operand"]
        scratch = arena(op["scratch_region"], op["scratch_offset"])
        ins = lay.operands[op["first_operand"]:op["first_operand"] + op["n_inputs"]]
        dispatch = max((k + 1 for k, t in enumerate(ins)  # mt_op_args.dispatch (mt_kernel.h)
                        if lay.tensors[t]["flags"] & S.TENSOR_FLAG_RING), default=0)
        if op["flags"] & S.OP_FLAG_SUBGRAPH or op["opcode"] == DELEGATE:
            dispatch = DISPATCH_OTHER
        args.append(
            f"    {{&{base}[{first}], (mt_tensor *)&{base}[{first + op['n_inputs']}], "
            f"{at('attrs', S.I32 * op['first_attr'], 'const int32_t *')}, {scratch}, "
            f"{op['scratch_size']}u, {op['n_inputs']}u, {op['n_outputs']}u, {op['n_attrs']}u, "
            f"{dispatch}u}},"
            f" /* op {i} */")
    lines = [f"/* {name}_binding.c - memory of model {name} bound ahead of time: its arenas at "
             "fixed addresses and the", " * views and kernel args mt_bind_state would build, "
             "as const tables (flash). mt_bind_static(&m,",
             f" * &{name}_binding) checks every entry, then runs with no state buffer "
             "(mcutorch.h, 2b). */",
             f'#include "{name}_config.h"', f'#include "{name}_program.h"', ""]
    for k in (k for k, size in enumerate(region_sizes) if size):
        lines += [f"#ifdef {up}_ARENA{k}_SECTION",
                  f"__attribute__((section({up}_ARENA{k}_SECTION)))", "#endif",
                  f"static uint8_t {name}_arena{k}[{up}_ARENA{k}_SIZE]"
                  f" __attribute__((aligned({up}_ARENA{k}_ALIGN)));"]
    if persistent_size:
        lines += [f"#ifdef {up}_PERSIST_SECTION",
                  f"__attribute__((section({up}_PERSIST_SECTION)))", "#endif",
                  f"static uint8_t {name}_persist[{up}_PERSISTENT_SIZE] "
                  "__attribute__((aligned(16)));"]
    if n_ring:
        lines.append(f"static mt_tensor {name}_ring_views[{n_ring}]; /* the ring ops' views: "
                     "filled by mt_bind_static, their window moved on every call */")
    lines += ["", f"static const mt_tensor {name}_views[{max(len(views), 1)}] = {{",
              *(views or ["    {NULL, NULL},"]), "};",
              f"static const mt_op_args {name}_args[{max(len(args), 1)}] = {{",
              *(args or ["    {NULL, NULL, NULL, NULL, 0u, 0u, 0u, 0u, 0u},"]), "};"]
    if n_regions:
        lines += [f"static void *const {name}_arenas[] = {{"
                  + ", ".join(f"{name}_arena{k}" if size else "NULL"
                              for k, size in enumerate(region_sizes)) + "};",
                  f"static const uint32_t {name}_arena_sizes[] = {{"
                  + ", ".join(f"{up}_ARENA{k}_SIZE" for k in range(n_regions)) + "};"]
    lines += ["", f"const mt_static_binding {name}_binding = {{",
              f"    {f'{name}_arenas' if n_regions else 'NULL'}, "
              f"{f'{name}_arena_sizes' if n_regions else 'NULL'},",
              f"    {f'{name}_persist' if persistent_size else 'NULL'}, {persistent_size}u,",
              f"    {name}_views, {name}_args, {f'{name}_ring_views' if n_ring else 'NULL'},",
              f"    {n_regions}u, {len(views)}u, {len(args)}u, {n_ring}u,", "};", ""]
    return "\n".join(lines)


def table_bytes(program) -> tuple[int, int]:
    """(flash, RAM) bytes of a program's static binding tables on a 32-bit CPU: the const views
    and args, i.e. the run-time binding's state less its arena pointers (`crt.state_size`);
    the ring views table, 8 B per operand of each ring op (the only RAM beyond the arenas and
    the persistent buffer)."""
    from mcutorch.device.crt import state_size

    ring = sum(len(op.inputs) + len(op.outputs) for op in program.ops
               if any(program.tensors[t].ring for t in (*op.inputs, *op.outputs)))
    return state_size(program, 4) - 4 * len(program.regions), 8 * ring


__all__ = ["Layout", "binding_source", "ring_views", "table_bytes"]
