"""Stateful models: persistent tensors kept across invokes, reset, and refused hostile records.

Reference runtime = host C runtime = PyTorch's converted model carried frame by frame (the
converted model takes the state as extra inputs and returns its new value)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import mcutorch
from mcutorch.device import crt
from mcutorch.errors import ProgramError
from mcutorch.program.model import PersistentInfo, Program


class CatShift(torch.nn.Module):
    """A 3-frame history in front of a conv1d (copy_ of a concat)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("hist", torch.zeros(1, 4, 3))
        self.conv = torch.nn.Conv1d(4, 2, 3)

    def forward(self, x):
        self.hist.copy_(torch.cat([self.hist[:, :, 1:], x], 2))
        return self.conv(self.hist)


class SliceAssign(torch.nn.Module):
    """In-place slice assignment, then a read of the whole history."""

    def __init__(self):
        super().__init__()
        self.register_buffer("hist", torch.linspace(-1, 1, 12).reshape(1, 3, 4))

    def forward(self, x):
        self.hist[:, :, :-1] = self.hist[:, :, 1:].clone()
        self.hist[:, :, -1:] = x
        return torch.relu(self.hist) * 2.0


class Ema(torch.nn.Module):
    """A running average: s = 0.75 s + 0.25 x (the output is the state itself)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("s", torch.full((1, 8), 0.5))

    def forward(self, x):
        self.s.copy_(self.s * 0.75 + x * 0.25)
        return self.s + 0.0


def _frames(shape, n=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=g) for _ in range(n)]


def _compiled(model, frames):
    torch.manual_seed(0)
    q = mcutorch.quantize(model.eval(), (frames[0],), calibration=frames)
    return q, mcutorch.compile(q, target="cortex-m55")


CASES = [(CatShift, (1, 4, 1)), (SliceAssign, (1, 3, 1)), (Ema, (1, 8))]


@pytest.mark.parametrize("make,shape", CASES, ids=[c[0].__name__ for c in CASES])
def test_state_kept_across_invokes(make, shape):
    frames = _frames(shape)
    q, p = _compiled(make(), frames)
    prog = p.program
    assert prog.persistent and prog.persistent_size > 0
    assert sum(prog.persistent[0].tensor in op.outputs for op in prog.ops) == 1  # one write
    sets = [p.quantize_inputs([f]) for f in frames]
    ref = [p.run_int8(s)[0] for s in sets]
    assert len({r.tobytes() for r in ref}) > 1  # the output moves with the state
    host, after = crt.run_host_sequence(p, sets)
    assert all(np.array_equal(h[0], r) for h, r in zip(host, ref))
    # PyTorch's converted model, its state carried by hand, gives the same values
    state = [r["init"] for r in q.meta["mcutorch_state"]]
    for f, r in zip(frames, ref):
        out = q(f, *state)
        state = [out[-1]]
        want = p.dequantize_outputs([r])[0]
        np.testing.assert_array_equal(out[0].detach().numpy().reshape(want.shape), want)
    # reset: back to the initial state, in the reference and by restarting the C session
    p.reset()
    assert np.array_equal(p.run_int8(sets[0])[0], ref[0])
    # the C session continues from a given persistent buffer (-p): frames 5.. after 0..4
    first, mid = crt.run_host_sequence(p, sets[:5])
    rest, end = crt.run_host_sequence(p, sets[5:], state=mid)
    assert all(np.array_equal(h[0], r) for h, r in zip(first + rest, ref))
    assert end == after


def test_program_round_trip_and_no_folding():
    frames = _frames((1, 4, 1))
    _, p = _compiled(CatShift(), frames)
    blob = p.to_bytes()
    back = Program.from_bytes(blob)
    assert back == p.program and back.persistent == p.program.persistent
    from mcutorch.program.schema import VERSION_MINOR

    assert VERSION_MINOR >= 5  # persistent tensors came with format 1.5
    assert blob[4:8] == (1).to_bytes(2, "little") + VERSION_MINOR.to_bytes(2, "little")
    # the state is no constant: no const tensor holds the history's shape of zeros in use
    t = back.tensors[back.persistent[0].tensor]
    assert t.storage == "persistent" and t.shape == (1, 4, 3)


def _hostile(p: Program):
    r = p.persistent[0]
    t = p.tensors[r.tensor]
    yield "misaligned init", dataclasses.replace(p, persistent=[PersistentInfo(r.tensor, 3)])
    yield "init outside CONST", dataclasses.replace(
        p, persistent=[PersistentInfo(r.tensor, len(p.constants))])
    yield "arena tensor", dataclasses.replace(p, persistent=[PersistentInfo(0, r.init_offset)])
    yield "twice", dataclasses.replace(p, persistent=[r, r])
    yield "missing record", dataclasses.replace(p, persistent=[])
    far = list(p.tensors)
    far[r.tensor] = dataclasses.replace(t, offset=1 << 30)
    yield "far offset", dataclasses.replace(p, tensors=far)


def test_hostile_persistent_records_refused_by_both_readers():
    from mcutorch.program import schema as S
    from mcutorch.program.writer import _assemble, _payloads

    _, p = _compiled(CatShift(), _frames((1, 4, 1)))
    blobs = []
    for what, bad in _hostile(p.program):
        with pytest.raises(ProgramError) as e:
            bad.to_bytes()
        assert e.value.reason == "bad_persistent", what
        blobs.append(_assemble(_payloads(bad)))
    codes = crt.check_host(blobs)
    assert codes == [S.ERROR_CODES["bad_persistent"]] * len(blobs)
    for blob in blobs:
        with pytest.raises(ProgramError) as e:
            Program.from_bytes(blob)
        assert e.value.reason == "bad_persistent"


def test_ethos_u_keeps_the_state_on_the_cpu():
    frames = _frames((1, 4, 1))
    q, cpu = _compiled(CatShift(), frames)
    npu = mcutorch.compile(q, target="cortex-m55+ethos-u55-128", board="mps3-an547")
    place = {row["op"]: row for row in npu.program.metadata["placement"]}
    assert place["strided_slice"]["on"] == place["copy"]["on"] == "CPU"
    assert place["conv2d"]["on"] == "NPU"  # the stateless rest is delegated
    assert npu.program.ops[-1].name == "copy"
    sets = [cpu.quantize_inputs([f]) for f in frames]
    assert all(np.array_equal(cpu.run_int8(s)[0], npu.run_int8(s)[0]) for s in sets)


@pytest.mark.parametrize("board", ["mps3-an547"])
def test_board_keeps_state_across_frames_in_one_run(board):
    frames = _frames((1, 4, 1))
    _, p = _compiled(CatShift(), frames)
    sets = [p.quantize_inputs([f]) for f in frames]
    ref = [p.run_int8(s)[0] for s in sets]
    outs = p._on_board(sets, board)  # all frames in one QEMU run
    assert all(np.array_equal(o[0], r) for o, r in zip(outs, ref))
