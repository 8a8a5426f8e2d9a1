"""Program -> bytes. Deterministic: sections in schema order, zero padding, sorted-key JSON."""
from __future__ import annotations

import json
import struct
import zlib

import numpy as np

from mcutorch.errors import ProgramError
from mcutorch.program import schema as S
from mcutorch.program.model import Program
from mcutorch.program.validate import validate


def write(p: Program) -> bytes:
    """Validate `p` (ProgramError when invalid) and return the program file."""
    validate(p)
    return _assemble(_payloads(p))


def _pack(st: S.Struct, values: dict, what: str) -> bytes:
    try:
        return st.pack(values)
    except struct.error as e:
        raise ProgramError(st.reason, f"{what}: {e}") from None


def _i32(values: list[int]) -> bytes:
    return np.asarray(values, dtype="<i4").tobytes()


def _payloads(p: Program) -> list[tuple[str, bytes]]:
    """(section name, bytes) in file order; METADATA last so it can be stripped."""
    ops, operands, attrs = _ops(p)
    delegates, bindings = _delegates(p)
    out = [("target", _target(p)), ("regions", _regions(p)), ("tensors", _tensors(p)),
           ("ops", ops), ("operands", operands), ("attrs", attrs), ("io", _io(p)),
           ("delegates", delegates), ("bindings", bindings)]
    if p.persistent:  # format 1.5; absent otherwise, so a stateless program reads as before
        out.append(("persistent", b"".join(
            _pack(S.PERSISTENT, {"tensor": r.tensor, "init_offset": r.init_offset, "flags": 0,
                                 "reserved": 0}, f"persistent {k}")
            for k, r in enumerate(p.persistent))))
    out.append(("const", bytes(p.constants)))
    if p.metadata is not None:
        out.append(("metadata", _metadata(p.metadata)))
    return out


def _assemble(payloads: list[tuple[str, bytes]]) -> bytes:
    """Header, section table, then each section at the next 16-byte boundary; CRC last."""
    table = S.HEADER.size
    pos = table + S.SECTION.size * len(payloads)
    entries, placed = [], []
    for name, data in payloads:
        pos += -pos % S.ALIGN
        kind = S.KIND_BY_NAME[name]
        flags = S.SECTION_FLAG_SKIPPABLE if kind.skippable else 0
        entries.append(_pack(S.SECTION, {"kind": kind.id, "flags": flags, "offset": pos,
                                         "size": len(data), "reserved": 0}, name))
        placed.append((pos, data))
        pos += len(data)
    buf = bytearray(pos)
    buf[table:table + S.SECTION.size * len(entries)] = b"".join(entries)
    for offset, data in placed:
        buf[offset:offset + len(data)] = data
    header = {"magic": S.MAGIC, "version_major": S.VERSION_MAJOR,
              "version_minor": S.VERSION_MINOR, "file_size": pos, "crc32": 0, "flags": 0,
              "section_count": len(entries), "section_table": table, "reserved": 0}
    buf[:S.HEADER.size] = _pack(S.HEADER, header, "header")
    header["crc32"] = zlib.crc32(buf[S.CRC_START:])
    buf[:S.HEADER.size] = _pack(S.HEADER, header, "header")
    return bytes(buf)


def _target(p: Program) -> bytes:
    t = p.target
    switches = sum(S.TARGET_SWITCH_BITS[s] for s in t.switches)
    return _pack(S.TARGET, {"cpu": S.CPUS.index(t.cpu), "npu": S.NPUS.index(t.npu),
                            "isa": S.ISAS.index(t.isa), "rounding": S.ROUNDINGS.index(t.rounding),
                            "switches": switches, "flags": t.flags, "reserved2": 0}, "target")


def _regions(p: Program) -> bytes:
    out = []
    for i, r in enumerate(p.regions):
        flags = (S.REGION_FLAG_NPU if r.npu else 0) | (
            S.REGION_FLAG_BASE_KNOWN if r.base is not None else 0)
        out.append(_pack(S.REGION, {
            "name": r.name.encode("ascii"), "size": r.size, "capacity": r.capacity,
            "base": r.base or 0, "alignment": r.alignment, "rank": r.rank, "flags": flags,
            "reserved": 0}, f"region {i}"))
    return b"".join(out)


def _tensors(p: Program) -> bytes:
    out = []
    for i, t in enumerate(p.tensors):
        out.append(_pack(S.TENSOR, {
            "dtype": S.DTYPES.index(t.dtype), "rank": len(t.shape),
            "storage": S.STORAGES.index(t.storage), "flags": S.TENSOR_FLAG_RING if t.ring else 0,
            "region": S.NONE16 if t.region is None else t.region, "reserved": 0,
            "shape": t.shape + (0,) * (S.MAX_RANK - len(t.shape)), "offset": t.offset,
            "size": t.nbytes, "scale": t.scale, "zero_point": t.zero_point}, f"tensor {i}"))
    return b"".join(out)


def _ops(p: Program) -> tuple[bytes, bytes, bytes]:
    """OPS records plus the OPERANDS and ATTRS arrays they index."""
    records, operands, attrs = [], [], []
    subgraph = p.subgraph_ops()
    for i, op in enumerate(p.ops):
        d = op.opdef
        scratch = op.scratch
        records.append(_pack(S.OP, {
            "opcode": d.opcode, "variant": d.variants.index(op.variant),
            "flags": (S.OP_FLAG_SUBGRAPH if i in subgraph else 0) | (
                S.OP_FLAG_RING if any(p.tensors[t].ring for t in (*op.inputs, *op.outputs))
                else 0),
            "n_inputs": len(op.inputs), "n_outputs": len(op.outputs),
            "first_operand": len(operands), "first_attr": len(attrs), "n_attrs": len(op.attrs),
            "scratch_region": S.NONE16 if scratch is None else scratch.region,
            "scratch_offset": 0 if scratch is None else scratch.offset,
            "scratch_size": 0 if scratch is None else scratch.size,
            "source": S.NONE32 if op.source is None else op.source}, f"op {i}"))
        operands += [*op.inputs, *op.outputs]
        attrs += list(op.attrs.values())
    return b"".join(records), _i32(operands), _i32(attrs)


def _io(p: Program) -> bytes:
    head = _pack(S.IO, {"n_inputs": len(p.inputs), "n_outputs": len(p.outputs)}, "io")
    return head + _i32(p.inputs + p.outputs)


def _delegates(p: Program) -> tuple[bytes, bytes]:
    """DELEGATES records plus the BINDINGS array they index."""
    records, bindings = [], []
    for k, d in enumerate(p.delegates):
        values = {"npu": S.NPUS.index(d.npu), "flags": 0,
                  "command_offset": d.command[0], "command_size": d.command[1],
                  "weights_offset": d.weights[0], "weights_size": d.weights[1],
                  "first_binding": len(bindings), "n_inputs": len(d.inputs),
                  "n_outputs": len(d.outputs),
                  "cpu_first_op": S.NONE32 if d.cpu_ops is None else d.cpu_ops[0],
                  "cpu_n_ops": 0 if d.cpu_ops is None else d.cpu_ops[1]}
        for name in ("scratch", "fast_scratch"):
            area = getattr(d, name)
            values[f"{name}_region"] = S.NONE16 if area is None else area.region
            values[f"{name}_offset"] = 0 if area is None else area.offset
            values[f"{name}_size"] = 0 if area is None else area.size
        records.append(_pack(S.DELEGATE, values, f"delegate {k}"))
        bindings += [_pack(S.BINDING, {"tensor": b.tensor, "offset": b.offset,
                                       "elem_size": b.elem_size, "shape": b.shape},
                           f"delegate {k} binding") for b in d.inputs + d.outputs]
    return b"".join(records), b"".join(bindings)


def _metadata(meta: dict) -> bytes:
    try:
        return json.dumps(meta, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as e:  # includes UnicodeEncodeError (lone surrogates)
        raise ProgramError("bad_metadata", f"not JSON-serialisable: {e}") from None
