"""Generate `runtime/include/mt_program.h` from schema.py, the op registry (mcutorch.ops) and
targets.py (MT_CPU_LIST).

`python -m mcutorch.device.generate` writes it (with the other generated C files) and `--check`
says whether the checked-in copy is current, as a test does. The header is C99, needs only
<stddef.h>/<stdint.h>, and verifies at compile time that the C compiler lays the structs out exactly
as the Python side packs them (so records can be read in place from flash).
"""
from __future__ import annotations

import re

from mcutorch import ops
from mcutorch.program import schema as S


def _ident(name: str) -> str:
    """C identifier part for a table name: "cortex-m0plus" -> "CORTEX_M0PLUS"."""
    return re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def _enum(type_name: str, prefix: str, items: list[tuple[str, int, str]]) -> list[str]:
    """A typedef'd enum; items are (name, value, comment). (C99 allows the trailing comma.)"""
    lines = ["typedef enum {"]
    for name, value, doc in items:
        comment = f" /* {doc} */" if doc else ""
        lines.append(f"  {prefix}{_ident(name)} = {value},{comment}")
    lines += [f"}} {type_name};", ""]
    return lines


def _table_enum(type_name: str, prefix: str, names: tuple[str, ...], count: str) -> list[str]:
    items = [(n, i, "") for i, n in enumerate(names)] + [(count, len(names), "")]
    return _enum(type_name, prefix, items)


def _constants() -> list[str]:
    magic_u32 = int.from_bytes(S.MAGIC, "little")
    return [
        f'#define MT_PROGRAM_MAGIC "{S.MAGIC.decode()}"',
        f"#define MT_PROGRAM_MAGIC_U32 0x{magic_u32:08X}u /* the magic read as a LE uint32_t */",
        f"#define MT_FORMAT_VERSION_MAJOR {S.VERSION_MAJOR}",
        f"#define MT_FORMAT_VERSION_MINOR {S.VERSION_MINOR}",
        f"#define MT_ALIGN {S.ALIGN} /* section and constant alignment */",
        f"#define MT_MAX_RANK {S.MAX_RANK}",
        f"#define MT_MAX_SECTIONS {S.MAX_SECTIONS}",
        f"#define MT_MAX_REGIONS {S.MAX_REGIONS}",
        f"#define MT_MAX_IO {S.MAX_IO} /* program inputs; program outputs */",
        f"#define MT_MAX_DELEGATES {S.MAX_DELEGATES}",
        f"#define MT_MAX_PERSISTENT {S.MAX_PERSISTENT}",
        f"#define MT_MAX_VARIADIC {S.MAX_VARIADIC} /* operands of a variadic list; bindings */",
        f"#define MT_CRC_START {S.CRC_START} /* crc32 = zlib CRC32 of file[MT_CRC_START:] */",
        "#define MT_NONE16 0xFFFFu /* no region */",
        "#define MT_NONE32 0xFFFFFFFFu /* no source / no CPU version */",
        f"#define MT_SECTION_FLAG_SKIPPABLE 0x{S.SECTION_FLAG_SKIPPABLE:X}u",
        f"#define MT_REGION_FLAG_NPU 0x{S.REGION_FLAG_NPU:X}u",
        f"#define MT_REGION_FLAG_BASE_KNOWN 0x{S.REGION_FLAG_BASE_KNOWN:X}u",
        f"#define MT_OP_FLAG_SUBGRAPH 0x{S.OP_FLAG_SUBGRAPH:X}u",
        f"#define MT_OP_FLAG_RING 0x{S.OP_FLAG_RING:X}u /* has a ring window operand (1.6) */",
        f"#define MT_TENSOR_FLAG_RING 0x{S.TENSOR_FLAG_RING:X}u",
        f"#define MT_RING_HEAD {S.RING_HEAD} /* a ring block: int32 position, then slots */",
        *(f"#define MT_TARGET_SWITCH_{_ident(n)} 0x{b:X}u /* +{n} */"
          for n, b in S.TARGET_SWITCH_BITS.items()),
        f"#define MT_TARGET_SWITCHES_KNOWN 0x{S.TARGET_SWITCHES_KNOWN:X}u",
        f"#define MT_REGION_ALIGN_MIN {S.REGION_ALIGN_MIN}",
        f"#define MT_REGION_ALIGN_MAX {S.REGION_ALIGN_MAX}",
        "",
    ]


def _status() -> list[str]:
    items = [("OK", 0, "")] + [("ERR_" + e, S.ERROR_CODES[e], "") for e in S.ERRORS]
    items.append(("STATUS_RUNTIME_BASE", S.RUNTIME_STATUS_BASE, "first non-format status"))
    return ["/* Load status: MT_ERR_<reason> matches ProgramError.reason in Python. */",
            *_enum("mt_status_t", "MT_", items)]


def _sections() -> list[str]:
    items = [(k.name, k.id, ("SKIPPABLE; " if k.skippable else "") + k.doc)
             for k in S.SECTION_KINDS]
    return _enum("mt_section_kind_t", "MT_SECTION_", items)


def _dtypes() -> list[str]:
    lines = _table_enum("mt_dtype_t", "MT_DTYPE_", S.DTYPES, "count")
    lines += [f"#define MT_DTYPE_SIZE_{_ident(d)} {S.DTYPE_SIZES[d]}" for d in S.DTYPES]
    lines += [f"#define MT_INT48_MIN (-{-S.INT48[0]}LL)", f"#define MT_INT48_MAX {S.INT48[1]}LL"]
    return lines + [""]


def _dtype_rule(op: ops.OpDef) -> tuple[str, str]:
    """MT_<OP>_DTYPES (OpDef.dtypes as MT_DTYPE_PAIR bits; 0u = not checked) and
    MT_<OP>_ACT_INPUTS (bit k: input k is an activation; MT_ACT_ALL for a variadic list)."""
    act = op.activation_inputs()
    return ("0u" if op.dtypes is None else "(" + " | ".join(
        f"MT_DTYPE_PAIR(MT_DTYPE_{_ident(a)}, MT_DTYPE_{_ident(b)})" for a, b in op.dtypes) + ")",
        "MT_ACT_ALL" if act == (-1,) else f"0x{sum(1 << k for k in act):X}u")


def _op_block(op: ops.OpDef) -> list[str]:
    """Per-op defines: operand counts and indices, attribute indices, variants."""
    p = "MT_" + op.name.upper()
    n_in = "MT_VARIADIC" if ops.VARIADIC in op.inputs else len(op.inputs)
    n_out = "MT_VARIADIC" if ops.VARIADIC in op.outputs else len(op.outputs)
    alias = " | ".join(f"MT_ALIAS_{_ident(k)}" for k in ops.ALIAS_KINDS if k in op.alias)
    lines = [f"/* {op.name}{': ' + op.doc if op.doc else ''} */",
             f"#define {p}_N_INPUTS {n_in}", f"#define {p}_N_OUTPUTS {n_out}",
             f"#define {p}_N_ATTRS {len(op.attrs)}", f"#define {p}_N_VARIANTS {len(op.variants)}",
             f"#define {p}_ALIAS {'(' + alias + ')' if alias else '0u'}",
             f"#define {p}_MAC {_mac(op)}",
             *(f"#define {p}_{k} {v}" for k, v in zip(("DTYPES", "ACT_INPUTS"), _dtype_rule(op)))]
    for kind, names in (("IN", op.inputs), ("OUT", op.outputs)):
        lines += [f"#define {p}_{kind}_{_ident(n)} {i}" for i, n in enumerate(names)
                  if n != ops.VARIADIC]
    lines += [f"#define {p}_{_ident(a)} {i}" for i, a in enumerate(op.attrs)]
    lines += [f"#define {p}_VARIANT_{_ident(v)} {i}" for i, v in enumerate(op.variants)]
    return lines + [""]


def _mac(op: ops.OpDef) -> str:
    """MT_<OP>_MAC: 0, or the MAC range check's facts (ops.OpDef.mac_axis, zp_folded)."""
    if op.mac_axis is None:
        return "0u"
    folded = sum(1 << i for i, v in enumerate(op.variants) if v in op.zp_folded)
    axis = "MT_MAC_AXIS_FIRST" if op.mac_axis == 0 else "MT_MAC_AXIS_LAST"
    return f"({axis} | MT_MAC_ZP_ATTR({op.attr_index('in_zp')}) | MT_MAC_ZP_FOLDED(0x{folded:X}u))"


def _ops() -> list[str]:
    items = [(op.name, op.opcode, "") for op in ops.OPS] + [("count", ops.OPCODE_END, "")]
    lines = ["/* ---- ops (src/mcutorch/ops) ---- */",
             *_enum("mt_opcode_t", "MT_OP_", items),
             "#define MT_VARIADIC (-1) /* any number (1..MT_MAX_VARIADIC) of operands */",
             f"#define MT_MAX_ATTRS {ops.MAX_ATTRS}",
             "/* MT_<OP>_ALIAS: the ways (ops.ALIAS_KINDS) the op's operands may share bytes */",
             *(f"#define MT_ALIAS_{_ident(k)} 0x{1 << i:X}u"
               for i, k in enumerate(ops.ALIAS_KINDS)),
             "/* MT_<OP>_MAC: 0, or for a MAC op (x, weight, bias, mult, shift) the weight's",
             " * output-channel axis, the in_zp attribute index and the variants whose",
             " * accumulator reads x itself (in_zp folded into the bias): mt_validate.c",
             " * mt_check_mac bounds every channel's accumulator at load */",
             "#define MT_MAC_AXIS_FIRST 0x1u",
             "#define MT_MAC_AXIS_LAST 0x2u",
             "#define MT_MAC_AXIS(mac) ((mac)&0x3u)",
             "#define MT_MAC_ZP_ATTR(i) ((uint32_t)(i) << 8)",
             "#define MT_MAC_ZP_ATTR_OF(mac) (((mac) >> 8) & 0xFFu)",
             "#define MT_MAC_ZP_FOLDED(mask) ((uint32_t)(mask) << 16)",
             "#define MT_MAC_ZP_FOLDED_IN(mac, variant) (((mac) >> (16 + (variant))) & 1u)",
             "",
             "/* MT_<OP>_DTYPES: the (activation input, output) dtype pairs the op's",
             " * kernels take (ops.OpDef.dtypes; 0u = not checked), MT_<OP>_ACT_INPUTS the",
             " * inputs that are activations: mt_validate.c mt_check_dtypes refuses other",
             " * pairs at load */",
             "#define MT_DTYPE_PAIR(in, out) (1u << ((in)*MT_DTYPE_COUNT + (out)))",
             "#define MT_ACT_ALL 0xFFFFFFFFu",
             "/* X(NAME, opcode, n_inputs, n_outputs, n_attrs, n_variants, alias, mac, dtypes,",
             " * act_inputs) for every op */",
             "#define MT_OP_LIST(X) \\"]
    for op in ops.OPS:
        p = "MT_" + op.name.upper()
        lines.append(f"  X({op.name.upper()}, {op.opcode}, {p}_N_INPUTS, {p}_N_OUTPUTS, "
                     f"{p}_N_ATTRS, {p}_N_VARIANTS, {p}_ALIAS, {p}_MAC, {p}_DTYPES, "
                     f"{p}_ACT_INPUTS) \\")
    lines[-1] = lines[-1].removesuffix(" \\")
    lines.append("")
    for op in ops.OPS:
        lines += _op_block(op)
    return lines


def _cpu_list() -> list[str]:
    """MT_CPU_LIST(X): per CPU the switches it takes and its ISA level without switches, from
    targets.py. A switch lowers the ISA level: +nomve mve -> dsp, then +nodsp dsp -> scalar
    (MVE implies DSP); checked here against parse_target for every switch combination."""
    from itertools import combinations

    from mcutorch.targets import CPUS, parse_target

    lines = ["/* X(NAME, cpu id, MT_TARGET_SWITCH_* bits the CPU takes, MT_ISA_* without",
             " * switches) from src/mcutorch/targets.py. With switches the ISA level is lowered:",
             " * +nomve turns mve into dsp, then +nodsp turns dsp into scalar. */",
             "#define MT_CPU_LIST(X) \\"]
    for name in S.CPUS:
        cpu = CPUS[name]
        assert cpu.id == S.CPUS.index(name) and set(cpu.switches) <= set(S.TARGET_SWITCHES), name
        isa = parse_target(name).isa
        for k in range(len(cpu.switches) + 1):
            for chosen in combinations(cpu.switches, k):
                low = isa
                if "nomve" in chosen and low == "mve":
                    low = "dsp"
                if "nodsp" in chosen and low == "dsp":
                    low = "scalar"
                assert parse_target("+".join((name, *chosen))).isa == low, (name, chosen)
        bits = " | ".join(f"MT_TARGET_SWITCH_{_ident(sw)}" for sw in S.TARGET_SWITCHES
                          if sw in cpu.switches) or "0u"
        lines.append(f"  X({_ident(name)}, {cpu.id}, {bits}, MT_ISA_{_ident(isa)}) \\")
    lines[-1] = lines[-1].removesuffix(" \\")
    return lines + [""]


def _struct(s: S.Struct) -> list[str]:
    """typedef struct + size define + compile-time layout checks."""
    lines = [f"/* {s.doc} ({s.size} bytes) */", "typedef struct {"]
    for f in s.fields:
        ctype = S._TYPES[f.type][0]
        dims = f"[{f.count}]" if f.count > 1 or f.type == "char" else ""
        comment = f" /* {f.doc} */" if f.doc else ""
        lines.append(f"  {ctype} {f.name}{dims};{comment}")
    up = s.name.upper()
    lines += [f"}} {s.c_name};", f"#define MT_{up}_RECORD_SIZE {s.size}",
              f"MT_LAYOUT_CHECK({s.name}_sizeof, sizeof({s.c_name}) == {s.size});"]
    lines += [f"MT_LAYOUT_CHECK({s.name}_at_{f.name}, offsetof({s.c_name}, {f.name}) == "
              f"{s.offsets[f.name]});" for f in s.fields]
    return lines + [""]


def _structs() -> list[str]:
    lines = ["/* ---- records (little-endian; the loader requires a little-endian CPU) ---- */",
             "#define MT_LAYOUT_CHECK(name, cond) \\",
             "  typedef char mt_layout_check_##name[(cond) ? 1 : -1]",
             "MT_LAYOUT_CHECK(float_size, sizeof(float) == 4);", ""]
    for s in S.STRUCTS:
        lines += _struct(s)
    return lines


def generate() -> str:
    """The full text of mt_program.h."""
    lines = [
        "/* mt_program.h: the mcutorch program file, format "
        f"{S.VERSION_MAJOR}.{S.VERSION_MINOR}.",
        " * GENERATED by `python -m mcutorch.program --c-header` from",
        " * src/mcutorch/program/schema.py (layout, described in its docstring) and",
        " * src/mcutorch/ops (op table). Do not edit by hand. */",
        "#ifndef MT_PROGRAM_H", "#define MT_PROGRAM_H", "",
        "#include <stddef.h>", "#include <stdint.h>", "",
        *_constants(), *_status(), *_sections(), *_dtypes(),
        *_table_enum("mt_storage_t", "MT_STORAGE_", S.STORAGES, "count"),
        *_table_enum("mt_isa_t", "MT_ISA_", S.ISAS, "count"),
        *_table_enum("mt_rounding_t", "MT_ROUNDING_", S.ROUNDINGS, "count"),
        *_table_enum("mt_cpu_t", "MT_CPU_", S.CPUS, "count"), *_cpu_list(),
        *_table_enum("mt_npu_t", "MT_NPU_", S.NPUS, "count"),
        *_ops(), *_structs(),
        "#endif /* MT_PROGRAM_H */", "",
    ]
    text = "\n".join(lines)
    _check_unique_defines(text)
    return text


def _check_unique_defines(text: str) -> None:
    """Op and attribute names must not collide once upper-cased into C names."""
    names = re.findall(r"^#define (\w+)", text, re.M)
    names += re.findall(r"^  (MT_\w+) = ", text, re.M)
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, f"duplicate C names in mt_program.h: {sorted(dup)}"
