"""bytes -> Program, checking everything on the way.

Order: header (size, magic, version, file size, CRC, reserved fields) -> section table (bounds,
alignment, overlap, kinds, record sizes) -> each section's raw records (enum ids, reserved fields,
stored sizes, index ranges) -> the semantic checks of validate.py on the decoded Program -> op
flags. Any input bytes either give a Program or raise ProgramError(reason in schema.ERRORS).
The CONST section is not copied: Program.constants is a memoryview of the caller's buffer.
"""
from __future__ import annotations

import json
import math
import struct
import zlib

from mcutorch import ops
from mcutorch.errors import ProgramError
from mcutorch.program import schema as S
from mcutorch.program.model import (Area, Binding, DelegateInfo, OpInfo, PersistentInfo, Program,
                                    RegionInfo, TargetInfo, TensorInfo)
from mcutorch.program.validate import require, validate


def read(buf, verify_crc: bool = True) -> Program:
    """Parse and validate a program file (bytes, bytearray, memoryview, mmap)."""
    mv = memoryview(buf)
    if mv.ndim != 1 or mv.format != "B":
        mv = mv.cast("B")
    _check_header(mv, verify_crc)
    sec = _section_table(mv)
    ops_list, op_flags = _ops(sec["ops"], sec["operands"], sec["attrs"])
    inputs, outputs = _io(sec["io"])
    p = Program(target=_target(sec["target"]), regions=_regions(sec["regions"]),
                tensors=_tensors(sec["tensors"]), ops=ops_list, inputs=inputs, outputs=outputs,
                constants=sec["const"], delegates=_delegates(sec["delegates"], sec["bindings"]),
                metadata=_metadata(sec.get("metadata")),
                persistent=_persistent(sec.get("persistent")))
    validate(p)
    _check_op_flags(p, op_flags)
    return p


def _check_header(mv: memoryview, verify_crc: bool) -> None:
    require(len(mv) >= S.HEADER.size, "truncated",
            f"{len(mv)} bytes, shorter than the {S.HEADER.size}-byte header")
    h = S.HEADER.unpack(mv)
    require(h["magic"] == S.MAGIC, "bad_magic",
            f"starts with {h['magic']!r}, not {S.MAGIC!r}: not an mcutorch program")
    major, minor = h["version_major"], h["version_minor"]
    require(major == S.VERSION_MAJOR, "bad_version",
            f"program format {major}.{minor}; this mcutorch reads format {S.VERSION_MAJOR}.x "
            f"(up to {S.VERSION_MAJOR}.{S.VERSION_MINOR})"
            + ("; upgrade mcutorch" if major > S.VERSION_MAJOR else "; recompile the model"))
    require(h["file_size"] == len(mv), "truncated",
            f"header says {h['file_size']} bytes, got {len(mv)}")
    if verify_crc:
        crc = zlib.crc32(mv[S.CRC_START:])
        require(crc == h["crc32"], "bad_crc", f"CRC32 {crc:08x}, header says {h['crc32']:08x}")
    require(h["flags"] == 0 and h["reserved"] == 0, "bad_header",
            f"flags 0x{h['flags']:x} / reserved 0x{h['reserved']:x} must be 0")


def _section_table(mv: memoryview) -> dict[str, memoryview]:
    """Check the table and return each known section's bytes by name."""
    h = S.HEADER.unpack(mv)
    n, table = h["section_count"], h["section_table"]
    require(n <= S.MAX_SECTIONS, "bad_section", f"{n} sections (at most {S.MAX_SECTIONS})")
    table_end = table + n * S.SECTION.size
    require(table % S.ALIGN == 0 and table >= S.HEADER.size and table_end <= len(mv),
            "bad_section", f"section table at {table} ({n} entries) outside the file or unaligned")
    spans = [(0, S.HEADER.size), (table, table_end)]
    found: dict[str, memoryview] = {}
    for i, e in enumerate(S.SECTION.unpack_all(mv, table, n)):
        _check_entry(i, e, len(mv))
        spans.append((e["offset"], e["offset"] + e["size"]))
        kind = S.KIND_BY_ID.get(e["kind"])
        if kind is None:
            require(e["flags"] & S.SECTION_FLAG_SKIPPABLE, "bad_section",
                    f"section {i}: unknown kind {e['kind']} is not skippable "
                    "(written by a newer mcutorch?)")
            continue
        _check_known(i, e, kind, found)
        found[kind.name] = mv[e["offset"]:e["offset"] + e["size"]]
    _check_overlap(spans)
    missing = [k for k in S.REQUIRED_SECTIONS if k not in found]
    require(not missing, "bad_section", f"missing sections: {', '.join(missing)}")
    return found


def _check_entry(i: int, e: dict, size: int) -> None:
    require(e["reserved"] == 0 and e["flags"] & ~S.SECTION_FLAG_SKIPPABLE == 0, "bad_section",
            f"section {i}: unknown flags 0x{e['flags']:x} or reserved bits")
    require(e["offset"] % S.ALIGN == 0, "bad_section",
            f"section {i}: offset {e['offset']} is not {S.ALIGN}-aligned")
    require(e["offset"] + e["size"] <= size, "bad_section",
            f"section {i}: bytes [{e['offset']}, {e['offset'] + e['size']}) outside the "
            f"{size}-byte file")


def _check_known(i: int, e: dict, kind: S.SectionKind, found: dict) -> None:
    require(kind.name not in found, "bad_section", f"section {i}: second {kind.name} section")
    expected = S.SECTION_FLAG_SKIPPABLE if kind.skippable else 0
    require(e["flags"] == expected, "bad_section",
            f"section {i} ({kind.name}): flags 0x{e['flags']:x}, expected 0x{expected:x}")
    unit = kind.record.size if kind.record is not None else (
        4 if kind.name in ("operands", "attrs") else 1)
    require(e["size"] % unit == 0, "bad_section",
            f"section {i} ({kind.name}): {e['size']} bytes is not a multiple of {unit}")
    require(kind.name != "target" or e["size"] == S.TARGET.size, "bad_section",
            f"section {i} (target): holds {e['size']} bytes, not one {S.TARGET.size}-byte record")


def _check_overlap(spans: list[tuple[int, int]]) -> None:
    spans = sorted(spans)
    for (a0, a1), (b0, b1) in zip(spans, spans[1:]):
        require(b0 >= a1, "bad_section", f"bytes [{a0}, {a1}) and [{b0}, {b1}) overlap")


def _records(st: S.Struct, v: memoryview) -> list[dict]:
    return st.unpack_all(v, 0, len(v) // st.size)


def _int32s(v: memoryview) -> tuple[int, ...]:
    return struct.unpack_from(f"<{len(v) // 4}i", v)


def _enum(table: tuple[str, ...], i: int, reason: str, what: str) -> str:
    require(i < len(table), reason, f"{what} id {i} (known: {', '.join(table)})")
    return table[i]


def _target(v: memoryview) -> TargetInfo:
    t = S.TARGET.unpack(v)
    require(t["reserved2"] == 0, "bad_target", "reserved field set")
    bits = t["switches"]
    require(bits & ~S.TARGET_SWITCHES_KNOWN == 0, "bad_target",
            f"unknown switch bits 0x{bits & ~S.TARGET_SWITCHES_KNOWN:x} (known: "
            + ", ".join(f"+{n} 0x{b:x}" for n, b in S.TARGET_SWITCH_BITS.items())
            + "; written by a newer mcutorch?)")
    return TargetInfo(cpu=_enum(S.CPUS, t["cpu"], "bad_target", "cpu"),
                      isa=_enum(S.ISAS, t["isa"], "bad_target", "isa"),
                      npu=_enum(S.NPUS, t["npu"], "bad_target", "npu"),
                      rounding=_enum(S.ROUNDINGS, t["rounding"], "bad_target", "rounding"),
                      flags=t["flags"],
                      switches=tuple(n for n, b in S.TARGET_SWITCH_BITS.items() if bits & b))


def _regions(v: memoryview) -> list[RegionInfo]:
    n = len(v) // S.REGION.size
    require(n <= S.MAX_REGIONS, "bad_region", f"{n} regions (at most {S.MAX_REGIONS})")
    out = []
    known = S.REGION_FLAG_NPU | S.REGION_FLAG_BASE_KNOWN
    for i, r in enumerate(_records(S.REGION, v)):
        name = r["name"].rstrip(b"\0")
        require(b"\0" not in name, "bad_region", f"region {i}: name {r['name']!r} not zero padded")
        require(r["flags"] & ~known == 0 and r["reserved"] == 0, "bad_region",
                f"region {i}: unknown flags 0x{r['flags']:x} or reserved bits")
        has_base = bool(r["flags"] & S.REGION_FLAG_BASE_KNOWN)
        require(has_base or r["base"] == 0, "bad_region", f"region {i}: base without BASE_KNOWN")
        out.append(RegionInfo(name=name.decode("latin-1"), size=r["size"],
                              alignment=r["alignment"], rank=r["rank"],
                              npu=bool(r["flags"] & S.REGION_FLAG_NPU),
                              base=r["base"] if has_base else None, capacity=r["capacity"]))
    return out


def _tensors(v: memoryview) -> list[TensorInfo]:
    return [_tensor(i, t) for i, t in enumerate(_records(S.TENSOR, v))]


def _tensor(i: int, t: dict) -> TensorInfo:
    what = f"tensor {i}"
    dtype = _enum(S.DTYPES, t["dtype"], "bad_tensor", f"{what}: dtype")
    storage = _enum(S.STORAGES, t["storage"], "bad_tensor", f"{what}: storage")
    rank = t["rank"]
    require(rank <= S.MAX_RANK and not any(t["shape"][rank:]), "bad_tensor",
            f"{what}: rank {rank}, shape {t['shape']} (dims past the rank must be 0)")
    require(t["flags"] & ~S.TENSOR_FLAG_RING == 0 and t["reserved"] == 0, "bad_tensor",
            f"{what}: reserved bits set")
    shape = t["shape"][:rank]
    size = math.prod(shape) * S.DTYPE_SIZES[dtype]
    require(size == t["size"], "bad_tensor",
            f"{what}: {dtype}{list(shape)} is {size} bytes, record says {t['size']}")
    no_region = storage != "arena"  # const and persistent tensors have none
    require(no_region == (t["region"] == S.NONE16), "bad_tensor",
            f"{what}: {storage} tensor with region {t['region']}")
    return TensorInfo(dtype, shape, storage, t["offset"], None if no_region else t["region"],
                      t["scale"], t["zero_point"], bool(t["flags"] & S.TENSOR_FLAG_RING))


def _ops(v: memoryview, operands_v: memoryview, attrs_v: memoryview):
    """OpInfos plus each op's stored flags (checked once delegates are known)."""
    operands, attrs = _int32s(operands_v), _int32s(attrs_v)
    out, flags = [], []
    for i, r in enumerate(_records(S.OP, v)):
        out.append(_op(i, r, operands, attrs))
        flags.append(r["flags"])
    return out, flags


def _op(i: int, r: dict, operands: tuple, attrs: tuple) -> OpInfo:
    require(r["opcode"] in ops.BY_OPCODE, "bad_op",
            f"op {i}: opcode {r['opcode']} is unknown to this mcutorch (format "
            f"{S.VERSION_MAJOR}.{S.VERSION_MINOR} has opcodes {sorted(ops.BY_OPCODE)}); a program "
            "from a newer mcutorch needs that version to run")
    d = ops.BY_OPCODE[r["opcode"]]
    what = f"op {i} ({d.name})"
    require(r["variant"] < len(d.variants), "bad_op",
            f"{what}: variant {r['variant']}, ops.py has {len(d.variants)}")
    require(r["flags"] & ~(S.OP_FLAG_SUBGRAPH | S.OP_FLAG_RING) == 0, "bad_op",
            f"{what}: flags 0x{r['flags']:x}")
    require(r["n_attrs"] == len(d.attrs), "bad_op",
            f"{what}: {r['n_attrs']} attributes, ops.py says {len(d.attrs)}")
    require(r["n_inputs"] <= S.MAX_VARIADIC and r["n_outputs"] <= S.MAX_VARIADIC, "bad_op",
            f"{what}: {r['n_inputs']} inputs, {r['n_outputs']} outputs (at most "
            f"{S.MAX_VARIADIC} each)")
    first, n_in = r["first_operand"], r["n_inputs"]
    end = first + n_in + r["n_outputs"]
    require(end <= len(operands), "bad_offset",
            f"{what}: operands [{first}, {end}) outside OPERANDS ({len(operands)})")
    a0, a1 = r["first_attr"], r["first_attr"] + r["n_attrs"]
    require(a1 <= len(attrs), "bad_offset",
            f"{what}: attributes [{a0}, {a1}) outside ATTRS ({len(attrs)})")
    return OpInfo(d.name, operands[first:first + n_in], operands[first + n_in:end],
                  dict(zip(d.attrs, attrs[a0:a1])), d.variants[r["variant"]],
                  _area(r, "scratch", "bad_op", what),
                  None if r["source"] == S.NONE32 else r["source"])


def _area(r: dict, prefix: str, reason: str, what: str) -> Area | None:
    """`<prefix>_region/_offset/_size` fields; region NONE16 means absent (then all zero)."""
    region, offset, size = (r[f"{prefix}_{k}"] for k in ("region", "offset", "size"))
    if region == S.NONE16:
        require(offset == 0 and size == 0, reason, f"{what}: {prefix} without a region")
        return None
    return Area(region, offset, size)


def _io(v: memoryview) -> tuple[list[int], list[int]]:
    require(len(v) >= S.IO.size, "bad_io", f"IO section of {len(v)} bytes")
    h = S.IO.unpack(v)
    n_in, n_out = h["n_inputs"], h["n_outputs"]
    require(len(v) == S.IO.size + 4 * (n_in + n_out), "bad_io",
            f"IO section of {len(v)} bytes cannot hold {n_in} inputs and {n_out} outputs")
    idx = _int32s(v[S.IO.size:])
    return list(idx[:n_in]), list(idx[n_in:])


def _delegates(v: memoryview, bindings_v: memoryview) -> list[DelegateInfo]:
    n = len(v) // S.DELEGATE.size
    require(n <= S.MAX_DELEGATES, "bad_delegate", f"{n} delegates (at most {S.MAX_DELEGATES})")
    bindings = _records(S.BINDING, bindings_v)
    return [_delegate(k, r, bindings) for k, r in enumerate(_records(S.DELEGATE, v))]


def _delegate(k: int, r: dict, bindings: list[dict]) -> DelegateInfo:
    what = f"delegate {k}"
    npu = _enum(S.NPUS, r["npu"], "bad_delegate", f"{what}: npu")
    require(r["flags"] == 0, "bad_delegate", f"{what}: flags 0x{r['flags']:x}")
    require(1 <= r["n_inputs"] <= S.MAX_VARIADIC and 1 <= r["n_outputs"] <= S.MAX_VARIADIC,
            "bad_delegate", f"{what}: {r['n_inputs']} inputs, {r['n_outputs']} outputs (each "
            f"1..{S.MAX_VARIADIC})")
    first, n_in = r["first_binding"], r["n_inputs"]
    end = first + n_in + r["n_outputs"]
    require(end <= len(bindings), "bad_offset",
            f"{what}: bindings [{first}, {end}) outside BINDINGS ({len(bindings)})")
    cpu = None
    if r["cpu_first_op"] == S.NONE32:
        require(r["cpu_n_ops"] == 0, "bad_delegate", f"{what}: CPU op count without ops")
    else:
        cpu = (r["cpu_first_op"], r["cpu_n_ops"])
    bound = [Binding(b["tensor"], b["offset"], b["shape"], b["elem_size"])
             for b in bindings[first:end]]
    return DelegateInfo(npu, (r["command_offset"], r["command_size"]),
                        (r["weights_offset"], r["weights_size"]),
                        _area(r, "scratch", "bad_delegate", what),
                        _area(r, "fast_scratch", "bad_delegate", what),
                        bound[:n_in], bound[n_in:], cpu)


def _persistent(v: memoryview | None) -> list[PersistentInfo]:
    """PERSISTENT records (format 1.5; absent: none)."""
    out = []
    for k, r in enumerate(_records(S.PERSISTENT, v) if v is not None else ()):
        require(r["flags"] == 0 and r["reserved"] == 0, "bad_persistent",
                f"persistent {k}: reserved bits set")
        out.append(PersistentInfo(r["tensor"], r["init_offset"]))
    return out


def _metadata(v: memoryview | None) -> dict | None:
    if v is None:
        return None
    try:
        meta = json.loads(bytes(v).decode("utf-8"), parse_constant=_reject_constant)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError, JSONDecodeError, ...
        raise ProgramError("bad_metadata", f"not UTF-8 JSON: {e}") from None
    require(isinstance(meta, dict), "bad_metadata", "metadata must be a JSON object")
    return meta


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _check_op_flags(p: Program, flags: list[int]) -> None:
    subgraph = p.subgraph_ops()
    for i, f in enumerate(flags):
        marked = bool(f & S.OP_FLAG_SUBGRAPH)
        require(marked == (i in subgraph), "bad_op",
                f"op {i}: SUBGRAPH flag {'set' if marked else 'clear'} but the op is "
                f"{'' if i in subgraph else 'not '}in a delegate's CPU version")
        op = p.ops[i]  # its tensor indices are checked
        ring = any(p.tensors[t].ring for t in (*op.inputs, *op.outputs))
        require(bool(f & S.OP_FLAG_RING) == ring, "bad_op",
                f"op {i}: RING flag {'set' if f & S.OP_FLAG_RING else 'clear'} but the op has "
                f"{'a' if ring else 'no'} ring window operand")
