"""The program as plain Python data: what the compiler fills in and what the reader returns.

Names (dtypes, ops, variants, CPUs, ...) are strings here; the writer turns them into the ids of
schema.py and the reader turns them back, so `Program.from_bytes(p.to_bytes()) == p`.
Values are normalised on construction (tuples for shapes and operand lists, float32 scales, ints)
so a hand-built Program compares equal to the one read back.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from mcutorch import ops
from mcutorch.errors import FileError
from mcutorch.program import schema as S


@dataclass(frozen=True)
class Area:
    """Bytes [offset, offset + size) of the arena of region `region` (scratch buffers)."""

    region: int
    offset: int
    size: int


@dataclass
class TargetInfo:
    """What the program was compiled for (ids: schema.CPUS, ISAS, NPUS, ROUNDINGS,
    TARGET_SWITCHES). `switches` are the feature switches without "+" ("nofp", ...), kept in
    schema.TARGET_SWITCHES order.

    The one way from a program back to its target is `as_target()` (and its `name`); the
    compiler writes the record with `TargetInfo.of(target)`:

    >>> from mcutorch.targets import parse_target
    >>> info = TargetInfo.of(parse_target("m55+nomve+ethos-u55-128"))
    >>> info.cpu, info.isa, info.switches, info.npu
    ('cortex-m55', 'dsp', ('nomve',), 'ethos-u55-128')
    >>> info.name, info.as_target().gcc_flags[0]
    ('cortex-m55+nomve+ethos-u55-128', '-mcpu=cortex-m55+nomve')
    """

    cpu: str
    isa: str = "scalar"
    npu: str = "none"
    rounding: str = "single"
    flags: int = 0
    switches: tuple[str, ...] = ()

    def __post_init__(self):
        order = {name: k for k, name in enumerate(S.TARGET_SWITCHES)}
        self.switches = tuple(sorted(set(self.switches), key=lambda n: (order.get(n, 99), n)))

    @classmethod
    def of(cls, target, rounding: str = "single") -> TargetInfo:
        """The record for a `mcutorch.targets.Target` (what the compile decided)."""
        return cls(target.cpu, target.isa, target.npu or "none", rounding,
                   switches=target.switches)

    @property
    def name(self) -> str:
        """The canonical target name: CPU, switches, NPU ("cortex-m4+nofp")."""
        npu = () if self.npu == "none" else (self.npu,)
        return "+".join((self.cpu, *self.switches, *npu))

    def as_target(self):
        """The full `mcutorch.targets.Target` (gcc flags, features, ...) of this record.

        Raises TargetError when the record names no valid target or its ISA level is not the
        target's (a reader refuses such programs with bad_target, so a loaded program always
        has one).
        """
        from mcutorch.errors import TargetError
        from mcutorch.targets import parse_target

        target = parse_target(self.name)
        if target.isa != self.isa:
            raise TargetError(f"the program records ISA level {self.isa!r}, but {target.name} "
                              f"has {target.isa!r}")
        return target


@dataclass
class RegionInfo:
    """One memory arena the caller provides; `size` is what the plan needs."""

    name: str
    size: int
    alignment: int = 16
    rank: int = 0  # speed rank, 0 = fastest
    npu: bool = False  # an Ethos-U can reach it
    base: int | None = None  # address on the board, informational
    capacity: int = 0  # bytes of the board region, 0 = unknown


@dataclass
class TensorInfo:
    """A tensor: dtype, shape, where its bytes live (arena region or CONST) and its qparams."""

    dtype: str
    shape: tuple[int, ...]
    storage: str = "arena"  # "arena" | "const"
    offset: int = 0  # in the region's arena, or in the CONST blob
    region: int | None = None  # region index for arena tensors
    scale: float = 0.0
    zero_point: int = 0
    ring: bool = False  # a persistent ring window (TENSOR_FLAG_RING, format 1.6)

    def __post_init__(self):
        self.shape = tuple(int(d) for d in self.shape)
        self.scale = float(np.float32(self.scale))  # the file stores f32
        self.zero_point, self.offset = int(self.zero_point), int(self.offset)
        self.region = None if self.region is None else int(self.region)

    @classmethod
    def arena(cls, dtype, shape, region, offset, scale=0.0, zero_point=0) -> TensorInfo:
        return cls(dtype, shape, "arena", offset, region, scale, zero_point)

    @classmethod
    def const(cls, dtype, shape, offset, scale=0.0, zero_point=0) -> TensorInfo:
        return cls(dtype, shape, "const", offset, None, scale, zero_point)

    @classmethod
    def persistent(cls, dtype, shape, offset, scale=0.0, zero_point=0, ring=False) -> TensorInfo:
        """A tensor of the persistent buffer (state kept across invokes, format 1.5); `ring`:
        a ring window (1.6)."""
        return cls(dtype, shape, "persistent", offset, None, scale, zero_point, ring)

    @property
    def ring_slots(self) -> int:
        """n of a ring window: its first dim of size > 1 (0 when there is none)."""
        return next((d for d in self.shape if d > 1), 0)

    @property
    def extent(self) -> int:
        """Bytes it occupies in its storage: a ring window's whole block (schema.py, TENSOR)."""
        n = self.ring_slots
        if not self.ring or n < 2:
            return self.nbytes
        return S.RING_HEAD + (2 * n - 1) * (self.nbytes // n)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def elem_size(self) -> int:
        return S.DTYPE_SIZES.get(self.dtype, 0)

    @property
    def nbytes(self) -> int:
        return self.numel * self.elem_size


@dataclass
class OpInfo:
    """One op record: ops.py name and variant, operand tensor indices, int32 attributes."""

    name: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    attrs: dict[str, int] = field(default_factory=dict)  # ops.py order
    variant: str = ops.DEFAULT_VARIANT
    scratch: Area | None = None
    source: int | None = None  # index into metadata["sources"]

    def __post_init__(self):
        self.inputs = tuple(int(i) for i in self.inputs)
        self.outputs = tuple(int(i) for i in self.outputs)
        order = ops.BY_NAME[self.name].attrs if self.name in ops.BY_NAME else ()
        if set(self.attrs) == set(order):
            self.attrs = {a: int(self.attrs[a]) for a in order}

    @property
    def opdef(self) -> ops.OpDef:
        return ops.get(self.name)


@dataclass
class Binding:
    """A delegate input/output: tensor at byte `offset` of the delegate's scratch area, with
    Vela's 6-D shape (shorter shapes are padded with leading 1s) and element size."""

    tensor: int
    offset: int
    shape: tuple[int, ...]
    elem_size: int

    def __post_init__(self):
        shape = tuple(int(d) for d in self.shape)
        self.shape = (1,) * (S.MAX_RANK - len(shape)) + shape
        self.tensor, self.offset = int(self.tensor), int(self.offset)
        self.elem_size = int(self.elem_size)


@dataclass
class DelegateInfo:
    """An Ethos-U subgraph: command stream and weights (byte ranges of CONST), Vela's scratch
    areas, I/O bindings, and optionally a CPU version: ops [first, first + count) of the program."""

    npu: str
    command: tuple[int, int]  # (offset, size) in CONST
    weights: tuple[int, int] = (0, 0)
    scratch: Area | None = None
    fast_scratch: Area | None = None
    inputs: list[Binding] = field(default_factory=list)
    outputs: list[Binding] = field(default_factory=list)
    cpu_ops: tuple[int, int] | None = None  # (first op, count)

    def __post_init__(self):
        self.command = tuple(int(v) for v in self.command)
        self.weights = tuple(int(v) for v in self.weights)
        self.inputs, self.outputs = list(self.inputs), list(self.outputs)
        self.cpu_ops = None if self.cpu_ops is None else tuple(int(v) for v in self.cpu_ops)


@dataclass(frozen=True)
class PersistentInfo:
    """A persistent tensor (storage "persistent"): its index and its initial value, the CONST
    bytes [init_offset, init_offset + its size) (format 1.5)."""

    tensor: int
    init_offset: int


@dataclass(frozen=True)
class Port:
    """A program input or output as the host sees it: its float side in the model's layout and
    batch (`model_shape`, `layout`) and its int8 side in the program (`shape`, `dtype`, NHWC for
    4-D tensors). `layout` is "NCHW" when the model's NCHW tensor is stored NHWC (the host
    transposes), "NHWC" for a 4-D tensor the host passes as it is, "none" otherwise."""

    kind: str  # "input" | "output"
    index: int  # position among the program's inputs or outputs
    tensor: int  # tensor index
    name: str
    model_shape: tuple[int, ...]
    layout: str
    shape: tuple[int, ...]
    dtype: str
    scale: float
    zero_point: int
    ids_below: int | None = None  # int32 token ids (format 1.6): every id in [0, ids_below)

    @property
    def is_ids(self) -> bool:
        """An int32 input of token ids (read by embeddings), not a quantized value."""
        return self.dtype == "int32"

    @property
    def label(self) -> str:
        """'input 0 (x)': how error messages name the port."""
        return f"{self.kind} {self.index} ({self.name})"

    @property
    def nchw_as_nhwc(self) -> bool:
        return self.layout == "NCHW"


@dataclass
class Program:
    """A compiled model. `constants` is the CONST blob (build it with ConstantPool); after
    `from_bytes` it is a memoryview of the caller's buffer, so constants are read in place.
    `metadata` None means the METADATA section is absent (stripped)."""

    target: TargetInfo
    regions: list[RegionInfo]
    tensors: list[TensorInfo]
    ops: list[OpInfo]
    inputs: list[int]
    outputs: list[int]
    constants: bytes | memoryview = b""
    delegates: list[DelegateInfo] = field(default_factory=list)
    metadata: dict | None = None
    persistent: list[PersistentInfo] = field(default_factory=list)  # format 1.5
    # measured while compiling (e.g. "vela_seconds"); never written: a program's bytes depend on
    # its inputs only, so two compiles of one model give the same file
    timings: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        self.regions, self.tensors = list(self.regions), list(self.tensors)
        self.ops = list(self.ops)
        self.inputs = [int(i) for i in self.inputs]
        self.outputs = [int(i) for i in self.outputs]
        self.delegates = list(self.delegates)
        self.persistent = [PersistentInfo(int(r.tensor), int(r.init_offset))
                           for r in self.persistent]

    # --- serialisation ---
    def to_bytes(self) -> bytes:
        """The program file; deterministic. Raises ProgramError when the program is invalid."""
        from mcutorch.program.writer import write

        return write(self)

    @classmethod
    def from_bytes(cls, buf, verify_crc: bool = True) -> Program:
        """Parse and validate a program file; raises ProgramError(reason in schema.ERRORS)."""
        from mcutorch.program.reader import read

        return read(buf, verify_crc=verify_crc)

    def save(self, path) -> None:
        Path(path).write_bytes(self.to_bytes())

    @classmethod
    def load(cls, path, verify_crc: bool = True) -> Program:
        """Read and validate a program file; FileError when `path` is missing or a folder."""
        return cls.from_bytes(read_program_file(path), verify_crc=verify_crc)

    # --- helpers for executors and inspect ---
    def const_array(self, index: int) -> np.ndarray:
        """Constant tensor `index` as a numpy view of the CONST bytes (no copy)."""
        t = self.tensors[index]
        if t.storage != "const":
            raise ValueError(f"tensor {index} is not a constant (storage {t.storage!r})")
        dtype = np.dtype(S.DTYPE_NUMPY[t.dtype])
        return np.frombuffer(self.constants, dtype, t.numel, t.offset).reshape(t.shape)

    @property
    def persistent_size(self) -> int:
        """Bytes of the persistent buffer: the end of the last persistent tensor (0: none)."""
        return max((self.tensors[r.tensor].offset + self.tensors[r.tensor].extent
                    for r in self.persistent), default=0)

    def persistent_init(self, record: PersistentInfo) -> np.ndarray:
        """The initial value of a persistent tensor as raw bytes (a view of CONST)."""
        t = self.tensors[record.tensor]
        return np.frombuffer(self.constants, np.uint8, t.extent, record.init_offset)

    def subgraph_ops(self) -> set[int]:
        """Indices of ops that belong to a delegate's CPU version (the main loop skips them)."""
        return {i for d in self.delegates if d.cpu_ops
                for i in range(d.cpu_ops[0], d.cpu_ops[0] + d.cpu_ops[1])}

    def main_ops(self) -> list[int]:
        """Indices of the ops the main loop runs, in order."""
        skip = self.subgraph_ops()
        return [i for i in range(len(self.ops)) if i not in skip]

    def tensor_name(self, index: int) -> str:
        names = (self.metadata or {}).get("tensor_names") or []
        return names[index] if index < len(names) else f"t{index}"

    def op_source(self, index: int) -> str:
        """'file:line (torch op)' for op `index`, or '' when unknown or stripped."""
        src, sources = self.ops[index].source, (self.metadata or {}).get("sources") or []
        if src is None or src >= len(sources):
            return ""
        return f"{sources[src].get('loc', '?')} ({sources[src].get('op', '?')})"

    def ports(self, kind: str) -> list[Port]:
        """The program's inputs (`kind` "inputs") or outputs ("outputs") as the host sees them:
        from METADATA "io" (model layout and shapes) when present, else the program's own int8
        tensors (a hand-built program)."""
        indices = self.inputs if kind == "inputs" else self.outputs
        entries = ((self.metadata or {}).get("io") or {}).get(kind) or []
        out = []
        for i, idx in enumerate(indices):
            t = self.tensors[idx]
            e = entries[i] if i < len(entries) else {}
            shape = tuple(int(d) for d in e.get("shape", t.shape))
            if e.get("nchw_as_nhwc"):
                layout = "NCHW"
            else:
                layout = "NHWC" if len(shape) == 4 else "none"
            out.append(Port(kind[:-1], i, idx, str(e.get("name") or self.tensor_name(idx)),
                            shape, layout, tuple(t.shape), t.dtype, t.scale, t.zero_point,
                            self._ids_below(idx) if t.dtype == "int32" else None))
        return out

    def _ids_below(self, idx: int) -> int:
        """The smallest table of the embeddings reading tensor idx as their ids: its rows."""
        rows = [self.tensors[op.inputs[1]].shape[0] for op in self.ops
                if op.name == "embedding" and op.inputs[0] == idx]
        return int(min(rows, default=0))

    def stripped(self) -> Program:
        """The same program with METADATA cut down to the model boundary (what a device build
        keeps): only the "io" key survives, when the program has one.

        "io" holds what the host needs to talk to the program in the model's terms: each
        input's and output's name, float shape and whether it is the model's NCHW tensor stored
        NHWC. Without it `load(stripped).run(x)` could not know it must transpose, and would
        silently feed NCHW bytes as NHWC. It stays inside METADATA, rather than in a new section
        or in the IO records, because METADATA is the format's skippable section: the C runtime
        skips it, so its validation and the bytes it reads are the same as for a program
        stripped bare, no format version changes, and older readers read the file. It costs a
        few hundred bytes of flash. A program without "io" strips to no METADATA at all; with
        it, the ops lose their indices into the dropped "sources" list."""
        io = (self.metadata or {}).get("io")
        if io is None:
            return replace(self, metadata=None)
        ops_ = [replace(op, source=None) for op in self.ops]
        return replace(self, ops=ops_, metadata={"io": io})


def read_program_file(path) -> bytes:
    """The bytes of a program file, or FileError naming what is wrong with `path`."""
    path = Path(path)
    if path.is_dir():
        raise FileError(f"{path} is a folder, not a program file: pass the .mtp file "
                        "`mcutorch compile` wrote")
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise FileError(f"program file {path} does not exist") from None
    except OSError as e:
        raise FileError(f"cannot read program file {path}: {e.strerror or e}") from None


class ConstantPool:
    """Builds the CONST blob: each item starts 16-aligned so it can be read in place; identical
    items are stored once (an unrolled LSTM's recurrent weight, used by every time step)."""

    def __init__(self):
        self._buf = bytearray()
        self._offsets: dict[bytes, int] = {}

    def add(self, data) -> int:
        """Append an array (stored little-endian, C order) or raw bytes; returns its offset (the
        earlier one for bytes already in the pool)."""
        if isinstance(data, np.ndarray):
            data = np.ascontiguousarray(data).astype(data.dtype.newbyteorder("<"), copy=False)
            data = data.tobytes()
        data = bytes(data)
        if data in self._offsets:
            return self._offsets[data]
        self._buf += bytes(-len(self._buf) % S.ALIGN)
        offset = self._offsets[data] = len(self._buf)
        self._buf += data
        return offset

    def tensor(self, array: np.ndarray, scale: float = 0.0, zero_point: int = 0) -> TensorInfo:
        """Add `array` and return its const TensorInfo (dtype from the array)."""
        dtype = np.dtype(array.dtype).name
        if dtype not in S.DTYPES:
            raise ValueError(f"constant dtype {dtype} not in {S.DTYPES}")
        return TensorInfo.const(dtype, array.shape, self.add(array), scale, zero_point)

    def to_bytes(self) -> bytes:
        return bytes(self._buf)
