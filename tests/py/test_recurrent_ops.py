"""lstm / gru (format 1.8), rnn_tanh / rnn_relu (1.9): the unrolled steps of an nn.LSTM / nn.GRU /
nn.RNN layer and direction that share every constant and attribute, fused by passes/recurrent.py
into one op. Fused == unrolled
== reference bit for bit (host C and emulated boards), int8 and a16w8; a program that does not
grow with the sequence; hostile op records refused by both readers."""
from __future__ import annotations

import struct

import numpy as np
import pytest
import torch

import mcutorch
from mcutorch.device import crt
from mcutorch.program import schema as S
from mcutorch.ref.interpreter import Interpreter
from test_program import reason_of, recrc, sections
from test_rnn import Seq, _inputs

# (kind, module keywords, last state instead of the sequence, initial state as input)
CONFIGS = [
    ("lstm", dict(batch_first=True), False, False),
    ("lstm", dict(batch_first=False, num_layers=2), True, False),
    ("lstm", dict(batch_first=True, bidirectional=True), False, True),
    ("lstm", dict(batch_first=False, bidirectional=True, num_layers=2), True, True),
    ("gru", dict(batch_first=True), True, False),
    ("gru", dict(batch_first=False, bidirectional=True), False, True),
    ("gru", dict(batch_first=True, num_layers=2, bidirectional=True), False, False),
    ("gru", dict(batch_first=False, num_layers=2, bias=False), True, True),
    ("rnn", dict(batch_first=True, nonlinearity="tanh"), False, False),
    ("rnn", dict(batch_first=False, nonlinearity="tanh", bidirectional=True, num_layers=2), True,
     True),
    ("rnn", dict(batch_first=True, nonlinearity="relu", num_layers=2), False, True),
    ("rnn", dict(batch_first=False, nonlinearity="relu", bidirectional=True), True, False),
]
QUANTIZERS = {"int8": None, "a16w8": dict(activations="int16")}


def _pair(kind, kw, last, state, dtype="int8", steps=6, target="cortex-m55"):
    """(fused, unrolled) compiled programs of one configuration and its quantizer."""
    torch.manual_seed(0)
    model = Seq(kind, last, state, **kw).eval()
    cal = [_inputs(kind, kw, state, steps=steps, seed=s) for s in range(6)]
    quantizer = QUANTIZERS[dtype] and mcutorch.Quantizer(**QUANTIZERS[dtype])
    q = mcutorch.quantize(model, cal[0], calibration=cal,
                          **({"quantizer": quantizer} if quantizer else {}))
    return (mcutorch.compile(q, cal[0], target=target),
            mcutorch.compile(q, cal[0], target=target, fuse_recurrent=False))


def _sets(compiled, kind, kw, state, n=2, steps=6):
    return [compiled.quantize_inputs([t.numpy() for t in _inputs(kind, kw, state, steps=steps,
                                                                 seed=9 + i)]) for i in range(n)]


def _op(kind, kw) -> str:
    """The fused op of a configuration: nn.RNN's is rnn_tanh or rnn_relu."""
    return f"rnn_{kw.get('nonlinearity', 'tanh')}" if kind == "rnn" else kind


def _layers(kw) -> int:
    return kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)


# make test: every configuration in one dtype (int8 and a16w8 alternating, so each kind meets
# both); make test-all: every configuration in both
HOST_CASES = [pytest.param(*c, d, marks=() if (i + (d == "a16w8")) % 2 == 0 else pytest.mark.slow,
                           id=f"{c[0]}{i}-{d}")
              for i, c in enumerate(CONFIGS) for d in QUANTIZERS]


@pytest.mark.parametrize("kind,kw,last,state,dtype", HOST_CASES)
def test_fused_equals_unrolled_equals_reference_on_host_c(kind, kw, last, state, dtype):
    fused, unrolled = _pair(kind, kw, last, state, dtype)
    names = [op.name for op in fused.program.ops]
    assert names.count(_op(kind, kw)) == _layers(kw)  # every layer and direction is one op
    assert _op(kind, kw) not in [op.name for op in unrolled.program.ops]
    assert len(fused.program.ops) < len(unrolled.program.ops) / 2
    for xs in _sets(fused, kind, kw, state):
        want = Interpreter(unrolled.program).invoke(xs)
        assert want[0].dtype == (np.int16 if dtype == "a16w8" else np.int8)
        for got in (Interpreter(fused.program).invoke(xs), crt.run_host(fused.program, xs),
                    crt.run_host(unrolled.program, xs)):
            for a, b in zip(got, want, strict=True):
                np.testing.assert_array_equal(a, b)


# the M55 in the fast set (make test); M0+ and M33 in make test-all
BOARDS = [pytest.param("cortex-m0plus", "mps2-an385", marks=pytest.mark.slow),
          pytest.param("cortex-m33", "mps2-an505", marks=pytest.mark.slow),
          ("cortex-m55", "mps3-an547")]


@pytest.mark.parametrize("target,board", BOARDS)
@pytest.mark.parametrize("kind,kw,last,state,dtype", [
    (*CONFIGS[3], "int8"), (*CONFIGS[6], "int8"), (*CONFIGS[0], "a16w8"), (*CONFIGS[5], "a16w8"),
    (*CONFIGS[9], "int8"), (*CONFIGS[10], "a16w8")])
def test_fused_programs_on_boards(kind, kw, last, state, dtype, target, board):
    """C (M0+, unaligned-access trapping), DSP (M33) and MVE (M55) gate matmuls and element-wise
    paths: the firmware gives the unrolled program's reference integers."""
    from mcutorch.device import firmware

    fused, unrolled = _pair(kind, kw, last, state, dtype, target=target)
    sets = _sets(fused, kind, kw, state)
    run = firmware.run(fused.program, sets, board)
    for got, xs in zip(run.outputs, sets):
        for a, b in zip(got, Interpreter(unrolled.program).invoke(xs), strict=True):
            np.testing.assert_array_equal(a, b)


def _program_bytes(kind, steps, fuse=True):
    fused, unrolled = _pair(kind, dict(batch_first=True), False, False, steps=steps)
    return len((fused if fuse else unrolled).program.stripped().to_bytes())


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn"])
def test_the_program_does_not_grow_with_the_sequence(kind):
    """T = 8 and T = 32: the fused program differs by a few bytes (the longer x and y shapes are
    in the same records; equal qparams may coincide differently in the constant pool), where the
    unrolled one grows by its op and tensor records per step."""
    fused = {t: _program_bytes(kind, t) for t in (8, 32)}
    unrolled = {t: _program_bytes(kind, t, fuse=False) for t in (8, 32)}
    print(kind, "fused", fused, "unrolled", unrolled)
    assert abs(fused[32] - fused[8]) <= 64, fused
    assert unrolled[32] - unrolled[8] > 24 * 500, unrolled  # an RNN step's records: 800 B


# --- hostile records: both readers refuse them (bad_op) ---------------------------------------
def _attr_patch(blob: bytes, op: int, attr: int, value: int) -> bytes:
    buf = bytearray(blob)
    rec = sections(buf)["ops"][0] + op * S.OP.size
    first = struct.unpack_from("<I", buf, rec + S.OP.offsets["first_attr"])[0]
    struct.pack_into("<i", buf, sections(buf)["attrs"][0] + 4 * (first + attr), value)
    return recrc(buf)


def _op_patch(blob: bytes, op: int, field: str, value: int) -> bytes:
    buf = bytearray(blob)
    struct.pack_into("<" + S._TYPES[next(f.type for f in S.OP.fields if f.name == field)][2],
                     buf, sections(buf)["ops"][0] + op * S.OP.size + S.OP.offsets[field], value)
    return recrc(buf)


KINDS = {"lstm": ("lstm", {}), "gru": ("gru", {}), "rnn_tanh": ("rnn", dict(nonlinearity="tanh")),
         "rnn_relu": ("rnn", dict(nonlinearity="relu"))}  # op -> (module kind, keywords)


@pytest.fixture(scope="module")
def hostile_base():
    return {op: _pair(k, dict(batch_first=True, **kw), False, False)[0].program
            for op, (k, kw) in KINDS.items()}


HOSTILE = [  # name, patch(blob, op index, op attrs, x's time steps)
    ("steps beyond y", lambda b, i, a, t: _attr_patch(b, i, 0, a["steps"] + 1)),
    ("no steps", lambda b, i, a, t: _attr_patch(b, i, 0, 0)),
    ("start outside T", lambda b, i, a, t: _attr_patch(b, i, 1, t)),
    ("negative start", lambda b, i, a, t: _attr_patch(b, i, 1, -1)),
    ("steps past the end", lambda b, i, a, t: _attr_patch(b, i, 1, t - 1)),
    ("reverse 2", lambda b, i, a, t: _attr_patch(b, i, 2, 2)),
    ("reverse past 0", lambda b, i, a, t: _attr_patch(b, i, 2, 1)),
    ("in_zp outside int8", lambda b, i, a, t: _attr_patch(b, i, 3, 300)),
    ("scratch too small", lambda b, i, a, t: _op_patch(b, i, "scratch_size", 4)),
    ("scratch a byte short", lambda b, i, a, t: _op_patch(b, i, "scratch_size", a["_need"] - 1)),
    ("no scratch", lambda b, i, a, t: _op_patch(b, i, "scratch_region", 0xFFFF)),
]


@pytest.mark.parametrize("kind", KINDS)
def test_hostile_records_are_refused_by_both_readers(hostile_base, kind):
    p = hostile_base[kind]
    i = next(k for k, op in enumerate(p.ops) if op.name == kind)
    op, blob = p.ops[i], p.to_bytes()
    x = p.tensors[op.inputs[0]]
    t = x.shape[1]
    need = x.shape[0] * x.shape[2]  # one step's gates, int8: the planned scratch exactly
    assert op.scratch.size == need
    assert reason_of(blob) is None and crt.check_host([blob]) == [0]
    bad = [patch(blob, i, {**op.attrs, "_need": need}, t) for _, patch, in HOSTILE]
    assert [reason_of(b) for b in bad] == ["bad_op"] * len(bad)
    assert crt.check_host(bad) == [S.ERROR_CODES["bad_op"]] * len(bad)


@pytest.mark.parametrize("op", ["lstm", "rnn_tanh"])
def test_an_npu_target_keeps_the_unrolled_steps(op):
    """The unrolled steps lower to TOSA (one delegate); the fused op would stay on the CPU."""
    from mcutorch.passes import PIPELINE

    assert "fuse_recurrent" in dict(PIPELINE)
    kind, kw = KINDS[op]
    fused, _ = _pair(kind, dict(batch_first=True, **kw), True, False)
    assert any(o.name == op for o in fused.program.ops)
    npu = mcutorch.compile(*_npu_args(kind, kw), target="cortex-m55+ethos-u55-128",
                           board="mps3-an547")
    assert not any(o.name == op for o in npu.program.ops)


def _npu_args(kind, kw):
    torch.manual_seed(0)
    kw = dict(batch_first=True, **kw)
    model = Seq(kind, True, False, **kw).eval()
    cal = [_inputs(kind, kw, False, seed=s) for s in range(4)]
    return mcutorch.quantize(model, cal[0], calibration=cal), cal[0]
