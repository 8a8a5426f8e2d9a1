"""Ring buffers for streaming histories (passes/ring.py, ring_write, format 1.6 ring windows).

- the definition (ref.movement.ring_write) against a plain list of the last n frames;
- table-driven one-op programs (ring_write, then a copy of the window) in the reference, the
  host C runtime (ASan + UBSan) and the emulated boards, bit for bit with that list, resets
  mid-stream included;
- compiled streaming modules (a (k,1) depthwise conv, a (k,3) conv2d, a pointwise conv, two
  readers of one window; several k, channel counts and feature widths): the ring program runs
  only ring_writes where the copy path (compile(..., ring_buffers=False)) runs concat + slice,
  and the two give the same integers frame after frame on the reference and the host C
  runtime; a history whose frames are not contiguous keeps the copy path;
- hostile ring records refused by both readers with the same reason, and a corrupt position in
  the persistent buffer refused at run time by both executors;
- on cortex-m55+ethos-u55-128 the ring stays on the CPU and the program equals the CPU one.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import mcutorch
from mcutorch.device import crt
from mcutorch.errors import ExecutionError, RunError
from mcutorch.program import OpInfo, Program, RegionInfo, TensorInfo
from mcutorch.program import schema as S
from mcutorch.program.model import ConstantPool, PersistentInfo
from mcutorch.ref.interpreter import Interpreter
from mcutorch.ref.movement import RING_HEAD, ring_block, ring_position, ring_write
from test_program import _target_info, reason_of, unchecked_bytes


def _windows(history: np.ndarray, frames: list[np.ndarray], n: int) -> list[np.ndarray]:
    """The independent answer: after each frame, the last n frames (history first), in order."""
    seen = list(np.asarray(history).reshape(n - 1, -1)) + []
    out = []
    for f in frames:
        seen.append(np.asarray(f).reshape(-1))
        out.append(np.stack(seen[-n:]))
    return out


@pytest.mark.parametrize("n,frame,dtype", [(2, 3, np.int8), (3, 40, np.int8), (5, 7, np.int16),
                                           (15, 128, np.int8), (4, 1, np.int16)])
def test_definition_is_the_last_n_frames(n, frame, dtype):
    rng = np.random.default_rng(n * 1000 + frame)
    lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
    history = rng.integers(lo, hi + 1, (n - 1, frame)).astype(dtype)
    frames = [rng.integers(lo, hi + 1, frame).astype(dtype) for _ in range(3 * n + 2)]
    block = ring_block(history, n)
    s = frame * np.dtype(dtype).itemsize
    assert block.size == RING_HEAD + (2 * n - 1) * s and ring_position(block, n) == 0
    for f, want in zip(frames, _windows(history, frames, n)):
        block = ring_write(f, block, slots=n)
        p = ring_position(block, n)
        got = block[RING_HEAD + p * s:RING_HEAD + (p + n) * s].view(dtype).reshape(n, frame)
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="position"):
        bad = block.copy()
        bad[:4] = np.array([n], "<i4").view(np.uint8)
        ring_write(frames[0], bad, slots=n)
    with pytest.raises(ValueError, match="no ring"):
        ring_write(frames[0], block[:-1], slots=n)


# (name, frame shape, window shape, dtype): the ring dim is the window's first dim of size > 1
RINGS = [("rows_c40_k3", (1, 1, 1, 40), (1, 3, 1, 40), "int8"),
         ("rows_c5_k2", (1, 1, 1, 5), (1, 2, 1, 5), "int8"),
         ("feat_f6_c3_k7", (1, 1, 6, 3), (1, 7, 6, 3), "int8"),
         ("rank2_c17_k4", (1, 17), (4, 17), "int8"),
         ("int16_rank3_k5", (1, 1, 9), (1, 5, 9), "int16"),
         ("one_value_k15", (1, 1, 1, 1), (1, 15, 1, 1), "int8")]


def ring_program(frame: tuple, window: tuple, dtype: str, history: np.ndarray) -> Program:
    """x (one frame) -> ring_write -> ring window R (persistent) -> copy -> y (the window)."""
    x = TensorInfo.arena(dtype, frame, 0, 0, 0.5)
    y = TensorInfo.arena(dtype, window, 0, -(-x.nbytes // 16) * 16, 0.5)
    r = TensorInfo.persistent(dtype, window, 0, 0.5, ring=True)
    n = r.ring_slots
    pool = ConstantPool()
    init = pool.add(ring_block(history, n))
    ops = [OpInfo("ring_write", [0], [2], {"slots": n}), OpInfo("copy", [2], [1], {})]
    return Program(_target_info("cortex-m55"), [RegionInfo("ram", y.offset + y.nbytes)],
                   [x, y, r], ops, [0], [1], pool.to_bytes(), persistent=[PersistentInfo(2, init)])


def _ring_case(name):
    _, frame, window, dtype = next(c for c in RINGS if c[0] == name)
    n = next(d for d in window if d > 1)
    rng = np.random.default_rng(len(name) * 7 + n)
    lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
    history = rng.integers(lo, hi + 1, (n - 1, *frame)).astype(dtype)
    frames = [rng.integers(lo, hi + 1, frame).astype(dtype) for _ in range(2 * n + 3)]
    p = Program.from_bytes(ring_program(frame, window, dtype, history).to_bytes())
    return p, history, frames, n


@pytest.mark.parametrize("name", [c[0] for c in RINGS])
def test_ring_program_reference_and_host_c(name):
    p, history, frames, n = _ring_case(name)
    want = _windows(history, frames, n)
    it = Interpreter(p)
    ref = [it.invoke([f])[0] for f in frames]
    for r, w in zip(ref, want):
        np.testing.assert_array_equal(r.reshape(n, -1), w)
    host, after = crt.run_host_sequence(p, [[f] for f in frames])
    assert all(np.array_equal(h[0], r) for h, r in zip(host, ref))
    assert ring_position(np.frombuffer(after, np.uint8), n) == len(frames) % n
    # reset mid-stream: mt_reset before frame 5 (and 10, ...) starts the windows over
    k = 5
    again, _ = crt.run_host_sequence(p, [[f] for f in frames], reset_every=k)
    it.reset()
    for j, f in enumerate(frames):
        if j and j % k == 0:
            it.reset()
        np.testing.assert_array_equal(again[j][0], it.invoke([f])[0])
        np.testing.assert_array_equal(
            again[j][0].reshape(n, -1), _windows(history, frames[j - j % k:j + 1], n)[-1])


BOARDS = [("mps2-an385", "cortex-m0plus"), ("mps2-an385", "cortex-m3"),
          ("mps2-an505", "cortex-m33"), ("mps3-an547", "cortex-m55")]


@pytest.mark.parametrize("board,cpu", [BOARDS[0], BOARDS[-1]] + [
    pytest.param(*b, marks=pytest.mark.slow) for b in BOARDS[1:-1]])
def test_ring_programs_on_boards(board, cpu):
    """Every table case, one QEMU run each, with a reset every 4 frames (Armv6-M: unaligned
    access traps on, so the frame copies must be byte-safe)."""
    from mcutorch.device import firmware

    for name, *_ in RINGS:
        p, history, frames, n = _ring_case(name)
        p = dataclasses.replace(p, target=_target_info(cpu))
        it = Interpreter(p)
        want = []
        for j, f in enumerate(frames):
            if j and j % 4 == 0:
                it.reset()
            want.append(it.invoke([f])[0])
        outs = firmware.run(p, [[f] for f in frames], board, reset_every=4).outputs
        assert all(np.array_equal(o[0], w) for o, w in zip(outs, want)), (name, board, cpu)


# ---------------------------------------------------------------------------------- models

class DepthwiseHistory(torch.nn.Module):
    """SWW's block: a (k,1) depthwise conv over the last k frames, then a pointwise conv."""

    def __init__(self, c=8, k=3, cout=6):
        super().__init__()
        self.register_buffer("hist", torch.zeros(1, c, k - 1, 1))
        self.dw = torch.nn.Conv2d(c, c, (k, 1), groups=c, bias=False)
        self.pw = torch.nn.Conv2d(c, cout, 1)

    def forward(self, x):
        window = torch.cat([self.hist, x], 2)
        self.hist.copy_(window[:, :, 1:])
        return torch.relu(self.pw(self.dw(window)))


class ConvHistory(torch.nn.Module):
    """A plain (k,3) conv2d over k frames of f features ([1, C, 1, F] per call)."""

    def __init__(self, c=3, k=4, f=6):
        super().__init__()
        self.register_buffer("hist", torch.zeros(1, c, k - 1, f))
        self.conv = torch.nn.Conv2d(c, 5, (k, 3))

    def forward(self, x):
        window = torch.cat([self.hist, x], 2)
        self.hist.copy_(window[:, :, 1:])
        return self.conv(window)


class TwoReaders(torch.nn.Module):
    """One window read by a pointwise conv and by a (k,1) depthwise conv."""

    def __init__(self, c=4, k=5):
        super().__init__()
        self.register_buffer("hist", torch.zeros(1, c, k - 1, 1))
        self.pw = torch.nn.Conv2d(c, 3, 1)
        self.dw = torch.nn.Conv2d(c, c, (k, 1), groups=c)

    def forward(self, x):
        window = torch.cat([self.hist, x], 2)
        self.hist.copy_(window[:, :, 1:])
        return self.pw(window).mean(2, keepdim=True), self.dw(window)


class TimeAlongW(DepthwiseHistory):
    """Frames along W with 3 rows: a frame is not contiguous in NHWC, so no ring (copy path)."""

    def __init__(self, c=4, k=3):
        super().__init__(c, 1)
        self.register_buffer("hist", torch.zeros(1, c, 3, k - 1))
        self.dw = torch.nn.Conv2d(c, c, (1, k), groups=c, bias=False)

    def forward(self, x):
        window = torch.cat([self.hist, x], 3)
        self.hist.copy_(window[:, :, :, 1:])
        return torch.relu(self.pw(self.dw(window)))


MODELS = [("dw_c8_k3", lambda: DepthwiseHistory(8, 3), (1, 8, 1, 1), True),
          ("dw_c20_k10", lambda: DepthwiseHistory(20, 10, 4), (1, 20, 1, 1), True),
          ("dw_c1_k2", lambda: DepthwiseHistory(1, 2, 2), (1, 1, 1, 1), True),
          ("conv_k4_f6", lambda: ConvHistory(3, 4, 6), (1, 3, 1, 6), True),
          ("two_readers_k5", lambda: TwoReaders(4, 5), (1, 4, 1, 1), True),
          ("time_along_w", lambda: TimeAlongW(4, 3), (1, 4, 3, 1), False)]


def _frames(shape, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=g) for _ in range(n)]


def _pair(make, shape):
    torch.manual_seed(0)
    frames = _frames(shape, 14)
    q = mcutorch.quantize(make().eval(), (frames[0],), calibration=frames)
    return (mcutorch.compile(q, target="cortex-m55"),
            mcutorch.compile(q, target="cortex-m55", ring_buffers=False), frames)


@pytest.mark.parametrize("name,make,shape,ring", MODELS, ids=[m[0] for m in MODELS])
def test_compiled_ring_equals_the_copy_path(name, make, shape, ring):
    rp, cp, frames = _pair(make, shape)
    names = [op.name for op in rp.program.ops]
    copies = [op.name for op in cp.program.ops]
    assert copies.count("concat") == 1 and copies.count("strided_slice") == 1
    if ring:
        assert names.count("ring_write") == 1 and not {"concat", "strided_slice"} & set(names)
        (t,) = [rp.program.tensors[r.tensor] for r in rp.program.persistent]
        n = t.ring_slots
        assert t.ring and t.extent == RING_HEAD + (2 * n - 1) * (t.nbytes // n)
    else:
        assert names == copies  # not a contiguous frame: the copy path, unchanged
    sets = [rp.quantize_inputs([f]) for f in frames]
    ring_out = [rp.run_int8(s) for s in sets]
    copy_out = [cp.run_int8(s) for s in sets]
    for a, b in zip(ring_out, copy_out):
        assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert len({o[0].tobytes() for o in ring_out}) > 1  # the output follows the history
    host, _ = crt.run_host_sequence(rp, sets, reset_every=6)  # mt_reset before frames 6 and 12
    rp.reset()
    for j, s in enumerate(sets):
        if j and j % 6 == 0:
            rp.reset()
        assert all(np.array_equal(h, r) for h, r in zip(host[j], rp.run_int8(s)))
    cp.reset()  # after mt_reset, frame 6 is the first frame of a fresh copy-path session
    assert all(np.array_equal(h, r) for h, r in zip(host[6], cp.run_int8(sets[6])))


def test_sww_bytes_moved_per_frame():
    """What the rewrite saves on the streaming wake word: the copy path moves 2k - 1 frames per
    history and call, the ring 2 (1 every k-th call)."""
    frames = [(3, 40), (5, 128), (10, 128), (15, 128)]  # (k, channels) of the four histories
    copy_path = sum((2 * k - 1) * c for k, c in frames)
    ring = sum(2 * c for _, c in frames)
    assert (copy_path, ring) == (7496, 848)


# ---------------------------------------------------------------------------- hostile input

def _hostile(p: Program):
    """(what, program, reason) for ring records both readers must refuse."""
    r = p.persistent[0]
    tensors = list(p.tensors)
    arena = list(tensors)
    arena[1] = dataclasses.replace(arena[1], ring=True)  # y: an arena tensor marked ring
    yield "ring flag on an arena tensor", dataclasses.replace(p, tensors=arena), "bad_tensor"
    flat = list(tensors)
    flat[2] = dataclasses.replace(flat[2], shape=(1,) * len(flat[2].shape))
    yield "ring of one slot", dataclasses.replace(p, tensors=flat), "bad_tensor"
    consts = bytearray(p.constants)
    consts[r.init_offset:r.init_offset + 4] = np.array([p.tensors[2].ring_slots], "<i4").tobytes()
    yield "initial position n", dataclasses.replace(p, constants=bytes(consts)), "bad_persistent"
    consts[r.init_offset:r.init_offset + 4] = np.array([-1], "<i4").tobytes()
    yield "initial position -1", dataclasses.replace(p, constants=bytes(consts)), "bad_persistent"
    short = dataclasses.replace(p, constants=p.constants[:r.init_offset + 20])
    yield "initial block past CONST", short, "bad_persistent"
    ops = list(p.ops)
    ops[0] = dataclasses.replace(ops[0], attrs={"slots": ops[0].attrs["slots"] + 1})
    yield "slots != the window's", dataclasses.replace(p, ops=ops), "bad_op"
    ops = [p.ops[0], OpInfo("copy", [0], [2], {}), p.ops[1]]
    yield "a copy writing the ring", dataclasses.replace(p, ops=ops), "bad_op"
    ops = [OpInfo("ring_write", [1], [2], {"slots": p.ops[0].attrs["slots"]}), p.ops[1]]
    yield "x not one frame", dataclasses.replace(p, ops=ops), "bad_op"
    over = list(tensors)  # the block reaches past the window's bytes: a second persistent on it
    over.append(TensorInfo.persistent(tensors[2].dtype, tensors[0].shape,
                                      -(-tensors[2].nbytes // 16) * 16, 0.5))
    end = -(-len(p.constants) // 16) * 16  # its own initial value, after the others
    consts = bytes(p.constants) + bytes(end - len(p.constants) + over[3].nbytes)
    yield "tensor over the block (not the window)", dataclasses.replace(
        p, tensors=over, constants=consts,
        persistent=[r, PersistentInfo(3, end)]), "bad_persistent"


def _clear_ring_flag(blob: bytes) -> bytes:
    """The file with OP_FLAG_RING cleared on op 0 and the CRC fixed."""
    import zlib

    b = bytearray(blob)
    table = S.HEADER.unpack(b)["section_table"]
    for k in range(S.HEADER.unpack(b)["section_count"]):
        e = S.SECTION.unpack(b, table + k * S.SECTION.size)
        if e["kind"] == S.KIND_BY_NAME["ops"].id:
            b[e["offset"] + S.OP.offsets["flags"]] &= ~S.OP_FLAG_RING & 0xFF
    b[12:16] = zlib.crc32(bytes(b[16:])).to_bytes(4, "little")
    return bytes(b)


def test_hostile_ring_records_refused_by_both_readers():
    p, *_ = _ring_case("rows_c40_k3")
    cases = list(_hostile(p))
    blobs = [unchecked_bytes(bad) for _, bad, _ in cases]
    cases.append(("RING flag missing", None, "bad_op"))
    blobs.append(_clear_ring_flag(p.to_bytes()))
    got = [reason_of(b) for b in blobs]
    assert got == [reason for *_, reason in cases], list(zip([c[0] for c in cases], got))
    assert crt.check_host(blobs) == [S.ERROR_CODES[reason] for *_, reason in cases]


def test_corrupt_position_at_run_time_is_refused():
    """A persistent buffer whose ring position left [0, n) (someone else's write) is never read
    through: the reference raises, the C runtime returns bad_state (before any kernel runs)."""
    p, history, frames, n = _ring_case("feat_f6_c3_k7")
    it = Interpreter(p)
    it.invoke([frames[0]])
    it.persistent[:4] = np.array([n + 3], "<i4").view(np.uint8)
    with pytest.raises(ExecutionError, match="position"):
        it.invoke([frames[1]])
    _, state = crt.run_host_sequence(p, [[frames[0]]])
    bad = bytearray(state)
    bad[:4] = np.array([-5], "<i4").tobytes()
    with pytest.raises(RunError, match="bad_state"):
        crt.run_host_sequence(p, [[frames[1]]], state=bytes(bad))


def test_ethos_u_keeps_the_ring_on_the_cpu():
    torch.manual_seed(0)
    frames = _frames((1, 8, 1, 1), 10)
    q = mcutorch.quantize(DepthwiseHistory(8, 3).eval(), (frames[0],), calibration=frames)
    cpu = mcutorch.compile(q, target="cortex-m55")
    npu = mcutorch.compile(q, target="cortex-m55+ethos-u55-128", board="mps3-an547")
    place = {row["op"]: row for row in npu.program.metadata["placement"]}
    assert place["ring_write"]["on"] == "CPU" and place["depthwise_conv2d"]["on"] == "CPU"
    assert any(op.name == "delegate" for op in npu.program.ops)  # the pointwise conv
    sets = [cpu.quantize_inputs([f]) for f in frames]
    assert all(np.array_equal(cpu.run_int8(s)[0], npu.run_int8(s)[0]) for s in sets)
