"""The program file: round trip, determinism, layout, every named error, fuzzing, the C header."""
from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcutorch import ops
from mcutorch.device.paths import RUNTIME
from mcutorch.errors import ProgramError
from mcutorch.program import (Area, Binding, ConstantPool, DelegateInfo, OpInfo, Program,
                              RegionInfo, TargetInfo, TensorInfo, load, save)
from mcutorch.program import schema as S

# ----------------------------------------------------------------------------------------------
# a small hand-built program: conv2d -> delegate (CPU version: lut) -> clamp, two regions,
# a delegate with 6-D bindings in NPU-reachable scratch, metadata


def build_program(meta_order: int = 0) -> Program:
    pool = ConstantPool()
    sram, dtcm = 0, 1
    tensors = [
        TensorInfo.arena("int8", (1, 4, 4, 2), dtcm, 0, 0.05, -3),  # 0 x
        pool.tensor(np.arange(-3, 3, dtype=np.int8).reshape(3, 1, 1, 2), 0.01),  # 1 weight
        pool.tensor(np.array([100, -200, 70000], np.int32)),  # 2 bias
        pool.tensor(np.array([1 << 30, 1 << 29, 1 << 28], np.int32)),  # 3 mult
        pool.tensor(np.array([33, 34, 35], np.int32)),  # 4 shift
        TensorInfo.arena("int8", (1, 4, 4, 3), sram, 64, 0.1, 5),  # 5 y (delegate input)
        TensorInfo.arena("int8", (1, 4, 4, 3), sram, 128, 1 / 256, -128),  # 6 z (delegate out)
        TensorInfo.arena("int8", (1, 4, 4, 3), dtcm, 32, 1 / 256, -128),  # 7 out
        pool.tensor(np.arange(-128, 128, dtype=np.int16).astype(np.int8)),  # 8 lut table
    ]
    command = pool.add(b"\x01\x02\x03\x04" * 8)
    weights = pool.add(np.arange(48, dtype=np.uint8))
    conv = dict.fromkeys(ops.get("conv2d").attrs, 0) | {
        "stride_h": 1, "stride_w": 1, "dilation_h": 1, "dilation_w": 1, "groups": 1,
        "in_zp": -3, "out_zp": 5, "act_min": -128, "act_max": 127}
    ops_ = [
        OpInfo("conv2d", [0, 1, 2, 3, 4], [5], conv, scratch=Area(dtcm, 96, 32), source=0),
        OpInfo("delegate", [5], [6], {"index": 0}, source=1),
        OpInfo("clamp", [6], [7], {"act_max": 127, "act_min": 0}),  # given out of ops.py order
        OpInfo("lut", [5, 8], [6], {}, source=1),  # the delegate's CPU version
    ]
    delegate = DelegateInfo(
        "ethos-u55-128", (command, 32), (weights, 48), scratch=Area(sram, 0, 256),
        fast_scratch=Area(sram, 256, 64),
        inputs=[Binding(5, 64, (1, 4, 4, 3), 1)], outputs=[Binding(6, 128, (1, 1, 1, 4, 4, 3), 1)],
        cpu_ops=(3, 1))
    regions = [RegionInfo("SRAM", 320, 16, rank=1, npu=True, base=0x21000000, capacity=4 << 20),
               RegionInfo("DTCM", 128, 16, rank=0, base=0x20000000, capacity=512 << 10)]
    meta = {"model": "tiny", "tensor_names": [f"t{i}" for i in range(len(tensors))],
            "sources": [{"loc": "model.py:12", "op": "aten.conv2d.default"},
                        {"loc": "model.py:13", "op": "aten.sigmoid.default"}],
            "options": {"target": "cortex-m55+ethos-u55-128", "béta": "ü"}}
    if meta_order:  # same content, different insertion order
        meta = dict(reversed(list(meta.items())))
    return Program(TargetInfo("cortex-m55", "mve", "ethos-u55-128"), regions, tensors, ops_,
                   [0], [7], pool.to_bytes(), [delegate], meta)


@pytest.fixture(scope="module")
def program() -> Program:
    return build_program()


@pytest.fixture(scope="module")
def blob(program) -> bytes:
    return program.to_bytes()


# ----------------------------------------------------------------------------------------------
# helpers: find fields in a file through its own section table, patch them, fix the CRC


def sections(buf) -> dict[str, tuple[int, int]]:
    h = S.HEADER.unpack(buf)
    out = {}
    for i, e in enumerate(S.SECTION.unpack_all(buf, h["section_table"], h["section_count"])):
        kind = S.KIND_BY_ID.get(e["kind"])
        out[kind.name if kind else f"kind{e['kind']}"] = (e["offset"], e["size"])
        out[f"#{i}"] = (h["section_table"] + i * S.SECTION.size, S.SECTION.size)
    return out


RECORD = {"header": S.HEADER, "target": S.TARGET, "regions": S.REGION, "tensors": S.TENSOR,
          "ops": S.OP, "io": S.IO, "delegates": S.DELEGATE, "bindings": S.BINDING}


def field_offset(buf, where: str, index: int, field: str, element: int = 0) -> tuple[int, str]:
    """Absolute offset and struct char of record `index`.`field` in section `where`
    ("header", a section name, or "#k" for section table entry k)."""
    if where == "header":
        st, base = S.HEADER, 0
    elif where.startswith("#"):
        st, base = S.SECTION, sections(buf)[where][0]
    else:
        st, base = RECORD[where], sections(buf)[where][0] + index * RECORD[where].size
    f = next(f for f in st.fields if f.name == field)
    width, char = S._TYPES[f.type][1], S._TYPES[f.type][2]
    return base + st.offsets[field] + element * width, f"{f.count}s" if char == "s" else char


def recrc(buf: bytearray) -> bytes:
    struct.pack_into("<I", buf, 12, zlib.crc32(buf[S.CRC_START:]))
    return bytes(buf)


def patch(blob: bytes, where: str, index: int, field: str, value, element: int = 0,
          fix_crc: bool = True) -> bytes:
    buf = bytearray(blob)
    off, char = field_offset(buf, where, index, field, element)
    struct.pack_into("<" + char, buf, off, value)
    return recrc(buf) if fix_crc else bytes(buf)


def patch_bytes(blob: bytes, offset: int, data: bytes, fix_crc: bool = True) -> bytes:
    buf = bytearray(blob)
    buf[offset:offset + len(data)] = data
    return recrc(buf) if fix_crc else bytes(buf)


def reason_of(buf) -> str | None:
    """None when `buf` loads; the ProgramError reason otherwise (any other exception fails)."""
    try:
        Program.from_bytes(buf)
    except ProgramError as e:
        assert e.reason in S.ERRORS, e
        return e.reason
    return None


# ----------------------------------------------------------------------------------------------
# round trip, determinism, layout


def test_round_trip_is_identical(program, blob):
    back = Program.from_bytes(blob)
    assert back == program
    assert back.to_bytes() == blob
    assert back.ops[2].attrs == {"act_min": 0, "act_max": 127}
    assert list(back.ops[2].attrs) == ["act_min", "act_max"]  # ops.py order
    assert back.delegates[0].inputs[0].shape == (1, 1, 1, 4, 4, 3)
    assert back.regions[1].base == 0x20000000 and back.regions[0].npu
    assert back.metadata["options"]["béta"] == "ü"
    assert back.main_ops() == [0, 1, 2] and back.subgraph_ops() == {3}
    assert back.op_source(0) == "model.py:12 (aten.conv2d.default)"


def test_deterministic(blob):
    assert build_program().to_bytes() == blob
    assert build_program(meta_order=1).to_bytes() == blob  # JSON keys sorted


def test_save_load(tmp_path, program):
    save(program, tmp_path / "m.mtp")
    assert load(tmp_path / "m.mtp") == program
    assert Program.load(tmp_path / "m.mtp").to_bytes() == program.to_bytes()


def test_layout(blob):
    h = S.HEADER.unpack(blob)
    assert blob[:4] == b"MCUT" and h["file_size"] == len(blob)
    assert (h["version_major"], h["version_minor"]) == (1, 9)
    assert h["crc32"] == zlib.crc32(blob[16:])
    assert (S.HEADER.size, S.SECTION.size, S.TARGET.size, S.REGION.size, S.TENSOR.size,
            S.OP.size, S.IO.size, S.DELEGATE.size, S.BINDING.size, S.PERSISTENT.size) == (
        32, 16, 16, 32, 48, 32, 8, 56, 36, 16)
    for layout in S.STRUCTS:
        assert layout.dtype.itemsize == layout.size
        assert [layout.dtype.fields[f.name][1] for f in layout.fields] == [layout.offsets[f.name]
                                                                            for f in layout.fields]
    secs = sections(blob)
    for name in [k.name for k in S.SECTION_KINDS if not k.optional]:
        assert secs[name][0] % 16 == 0, name
    names = [k for k in secs if not k.startswith("#")]
    assert names[-1] == "metadata"  # last, so stripping is cheap


def test_tensor_records_parse_with_numpy_dtype(blob, program):
    off, size = sections(blob)["tensors"]
    recs = np.frombuffer(blob, S.TENSOR.dtype, size // S.TENSOR.size, off)
    assert recs["offset"].tolist() == [t.offset for t in program.tensors]
    assert recs["shape"][0].tolist() == [1, 4, 4, 2, 0, 0]


def test_const_array_views_the_buffer_in_place(blob, program):
    buf = bytearray(blob)
    p = Program.from_bytes(buf)
    w = p.const_array(1)
    assert w.dtype == np.int8 and w.shape == (3, 1, 1, 2)
    np.testing.assert_array_equal(w, np.arange(-3, 3).reshape(3, 1, 1, 2))
    np.testing.assert_array_equal(p.const_array(2), [100, -200, 70000])
    const_at = sections(blob)["const"][0]
    assert (const_at + p.tensors[2].offset) % 16 == 0
    buf[const_at + p.tensors[1].offset] = 0x7F  # a write to the buffer shows through: no copy
    assert w[0, 0, 0, 0] == 127
    with pytest.raises(ValueError):
        p.const_array(0)


def test_stripped_and_unknown_sections(program, blob):
    stripped = program.stripped().to_bytes()
    assert len(stripped) < len(blob) and Program.from_bytes(stripped).metadata is None
    # an unknown SKIPPABLE section is ignored, an unknown required one refused
    for flags, expect in ((S.SECTION_FLAG_SKIPPABLE, None), (0, "bad_section")):
        buf = bytearray(blob)
        i = S.HEADER.unpack(blob)["section_count"] - 1  # the metadata entry
        off, _ = field_offset(buf, f"#{i}", 0, "kind")
        struct.pack_into("<HH", buf, off, 99, flags)
        assert reason_of(recrc(buf)) == expect


def test_writer_refuses_invalid_programs(program):
    from dataclasses import replace

    def with_op2(op):
        return replace(program, ops=[*program.ops[:2], op, *program.ops[3:]])

    with pytest.raises(ProgramError, match="bad_op"):
        with_op2(OpInfo("conv3d", [6], [7])).to_bytes()
    with pytest.raises(ProgramError, match="bad_op"):
        with_op2(OpInfo("clamp", [6], [7], {"act_min": 0})).to_bytes()
    with pytest.raises(ProgramError, match="bad_op"):
        with_op2(OpInfo("clamp", [6], [1], {"act_min": 0, "act_max": 1})).to_bytes()
    with pytest.raises(ProgramError, match="bad_io"):
        replace(program, outputs=[1]).to_bytes()
    with pytest.raises(ProgramError, match="bad_metadata"):
        replace(program, metadata={"x": float("nan")}).to_bytes()
    with pytest.raises(ProgramError, match="bad_target.*'tflite' is reserved"):
        replace(program, target=replace(program.target, rounding="tflite")).to_bytes()


def test_version_error_names_the_supported_version(blob):
    want = (rf"format 2\.{S.VERSION_MINOR}; this mcutorch reads format 1\.x "
            rf"\(up to 1\.{S.VERSION_MINOR}\)")
    with pytest.raises(ProgramError, match=want):
        Program.from_bytes(patch(blob, "header", 0, "version_major", 2))


def test_crc_check_can_be_skipped(blob):
    bad = patch_bytes(blob, sections(blob)["const"][0], b"\x55", fix_crc=False)
    assert reason_of(bad) == "bad_crc"
    Program.from_bytes(bad, verify_crc=False)


def test_ids_agree_with_targets():
    from mcutorch import targets

    assert {n: i for i, n in enumerate(S.CPUS)} == targets.CPU_IDS
    assert {("" if n == "none" else n): i for i, n in enumerate(S.NPUS)} == targets.NPU_IDS
    assert {n: i for i, n in enumerate(S.ISAS)} == targets.ISA_IDS
    assert S.TARGET_SWITCHES == targets.SWITCH_ORDER


# ----------------------------------------------------------------------------------------------
# the target: CPU, ISA level, switch bits and NPU as the compile decided them (format 1.1)


def copy_program(target: str) -> Program:
    """y = copy(x) in one region, compiled (by hand) for `target`."""
    from mcutorch.targets import parse_target

    tensors = [TensorInfo.arena("int8", (1, 4), 0, 0, 0.5),
               TensorInfo.arena("int8", (1, 4), 0, 16, 0.5)]
    return Program(TargetInfo.of(parse_target(target)), [RegionInfo("ram", 32)], tensors,
                   [OpInfo("copy", [0], [1])], [0], [1])


def every_target_name() -> list[str]:
    """Every CPU with every combination of its switches, without and with an NPU."""
    from itertools import combinations

    from mcutorch.targets import CPUS

    names = []
    for cpu in CPUS.values():
        for k in range(len(cpu.switches) + 1):
            for chosen in combinations(cpu.switches, k):
                names.append("+".join((cpu.name, *chosen)))
    return names + [f"{n}+ethos-u55-128" for n in names if n.startswith("cortex-m55")]


def test_every_target_round_trips_through_a_program():
    from mcutorch.targets import parse_target, valid_target_names

    names = every_target_name()
    assert set(valid_target_names()) <= set(names) and "cortex-m33+nodsp+nofp" in names
    for name in names:
        t = parse_target(name)
        blob = copy_program(name).to_bytes()
        back = Program.from_bytes(blob).target
        assert back.name == t.name == name
        assert back.as_target() == t  # the whole Target: switches, features, gcc flags
        assert (back.cpu, back.isa, back.switches) == (t.cpu, t.isa, t.switches)
        bits = S.TARGET.unpack(blob, sections(blob)["target"][0])["switches"]
        assert bits == sum(S.TARGET_SWITCH_BITS[s] for s in t.switches)


def test_switch_bits_are_the_documented_ones():
    assert (S.TARGET_SWITCH_NODSP, S.TARGET_SWITCH_NOMVE, S.TARGET_SWITCH_NOFP) == (1, 2, 4)
    assert S.TARGET_SWITCHES_KNOWN == 7
    blob = copy_program("cortex-m4+nofp").to_bytes()
    off = sections(blob)["target"][0]
    assert blob[off:off + 8] == bytes([3, 0, 0, 0, 1, 0, 4, 0])  # cpu 3, npu 0, dsp, single, nofp


def test_programs_without_switches_are_format_1_0_but_the_version():
    """A target without switches writes exactly the 1.0 bytes (TARGET.switches was reserved 0),
    and a 1.0 program (or one of a newer minor) still loads."""
    blob = copy_program("cortex-m55").to_bytes()
    off = sections(blob)["target"][0]
    assert blob[off + 6:off + 8] == b"\0\0"
    for minor in (0, 9):
        old = patch(blob, "header", 0, "version_minor", minor)
        assert Program.from_bytes(old) == Program.from_bytes(blob)


def test_unknown_opcode_is_refused_by_name():
    """An opcode past the registry (a program from a newer mcutorch) is refused, naming it."""
    blob = patch(copy_program("cortex-m55").to_bytes(), "ops", 0, "opcode", ops.OPCODE_END)
    with pytest.raises(ProgramError, match=f"opcode {ops.OPCODE_END} is unknown") as err:
        Program.from_bytes(blob)
    assert err.value.reason == "bad_op"


# (target, TARGET fields to patch, reason or None): switches must be known, taken by the CPU,
# and give the recorded ISA level. The C loader must agree (test_crt).
SWITCH_CASES = [
    ("cortex-m4", {"switches": S.TARGET_SWITCH_NOMVE}, "bad_target"),  # M4 has no MVE to drop
    ("cortex-m4", {"switches": S.TARGET_SWITCH_NODSP}, "bad_target"),  # DSP is not optional
    ("cortex-m4", {"switches": S.TARGET_SWITCH_NOFP}, None),
    ("cortex-m0", {"switches": S.TARGET_SWITCH_NOFP}, "bad_target"),
    ("cortex-m55", {"switches": S.TARGET_SWITCH_NODSP}, "bad_target"),
    ("cortex-m55", {"switches": S.TARGET_SWITCH_NOFP}, "bad_target"),  # MVE needs the FPU
    ("cortex-m55", {"switches": S.TARGET_SWITCH_NOMVE}, "bad_target"),  # ISA still mve
    ("cortex-m55", {"switches": S.TARGET_SWITCH_NOMVE, "isa": 1}, None),
    ("cortex-m55", {"switches": 0x8}, "bad_target"),  # unknown bit
    ("cortex-m55", {"switches": 0x8000}, "bad_target"),
    ("cortex-m55", {"switches": 0xFFFF}, "bad_target"),
    ("cortex-m55", {"isa": 1}, "bad_target"),  # dsp without +nomve
    ("cortex-m55+nomve", {"switches": 0}, "bad_target"),  # ISA dsp, but plain M55 is mve
    ("cortex-m85+nomve", {"isa": 2}, "bad_target"),
    ("cortex-m33", {"switches": S.TARGET_SWITCH_NODSP}, "bad_target"),  # ISA still dsp
    ("cortex-m33", {"switches": S.TARGET_SWITCH_NODSP | S.TARGET_SWITCH_NOFP, "isa": 0}, None),
    ("cortex-m33+nodsp", {"isa": 1}, "bad_target"),
    ("cortex-m33+nodsp+nofp", {"switches": S.TARGET_SWITCH_NOFP}, "bad_target"),  # isa scalar
    ("cortex-m35p", {"switches": S.TARGET_SWITCH_NOMVE}, "bad_target"),
    ("cortex-m4+nofp", {"cpu": 4}, None),  # cortex-m7+nofp
    ("cortex-m7+nofp", {"cpu": 2}, "bad_target"),  # M3 takes no +nofp
    ("cortex-m0plus", {"isa": 1}, "bad_target"),
]


def switch_case_files() -> list[tuple[bytes, str | None]]:
    out = []
    for target, fields, reason in SWITCH_CASES:
        blob = copy_program(target).to_bytes()
        for name, value in fields.items():
            blob = patch(blob, "target", 0, name, value)
        out.append((blob, reason))
    return out


@pytest.mark.parametrize("case", range(len(SWITCH_CASES)))
def test_switch_bits_are_checked(case):
    blob, reason = switch_case_files()[case]
    assert reason_of(blob) == reason, SWITCH_CASES[case]


def test_writer_refuses_switches_the_target_does_not_have():
    for info in (TargetInfo("cortex-m4", "dsp", switches=("nomve",)),
                 TargetInfo("cortex-m55", "mve", switches=("nomve",)),
                 TargetInfo("cortex-m55", "scalar"),
                 TargetInfo("cortex-m33", "dsp", switches=("nofast",))):
        p = copy_program("cortex-m55")
        p.target = info
        with pytest.raises(ProgramError) as e:
            p.to_bytes()
        assert e.value.reason == "bad_target", info
    assert TargetInfo("cortex-m33", "scalar", switches=["nofp", "nodsp", "nofp"]).switches == (
        "nodsp", "nofp")  # canonical order, each once


def test_inspect_names_the_recorded_target():
    from mcutorch.report import describe, render

    info = describe(copy_program("cortex-m33+nodsp+nofp"))
    assert info["target"]["name"] == "cortex-m33+nodsp+nofp"
    assert info["target"]["switches"] == ["nodsp", "nofp"] and info["target"]["isa"] == "scalar"
    assert render(info).startswith("model '' for cortex-m33+nodsp+nofp (isa scalar")


def test_target_of_a_bad_record_is_refused():
    from mcutorch.errors import TargetError

    with pytest.raises(TargetError, match="ISA level 'scalar'"):
        TargetInfo("cortex-m55", "scalar").as_target()
    with pytest.raises(TargetError, match="does not take"):
        TargetInfo("cortex-m4", "dsp", switches=("nomve",)).as_target()


# ----------------------------------------------------------------------------------------------
# limits (schema.MAX_*): the counts that keep every reader linear in the file. At each bound a
# program loads; one past it both readers refuse (test_crt runs the same files through the C
# loader). Files past a bound are written without the writer's validation, as a hostile tool
# could write them.


def unchecked_bytes(p: Program) -> bytes:
    """The file of `p` without the writer's checks."""
    from mcutorch.program import writer

    return writer._assemble(writer._payloads(p))


def _target_info(name: str) -> TargetInfo:
    from mcutorch.targets import parse_target

    return TargetInfo.of(parse_target(name))


def regions_program(n: int) -> Program:
    """copy_program with `n` regions (the tensors in the first)."""
    p = copy_program("cortex-m55")
    p.regions += [RegionInfo(f"r{k}", 16) for k in range(1, n)]
    return p


def io_program(n_in: int, n_out: int, n_concat: int) -> Program:
    """`n_in` program inputs, `n_out` outputs and one concat of `n_concat` (1, 1) inputs (in
    turn) into y (1, n_concat), which is the first output; the others are tensors 0, 1, ...
    (inputs when n_out <= n_in + 1: an output no op writes nor the caller is refused)."""
    n = max(n_in, n_out, n_concat)
    tensors = [TensorInfo.arena("int8", (1, 1), 0, k, 0.5) for k in range(n)]
    tensors.append(TensorInfo.arena("int8", (1, n_concat), 0, n, 0.5))
    y = len(tensors) - 1
    return Program(_target_info("cortex-m55"), [RegionInfo("ram", n + n_concat)], tensors,
                   [OpInfo("concat", [k % n_in for k in range(n_concat)], [y], {"axis": 3})],
                   list(range(n_in)), [y, *range(n_out - 1)])


def delegates_program(n_delegates: int, n_bindings: int) -> Program:
    """`n_delegates` delegates (no ops run them), each binding `n_bindings` (1, 1) inputs and
    one output in the same scratch area; the program's output is its input (no op writes the
    delegates' output)."""
    pool = ConstantPool()
    command = pool.add(b"\x01" * 16)
    tensors = [TensorInfo.arena("int8", (1, 1), 0, k, 0.5) for k in range(n_bindings + 1)]
    scratch = Area(0, 0, n_bindings + 1)
    delegates = [DelegateInfo("ethos-u55-128", (command, 16), scratch=scratch,
                              inputs=[Binding(k, k, (1, 1), 1) for k in range(n_bindings)],
                              outputs=[Binding(n_bindings, n_bindings, (1, 1), 1)])
                 for _ in range(n_delegates)]
    return Program(_target_info("cortex-m55+ethos-u55-128"),
                   [RegionInfo("sram", n_bindings + 1, npu=True)], tensors, [], [0],
                   [0], pool.to_bytes(), delegates)


# (name, program at the bound, program one past it, reason)
LIMITS = [
    ("regions", lambda: regions_program(S.MAX_REGIONS), lambda: regions_program(S.MAX_REGIONS + 1),
     "bad_region"),
    ("inputs", lambda: io_program(S.MAX_IO, 1, 1), lambda: io_program(S.MAX_IO + 1, 1, 1),
     "bad_io"),
    ("outputs", lambda: io_program(S.MAX_IO - 1, S.MAX_IO, 1),
     lambda: io_program(S.MAX_IO, S.MAX_IO + 1, 1), "bad_io"),
    ("concat_inputs", lambda: io_program(1, 1, S.MAX_VARIADIC),
     lambda: io_program(1, 1, S.MAX_VARIADIC + 1), "bad_op"),
    ("delegates", lambda: delegates_program(S.MAX_DELEGATES, 1),
     lambda: delegates_program(S.MAX_DELEGATES + 1, 1), "bad_delegate"),
    ("bindings", lambda: delegates_program(1, S.MAX_VARIADIC),
     lambda: delegates_program(1, S.MAX_VARIADIC + 1), "bad_delegate"),
]


def limit_files() -> list[tuple[str, bytes, bytes, str]]:
    return [(name, at().to_bytes(), unchecked_bytes(past()), reason)
            for name, at, past, reason in LIMITS]


@pytest.mark.parametrize("name", [case[0] for case in LIMITS])
def test_limits(name):
    _, at, past, reason = next(c for c in LIMITS if c[0] == name)
    assert reason_of(at().to_bytes()) is None
    assert reason_of(unchecked_bytes(past())) == reason
    with pytest.raises(ProgramError) as e:
        past().to_bytes()
    assert e.value.reason == reason


# ----------------------------------------------------------------------------------------------
# operands that share bytes (ops.ALIAS_KINDS): refused (bad_op) unless the op runs in place and
# its output is exactly an input's bytes; delegate ops are exempt, the ops of their CPU versions
# are not. test_crt runs the same files through the C loader, and the accepted ones through both
# executors.


def one_op_program(name: str, ins: list, out, attrs: dict | None = None, scratch=None,
                   out_region: int = 0) -> Program:
    """One op over int8 tensors in region "ram" (256 B; region "ram2" is a second one): `ins`
    are (shape, offset) of arena inputs, or arrays (constants); `out` the output's (shape,
    offset)."""
    pool = ConstantPool()
    tensors = [pool.tensor(x, 1.0) if isinstance(x, np.ndarray)
               else TensorInfo.arena("int8", x[0], 0, x[1], 0.5) for x in ins]
    tensors.append(TensorInfo.arena("int8", out[0], out_region, out[1], 0.5))
    arena = [i for i, x in enumerate(ins) if not isinstance(x, np.ndarray)]
    return Program(_target_info("cortex-m55"), [RegionInfo("ram", 256), RegionInfo("ram2", 256)],
                   tensors,
                   [OpInfo(name, range(len(ins)), [len(ins)], attrs or {}, scratch=scratch)],
                   arena, [len(ins)], pool.to_bytes())


ADD = {"a_zp": 0, "a_mult": 1 << 30, "a_shift": 30, "b_zp": 0, "b_mult": 1 << 30, "b_shift": 30,
       "out_zp": 0, "out_mult": 1 << 30, "out_shift": 31, "act_min": -128, "act_max": 127}
CONV = {"stride_h": 1, "stride_w": 1, "dilation_h": 1, "dilation_w": 1, "pad_top": 0,
        "pad_left": 0, "pad_bottom": 0, "pad_right": 0, "groups": 1, "in_zp": 0, "out_zp": 0,
        "act_min": -128, "act_max": 127}
POOL = {"kernel_h": 2, "kernel_w": 2, "stride_h": 2, "stride_w": 2, "pad_top": 0, "pad_left": 0,
        "pad_bottom": 0, "pad_right": 0, "act_min": -128, "act_max": 127}


def _conv(y_offset: int, scratch=None) -> Program:
    w = np.ones((2, 1, 1, 2), np.int8)
    consts = [w, np.zeros(2, np.int32), np.full(2, 1 << 30, np.int32), np.full(2, 31, np.int32)]
    return one_op_program("conv2d", [((1, 4, 4, 2), 0), *consts], ((1, 4, 4, 2), y_offset), CONV,
                          scratch)


CONV_ADD = {**{k: v for k, v in CONV.items() if k not in ("out_zp", "act_min", "act_max")},
            "conv_zp": 0, "conv_min": -128, "conv_max": 127, **ADD}


def _conv_add(skip: int, y: int, scratch=Area(0, 96, 32)) -> Program:
    """conv2d_add of x at [0, 32), skip at `skip`, y at `y` (32 bytes each)."""
    w = np.ones((2, 1, 1, 2), np.int8)
    consts = [w, np.zeros(2, np.int32), np.full(2, 1 << 30, np.int32), np.full(2, 31, np.int32)]
    return one_op_program("conv2d_add", [((1, 4, 4, 2), 0), *consts, ((1, 4, 4, 2), skip)],
                          ((1, 4, 4, 2), y), CONV_ADD, scratch)


def _add(a: int, b: int, y: int, y_shape=(1, 4), region: int = 0) -> Program:
    return one_op_program("add", [((1, 4), a), ((1, 4), b)], (y_shape, y), ADD, out_region=region)


def _add_self(y: int) -> Program:
    """add(x, x): one program input read twice (tensor 1 is left unused)."""
    p = _add(0, 8, y)
    p.inputs, p.ops[0].inputs = [0], (0, 0)
    return p


def _delegate_over_input(offset: int, cpu_version: bool) -> Program:
    """build_program's delegate with its output binding moved to scratch `offset` (its input's
    bytes are [64, 112)); without the CPU version (lut) when cpu_version is False."""
    p = build_program()
    p.tensors[6] = replace(p.tensors[6], offset=offset)
    p.delegates[0].outputs[0] = replace(p.delegates[0].outputs[0], offset=offset)
    if not cpu_version:
        p.delegates[0].cpu_ops, p.ops = None, p.ops[:3]
    return p


TABLE = np.arange(-128, 128, dtype=np.int16).astype(np.int8)[::-1].copy()
# (name, program, reason or None)
OVERLAP_CASES = [
    ("conv_partial", lambda: _conv(16), "bad_op"),
    ("conv_exact", lambda: _conv(0), "bad_op"),  # no in-place kernel
    ("conv_apart", lambda: _conv(32), None),
    ("conv_scratch_on_output", lambda: _conv(32, Area(0, 56, 16)), "bad_op"),
    ("conv_scratch_on_input", lambda: _conv(32, Area(0, 24, 16)), "bad_op"),
    ("conv_scratch_apart", lambda: _conv(32, Area(0, 64, 16)), None),
    ("conv_scratch_other_region", lambda: _conv(32, Area(1, 0, 64)), None),
    ("max_pool_partial", lambda: one_op_program(
        "max_pool2d", [((1, 4, 4, 2), 0)], ((1, 2, 2, 2), 24), POOL), "bad_op"),
    ("concat_on_second_input", lambda: one_op_program(
        "concat", [((1, 4), 0), ((1, 4), 4)], ((1, 8), 4), {"axis": 3}), "bad_op"),
    ("concat_apart", lambda: one_op_program(
        "concat", [((1, 4), 0), ((1, 4), 4)], ((1, 8), 8), {"axis": 3}), None),
    ("transpose_exact", lambda: one_op_program(
        "transpose", [((2, 3), 0)], ((3, 2), 0), {"perm0": 0, "perm1": 1, "perm2": 3,
                                                  "perm3": 2}), "bad_op"),
    ("pad_partial", lambda: one_op_program(
        "pad", [((1, 4), 0)], ((1, 6), 2), {**{f"before{k}": 0 for k in range(4)},
                                            **{f"after{k}": 0 for k in range(3)},
                                            "after3": 2, "value": 0}), "bad_op"),
    ("copy_exact", lambda: one_op_program("copy", [((1, 4), 0)], ((1, 4), 0)), "bad_op"),
    ("copy_empty", lambda: one_op_program("copy", [((1, 0), 0)], ((0,), 0)), None),
    ("copy_reshape", lambda: one_op_program("copy", [((2, 3), 0)], ((6,), 8)), None),
    ("conv_add_over_skip", lambda: _conv_add(32, 32), None),  # residual: y on the skip
    ("conv_add_apart", lambda: _conv_add(32, 64), None),
    ("conv_add_over_x", lambda: _conv_add(32, 0), "bad_op"),  # the conv still reads x
    ("conv_add_skip_is_x", lambda: _conv_add(0, 0), "bad_op"),  # skip = x: still x's bytes
    ("conv_add_partly_skip", lambda: _conv_add(32, 48), "bad_op"),
    ("conv_add_scratch_on_skip", lambda: _conv_add(32, 64, Area(0, 40, 16)), "bad_op"),
    ("add_inplace_a", lambda: _add(0, 8, 0), None),
    ("add_inplace_b", lambda: _add(0, 8, 8), None),
    ("add_inplace_both", lambda: _add_self(0), None),  # add(x, x) into x
    ("add_inputs_same_bytes", lambda: _add(0, 0, 8), "bad_op"),  # two inputs: live together
    ("add_inputs_overlap", lambda: _add(0, 2, 8), "bad_op"),
    ("add_shifted", lambda: _add(0, 8, 1), "bad_op"),
    ("add_same_offset_smaller", lambda: _add(0, 8, 0, y_shape=(1, 2)), "bad_op"),
    ("add_on_a_partly_b", lambda: _add(0, 2, 0), "bad_op"),
    ("add_other_region", lambda: _add(0, 8, 0, region=1), None),
    ("lut_inplace", lambda: one_op_program("lut", [((1, 4), 0), TABLE], ((1, 4), 0)), None),
    ("lut_partial", lambda: one_op_program("lut", [((1, 4), 0), TABLE], ((1, 4), 3)), "bad_op"),
    ("clamp_inplace", lambda: one_op_program(
        "clamp", [((2, 3), 16)], ((2, 3), 16), {"act_min": -5, "act_max": 9}), None),
    ("delegate_output_over_input", lambda: _delegate_over_input(80, False), None),  # exempt
    ("delegate_cpu_version_partial", lambda: _delegate_over_input(80, True), "bad_op"),
    ("delegate_cpu_version_inplace", lambda: _delegate_over_input(64, True), None),
]


def overlap_files() -> list[tuple[str, bytes, str | None]]:
    return [(name, unchecked_bytes(make()), reason) for name, make, reason in OVERLAP_CASES]


@pytest.mark.parametrize("name", [c[0] for c in OVERLAP_CASES])
def test_overlapping_operands(name):
    _, make, reason = next(c for c in OVERLAP_CASES if c[0] == name)
    assert reason_of(unchecked_bytes(make())) == reason
    if reason is None:
        assert Program.from_bytes(make().to_bytes()) == make()
    else:
        with pytest.raises(ProgramError, match="overlaps") as e:
            make().to_bytes()
        assert e.value.reason == reason


# ----------------------------------------------------------------------------------------------
# lifetimes across ops (validate.py check_lifetimes, mt_validate.c mt_check_lifetimes): no op
# writes over bytes still to be read, no tensor is read before its writer; test_crt runs the same
# files through the C loader, and the accepted ones through both executors.

CLAMP = {"act_min": -100, "act_max": 100}


def _chain(at: dict, steps: list, outputs=(4,), scratch: dict | None = None) -> Program:
    """Region "ram" (256 B), x = tensor 0 at 0 (the input); tensors 1..4 int8 (1, 8) at `at`
    (tensor -> offset; default 16 * k), tensor 5 a (8,) view whose offset `at` must give;
    `steps`: (op, inputs, output) with op "clamp", "add" or "copy", `scratch`: step -> Area."""
    tensors = [TensorInfo.arena("int8", (1, 8), 0, at.get(k, 16 * k), 0.5) for k in range(5)]
    tensors.append(TensorInfo.arena("int8", (8,), 0, at.get(5, 240), 0.5))
    ops_ = [OpInfo(name, ins, [y], {"clamp": CLAMP, "add": ADD}.get(name, {}),
                   scratch=(scratch or {}).get(k)) for k, (name, ins, y) in enumerate(steps)]
    return Program(_target_info("cortex-m55"), [RegionInfo("ram", 256)], tensors, ops_, [0],
                   list(outputs), b"")


def _lifetime_delegate(outputs) -> Program:
    """build_program with other program outputs (tensor 5, the delegate's input, still to be
    read after the delegate op: Vela's scratch holds it)."""
    p = build_program()
    p.outputs = list(outputs)
    return p


# 1 = clamp(x), 2 = clamp(x), 4 = add(1, 2): tensor 1 is live while op 1 writes tensor 2
_TWO = [("clamp", [0], 1), ("clamp", [0], 2), ("add", [1, 2], 4)]
LIFETIME_CASES = [
    ("apart", lambda: _chain({}, _TWO), None),
    ("live_tensor_overwritten", lambda: _chain({2: 16}, _TWO), "bad_op"),
    ("live_tensor_partly_overwritten", lambda: _chain({2: 20}, _TWO), "bad_op"),
    ("live_tensors_adjacent", lambda: _chain({2: 24}, _TWO), None),
    # clamp runs in place: op 1 may put 2 on 1's bytes only if op 2 no longer reads 1
    ("inplace_dead_input", lambda: _chain({2: 16}, [("clamp", [0], 1), ("clamp", [1], 2),
                                                   ("add", [2, 0], 4)]), None),
    ("inplace_live_input", lambda: _chain({2: 16}, [("clamp", [0], 1), ("clamp", [1], 2),
                                                   ("add", [1, 2], 4)]), "bad_op"),
    ("inplace_over_program_input", lambda: _chain({1: 0}, [("clamp", [0], 1), ("add", [0, 1], 4)]),
     "bad_op"),
    ("scratch_over_live_tensor", lambda: _chain({}, _TWO, scratch={1: Area(0, 16, 8)}), "bad_op"),
    ("scratch_over_dead_tensor", lambda: _chain({}, _TWO, scratch={2: Area(0, 0, 8)}), None),
    ("read_before_write", lambda: _chain({}, [("clamp", [3], 1), ("clamp", [0], 3),
                                               ("add", [1, 3], 4)]), "bad_op"),
    ("read_never_written", lambda: _chain({}, [("clamp", [3], 4)]), "bad_op"),
    ("output_never_written", lambda: _chain({}, [("clamp", [0], 4)], outputs=(4, 3)), "bad_op"),
    ("output_is_input", lambda: _chain({}, [("clamp", [0], 4)], outputs=(4, 0)), None),
    # tensor 5 (8,) on tensor 1's bytes, which no op writes: a view (a reshape's output)
    ("view", lambda: _chain({5: 16}, [("clamp", [0], 1), ("copy", [5], 4)]), None),
    ("view_of_input", lambda: _chain({5: 0}, [("copy", [5], 4)]), None),
    ("view_output", lambda: _chain({5: 16}, [("clamp", [0], 1)], outputs=(5,)), None),
    ("view_over_overwritten", lambda: _chain({5: 16, 2: 16}, [
        ("clamp", [0], 1), ("clamp", [0], 2), ("copy", [5], 4)]), None),  # views the latest
    ("view_partly_overwritten", lambda: _chain({5: 16, 2: 20}, [
        ("clamp", [0], 1), ("clamp", [0], 2), ("copy", [5], 4)]), "bad_op"),
    ("view_of_nothing", lambda: _chain({5: 120}, [("clamp", [0], 1), ("copy", [5], 4)]),
     "bad_op"),
    ("view_then_written", lambda: _chain({5: 16}, [("clamp", [0], 1), ("copy", [5], 4),
                                                    ("clamp", [0], 5)], outputs=(4,)), "bad_op"),
    ("view_inplace", lambda: _chain({5: 16, 2: 16}, [("clamp", [0], 1), ("clamp", [1], 2),
                                                      ("copy", [5], 4)]), None),
    ("delegate_fallback", lambda: _lifetime_delegate([7]), None),
    ("delegate_input_read_after", lambda: _lifetime_delegate([7, 5]), "bad_op"),
]


def lifetime_files() -> list[tuple[str, bytes, str | None]]:
    return [(name, unchecked_bytes(make()), reason) for name, make, reason in LIFETIME_CASES]


@pytest.mark.parametrize("name", [c[0] for c in LIFETIME_CASES])
def test_lifetimes(name):
    _, make, reason = next(c for c in LIFETIME_CASES if c[0] == name)
    assert reason_of(unchecked_bytes(make())) == reason
    if reason is None:
        assert Program.from_bytes(make().to_bytes()) == make()
    else:
        with pytest.raises(ProgramError, match="overlaps|before any op|earlier op reads") as e:
            make().to_bytes()
        assert e.value.reason == reason


# ----------------------------------------------------------------------------------------------
# every named error, each reached by one targeted corruption (CRC recomputed where it matters)


def _meta_at(b: bytes) -> int:
    return sections(b)["metadata"][0]


CORRUPT = {
    "bad_persistent": lambda b: patch(b, "tensors", 8, "storage", 2),  # the lut table, no record
    "truncated": lambda b: b[:-1],
    "bad_magic": lambda b: b"MCUX" + b[4:],
    "bad_version": lambda b: patch(b, "header", 0, "version_major", 2),
    "bad_crc": lambda b: patch_bytes(b, sections(b)["const"][0], b"\xAA", fix_crc=False),
    "bad_header": lambda b: patch(b, "header", 0, "flags", 1),
    "bad_section": lambda b: patch(b, "#0", 0, "flags", S.SECTION_FLAG_SKIPPABLE),
    "bad_target": lambda b: patch(b, "target", 0, "isa", 7),
    "bad_region": lambda b: patch(b, "regions", 0, "alignment", 24),
    "bad_tensor": lambda b: patch(b, "tensors", 5, "size", 47),
    "bad_offset": lambda b: patch(b, "tensors", 0, "offset", 4096),
    "bad_op": lambda b: patch(b, "ops", 0, "opcode", 200),
    "bad_io": lambda b: patch(b, "io", 0, "n_inputs", 2),
    "bad_delegate": lambda b: patch(b, "delegates", 0, "npu", 1),
    "bad_metadata": lambda b: patch_bytes(b, _meta_at(b), b"\xff"),
}


def test_every_reason_has_a_targeted_corruption():
    assert set(CORRUPT) == set(S.ERRORS)


@pytest.mark.parametrize("reason", S.ERRORS)
def test_named_error(blob, reason):
    with pytest.raises(ProgramError) as e:
        Program.from_bytes(CORRUPT[reason](blob))
    assert e.value.reason == reason


@pytest.mark.parametrize("corrupt, reason", [
    (lambda b: b[:20], "truncated"),
    (lambda b: b + b"\0", "truncated"),
    (lambda b: patch(b, "header", 0, "section_table", 40), "bad_section"),
    (lambda b: patch(b, "#3", 0, "offset", sections(b)["tensors"][0]), "bad_section"),
    (lambda b: patch(b, "tensors", 1, "offset", 8), "bad_offset"),  # const not 16-aligned
    (lambda b: patch(b, "tensors", 2, "region", 0), "bad_tensor"),  # const with a region
    (lambda b: patch(b, "tensors", 0, "shape", 7, element=4), "bad_tensor"),  # past rank
    (lambda b: patch(b, "tensors", 0, "scale", float("nan")), "bad_tensor"),
    (lambda b: patch(b, "tensors", 0, "zero_point", 128), "bad_tensor"),
    (lambda b: patch(b, "ops", 0, "variant", 1), "bad_op"),
    (lambda b: patch(b, "ops", 0, "n_inputs", 4), "bad_op"),
    (lambda b: patch(b, "ops", 0, "n_attrs", 12), "bad_op"),
    (lambda b: patch(b, "ops", 3, "flags", 0), "bad_op"),  # CPU-version op not marked
    (lambda b: patch(b, "ops", 0, "first_attr", 10**6), "bad_offset"),
    (lambda b: patch(b, "ops", 0, "scratch_size", 64), "bad_offset"),
    (lambda b: patch(b, "ops", 0, "source", 5), "bad_metadata"),
    (lambda b: patch(b, "regions", 1, "name", b"DT\0M"), "bad_region"),
    (lambda b: patch(b, "regions", 1, "size", 1), "bad_offset"),
    (lambda b: patch(b, "delegates", 0, "cpu_first_op", 1), "bad_delegate"),  # nests a delegate
    (lambda b: patch(b, "delegates", 0, "command_offset", 8), "bad_offset"),
    (lambda b: patch(b, "delegates", 0, "fast_scratch_offset", 192), "bad_delegate"),  # on scratch
    (lambda b: patch(b, "bindings", 0, "offset", 0), "bad_delegate"),  # tensor not there
    (lambda b: patch(b, "bindings", 1, "shape", 2, element=5), "bad_delegate"),
    (lambda b: patch(b, "target", 0, "rounding", 2), "bad_target"),
    (lambda b: patch(b, "target", 0, "rounding", 1), "bad_target"),  # tflite: reserved
    (lambda b: patch_bytes(b, _meta_at(b), b"[" * 8), "bad_metadata"),
])
def test_more_corruptions(blob, corrupt, reason):
    assert reason_of(corrupt(blob)) == reason


# ----------------------------------------------------------------------------------------------
# fuzzing: any mutation (CRC recomputed) loads or raises ProgramError; every reason is reachable

EXTREMES = {"B": (0, 1, 2, 6, 7, 0x80, 0xFF), "H": (0, 1, 2, 0x7FFF, 0xFFFE, 0xFFFF),
            "I": (0, 1, 15, 16, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF),
            "i": (0, 1, -1, 16, 2**31 - 1, -2**31), "f": (0.0, -1.0, float("inf"), float("nan")),
            "s": (b"", b"\xff" * 8, b"A\0B")}


def _sweep(blob: bytes):
    """Every field of every record (and raw words/bytes of the other sections) overwritten with
    extreme values, CRC fixed; yields the mutated files."""
    secs = sections(blob)
    places = [("header", 0)] + [(k, 0) for k in secs if k.startswith("#")]
    for name, layout in RECORD.items():
        if name not in ("header", "io"):
            places += [(name, i) for i in range(secs[name][1] // layout.size)]
    places.append(("io", 0))
    for where, index in places:
        layout = S.SECTION if where.startswith("#") else RECORD[where]
        for f in layout.fields:
            for element in range(f.count if f.is_array else 1):
                for value in EXTREMES[S._TYPES[f.type][2]]:
                    yield patch(blob, where, index, f.name, value, element)
    for name in ("operands", "attrs", "io"):
        off, size = secs[name]
        for pos in range(off, off + size, 4):
            for value in (-1, 2**31 - 1, 3, 100):
                yield patch_bytes(blob, pos, struct.pack("<i", value))
    off, size = secs["metadata"]
    for pos in range(off, off + size, 7):
        for byte in (b"\xff", b"\x00", b"[", b"1"):
            yield patch_bytes(blob, pos, byte)
    for n in (0, 4, 31, 32, len(blob) // 2, len(blob) - 1):
        yield blob[:n]
    yield patch_bytes(blob, 20, b"\x01", fix_crc=False)


def test_sweep_reaches_every_reason(blob):
    seen: dict[str | None, int] = {}
    for mutated in _sweep(blob):
        r = reason_of(mutated)
        seen[r] = seen.get(r, 0) + 1
    missing = set(S.ERRORS) - set(seen)
    assert not missing, f"unreached: {missing}; seen {seen}"


MUTATION = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(0, 7)),
    st.tuples(st.just("truncate"), st.integers(0, 10**6)),
    st.tuples(st.just("write"), st.integers(0, 10**6), st.sampled_from(["<B", "<H", "<I", "<i"]),
              st.sampled_from([0, 1, 16, 255, 0x7FFF, 0xFFFF, 2**31 - 1, 2**32 - 1, -1, -2**31])),
)


def _apply(blob: bytes, mutations, fix_size: bool) -> bytes:
    buf = bytearray(blob)
    for m in mutations:
        if m[0] == "flip" and buf:
            buf[m[1] % len(buf)] ^= 1 << m[2]
        elif m[0] == "truncate":
            del buf[m[1] % (len(buf) + 1):]
        elif m[0] == "write" and len(buf) >= 4:
            fmt, value = m[2], m[3]
            size = struct.calcsize(fmt)
            lo, hi = (-(2**(8 * size - 1)), 2**(8 * size - 1) - 1) if fmt == "<i" else (
                0, 2**(8 * size) - 1)
            value = value if lo <= value <= hi else value % (hi + 1) if lo == 0 else 0
            struct.pack_into(fmt, buf, m[1] % (len(buf) - size + 1), value)
    if len(buf) >= S.HEADER.size:
        if fix_size:
            struct.pack_into("<I", buf, 8, len(buf))
        recrc(buf)
    return bytes(buf)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutations=st.lists(MUTATION, min_size=1, max_size=4), fix_size=st.booleans())
def test_fuzz_mutations_only_raise_program_error(blob, mutations, fix_size):
    mutated = _apply(blob, mutations, fix_size)
    try:
        p = Program.from_bytes(mutated)
    except ProgramError as e:
        assert e.reason in S.ERRORS
        return
    assert Program.from_bytes(p.to_bytes()) == p  # what loads also re-serialises


# ----------------------------------------------------------------------------------------------
# the C header


def test_c_header_is_current():
    from mcutorch.device.generate import stale

    assert RUNTIME / "include" / "mt_program.h" not in stale(), (
        "runtime/include/mt_program.h is stale: run `python -m mcutorch.device.generate`")


C_USE = r"""
#include "mt_program.h"
int mt_check(const mt_header_t *h, const mt_op_t *op);
int mt_check(const mt_header_t *h, const mt_op_t *op) {
  if (h->version_major != MT_FORMAT_VERSION_MAJOR) return MT_ERR_BAD_VERSION;
  if (op->opcode == MT_OP_CONV2D && op->n_attrs != MT_CONV2D_N_ATTRS) return MT_ERR_BAD_OP;
  return MT_CONV2D_STRIDE_H + MT_DELEGATE_INDEX + (int)MT_SECTION_METADATA + MT_OK;
}
"""


@pytest.mark.parametrize("cc, flags", [("gcc", []),
                                       ("arm-none-eabi-gcc", ["-mcpu=cortex-m0plus", "-mthumb"])])
def test_c_header_compiles(tmp_path, cc, flags):
    if shutil.which(cc) is None:
        pytest.fail(f"{cc} not installed: run `make toolchain`")
    src = tmp_path / "use.c"
    src.write_text(C_USE)
    cmd = [cc, "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-fsyntax-only", *flags,
           "-I", str(RUNTIME / "include"), str(src)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
