"""The mcutorch program file, format 1.x: the one description of its bytes.

Everything here is data. The Python writer/reader (`writer.py`, `reader.py`) and the generated C
header `runtime/include/mt_program.h` (`python -m mcutorch.program --c-header`) are both
derived from the structs and enums below; nothing else spells out an offset.

Layout (little-endian; every section starts on a 16-byte boundary; padding is zero)::

    offset
    0x00 +------------------------------------------------+
         | HEADER (32 B)                                  |
         |   magic "MCUT" | version_major u16 | minor u16  |
         |   file_size u32 | crc32 u32                    |
    0x10 |   flags | section_count | section_table        |  crc32 = zlib.crc32(file[0x10:])
         |   reserved                          (all u32)  |
    0x20 +------------------------------------------------+
         | SECTION TABLE  section_count x SECTION (16 B)  |
         |   kind u16 | flags u16 | offset | size | rsvd  |
         +------------------------------------------------+  every section 16-aligned:
         | TARGET     1 x TARGET (16 B)                   |
         | REGIONS    n x REGION (32 B)                   |
         | TENSORS    n x TENSOR (48 B)                   |
         | OPS        n x OP (32 B)                       |
         | OPERANDS   n x i32 tensor index                |  per op: inputs, then outputs
         | ATTRS      n x i32                             |  per op: ops.py attribute order
         | IO         IO (8 B), then i32 input indices,   |
         |            then i32 output indices             |
         | DELEGATES  n x DELEGATE (56 B)                 |
         | BINDINGS   n x BINDING (36 B)                  |  delegate I/O in Vela's scratch
         | PERSISTENT n x PERSISTENT (16 B), optional     |  state kept across invokes (1.5)
         | CONST      constant blob: const tensors, NPU   |  every item 16-aligned: read
         |            command streams and weights         |  in place from flash
         | METADATA   UTF-8 JSON object (SKIPPABLE)       |  last, so it is cheap to strip
         +------------------------------------------------+

Sections are found through the table only; the writer emits them in the order above. Array
sections hold `size / record size` records. A reader skips sections whose kind it does not know
when their SKIPPABLE flag is set, and rejects them otherwise.

Versions (HEADER.version_major.version_minor, VERSION_MAJOR / VERSION_MINOR below):
  * A reader accepts every minor version of its major, older or newer than its own, and refuses
    every other major (bad_version).
  * Every change to what a program can hold bumps the minor version: a new section kind, enum
    value (opcode, kernel variant, CPU, NPU, dtype, ...), flag bit, or a meaning given to a
    field that was reserved (zero). A minor bump may only add such things; it never moves a
    field or changes what an existing value means, so every older program reads the same.
  * What an older reader meets of a newer minor: skippable sections are skipped; anything else
    new (an unknown id, a flag bit it does not know, a reserved field that is no longer zero) is
    refused with the error of that record, never silently ignored. So a newer program that uses
    none of the additions loads in an older reader, and one that does is refused, not misread.
  * Record layouts (sizes, field offsets) change only with the major version.
  * A new op (opcode) is such an addition: its registry entry records the minor version that
    added it (`OpDef.since`, mcutorch.ops), and VERSION_MINOR is the newest of those and of the
    record changes below (SCHEMA_MINOR). An older reader refuses the new opcode (bad_op, naming
    it); the op table of mt_program.h is generated from the same registry.

Version history:
  * 1.0: first version.
  * 1.1: TARGET switch bits: the former TARGET.reserved u16 is `switches`, the feature switches
    the program was compiled with (TARGET_SWITCH_*: +nodsp, +nomve, +nofp). Programs without
    switches are byte-identical to 1.0 except the version field.
  * 1.2: opcodes 16 `maximum` and 17 `minimum` (element-wise, shared qparams).
  * 1.3: opcodes 18 `strided_slice` and 19 `gather` (data movement, ranks 1..6, shared
    qparams), 20 `reduce_sum`, 21 `reduce_max`, 22 `reduce_min`, 23 `log_softmax`,
    24 `reduce_var`, 25 `norm`, 26 `sub`, 27 `div`; add, mul, maximum and minimum broadcast
    (numpy rules, stated by the operand shapes alone: a 1.2 program's same-shape operands mean
    what they meant). transpose, concat and pad keep their 4-D records: the compiler lowers 5-D
    and 6-D ones to 4-D ops on reshaped views (docs/numerics.md), so no record changed and 1.2
    programs load.
  * 1.4: opcodes 28 `compare` (two int8 tensors -> a uint8 0/1 mask, the exact comparison of their
    real values) and 29 `where` (mask, a, b -> y, each value rescaled into y's qparams), both with
    numpy broadcasting; a uint8 TENSOR (DTYPES id 1, scale 1, zero point 0) holds a mask; 30
    `conv_transpose2d` (grouped transposed convolution, per-channel requant; conv_transpose1d is
    it on [N, C, 1, L] views); 31 `resize` (nearest / bilinear resampling with TOSA RESIZE's
    scale, offset and border per axis, shared qparams); 32 `matmul` (two int8 activations, batch
    dims broadcast, `transpose_b` reads b as [..., N, K]). No record changed: 1.3 programs load.
  * 1.5: persistent tensors (stateful models): TENSOR storage 2 `persistent` (bytes [offset,
    offset+size) of the persistent buffer the caller binds once, region = NONE16, offset
    16-aligned) and the optional PERSISTENT section, one record per persistent tensor (its
    initial value in CONST); error `bad_persistent`. Opcode 33 `conv2d_add` (conv2d with the
    residual add fused into its output stage; its output may lie on exactly the skip input's
    bytes: alias kind `residual`, MT_ALIAS_RESIDUAL).
    int16 activations (a16w8): an int64 TENSOR (DTYPES id 4, 8 B) holds a MAC's int48 bias:
    constants only, every value within int48 [-2^47, 2^47) (both readers check, bad_tensor).
    Each op's activation operands are checked against the dtypes its kernels take
    (`OpDef.dtypes`, mt_program.h MT_<OP>_DTYPES; bad_op): an int16 tensor on an op without an
    int16 kernel is refused at load, no longer at run time; `rescale` takes int8 or int16 on
    either side (zero point 0 on an int16 side), `concat`, `copy` and `pad` int16 tensors,
    `fully_connected` an int16 x (an int64 bias, a 16-bit mult; the accumulator bounded within
    int48 at load). No record changed: 1.4 programs load.
  * 1.6: `lut` takes an int16 x: a 513-entry int16 table interpolated as TOSA TABLE does
    (docs/numerics.md section 6), int16 y.
    int32 token ids: an int32 arena TENSOR (DTYPES id 3) is a tensor of token ids, not a
    quantized value: scale 0 and zero point 0 (both readers refuse other qparams, bad_tensor),
    and only an op whose dtype rule takes int32 (`OpDef.dtypes`) may read it as an activation,
    so far opcode 35 `embedding` (ids int32 [..], an int8 constant table [V, D] -> int8 [.., D]
    in the table's qparams; an id outside [0, V) is a run-time status, MT_STATUS_BAD_INPUT, and
    a ValueError in the reference, checked before any row is read). Such a tensor is a program
    input the host fills with integer ids.
    Ring buffers for streaming histories: TENSOR_FLAG_RING on a persistent tensor makes it
    a ring window (its block in the persistent buffer and its moving bytes: "Meaning of the
    records", TENSOR), written by opcode 34 `ring_write` alone; OP_FLAG_RING on every op with
    one among its operands (the C runtime points its views at the window, or for ring_write at
    the block, before the op runs). No record changed: 1.5 programs load.
  * 1.7: `reduce_sum` takes an int16 x and y (zero points 0, at most 2^16 - 1 elements per
    sum; docs/numerics.md section 6): the mean of an a16w8 model stays int16. No record
    changed: 1.6 programs load.
  * 1.8: opcodes 36 `lstm` and 37 `gru`: the steps of an unrolled recurrent layer and
    direction that share every constant and attribute as one op of three / two outputs (the
    sequence, the last h, the last c), its state product's weights once and planned scratch for
    the gates (docs/numerics.md, lstm / gru). Alias kind `overlap` (MT_ALIAS_OVERLAP) on int8
    `depthwise_conv2d` and on int8 `conv2d` 1x1 (stride 1, no padding, groups 1, Cout <= 64):
    the output may lie over its x, starting at least the op's least delta below it
    (`OpDef.overlap`, mt_overlap_delta; both readers refuse a smaller one, bad_op). `matmul`
    (two int16 activations, int48 accumulator, 16-bit multiplier), `softmax` (int16 x, a
    512-entry exp table, output (1/32768, 0)), `norm` (int16 x, Q20) and `where` (int16
    values) take int16 activations (docs/numerics.md section 6): a16w8 attention. No record
    changed: 1.7 programs load.
  * 1.9: opcodes 38 `rnn_tanh` and 39 `rnn_relu`: the steps of an unrolled nn.RNN layer and
    direction as one op of two outputs (the sequence, the last h), like `lstm` / `gru`
    (docs/numerics.md, rnn_tanh / rnn_relu). No record changed: 1.8 programs load.

Meaning of the records:
  * TARGET: what the compile decided: CPU / ISA level / NPU (ids in CPUS / ISAS / NPUS), the
    feature switches (`switches`: bit 1 << k for TARGET_SWITCHES[k], i.e. TARGET_SWITCH_NODSP,
    TARGET_SWITCH_NOMVE, TARGET_SWITCH_NOFP; since 1.1), the requantization rounding rule
    (ROUNDINGS; "tflite" is reserved for imported TFLite models: the format has its id, but
    no executor implements it, so both readers refuse it, bad_target, like an unknown id), and
    program flags (none defined; must be 0).
    CPU + switches + NPU name the target (`mcutorch.targets`: "cortex-m4+nofp"), so a program
    says exactly how firmware for it is built. Readers refuse (bad_target) unknown switch bits,
    a switch the CPU does not take (its `targets.CPUS[cpu].switches`: +nomve only on M55/M85,
    +nodsp on M33/M35P, +nofp on M4/M7/M33/M35P), and an ISA level other than the one the CPU
    has with those switches (`targets.parse_target(name).isa`; a switch lowers the CPU's ISA
    level: +nomve mve -> dsp, +nodsp dsp -> scalar).
  * REGION: one memory arena the caller provides: name (<= 8 ASCII chars [A-Za-z0-9_], zero
    padded), `size` bytes needed, `capacity` of the board region (0 = unknown), `base` address
    (informational, valid with REGION_FLAG_BASE_KNOWN), `alignment` the arena needs (power of two,
    4..65536), speed `rank` (0 = fastest), REGION_FLAG_NPU when an Ethos-U can reach it.
  * TENSOR: dtype (DTYPES), rank <= 6 and shape[6] (unused dims 0), storage ARENA (bytes
    [offset, offset+size) of arena `region`, offset a multiple of the element size) or CONST
    (bytes of the CONST section, offset 16-aligned, region = NONE16); size = prod(shape) *
    element size; per-tensor scale (f32, finite, >= 0) and zero point (in the dtype's range).
    An int64 tensor is a constant whose values all lie in int48 (since 1.5). An int32 arena
    tensor holds token ids (scale 0, zero point 0; since 1.6).
    Ring window (1.6, TENSOR_FLAG_RING, storage persistent only): a streaming history of n
    frames along its ring dim (the first dim of size > 1; n >= 2; every dim before it is 1, so
    a frame is s = size / n contiguous bytes). Its block is the persistent bytes [offset,
    offset + 16 + (2n - 1) * s): the int32 position p in [0, n) at offset (12 more bytes
    unused), then 2n - 1 slots of s bytes. At run time the tensor is the n slots p .. p + n - 1
    (bytes offset + 16 + p * s, size bytes): the last n frames, oldest first. `ring_write`
    (its only writer) advances p and writes each new frame twice (slots p + n - 1 and p - 1),
    so every window is contiguous. Its PERSISTENT record's initial value is the whole block
    (p in [0, n)); a p outside [0, n) at run time is refused (C: MT_STATUS_BAD_STATE; the
    reference: ExecutionError), never read through.
  * OP: opcode and kernel variant (indices into ops.py), inputs and outputs as a range of
    OPERANDS, attributes as a range of ATTRS (count = len(ops.py attrs)), a scratch buffer in a
    region (region = NONE16 when none), an index into metadata "sources" (NONE32 = none), and
    OP_FLAG_SUBGRAPH on ops that belong to a delegate's CPU version (the main loop skips them).
  * DELEGATE: an Ethos-U subgraph: `npu` config (NPUS id, equal to the target's), command stream
    and weights as byte ranges of CONST (16-aligned), Vela's scratch and fast-scratch areas placed
    in regions (region = NONE16 when absent), its input then output BINDINGs as a range of
    BINDINGS, and its CPU version as a range of OPS (cpu_first_op = NONE32 when absent).
    The `delegate` op (attribute `index`) runs it; the op's operands are the binding tensors.
  * BINDING: a delegate input/output: tensor index, byte offset inside the scratch area, 6-D
    shape and element size as Vela reports them. The tensor lives exactly there (no copies).
  * PERSISTENT (1.5, optional): a persistent tensor (TENSOR storage `persistent`): the state of
    a stateful model, kept across invokes in the persistent buffer (apart from the per-invoke
    arenas; its size is the end of the last persistent tensor), set to its initial value (the
    16-aligned CONST bytes [init_offset, init_offset + size)) on binding and by a reset, read
    by the ops of an invoke and written by its last op (a `copy` of the new value). Every
    persistent tensor has exactly one record; at most MAX_PERSISTENT records; persistent
    tensors share no byte with each other, nor do their initial values (so the buffer is
    bounded by the file size); flags and reserved are 0. A persistent tensor is no program
    input or output and no delegate binding (bad_persistent).
  * METADATA: a JSON object; known keys: "model" (str), "tensor_names" (list of str, one per
    tensor), "sources" (list of {"loc": "file:line", "op": torch op}; OP.source indexes it),
    "options" (object), "io" ({"inputs": [...], "outputs": [...]}, one {"name", "shape",
    "nchw_as_nhwc"} per program input / output: the model's float shape and whether it is the
    model's NCHW tensor stored NHWC; Program.stripped keeps only this key). Other keys are kept
    as they are.

Limits (every reader, every format version): at most MAX_REGIONS (16) regions (bad_region),
MAX_IO (256) program inputs and as many outputs (bad_io), MAX_DELEGATES (256) delegates and at
most MAX_VARIADIC (256) input and as many output bindings per delegate (bad_delegate), at most
MAX_VARIADIC operands in an op's input list and in its output list (bad_op). Records may share
ranges of OPERANDS and BINDINGS, so without these bounds a small file could make a reader do
work quadratic in its size; with them, the C loader (which has no memory to sort or hash in)
stays linear. The counts of ops, records and operands and the total operand, binding and
const bytes are bounded only by the file size. A reader refuses the region and delegate counts
and an op's and a delegate's operand counts with the records (reader.py `_regions`, `_op`,
`_delegates`), the io counts with the semantic checks.

Validation (reader.py, then validate.py; the C loader does the same in the same order): header
size, magic, version, file_size == buffer length, CRC, reserved fields; section table bounds,
alignment, overlap, kinds, record sizes; every record's enum ids and reserved fields; then every
index and byte range (tensors in their region / CONST, operand and attribute ranges, scratch,
delegate blobs and bindings, IO), the counts ops.py prescribes, and that no op's output shares
a byte with an input, another output or its scratch beyond what its registry entry allows
(ops.ALIAS_KINDS: "inplace" = exactly an input's bytes; "overlap" = over x, at least the op's
least delta below it; the delegate op: anything; bad_op); and lifetimes across ops (validate.py
check_lifetimes, bad_op): in each order the ops run (with the NPU; and, when a delegate has a
CPU version, without it), an arena tensor is live from its first writer (an input: program
start) to its last reader (an output: program end), a scratch area and a delegate's Vela
scratch during their op; no two live ranges whose bytes meet share an op other than the one
where one ends and the other begins (which the alias checks judge), except a view (a tensor no
op writes: a reshape's output, on exactly the bytes written last before its first read) beside
what it views; and no tensor is read before its writer or, for a view, before any write of its
bytes. The C loader, with no memory for every tensor's range, fills them 16 at a time: quadratic
in the arena tensors, stated in mt_validate.c.
Failures are named by ERRORS.
"""
from __future__ import annotations

import struct
import sys
from dataclasses import dataclass

import numpy as np

from mcutorch import ops

MAGIC = b"MCUT"
VERSION_MAJOR = 1
SCHEMA_MINOR = 8  # the newest change to the records themselves (history above)
VERSION_MINOR = max(SCHEMA_MINOR, *(op.since for op in ops.OPS))  # ... or to the op registry
ALIGN = 16  # section alignment in the file and const item alignment in CONST
MAX_RANK = 6
MAX_SECTIONS = 64  # a reader refuses larger section tables outright
# Counts that bound the loader's work (see "Limits" above): every check stays linear in the file.
MAX_REGIONS = 16  # regions (bad_region)
MAX_IO = 256  # program inputs, and program outputs (bad_io)
MAX_DELEGATES = 256  # delegate records (bad_delegate)
MAX_PERSISTENT = 256  # persistent tensor records (bad_persistent)
MAX_VARIADIC = 256  # operands of one variadic list (concat inputs, delegate op inputs / outputs;
#                     bad_op) and a delegate's input / output bindings (bad_delegate)
REGION_ALIGN_MIN, REGION_ALIGN_MAX = 4, 65536  # arena alignment bounds (powers of two)
NONE16 = 0xFFFF  # "no region"
NONE32 = 0xFFFFFFFF  # "no source", "no CPU version"

# Named validation errors, in C status code order (MT_ERR_<NAME> = index + 1; MT_OK = 0).
ERRORS: tuple[str, ...] = (
    "truncated",  # shorter than the header, or file_size != length of the buffer
    "bad_magic",  # not an mcutorch program
    "bad_version",  # a format major version this reader does not read
    "bad_crc",  # CRC32 over file[16:] does not match
    "bad_header",  # reserved header fields or flags set
    "bad_section",  # section table: bounds, alignment, overlap, kinds, sizes, duplicates
    "bad_target",  # unknown CPU / ISA / NPU / rounding id, switch or program flag bits; a
    #                switch the CPU does not take; an ISA level the CPU + switches do not give
    "bad_region",  # region name, alignment, flags, size > capacity
    "bad_tensor",  # dtype, rank, shape x element size != size, storage, region index, qparams
    "bad_offset",  # a byte or index range points outside what it lives in, or is misaligned
    "bad_op",  # opcode, variant, operand / attribute counts, tensor indices, flags
    "bad_io",  # program inputs / outputs
    "bad_delegate",  # delegate record or binding inconsistent
    "bad_metadata",  # METADATA is not UTF-8 JSON of the documented shape
    "bad_persistent",  # persistent tensor records: tensor, initial value, overlap, use (1.5)
)
ERROR_CODES = {name: i + 1 for i, name in enumerate(ERRORS)}
RUNTIME_STATUS_BASE = 64  # C runtime statuses that are not format errors start here

# --- enums (append-only: ids are stored in files) ---
DTYPES = ("int8", "uint8", "int16", "int32", "int64")
DTYPE_SIZES = {"int8": 1, "uint8": 1, "int16": 2, "int32": 4, "int64": 8}
DTYPE_NUMPY = {"int8": "<i1", "uint8": "<u1", "int16": "<i2", "int32": "<i4", "int64": "<i8"}
INT48 = (-2**47, 2**47 - 1)  # an int64 tensor's values (a16w8 bias) and zero point
DTYPE_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767),
                "int32": (-2**31, 2**31 - 1), "int64": INT48}
STORAGES = ("arena", "const", "persistent")
ISAS = ("scalar", "dsp", "mve")
ROUNDINGS = ("single", "tflite")
# TARGET.switches: bit 1 << k is the feature switch +TARGET_SWITCHES[k] (targets.SWITCH_ORDER; a
# test keeps the two equal). Append-only, like the enums.
TARGET_SWITCHES = ("nodsp", "nomve", "nofp")
TARGET_SWITCH_BITS = {name: 1 << k for k, name in enumerate(TARGET_SWITCHES)}
TARGET_SWITCH_NODSP, TARGET_SWITCH_NOMVE, TARGET_SWITCH_NOFP = TARGET_SWITCH_BITS.values()
TARGET_SWITCHES_KNOWN = (1 << len(TARGET_SWITCHES)) - 1
# CPU and NPU ids are the ones targets.py documents (a test keeps the two tables equal).
CPUS = ("cortex-m0", "cortex-m0plus", "cortex-m3", "cortex-m4", "cortex-m7", "cortex-m23",
        "cortex-m33", "cortex-m35p", "cortex-m55", "cortex-m85")
NPUS = ("none", "ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256",
        "ethos-u65-256", "ethos-u65-512", "ethos-u85-128", "ethos-u85-256", "ethos-u85-512",
        "ethos-u85-1024", "ethos-u85-2048")

SECTION_FLAG_SKIPPABLE = 0x1
REGION_FLAG_NPU = 0x1  # an Ethos-U can reach this region
REGION_FLAG_BASE_KNOWN = 0x2  # `base` holds the region's address
OP_FLAG_SUBGRAPH = 0x1  # op belongs to a delegate's CPU version; the main loop skips it
OP_FLAG_RING = 0x2  # op has a ring window operand (1.6): its views follow the window
TENSOR_FLAG_RING = 0x1  # a persistent tensor that is a ring window (1.6)
RING_HEAD = 16  # bytes before a ring's slots: the int32 position p, then zeros

# --- the struct description: (C/Python type, bytes, struct char, numpy type) ---
_TYPES = {
    "u8": ("uint8_t", 1, "B", "<u1"),
    "u16": ("uint16_t", 2, "H", "<u2"),
    "u32": ("uint32_t", 4, "I", "<u4"),
    "i32": ("int32_t", 4, "i", "<i4"),
    "f32": ("float", 4, "f", "<f4"),
    "char": ("char", 1, "s", "S"),  # fixed-size zero-padded byte string (Python bytes)
}


@dataclass(frozen=True)
class Field:
    """One struct member: `count` > 1 makes a fixed array (a byte string for "char")."""

    name: str
    type: str
    count: int = 1
    doc: str = ""

    @property
    def size(self) -> int:
        return _TYPES[self.type][1] * self.count

    @property
    def is_array(self) -> bool:
        return self.count > 1 and self.type != "char"


class Struct:
    """A little-endian record: Python `struct` format, numpy dtype and C struct from one list."""

    def __init__(self, name: str, reason: str, doc: str, fields: list[Field]):
        self.name, self.reason, self.doc, self.fields = name, reason, doc, tuple(fields)
        self.format = "<" + "".join(_field_format(f) for f in self.fields)
        self._struct = struct.Struct(self.format)
        self.size = self._struct.size
        self.offsets = _natural_offsets(self)
        self._plan = tuple((f.name, f.count if f.is_array else 0) for f in self.fields)

    @property
    def c_name(self) -> str:
        return f"mt_{self.name}_t"

    @property
    def dtype(self) -> np.dtype:
        """numpy structured dtype with the same layout (for inspecting record arrays)."""
        return np.dtype({"names": [f.name for f in self.fields],
                         "formats": [_numpy_format(f) for f in self.fields],
                         "offsets": [self.offsets[f.name] for f in self.fields],
                         "itemsize": self.size})

    def pack(self, values: dict) -> bytes:
        """Pack a dict of field values (arrays as sequences); struct.error on bad values."""
        flat = []
        for f in self.fields:
            v = values[f.name]
            if f.is_array:
                if len(v) != f.count:
                    raise struct.error(f"{self.name}.{f.name} needs {f.count} values")
                flat.extend(v)
            else:
                flat.append(v)
        return self._struct.pack(*flat)

    def unpack(self, buf, offset: int = 0) -> dict:
        """Unpack one record at `offset` (caller checked bounds) into a dict."""
        flat = self._struct.unpack_from(buf, offset)
        out, i = {}, 0
        for name, count in self._plan:
            if count:
                out[name] = flat[i:i + count]
                i += count
            else:
                out[name] = flat[i]
                i += 1
        return out

    def unpack_all(self, buf, offset: int, count: int) -> list[dict]:
        """Unpack `count` consecutive records."""
        return [self.unpack(buf, offset + k * self.size) for k in range(count)]


def _field_format(f: Field) -> str:
    char = _TYPES[f.type][2]
    return f"{f.count}{char}" if f.count > 1 or f.type == "char" else char


def _numpy_format(f: Field):
    if f.type == "char":
        return f"S{f.count}"
    return (_TYPES[f.type][3], (f.count,)) if f.is_array else _TYPES[f.type][3]


def _natural_offsets(s: Struct) -> dict[str, int]:
    """Field offsets; asserts there is no implicit C padding (every field naturally aligned)."""
    offsets, pos, widest = {}, 0, 1
    for f in s.fields:
        align = _TYPES[f.type][1]
        assert pos % align == 0, f"{s.name}.{f.name} at {pos} is not {align}-aligned"
        offsets[f.name], pos, widest = pos, pos + f.size, max(widest, align)
    assert pos == s.size and pos % widest == 0, f"{s.name}: size {pos} needs tail padding"
    return offsets


F = Field
HEADER = Struct("header", "bad_header", "file header at offset 0", [
    F("magic", "char", 4, 'b"MCUT"'),
    F("version_major", "u16", doc="format major version; a reader reads only its own"),
    F("version_minor", "u16", doc="format minor version; any minor of the major is readable"),
    F("file_size", "u32", doc="total bytes of the program"),
    F("crc32", "u32", doc="zlib CRC32 of every byte after this field (file[16:])"),
    F("flags", "u32", doc="none defined; 0"),
    F("section_count", "u32", doc=f"entries in the section table (<= {MAX_SECTIONS})"),
    F("section_table", "u32", doc="byte offset of the section table (16-aligned)"),
    F("reserved", "u32", doc="0"),
])
SECTION = Struct("section", "bad_section", "section table entry", [
    F("kind", "u16", doc="a SECTION_KINDS id"),
    F("flags", "u16", doc="SECTION_FLAG_*"),
    F("offset", "u32", doc="byte offset in the file (16-aligned)"),
    F("size", "u32", doc="bytes (record sections: a multiple of the record size)"),
    F("reserved", "u32", doc="0"),
])
TARGET = Struct("target", "bad_target", "what the program was compiled for", [
    F("cpu", "u16", doc="CPUS id"),
    F("npu", "u16", doc="NPUS id (0 = none)"),
    F("isa", "u8", doc="ISAS id: 0 scalar, 1 dsp, 2 mve"),
    F("rounding", "u8", doc="ROUNDINGS id: 0 single, 1 tflite (reserved)"),
    F("switches", "u16", doc="TARGET_SWITCH_* bits: +nodsp 0x1, +nomve 0x2, +nofp 0x4 (1.1)"),
    F("flags", "u32", doc="program flags; none defined, 0"),
    F("reserved2", "u32", doc="0"),
])
REGION = Struct("region", "bad_region", "a memory arena the caller provides", [
    F("name", "char", 8, doc="ASCII [A-Za-z0-9_], zero padded"),
    F("size", "u32", doc="bytes the arena must provide"),
    F("capacity", "u32", doc="bytes of the board region (0 = unknown)"),
    F("base", "u32", doc="address when REGION_FLAG_BASE_KNOWN (informational)"),
    F("alignment", "u32", doc="arena alignment, power of two in 4..65536"),
    F("rank", "u16", doc="speed rank, 0 = fastest"),
    F("flags", "u16", doc="REGION_FLAG_*"),
    F("reserved", "u32", doc="0"),
])
TENSOR = Struct("tensor", "bad_tensor", "a tensor: where it lives, its shape and qparams", [
    F("dtype", "u8", doc="DTYPES id"),
    F("rank", "u8", doc=f"0..{MAX_RANK}"),
    F("storage", "u8", doc="STORAGES id: 0 arena, 1 const"),
    F("flags", "u8", doc="TENSOR_FLAG_RING (1.6) on a persistent ring window; else 0"),
    F("region", "u16", doc="region index for arena tensors, NONE16 for const"),
    F("reserved", "u16", doc="0"),
    F("shape", "u32", MAX_RANK, doc="dims; entries past rank are 0"),
    F("offset", "u32", doc="byte offset in its region's arena or in CONST"),
    F("size", "u32", doc="bytes = prod(shape) * element size"),
    F("scale", "f32", doc="quantization scale (0 when not quantized)"),
    F("zero_point", "i32", doc="quantization zero point"),
])
OP = Struct("op", "bad_op", "one op: kernel, operands, attributes, scratch", [
    F("opcode", "u16", doc="ops.py opcode (MT_OP_*)"),
    F("variant", "u8", doc="index into the op's ops.py variants"),
    F("flags", "u8", doc="OP_FLAG_*"),
    F("n_inputs", "u16"),
    F("n_outputs", "u16"),
    F("first_operand", "u32", doc="index into OPERANDS: n_inputs then n_outputs tensor indices"),
    F("first_attr", "u32", doc="index into ATTRS"),
    F("n_attrs", "u16", doc="equals the op's ops.py attribute count"),
    F("scratch_region", "u16", doc="region of the scratch buffer, NONE16 = none"),
    F("scratch_offset", "u32"),
    F("scratch_size", "u32"),
    F("source", "u32", doc="index into metadata sources, NONE32 = none"),
])
IO = Struct("io", "bad_io", "IO section head; n_inputs + n_outputs i32 tensor indices follow", [
    F("n_inputs", "u32"),
    F("n_outputs", "u32"),
])
DELEGATE = Struct("delegate", "bad_delegate", "an Ethos-U subgraph", [
    F("npu", "u16", doc="NPUS id the command stream was compiled for"),
    F("flags", "u16", doc="0"),
    F("scratch_region", "u16", doc="NONE16 = no scratch"),
    F("fast_scratch_region", "u16", doc="NONE16 = no fast scratch"),
    F("command_offset", "u32", doc="command stream: byte range of CONST (16-aligned)"),
    F("command_size", "u32"),
    F("weights_offset", "u32", doc="NPU weights: byte range of CONST (16-aligned)"),
    F("weights_size", "u32"),
    F("scratch_offset", "u32", doc="Vela's scratch area in its region"),
    F("scratch_size", "u32"),
    F("fast_scratch_offset", "u32"),
    F("fast_scratch_size", "u32"),
    F("first_binding", "u32", doc="index into BINDINGS: n_inputs then n_outputs"),
    F("n_inputs", "u16"),
    F("n_outputs", "u16"),
    F("cpu_first_op", "u32", doc="CPU version: ops [first, first + n) ; NONE32 = none"),
    F("cpu_n_ops", "u32"),
])
BINDING = Struct("binding", "bad_delegate", "a delegate input/output inside Vela's scratch", [
    F("tensor", "i32", doc="tensor index"),
    F("offset", "u32", doc="byte offset inside the delegate's scratch area"),
    F("elem_size", "u32", doc="bytes per element (1, 2 or 4)"),
    F("shape", "u32", 6, doc="Vela's 6-D shape"),
])
PERSISTENT = Struct("persistent", "bad_persistent", "a tensor kept across invokes (1.5)", [
    F("tensor", "i32", doc="tensor index (storage persistent)"),
    F("init_offset", "u32", doc="initial value: CONST bytes [init_offset, +size), 16-aligned"),
    F("flags", "u32", doc="0"),
    F("reserved", "u32", doc="0"),
])
STRUCTS = (HEADER, SECTION, TARGET, REGION, TENSOR, OP, IO, DELEGATE, BINDING, PERSISTENT)
assert HEADER.offsets["crc32"] + 4 == 16, "CRC covers file[16:]"
CRC_START = 16


@dataclass(frozen=True)
class SectionKind:
    """A section: id, how its bytes are interpreted, and whether a runtime may skip it."""

    name: str
    id: int
    record: Struct | None  # array of these records; None = raw bytes
    skippable: bool = False
    doc: str = ""
    optional: bool = False  # may be absent (not skippable: an older reader refuses it)


I32 = 4  # OPERANDS / ATTRS element size
SECTION_KINDS: tuple[SectionKind, ...] = (
    SectionKind("target", 1, TARGET, doc="exactly one TARGET record"),
    SectionKind("regions", 2, REGION),
    SectionKind("tensors", 3, TENSOR),
    SectionKind("ops", 4, OP),
    SectionKind("operands", 5, None, doc="int32 tensor indices"),
    SectionKind("attrs", 6, None, doc="int32 op attributes"),
    SectionKind("io", 7, None, doc="IO head + int32 input then output tensor indices"),
    SectionKind("delegates", 8, DELEGATE),
    SectionKind("bindings", 9, BINDING),
    SectionKind("const", 10, None, doc="constant blob, read in place"),
    SectionKind("metadata", 11, None, skippable=True, doc="UTF-8 JSON object"),
    SectionKind("persistent", 12, PERSISTENT, optional=True, doc="persistent tensors (1.5)"),
)
KIND_BY_NAME = {k.name: k for k in SECTION_KINDS}
KIND_BY_ID = {k.id: k for k in SECTION_KINDS}
REQUIRED_SECTIONS = tuple(k.name for k in SECTION_KINDS if not (k.skippable or k.optional))


def main(argv: list[str] | None = None) -> int:
    """`--c-header`: print the C header (`python -m mcutorch.device.generate` writes every generated
    C file and checks them with `--check`)."""
    from mcutorch.program.c_header import generate

    args = sys.argv[1:] if argv is None else argv
    if args == ["--c-header"]:
        sys.stdout.write(generate())
        return 0
    print("usage: python -m mcutorch.program --c-header", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
