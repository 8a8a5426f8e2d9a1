"""Semantic checks on a Program: indices, ranges, counts against ops.py, qparams, delegates.

Shared by the writer (a bad Program is refused before any byte is written) and the reader (run on
the decoded records, after the raw-format checks in reader.py). Every failure is a ProgramError
whose reason is one of schema.ERRORS.
"""
from __future__ import annotations

import math
import re

import numpy as np

from mcutorch import ops
from mcutorch.errors import ProgramError
from mcutorch.program import schema as S
from mcutorch.program.model import Area, Program

U32 = 0xFFFFFFFF
I32 = (-2**31, 2**31 - 1)
_REGION_NAME = re.compile(r"[A-Za-z0-9_]{1,8}")


def require(cond: bool, reason: str, detail: str) -> None:
    if not cond:
        raise ProgramError(reason, detail)


def is_int(v, lo: int = 0, hi: int = U32) -> bool:
    """A plain int (not bool) in [lo, hi]."""
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


def validate(p: Program) -> None:
    """Raise ProgramError on the first inconsistency; return None when `p` is valid."""
    check_target(p)
    check_regions(p)
    check_metadata(p)
    for i, t in enumerate(p.tensors):
        check_tensor(p, i, t)
    subgraph = check_delegates(p)
    for i, op in enumerate(p.ops):
        check_op(p, i, op, i in subgraph)
    check_io(p)
    check_persistent(p)
    check_lifetimes(p)
    check_metadata_io(p)


def check_target(p: Program) -> None:
    t = p.target
    for name, table in (("cpu", S.CPUS), ("isa", S.ISAS), ("npu", S.NPUS),
                        ("rounding", S.ROUNDINGS)):
        require(getattr(t, name) in table, "bad_target",
                f"{name} {getattr(t, name)!r} is not one of {', '.join(table)}")
    require(t.rounding == "single", "bad_target", f"rounding {t.rounding!r} is reserved: no "
            "executor implements it yet (only 'single' programs load)")
    require(t.flags == 0, "bad_target", f"program flags 0x{t.flags:x}: none are defined in "
            f"format {S.VERSION_MAJOR}.{S.VERSION_MINOR}")
    check_switches(t)


def check_switches(t) -> None:
    """Feature switches: known, taken by the CPU, and giving the recorded ISA level.

    targets.CPUS says which switches a CPU takes and parse_target what ISA level results; the
    C loader checks the same with the MT_CPU_LIST table of mt_program.h (generated from
    targets.py)."""
    from mcutorch.targets import CPUS, parse_target

    require(isinstance(t.switches, (tuple, list)), "bad_target",
            f"switches {t.switches!r} must be a tuple of names")
    switches = tuple(t.switches)
    unknown = [s for s in switches if s not in S.TARGET_SWITCH_BITS]
    require(not unknown and len(set(switches)) == len(switches), "bad_target",
            f"switches {switches}: each at most once, of "
            f"{', '.join(S.TARGET_SWITCHES)}")
    taken = CPUS[t.cpu].switches
    wrong = [s for s in switches if s not in taken]
    require(not wrong, "bad_target", f"{t.cpu} does not take {', '.join('+' + s for s in wrong)}"
            f" (its switches: {', '.join('+' + s for s in taken) or 'none'})")
    isa = parse_target("+".join((t.cpu, *switches))).isa
    require(t.isa == isa, "bad_target",
            f"ISA level {t.isa!r}, but {'+'.join((t.cpu, *switches))} has {isa!r}")


def check_regions(p: Program) -> None:
    require(len(p.regions) <= S.MAX_REGIONS, "bad_region",
            f"{len(p.regions)} regions (at most {S.MAX_REGIONS})")
    seen: set = set()
    for i, r in enumerate(p.regions):
        what = f"region {i} ({r.name!r})"
        require(isinstance(r.name, str) and _REGION_NAME.fullmatch(r.name) is not None,
                "bad_region", f"{what}: name must be 1-8 characters of [A-Za-z0-9_]")
        require(r.name not in seen, "bad_region", f"{what}: duplicate name")
        seen.add(r.name)
        require(is_int(r.size), "bad_region", f"{what}: size {r.size}")
        a = r.alignment
        require(is_int(a, S.REGION_ALIGN_MIN, S.REGION_ALIGN_MAX) and a & (a - 1) == 0,
                "bad_region", f"{what}: alignment {a} is not a power of two in "
                f"{S.REGION_ALIGN_MIN}..{S.REGION_ALIGN_MAX}")
        require(is_int(r.capacity) and (r.capacity == 0 or r.size <= r.capacity), "bad_region",
                f"{what}: needs {r.size} bytes but the region holds {r.capacity}")
        require(r.base is None or is_int(r.base), "bad_region", f"{what}: base {r.base}")
        require(is_int(r.rank, 0, 0xFFFF), "bad_region", f"{what}: rank {r.rank}")


def check_tensor(p: Program, i: int, t) -> None:
    what = f"tensor {i}"
    require(t.dtype in S.DTYPES, "bad_tensor", f"{what}: dtype {t.dtype!r}")
    require(t.storage in S.STORAGES, "bad_tensor", f"{what}: storage {t.storage!r}")
    require(len(t.shape) <= S.MAX_RANK and all(is_int(d) for d in t.shape), "bad_tensor",
            f"{what}: shape {t.shape} (rank <= {S.MAX_RANK}, dims < 2^32)")
    require(t.nbytes <= U32, "bad_tensor", f"{what}: {t.nbytes} bytes")
    require(math.isfinite(t.scale) and t.scale >= 0, "bad_tensor", f"{what}: scale {t.scale}")
    lo, hi = S.DTYPE_RANGES[t.dtype]
    require(is_int(t.zero_point, lo, hi), "bad_tensor",
            f"{what}: zero point {t.zero_point} outside {t.dtype} [{lo}, {hi}]")
    require(t.dtype != "int64" or t.storage == "const", "bad_tensor",
            f"{what}: an int64 tensor holds a constant int48 bias; it cannot live in an arena")
    require(t.dtype != "int32" or t.storage == "const" or (t.scale == 0 and t.zero_point == 0),
            "bad_tensor", f"{what}: an int32 {t.storage} tensor holds token ids: scale 0 and zero "
            f"point 0, not ({t.scale}, {t.zero_point})")
    if t.storage == "arena":
        _check_arena_tensor(p, what, t)
    elif t.storage == "persistent":
        _check_persistent_tensor(what, t)
    else:
        _check_const_tensor(p, what, t)
    require(not t.ring or (t.storage == "persistent" and t.ring_slots >= 2), "bad_tensor",
            f"{what}: a ring window is a persistent tensor with a dim of size >= 2, got "
            f"{t.storage} {list(t.shape)}")
    if t.dtype == "int64":  # the C loader checks the same (mt_validate.c mt_check_tensor)
        v = p.const_array(i)
        require(v.size == 0 or (int(v.min()) >= S.INT48[0] and int(v.max()) <= S.INT48[1]),
                "bad_tensor", f"{what}: an int64 value outside int48 [-2^47, 2^47)")


def _check_arena_tensor(p: Program, what: str, t) -> None:
    require(is_int(t.region, 0, len(p.regions) - 1), "bad_tensor",
            f"{what}: region {t.region} (program has {len(p.regions)})")
    region = p.regions[t.region]
    require(is_int(t.offset) and t.offset % t.elem_size == 0, "bad_offset",
            f"{what}: offset {t.offset} is not a multiple of the {t.dtype} size")
    require(t.offset + t.nbytes <= region.size, "bad_offset",
            f"{what}: bytes [{t.offset}, {t.offset + t.nbytes}) outside region {region.name} "
            f"({region.size} bytes)")


def _check_const_tensor(p: Program, what: str, t) -> None:
    require(t.region is None, "bad_tensor", f"{what}: a constant has no region")
    require(is_int(t.offset) and t.offset % S.ALIGN == 0, "bad_offset",
            f"{what}: constant offset {t.offset} is not {S.ALIGN}-aligned")
    require(t.offset + t.nbytes <= len(p.constants), "bad_offset",
            f"{what}: bytes [{t.offset}, {t.offset + t.nbytes}) outside CONST "
            f"({len(p.constants)} bytes)")


def _check_persistent_tensor(what: str, t) -> None:
    require(t.region is None, "bad_tensor", f"{what}: a persistent tensor has no region")
    require(is_int(t.offset) and t.offset % S.ALIGN == 0 and t.offset + t.extent <= U32,
            "bad_offset", f"{what}: persistent offset {t.offset} is not {S.ALIGN}-aligned or "
            "ends past 2^32")


def check_persistent(p: Program) -> None:
    """PERSISTENT records (schema.py): one per persistent tensor, each initial value a 16-aligned
    range of CONST; neither the tensors nor their initial values share a byte."""
    recs = p.persistent
    require(len(recs) <= S.MAX_PERSISTENT, "bad_persistent",
            f"{len(recs)} persistent records (at most {S.MAX_PERSISTENT})")
    seen: list = []
    for k, r in enumerate(recs):
        what = f"persistent {k}"
        require(is_int(r.tensor, 0, len(p.tensors) - 1), "bad_persistent",
                f"{what}: tensor {r.tensor} (program has {len(p.tensors)})")
        t = p.tensors[r.tensor]
        require(t.storage == "persistent", "bad_persistent",
                f"{what}: tensor {r.tensor} is a {t.storage} tensor")
        n = t.extent  # a ring window: its whole block
        require(is_int(r.init_offset) and r.init_offset % S.ALIGN == 0
                and r.init_offset + n <= len(p.constants), "bad_persistent",
                f"{what}: initial value [{r.init_offset}, {r.init_offset + n}) is not a "
                f"{S.ALIGN}-aligned range of CONST ({len(p.constants)} bytes)")
        if t.ring:
            pos = int(np.frombuffer(p.constants, "<i4", 1, r.init_offset)[0])
            require(0 <= pos < t.ring_slots, "bad_persistent",
                    f"{what}: ring position {pos} outside [0, {t.ring_slots})")
        for j, (t2, init2) in enumerate(seen):
            t1 = p.tensors[t2]
            require(r.tensor != t2, "bad_persistent", f"{what}: tensor {r.tensor} listed twice")
            require(not _meet((0, t.offset, n), (0, t1.offset, t1.extent)),
                    "bad_persistent", f"{what}: tensor {r.tensor} overlaps persistent {j}")
            require(not _meet((0, r.init_offset, n), (0, init2, t1.extent)),
                    "bad_persistent", f"{what}: initial value overlaps that of persistent {j}")
        seen.append((r.tensor, r.init_offset))
    packed = sum(-(-p.tensors[r.tensor].extent // S.ALIGN) * S.ALIGN for r in recs)
    require(p.persistent_size <= packed, "bad_persistent",
            f"the persistent buffer ends at {p.persistent_size}, past its tensors packed "
            f"({packed} bytes)")
    listed = {r.tensor for r in recs}
    for i, t in enumerate(p.tensors):
        require(t.storage != "persistent" or i in listed, "bad_persistent",
                f"tensor {i} is persistent but has no PERSISTENT record")


def check_area(p: Program, a, what: str, reason: str) -> None:
    """A scratch area: valid region (else `reason`), inside the region's arena (else bad_offset)."""
    require(isinstance(a, Area), reason, f"{what}: {a!r} is not an Area")
    require(is_int(a.region, 0, len(p.regions) - 1), reason,
            f"{what}: region {a.region} (program has {len(p.regions)})")
    require(is_int(a.offset) and is_int(a.size), "bad_offset", f"{what}: {a}")
    region = p.regions[a.region]
    require(a.offset + a.size <= region.size, "bad_offset",
            f"{what}: bytes [{a.offset}, {a.offset + a.size}) outside region {region.name} "
            f"({region.size} bytes)")


def check_const_range(p: Program, rng, what: str) -> None:
    """A (offset, size) byte range of CONST, 16-aligned."""
    off, size = rng
    require(is_int(off) and is_int(size) and off % S.ALIGN == 0, "bad_offset",
            f"{what}: offset {off} is not {S.ALIGN}-aligned")
    require(off + size <= len(p.constants), "bad_offset",
            f"{what}: bytes [{off}, {off + size}) outside CONST ({len(p.constants)} bytes)")


def _count_ok(names: tuple[str, ...], n: int) -> bool:
    return 1 <= n <= S.MAX_VARIADIC if ops.VARIADIC in names else n == len(names)


def _expected(names: tuple[str, ...]) -> str:
    return f"1..{S.MAX_VARIADIC}" if ops.VARIADIC in names else str(len(names))


def check_op(p: Program, i: int, op, in_subgraph: bool) -> None:
    what = f"op {i} ({op.name})"
    require(op.name in ops.BY_NAME, "bad_op", f"op {i}: unknown op {op.name!r}")
    d = ops.BY_NAME[op.name]
    require(op.variant in d.variants, "bad_op",
            f"{what}: variant {op.variant!r} not in {', '.join(d.variants)}")
    for kind, names, got in (("inputs", d.inputs, op.inputs), ("outputs", d.outputs, op.outputs)):
        require(_count_ok(names, len(got)), "bad_op",
                f"{what}: {len(got)} {kind}, ops.py says {_expected(names)}")
        require(all(is_int(t, 0, len(p.tensors) - 1) for t in got), "bad_op",
                f"{what}: {kind} {got} (program has {len(p.tensors)} tensors)")
    require(all(p.tensors[t].storage != "const" for t in op.outputs), "bad_op",
            f"{what}: an output is a constant")
    _check_dtypes(p, what, op, d)
    require(list(op.attrs) == list(d.attrs), "bad_op",
            f"{what}: attributes {list(op.attrs)}, ops.py says {list(d.attrs)}")
    require(all(is_int(v, *I32) for v in op.attrs.values()), "bad_op",
            f"{what}: attribute values must be int32")
    if op.scratch is not None:
        check_area(p, op.scratch, f"{what} scratch", "bad_op")
    _check_source(p, what, op.source)
    if op.name == "delegate":
        _check_delegate_op(p, what, op, in_subgraph)
    if "delegate" not in d.alias:
        _check_alias(p, what, op, d.alias)
    if d.mac_axis is not None:
        _check_mac_range(p, what, op, d)
    if op.name == "gather":
        _check_gather(p, what, op)
    if op.name in RECURRENT:
        _check_recurrent(p, what, op)
    _check_ring(p, what, op)
    if op.name == "matmul":  # two activations: |acc| <= K * 255 * 255 (the C loader: the same)
        _check_matmul(p, what, op)


def _check_matmul(p: Program, what: str, op) -> None:
    """|acc| <= K * 255 * 255 inside int32 (int16 a, b: K * 2^30 inside int48, zero points 0
    and a 16-bit multiplier, docs/numerics.md section 6) and its rq inside int32."""
    wide = p.tensors[op.inputs[0]].dtype == "int16"
    k = int(p.tensors[op.inputs[0]].shape[-1]) * (1 << 30 if wide else 255 * 255)
    mult, shift = op.attrs["mult"], op.attrs["shift"]
    fits = [v <= (S.INT48[1] if wide else I32[1]) and
            I32[0] <= (v * mult + (1 << shift - 1) >> shift) <= I32[1] for v in (k, -k)]
    legal = mult <= 32767 and op.attrs["a_zp"] == op.attrs["b_zp"] == 0 if wide else True
    require(mult >= 0 and 2 <= shift <= 62 and all(fits) and legal, "bad_op",
            f"{what}: K * {'2^30' if wide else '255 * 255'} = {k} or its rq leaves "
            f"{'int48 / int32, or not zero points 0 and a 16-bit multiplier' if wide else 'int32'}"
            " (docs/numerics.md, Domain)")


def _check_dtypes(p: Program, what: str, op, d) -> None:
    """OpDef.dtypes: the activation inputs share one dtype, the outputs another, and the pair is
    one the op's kernels take (the C loader: the same, MT_<OP>_DTYPES)."""
    if d.dtypes is None:
        return
    act = d.activation_inputs()
    ins = sorted({p.tensors[t].dtype for k, t in enumerate(op.inputs) if -1 in act or k in act})
    outs = sorted({p.tensors[t].dtype for t in op.outputs})
    require((*ins, *outs) in d.dtypes, "bad_op", f"{what}: {' / '.join(ins)} inputs -> "
            f"{' / '.join(outs)} output: its kernels take "
            + ", ".join(f"{a} -> {b}" for a, b in d.dtypes))


def _check_gather(p: Program, what: str, op) -> None:
    """gather's indices: a constant int32 vector whose entries all lie in x's gathered dim (the
    C loader checks the same, mt_validate.c mt_check_gather; both executors again at run time)."""
    x, t = p.tensors[op.inputs[0]], p.tensors[op.inputs[1]]
    axis = op.attrs["axis"] - 6 + len(x.shape)
    require(t.storage == "const" and t.dtype == "int32" and len(t.shape) == 1 and 0 <= axis
            < len(x.shape), "bad_op", f"{what}: not constant int32 indices, or axis not in x")
    idx = p.const_array(op.inputs[1])
    require(bool(np.all((idx >= 0) & (idx < x.shape[axis]))), "bad_op",
            f"{what}: an index outside [0, {x.shape[axis]})")


RECURRENT = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}  # op -> gates


def _check_recurrent(p: Program, what: str, op) -> None:
    """lstm / gru / rnn_tanh / rnn_relu (docs/numerics.md): x [B, T, G*H], weight [G*H, H], h0
    (c0), h (c) [B, H], y [B, steps, H], the steps inside T, constant tables of x's dtype (256
    int8, 513 int16) and bias_n [H], scratch for one step's gates (the C loader: the same,
    mt_check_recurrent)."""
    g, lstm, gru = RECURRENT[op.name], op.name == "lstm", op.name == "gru"
    x, w, y = p.tensors[op.inputs[0]], p.tensors[op.inputs[1]], p.tensors[op.outputs[0]]
    b, hs = (x.shape[0] if len(x.shape) == 3 else 0), (w.shape[1] if len(w.shape) == 2 else 0)
    state = [p.tensors[t] for t in (*op.inputs[5:7 if lstm else 6], *op.outputs[1:])]
    require(len(x.shape) == 3 and hs >= 1 and x.shape[2] == g * hs == w.shape[0]
            and all(t.shape == (b, hs) for t in state)
            and y.shape == (b, op.attrs["steps"], hs), "bad_op",
            f"{what}: x {x.shape}, weight {w.shape}, states {[t.shape for t in state]}, y "
            f"{y.shape}: not [B, T, {g}H], [{g}H, H], [B, H] and [B, steps, H]")
    steps, start, rev = (op.attrs[k] for k in ("steps", "start", "reverse"))
    end = start - steps + 1 if rev else start + steps - 1
    require(steps >= 1 and rev in (0, 1) and 0 <= min(start, end) and max(start, end)
            < x.shape[1], "bad_op", f"{what}: steps {steps} from start {start} (reverse {rev}) "
            f"leave the {x.shape[1]} time steps")
    n = 513 if x.dtype == "int16" else 256
    consts = [(p.tensors[t], (n,)) for t in op.inputs[7 if lstm or gru else 6:]]
    consts += [(p.tensors[op.inputs[6]], (hs,))] if gru else []
    require(all(t.storage == "const" and t.dtype == x.dtype and t.shape == shape
                for t, shape in consts), "bad_op",
            f"{what}: tables must be constant {x.dtype}[{n}] (and bias_n [{hs}])")
    need = b * g * hs * (2 if x.dtype == "int16" else 1)
    require(op.scratch is not None and op.scratch.size >= need, "bad_op",
            f"{what}: scratch {op.scratch and op.scratch.size} bytes; one step's gates need "
            f"{need}")


def _const_operand(p: Program, what: str, op, k: int, dtype: str, n: int | None = None):
    """Input k of a MAC op as a constant array of `dtype` (with n elements when given)."""
    t, name = p.tensors[op.inputs[k]], op.opdef.inputs[k]
    require(t.storage == "const" and t.dtype == dtype and len(t.shape) >= 1, "bad_op",
            f"{what}: {name} (tensor {op.inputs[k]}) must be a constant {dtype} tensor of rank "
            f">= 1, got {t.storage} {t.dtype} of rank {len(t.shape)}")
    require(n is None or t.numel == n, "bad_op",
            f"{what}: {name} has {t.numel} elements, the weight has {n} output channels")
    return p.const_array(op.inputs[k])


def _check_mac_range(p: Program, what: str, op, d) -> None:
    """docs/numerics.md "Domain": with every x - in_zp in its int8 range, each output channel's
    accumulator bias + sum((x - in_zp) * w) and its rq(acc, mult, shift) fit int32, whatever the
    input. Checked from the constant operands, so no input can leave the domain at run time; the
    C loader checks the same (mt_validate.c mt_check_mac), one pass over the weights."""
    wide = p.tensors[op.inputs[0]].dtype == "int16"  # int48 accumulator, 16-bit mult (sec. 6)
    w = _const_operand(p, what, op, 1, "int8")  # summed as int8 into int64: no wide copy
    channels = w.shape[d.mac_axis]
    bias, mult, shift = (_const_operand(p, what, op, k, "int64" if wide and k == 2 else "int32",
                                        channels).ravel().astype(np.int64) for k in (2, 3, 4))
    zp = 0 if op.variant in d.zp_folded else op.attrs["in_zp"]
    require(-128 <= zp <= 127 and not (wide and zp), "bad_op", f"{what}: in_zp {zp} is not "
            + ("0 (int16 x)" if wide else "int8"))
    if channels == 0:
        return
    w = np.moveaxis(w, d.mac_axis, 0).reshape(channels, -1)
    pos = np.maximum(w, 0).sum(axis=1, dtype=np.int64)
    neg = np.minimum(w, 0).sum(axis=1, dtype=np.int64)
    x_lo, x_hi, m_hi, a_hi = (-32768, 32767, 32767, S.INT48[1]) if wide else (-128, 127, *I32[1:],
                                                                            I32[1])
    hi = (x_hi - zp) * pos + (x_lo - zp) * neg + bias
    lo = (x_lo - zp) * pos + (x_hi - zp) * neg + bias
    bad = (mult < 0) | (mult > m_hi) | (shift < 2) | (shift > 62)
    c = int(np.argmax(bad)) if bad.any() else -1
    require(c < 0, "bad_op", f"{what}: channel {c}: mult {mult[c]} / shift {shift[c]} outside "
            f"[0, {m_hi}] / [2, 62]")
    half = np.left_shift(np.int64(1), shift - 1)
    bad = np.zeros(channels, bool)
    for v in (lo, hi):  # |v| <= 2^31 (2^47 with mult < 2^15), so v * mult + half < 2^63
        fits = (v >= -a_hi - (not wide)) & (v <= a_hi)
        scaled = (np.where(fits, v, 0) * mult + half) >> shift
        bad |= ~fits | (scaled < I32[0]) | (scaled > I32[1])
    c = int(np.argmax(bad)) if bad.any() else -1
    require(c < 0, "bad_op", f"{what}: channel {c}: the accumulator spans [{lo[c]}, {hi[c]}]; it "
            f"or its rescale (mult {mult[c]}, shift {shift[c]}) can leave int{48 if wide else 32}"
            " (docs/numerics.md, Domain)")


def _check_ring(p: Program, what: str, op) -> None:
    """Ring windows (1.6): written by ring_write alone, whose x is one frame of its window."""
    rings = [o for o in op.outputs if p.tensors[o].ring]
    if op.name != "ring_write":
        require(not rings, "bad_op", f"{what}: writes ring window {rings[:1]}; only ring_write may")
        return
    x, y = p.tensors[op.inputs[0]], p.tensors[op.outputs[0]]
    require(y.ring and not x.ring and op.attrs["slots"] == y.ring_slots
            and x.nbytes * y.ring_slots == y.nbytes, "bad_op",
            f"{what}: x {list(x.shape)} must be one frame of the ring window {list(y.shape)} of "
            f"slots {op.attrs['slots']} (its first dim of size > 1)")


def _bytes_of(p: Program, index: int):
    """(region, offset, size) of an arena tensor (region "persistent" for one of the persistent
    buffer); None for a constant."""
    t = p.tensors[index]
    if t.storage == "persistent":
        return ("persistent", t.offset, t.extent)
    return (t.region, t.offset, t.nbytes) if t.storage == "arena" else None


def _meet(a, b) -> bool:
    """Two (region, offset, size) byte ranges share a byte (empty ones never do)."""
    return (a is not None and b is not None and a[0] == b[0] and a[2] > 0 and b[2] > 0
            and a[1] < b[1] + b[2] and b[1] < a[1] + a[2])


def _check_alias(p: Program, what: str, op, kinds) -> None:
    """ops.ALIAS_KINDS: an output shares no byte with another output or the scratch buffer, nor
    with an input unless the two are exactly the same bytes and the op runs in place ("inplace":
    any input; "residual": the last input only, the skip); the scratch buffer shares none with an
    input either. The C loader checks the same (bad_op)."""
    scratch = None if op.scratch is None else (op.scratch.region, op.scratch.offset,
                                               op.scratch.size)
    last = len(op.inputs) - 1
    for k, o in enumerate(op.outputs):
        y = _bytes_of(p, o)
        for j, i in enumerate(op.inputs):
            x = _bytes_of(p, i)
            if "overlap" in kinds and j == 0 and _meet(y, x):
                _check_overlap(p, what, op, x, y)
                continue
            may = "inplace" in kinds or ("residual" in kinds and j == last)
            require(not _meet(y, x) or (may and x == y), "bad_op",
                    f"{what}: output tensor {o} {y} overlaps input tensor {i} {x}"
                    + (" without being exactly its bytes" if may else
                       " (only the skip, the last input, may share the output's bytes)"
                       if "residual" in kinds else " (the op cannot run in place)"))
        for o2 in op.outputs[:k]:
            require(not _meet(y, _bytes_of(p, o2)), "bad_op",
                    f"{what}: outputs {o2} and {o} overlap")
    for t in (*op.inputs, *op.outputs):
        require(not _meet(scratch, _bytes_of(p, t)), "bad_op",
                f"{what}: scratch {op.scratch} overlaps operand tensor {t}")


def _check_overlap(p: Program, what: str, op, x, y) -> None:
    """Alias kind "overlap": y over x in one arena region, starting at least the op's least
    delta (OpDef.overlap, from the shapes and attributes) below x (the C loader: the same)."""
    least = op.opdef.overlap(p.tensors[op.inputs[0]], p.tensors[op.outputs[0]],
                             p.tensors[op.inputs[1]], op.attrs)
    delta = x[1] - y[1]
    require(least is not None and x[0] == y[0] != "persistent" and delta >= least, "bad_op",
            f"{what}: output {y} overlaps input x {x}: "
            + (f"it starts {delta} bytes below x, the kernel needs at least {least}"
               if least is not None else "this op's shape or attributes allow no overlap")
            + " (docs/numerics.md, Overlap)")


def _check_source(p: Program, what: str, source) -> None:
    require(source is None or is_int(source, 0, U32 - 1), "bad_op", f"{what}: source {source}")
    if source is not None and p.metadata is not None:
        n = len(p.metadata.get("sources", []))
        require(source < n, "bad_metadata", f"{what}: source {source}, metadata has {n}")


def _check_delegate_op(p: Program, what: str, op, in_subgraph: bool) -> None:
    index = op.attrs["index"]
    require(0 <= index < len(p.delegates), "bad_delegate",
            f"{what}: delegate {index} (program has {len(p.delegates)})")
    require(not in_subgraph, "bad_delegate", f"{what}: delegates cannot nest")
    dg = p.delegates[index]
    for kind, tensors, bindings in (("inputs", op.inputs, dg.inputs),
                                    ("outputs", op.outputs, dg.outputs)):
        bound = tuple(b.tensor for b in bindings)
        require(tensors == bound, "bad_delegate",
                f"{what}: {kind} {tensors} but delegate {index} binds {bound}")


def check_delegates(p: Program) -> set[int]:
    """Check every delegate; return the op indices that form their CPU versions."""
    subgraph: set[int] = set()
    require(len(p.delegates) <= S.MAX_DELEGATES, "bad_delegate",
            f"{len(p.delegates)} delegates (at most {S.MAX_DELEGATES})")
    for k, d in enumerate(p.delegates):
        what = f"delegate {k}"
        require(d.npu in S.NPUS[1:] and d.npu == p.target.npu, "bad_delegate",
                f"{what}: npu {d.npu!r} but the target's is {p.target.npu!r}")
        check_const_range(p, d.command, f"{what} command stream")
        require(d.command[1] > 0, "bad_delegate", f"{what}: empty command stream")
        check_const_range(p, d.weights, f"{what} weights")
        for name in ("scratch", "fast_scratch"):
            area = getattr(d, name)
            if area is not None:
                check_area(p, area, f"{what} {name}", "bad_delegate")
                require(p.regions[area.region].npu, "bad_delegate",
                        f"{what}: {name} in region {p.regions[area.region].name}, "
                        "which the NPU cannot reach")
        spans = [(a.region, a.offset, a.size) if a is not None else None
                 for a in (d.scratch, d.fast_scratch)]
        require(not _meet(*spans), "bad_delegate",  # the NPU uses both at once
                f"{what}: fast scratch {spans[1]} overlaps its scratch {spans[0]}")
        _check_bindings(p, what, d)
        ops_range = _check_cpu_ops(p, what, d)
        require(not ops_range & subgraph, "bad_delegate", f"{what}: CPU versions overlap")
        subgraph |= ops_range
    return subgraph


def _check_bindings(p: Program, what: str, d) -> None:
    require(1 <= len(d.inputs) <= S.MAX_VARIADIC and 1 <= len(d.outputs) <= S.MAX_VARIADIC,
            "bad_delegate", f"{what}: {len(d.inputs)} inputs, {len(d.outputs)} outputs (each "
            f"1..{S.MAX_VARIADIC})")
    require(d.scratch is not None, "bad_delegate", f"{what}: bindings need a scratch area")
    for b in d.inputs + d.outputs:
        bw = f"{what} binding of tensor {b.tensor}"
        require(is_int(b.tensor, 0, len(p.tensors) - 1), "bad_delegate",
                f"{bw}: program has {len(p.tensors)} tensors")
        t = p.tensors[b.tensor]
        require(len(b.shape) == S.MAX_RANK and all(is_int(v) for v in b.shape), "bad_delegate",
                f"{bw}: shape {b.shape} is not 6-D")
        require(b.elem_size == t.elem_size and math.prod(b.shape) == t.numel, "bad_delegate",
                f"{bw}: {b.shape} x {b.elem_size} B does not match {t.dtype}{list(t.shape)}")
        require(is_int(b.offset) and b.offset + t.nbytes <= d.scratch.size, "bad_offset",
                f"{bw}: bytes [{b.offset}, {b.offset + t.nbytes}) outside the scratch area "
                f"({d.scratch.size} bytes)")
        require(t.storage == "arena" and t.region == d.scratch.region
                and t.offset == d.scratch.offset + b.offset, "bad_delegate",
                f"{bw}: the tensor does not live at scratch offset {b.offset}")


def _check_cpu_ops(p: Program, what: str, d) -> set[int]:
    if d.cpu_ops is None:
        return set()
    first, count = d.cpu_ops
    require(is_int(count, 1, U32), "bad_delegate", f"{what}: CPU version of {count} ops")
    require(is_int(first, 0, U32 - 1) and first + count <= len(p.ops), "bad_offset",
            f"{what}: CPU version ops [{first}, {first + count}) of {len(p.ops)}")
    return set(range(first, first + count))


def check_io(p: Program) -> None:
    require(len(p.outputs) >= 1, "bad_io", "a program needs at least one output")
    require(len(p.inputs) <= S.MAX_IO and len(p.outputs) <= S.MAX_IO, "bad_io",
            f"{len(p.inputs)} inputs, {len(p.outputs)} outputs (at most {S.MAX_IO} each)")
    for kind, idx in (("input", p.inputs), ("output", p.outputs)):
        require(len(set(idx)) == len(idx), "bad_io", f"duplicate {kind}s {idx}")
        for t in idx:
            require(is_int(t, 0, len(p.tensors) - 1), "bad_io",
                    f"{kind} tensor {t} (program has {len(p.tensors)})")
            require(p.tensors[t].storage == "arena", "bad_io",
                    f"{kind} tensor {t} is a {p.tensors[t].storage} tensor, not an arena one")


def run_orders(p: Program) -> list[list[int]]:
    """The op indices in the order they run: with the NPU (every delegate op, no CPU version) and,
    when some delegate has a CPU version, without it (each such delegate op replaced by its CPU
    version's ops, as mt_invoke runs them when the port's mt_ethosu_invoke says MT_STATUS_NO_NPU,
    which it says for every delegate or none)."""
    inner = {j for d in p.delegates if d.cpu_ops for j in range(d.cpu_ops[0], sum(d.cpu_ops))}
    npu = [i for i in range(len(p.ops)) if i not in inner]
    if not inner:
        return [npu]
    cpu = []
    for i in npu:
        d = p.delegates[p.ops[i].attrs["index"]] if p.ops[i].name == "delegate" else None
        cpu += range(d.cpu_ops[0], sum(d.cpu_ops)) if d is not None and d.cpu_ops else [i]
    return [npu, cpu]


def check_lifetimes(p: Program) -> None:
    """No op writes over bytes still to be read (schema.py, "Validation").

    In each run order (run_orders), an arena tensor is live from the op that first writes it
    (program start for an input) to its last reader (program end for an output); an op's scratch
    and a delegate op's Vela scratch only during that op. A tensor no op of the run writes and
    no input is a view (a reshape's output): it must have exactly the bytes of an input or of a
    tensor written before it is first read, and is live from the latest such write. Two live
    ranges whose bytes meet may share an op only where one ends and the other begins (that op's
    alias checks, _check_alias, judge the pair) or as a view and what it views (exactly the same
    bytes, the same start). A tensor read before the op that writes it is refused as well. The C
    loader checks the same (mt_validate.c mt_check_lifetimes; bad_op)."""
    for order in run_orders(p):
        _check_run(p, order)


def _check_run(p: Program, order: list[int]) -> None:
    arena = {i for i, t in enumerate(p.tensors) if t.storage == "arena"}
    first = dict.fromkeys(p.inputs, -1)  # step: -1 program start, len(order) its end
    last = dict(first)
    views: set[int] = set()
    written = {_bytes_of(p, t): -1 for t in p.inputs}  # bytes -> step of their latest write

    def read(t: int, s: int, who: str) -> None:
        if t not in first:
            src = written.get(_bytes_of(p, t))
            require(src is not None, "bad_op", f"{who} reads tensor {t} before any op writes it")
            first[t] = src
            views.add(t)
        last[t] = s

    items = []  # (what, bytes, first, last, view)
    for s, i in enumerate(order):
        op, who = p.ops[i], f"op {i} ({p.ops[i].name})"
        for t in op.inputs:
            if t in arena:
                read(t, s, who)
        for t in op.outputs:
            if t in arena:
                require(t not in views, "bad_op",
                        f"{who} writes tensor {t}, which an earlier op reads")
                first.setdefault(t, s)
                last[t] = max(last.get(t, s), s)
                written[_bytes_of(p, t)] = s
        areas = [("scratch", op.scratch)]
        if op.name == "delegate":
            d = p.delegates[op.attrs["index"]]
            areas += [("Vela scratch", d.scratch), ("Vela fast scratch", d.fast_scratch)]
        items += [(f"the {name} of {who}", (a.region, a.offset, a.size), s, s, False)
                  for name, a in areas if a is not None]
    for t in p.outputs:
        read(t, len(order), "the program's end")
    items += [(f"tensor {t}", _bytes_of(p, t), first[t], last[t], t in views) for t in first]
    items.sort(key=lambda it: it[2])
    for k, (wa, a, fa, la, va) in enumerate(items):
        for wb, b, fb, lb, vb in items[k + 1:]:
            if fb > la:
                break
            view = a == b and fa == fb and (va or vb)
            require(la == fb or lb == fa or view or not _meet(a, b), "bad_op",
                    f"{wb} {b}, live from op {_op_at(order, fb)}, overlaps {wa} {a}, live until op "
                    f"{_op_at(order, la)}")


def _op_at(order: list[int], s: int):
    return "start" if s < 0 else "end" if s >= len(order) else order[s]


def check_metadata(p: Program) -> None:
    """Shape of the known METADATA keys (see schema.py); other keys are free."""
    m = p.metadata
    if m is None:
        return
    require(isinstance(m, dict), "bad_metadata", "metadata must be a JSON object")
    require(isinstance(m.get("model", ""), str), "bad_metadata", '"model" must be a string')
    require(isinstance(m.get("options", {}), dict), "bad_metadata", '"options" must be an object')
    if "tensor_names" in m:
        names = m["tensor_names"]
        require(isinstance(names, list) and len(names) == len(p.tensors)
                and all(isinstance(n, str) for n in names), "bad_metadata",
                f'"tensor_names" must be {len(p.tensors)} strings')
    sources = m.get("sources", [])
    require(isinstance(sources, list) and all(
        isinstance(s, dict) and isinstance(s.get("loc"), str) and isinstance(s.get("op"), str)
        for s in sources), "bad_metadata", '"sources" must be a list of {"loc": str, "op": str}')


def check_metadata_io(p: Program) -> None:
    """METADATA "io" (the model boundary the host converts through, see Program.ports): one
    entry per program input / output, each with a float shape of the tensor's element count,
    and `nchw_as_nhwc` only on a 4-D tensor stored as that shape's NHWC transpose. Python-only
    like all of METADATA (the C runtime skips the section)."""
    io = (p.metadata or {}).get("io")
    if io is None:
        return
    require(isinstance(io, dict), "bad_metadata", '"io" must be an object')
    for kind, indices in (("inputs", p.inputs), ("outputs", p.outputs)):
        entries = io.get(kind)
        if entries is None:
            continue
        require(isinstance(entries, list) and len(entries) == len(indices), "bad_metadata",
                f'"io" {kind} must be a list of {len(indices)} entries')
        for k, (e, idx) in enumerate(zip(entries, indices)):
            what = f'"io" {kind}[{k}]'
            require(isinstance(e, dict), "bad_metadata", f"{what} must be an object")
            shape, t = e.get("shape"), p.tensors[idx]
            require(isinstance(shape, list) and len(shape) <= S.MAX_RANK
                    and all(is_int(d) for d in shape), "bad_metadata",
                    f"{what}: shape must be a list of at most {S.MAX_RANK} non-negative ints")
            require(math.prod(shape) == t.numel, "bad_metadata",
                    f"{what}: shape {shape} does not hold the {t.numel} elements of tensor {idx}")
            require(isinstance(e.get("name", ""), str), "bad_metadata", f"{what}: name must be a "
                    "string")
            nchw = e.get("nchw_as_nhwc", False)
            require(isinstance(nchw, bool), "bad_metadata", f"{what}: nchw_as_nhwc must be a bool")
            if nchw:
                require(len(shape) == 4 and tuple(t.shape) == tuple(shape[i] for i in (0, 2, 3, 1)),
                        "bad_metadata", f"{what}: NCHW {shape} stored NHWC needs a tensor of shape "
                        f"{[shape[i] for i in (0, 2, 3, 1)] if len(shape) == 4 else '(4-D)'}, "
                        f"tensor {idx} is {list(t.shape)}")
