"""nn.LSTM / nn.GRU / nn.RNN: unrolled before export (frontend/builders/recurrent.py), compiled,
bit-exact between the Python reference and the host C runtime (and emulated boards, slow),
within 1 LSB of PyTorch's fake-quant layer by layer, weights stored once whatever the sequence
length, and what stays out refused by name and file:line."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from torch import nn

import mcutorch
from mcutorch.compare import layer_by_layer
from mcutorch.device import crt
from mcutorch.errors import QuantizeError, UnsupportedOpError
from mcutorch.frontend.builders.recurrent import swap
from mcutorch.ref.interpreter import Interpreter

KINDS = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}


class Seq(nn.Module):
    """A recurrent layer returning the sequence (`last=False`) or the last layer's final state;
    `state`: the initial state is a model input (h0, and c0 for an LSTM) instead of zero."""

    def __init__(self, kind: str, last: bool = False, state: bool = False, **kw):
        super().__init__()
        self.rnn = KINDS[kind](6, 8, **kw)
        self.kind, self.last, self.state = kind, last, state

    def forward(self, x, *hx):
        if hx:
            hx = hx if self.kind == "lstm" else hx[0]
        out, h = self.rnn(x, hx if self.state else None)
        h_n = h[0] if self.kind == "lstm" else h
        return h_n[-1] if self.last else out


# (kind, module keywords, last state, initial state as input)
CONFIGS = [
    ("lstm", dict(batch_first=True), False, False),
    ("lstm", dict(batch_first=False, num_layers=2), True, False),
    ("lstm", dict(batch_first=False, bidirectional=True, num_layers=2), True, True),
    ("gru", dict(batch_first=False, bidirectional=True), False, True),
    ("gru", dict(batch_first=True, num_layers=2, bidirectional=True), False, False),
    ("rnn", dict(batch_first=True, nonlinearity="tanh", num_layers=2), False, True),
    ("rnn", dict(batch_first=False, nonlinearity="relu", bidirectional=True), True, False),
]


def _inputs(kind, kw, state, batch=2, steps=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((batch, steps, 6) if kw.get("batch_first") else (steps, batch, 6), generator=g)
    if not state:
        return (x,)
    n = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    h = tuple(0.5 * torch.randn(n, batch, 8, generator=g) for _ in range(2 if kind == "lstm"
                                                                             else 1))
    return (x, *h)


@pytest.mark.parametrize("kind,kw,last,state", [
    (k, dict(batch_first=bf, num_layers=layers, bidirectional=bi, bias=bias), bias, state)
    for k, bf, layers, bi, bias, state in itertools.product(
        KINDS, (True, False), (1, 2), (False, True), (True, False), (False, True))])
def test_the_unrolled_module_equals_the_torch_module_in_float(kind, kw, last, state):
    torch.manual_seed(1)
    model = Seq(kind, last, state, **kw).eval()
    args = _inputs(kind, kw, state)
    unrolled = swap(model)
    assert type(unrolled.rnn).__module__ == "mcutorch.frontend.builders.recurrent"
    assert type(model.rnn) is KINDS[kind]  # the user's model is left as it was
    with torch.no_grad():
        torch.testing.assert_close(unrolled(*args), model(*args), atol=2e-6, rtol=0)
        lstm = nn.LSTM(6, 8, **kw).eval()  # the full (out, (h_n, c_n)) structure
        want, got = lstm(args[0]), swap(lstm)(args[0])
        leaves = torch.utils._pytree.tree_leaves
        for a, b in zip(leaves(want), leaves(got)):
            torch.testing.assert_close(b, a, atol=2e-6, rtol=0)


def _compiled(kind, kw, last, state, steps=5):
    torch.manual_seed(0)
    model = Seq(kind, last, state, **kw).eval()
    cal = [_inputs(kind, kw, state, steps=steps, seed=s) for s in range(6)]
    qmodel = mcutorch.quantize(model, cal[0], calibration=cal)
    return qmodel, mcutorch.compile(qmodel, cal[0]), cal


@pytest.mark.parametrize("kind,kw,last,state", CONFIGS)
def test_recurrent_configs_are_bit_exact_and_within_one_lsb_of_fake_quant(kind, kw, last, state):
    qmodel, compiled, cal = _compiled(kind, kw, last, state)
    p = compiled.program
    xs = compiled.quantize_inputs([t.numpy() for t in _inputs(kind, kw, state, seed=9)])
    ref = Interpreter(p).invoke(xs)
    got = crt.run_host(p, xs)
    for a, b in zip(got, ref):
        np.testing.assert_array_equal(a, b)
    assert len(np.unique(ref[0])) > 5  # the state carries information, not a constant
    rows = layer_by_layer(qmodel, cal[1])
    assert rows and {r["op"] for r in rows} >= {"fully_connected", "add"}
    close = sum(r["within_1lsb"] * r["elements"] for r in rows) / sum(r["elements"] for r in rows)
    worst = min(rows, key=lambda r: r["within_1lsb"])
    print(f"{kind} {kw} last={last} state={state}: {len(p.ops)} ops, within 1 LSB {close:.2%}, "
          f"worst op {worst['op']} {worst['within_1lsb']:.2%}")
    assert close >= 0.99 and worst["within_1lsb"] >= 0.97


def _const_bytes(kind, kw, steps):
    return len(_compiled(kind, kw, False, False, steps=steps)[1].program.constants)


def test_an_lstm_program_stores_its_weights_once_whatever_the_sequence_length():
    """The unrolled steps share one set of qparams (Quantizer.share_steps), so each step's
    weight, bias and multipliers are the same bytes, stored once by the constant pool."""
    kw = dict(batch_first=True)
    sizes = {t: _const_bytes("lstm", kw, t) for t in (3, 16)}
    assert len(set(sizes.values())) == 1, sizes
    torch.manual_seed(0)
    weights = sum(p.numel() for n, p in nn.LSTM(6, 8).named_parameters() if "weight" in n)
    assert weights < sizes[3] < 4 * weights + 2048, sizes  # + tables, biases, multipliers
    # a 2-layer bidirectional GRU: equal qparams may coincide between layers at one length and
    # not at another, so the constants vary a little, never by a step's worth
    sizes = [_const_bytes("gru", dict(batch_first=True, num_layers=2, bidirectional=True), t)
             for t in (3, 8)]
    assert abs(sizes[1] - sizes[0]) <= 512, sizes


def test_the_constant_pool_stores_equal_constants_once():
    from mcutorch.program.model import ConstantPool

    pool = ConstantPool()
    w = np.arange(40, dtype=np.int8).reshape(5, 8)
    a, b = pool.add(w), pool.add(np.int32([7, 8]))
    assert pool.add(w.copy()) == a and pool.add(np.int32([7, 8])) == b  # the same bytes
    assert pool.add(w.astype(np.int16)) not in (a, b)  # other bytes, other offset
    assert a % 16 == 0 and b % 16 == 0


class Packed(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.rnn = nn.LSTM(6, 8, batch_first=True, **kw)

    def forward(self, x, packed: bool = False):
        if packed:
            x = nn.utils.rnn.pack_padded_sequence(x, torch.tensor([x.shape[1]] * len(x)),
                                                  batch_first=True)
        out, _ = self.rnn(x)  # the line the errors name
        return out.data if packed else out


FORWARD_LINE = Packed.forward.__code__.co_firstlineno + 4


@pytest.mark.parametrize("model,args,match", [
    (Packed(), (torch.randn(2, 5, 6), True), "PackedSequence input"),
    (Packed(proj_size=4), (torch.randn(2, 5, 6),), "proj_size=4"),
    (Packed(), (torch.randn(5, 6),), "unbatched"),
])
def test_what_stays_out_is_refused_naming_the_module_and_line(model, args, match):
    with pytest.raises(UnsupportedOpError, match=match) as err:
        mcutorch.quantize(model, args)
    assert f"test_rnn.py:{FORWARD_LINE} in rnn: torch.nn.LSTM" in str(err.value)


def test_dropout_between_layers_is_refused_in_training_and_dropped_in_eval():
    x = torch.randn(2, 5, 6)
    model = Packed(num_layers=2, dropout=0.3)
    with pytest.raises(UnsupportedOpError, match=f"test_rnn.py:{FORWARD_LINE} in rnn: "
                                                 r"torch.nn.LSTM: dropout=0.3 .*training"):
        mcutorch.quantize(model, (x,), calibration=[x], qat=True)
    mcutorch.compile(mcutorch.quantize(model, (x,)), (x,))  # eval: no dropout


def test_other_sequence_lengths_and_own_exports_are_refused_by_name():
    x = torch.randn(2, 5, 6)
    with pytest.raises(QuantizeError, match=r"shape \[2, 7, 6\]"):
        mcutorch.quantize(Packed(), (x,), calibration=[torch.randn(2, 7, 6)])
    compiled = mcutorch.compile(mcutorch.quantize(Packed(), (x,)), (x,))
    with pytest.raises(mcutorch.errors.InputError, match=r"expected float \[2, 5, 6\]"):
        compiled.run(torch.randn(2, 7, 6))
    from mcutorch.frontend._torchao import pt2e

    prepare, convert = pt2e()
    own = prepare(torch.export.export(Packed(), (x,)).module(), mcutorch.Quantizer())
    own(x)
    with pytest.raises(UnsupportedOpError,
                       match=r"in rnn: torch.nn.LSTM \(aten.lstm.input\).*capture"):
        mcutorch.compile(convert(own), (x,))


def test_a_gru_trains_with_qat_and_keeps_one_set_of_step_constants():
    torch.manual_seed(0)
    model = Seq("gru", True, False, batch_first=True).eval()
    x, y = torch.randn(32, 6, 6), torch.randn(32, 8)
    qat = mcutorch.quantize(model, (x[:1],), calibration=[x], qat=True)
    opt = torch.optim.Adam(qat.parameters(), lr=1e-3)
    for _ in range(3):
        opt.zero_grad()
        nn.functional.mse_loss(qat(x), y).backward()
        opt.step()
    compiled = mcutorch.compile(qat, (x[:1],))
    ptq = mcutorch.compile(mcutorch.quantize(model, (x[:1],), calibration=[x]), (x[:1],))
    assert len(compiled.program.constants) == len(ptq.program.constants)  # shared in QAT too
    xs = compiled.quantize_inputs([x[:1].numpy()])
    np.testing.assert_array_equal(crt.run_host(compiled.program, xs)[0],
                                  compiled.run_int8(xs)[0])


ALL_ZOO = ("lstm_digits", "gru_digits", "crnn_digits")


@pytest.mark.slow
@pytest.mark.parametrize("target,board,names", [
    ("cortex-m55", "mps3-an547", ALL_ZOO),  # MVE gate matmuls
    ("cortex-m33", "mps2-an505", ALL_ZOO),  # DSP (the CRNN fused: a 17.6 KB program; unrolled,
    ("cortex-m3", "mps2-an385", ALL_ZOO)])  # C  # its 86.5 KB passed an505's 64 KiB data)
def test_recurrent_zoo_on_boards(target, board, names):
    """The zoo's LSTM, GRU and CRNN on held-out digits as firmware: the reference's integers."""
    from mcutorch.device import firmware
    from mcutorch.models.sequence import train_digits

    for name in names:
        model, (xtr, _, xte, _) = train_digits(name, 0, epochs=3)
        qmodel = mcutorch.quantize(model, (xtr[:1],), calibration=[xtr[:256]])
        compiled = mcutorch.compile(qmodel, (xtr[:1],), target=target)
        sets = [compiled.quantize_inputs([xte[i:i + 1].numpy()]) for i in range(4)]
        run = firmware.run(compiled.program, sets, board)
        for got, xs in zip(run.outputs, sets):
            np.testing.assert_array_equal(got[0], Interpreter(compiled.program).invoke(xs)[0])


@pytest.mark.slow
def test_an_unrolled_lstm_is_one_verified_ethos_u_delegate():
    """Every op of the unrolled steps lowers to TOSA: one delegate, verified bit for bit on the
    TOSA reference model at compile time, whose CPU version gives the CPU program's integers."""
    qmodel, compiled, cal = _compiled("lstm", dict(batch_first=True), True, False)
    npu = mcutorch.compile(qmodel, cal[0], target="cortex-m55+ethos-u55-128", board="mps3-an547")
    meta = npu.program.metadata["ethos_u"]
    assert meta["verified"] and len(meta["delegates"]) == 1
    unrolled = mcutorch.compile(qmodel, cal[0], fuse_recurrent=False)  # an NPU target keeps them
    assert meta["delegates"][0]["ops"] == len(unrolled.program.ops)
    xs = compiled.quantize_inputs([cal[3][0].numpy()])
    np.testing.assert_array_equal(npu.run_int8(xs)[0], compiled.run_int8(xs)[0])


def test_a_gru_over_token_embeddings_is_bit_exact():
    """Token ids (int32 program input) -> nn.Embedding -> nn.GRU -> Linear: the reference and the
    host C runtime agree on held-out digits' row tokens."""
    from mcutorch.models import digits_tokens, token_gru_digits

    ids, _, ids_te, _ = digits_tokens(0)
    model = token_gru_digits().eval()
    q = mcutorch.quantize(model, (ids[:1],), calibration=[ids[:128]])
    compiled = mcutorch.compile(q, (ids[:1],))
    assert compiled.program.tensors[compiled.program.inputs[0]].dtype == "int32"
    for row in ids_te[:6]:
        xs = [row[None].numpy().astype(np.int32)]
        np.testing.assert_array_equal(crt.run_host(compiled.program, xs)[0],
                                      Interpreter(compiled.program).invoke(xs)[0])


@pytest.mark.slow
def test_the_token_gru_is_within_a_point_of_float():
    from mcutorch.models.sequence import train_digits

    model, (ids, _, ids_te, y_te) = train_digits("token_gru_digits", 0)
    q = mcutorch.quantize(model, (ids[:1],), calibration=[ids[:512]])
    program = mcutorch.compile(q, (ids[:1],))
    with torch.no_grad():
        f = float((model(ids_te).argmax(1) == y_te).float().mean())
    p = float((torch.as_tensor(np.asarray(program.run(ids_te))).argmax(1) == y_te).float().mean())
    assert p >= f - 0.01, (f, p)


@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU])
def test_a16w8_recurrent_layers_compile_bit_exact(kind):
    """int16 gates and states (a16w8: int16 add / mul / slices, sigmoid / tanh as int16 tables,
    GRU's int16 constant operand): the reference and host C agree, and the program is within a
    point of the float model's argmax on random sequences."""
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = kind(8, 16, batch_first=True)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            return self.fc(self.rnn(x)[0][:, -1])

    model = Net().eval()
    x = torch.rand(64, 6, 8)
    q = mcutorch.quantize(model, (x[:1],), calibration=[x],
                          quantizer=mcutorch.Quantizer(activations="int16"))
    compiled = mcutorch.compile(q, (x[:1],))
    assert compiled.program.tensors[compiled.program.inputs[0]].dtype == "int16"
    for i in range(3):
        xs = compiled.quantize_inputs([x[i:i + 1].numpy()])
        np.testing.assert_array_equal(crt.run_host(compiled.program, xs)[0],
                                      Interpreter(compiled.program).invoke(xs)[0])
    with torch.no_grad():
        want = model(x).argmax(1)
    got = torch.as_tensor(np.asarray(compiled.run(x.numpy()))).argmax(1)
    assert float((got == want).float().mean()) >= 0.95
