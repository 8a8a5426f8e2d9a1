"""nn.Embedding / F.embedding of int32 token ids (program format 1.6): the definition against
numpy, a token model end to end (reference vs host C bit for bit, layer by layer vs PyTorch's
fake-quant), the integer inputs `run` takes and refuses, out-of-range ids in every executor,
and both program readers on the int32 input's qparams and the dtype rule."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import mcutorch
from mcutorch.compare import layer_by_layer
from mcutorch.device import crt
from mcutorch.errors import ExecutionError, InputError, McutorchError, UnsupportedOpError
from mcutorch.program import schema as S
from mcutorch.ref import KERNELS
from test_program import patch, reason_of

V, D, T = 50, 16, 12  # vocabulary, embedding width, tokens per sequence
BAD_INPUT = 70  # mt_status MT_STATUS_BAD_INPUT


class TokenNet(nn.Module):
    """Embedding -> conv1d over time -> ReLU -> mean over time -> Linear (a text classifier)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D, padding_idx=0)
        self.conv = nn.Conv1d(D, 24, 3, padding=1)
        self.fc = nn.Linear(24, 4)

    def forward(self, ids):
        h = torch.relu(self.conv(self.emb(ids).transpose(1, 2)))
        return self.fc(h.mean(-1))


def _ids(seed: int, n: int = 1) -> torch.Tensor:
    return torch.randint(0, V, (n, T), generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def token_model():
    torch.manual_seed(0)
    model = TokenNet().eval()
    ids = _ids(0)
    qmodel = mcutorch.quantize(model, (ids,), calibration=[_ids(s) for s in range(1, 17)])
    return model, qmodel, mcutorch.compile(qmodel, (ids,), target="cortex-m55")


# --- the definition --------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(5,), (2, 7), (1, 3, 4), (2, 1, 2, 3), (1, 2, 1, 2, 2)])
def test_reference_is_a_row_lookup(shape):
    rng = np.random.default_rng(len(shape))
    v, d = 9, 5
    table = rng.integers(-128, 128, (v, d)).astype(np.int8)
    ids = rng.integers(0, v, shape).astype(np.int32)
    ids.flat[0], ids.flat[-1] = 0, v - 1  # the edge rows
    y = KERNELS["embedding"](ids, table)
    want = np.stack([table[i] for i in ids.ravel()]).reshape(*shape, d)
    assert y.dtype == np.int8 and np.array_equal(y, want)


@pytest.mark.parametrize("bad", [9, -1, 2**31 - 1, -2**31])
def test_reference_refuses_an_id_outside_the_table(bad):
    table = np.zeros((9, 4), np.int8)
    ids = np.array([[0, 3, bad, 8]], np.int32)
    with pytest.raises(ValueError, match=rf"token id {bad} at index \[0, 2\] outside \[0, 9\)"):
        KERNELS["embedding"](ids, table)


def test_reference_domain():
    table = np.zeros((4, 3), np.int8)
    with pytest.raises(ValueError, match="dtype int32"):
        KERNELS["embedding"](np.zeros(3, np.int64), table)  # ids are int32 exactly
    with pytest.raises(ValueError, match="rank 2"):
        KERNELS["embedding"](np.zeros(3, np.int32), np.zeros((4, 3, 1), np.int8))
    with pytest.raises(ValueError, match="rank 6"):
        KERNELS["embedding"](np.zeros((1,) * 6, np.int32), table)


# --- a token model end to end ---------------------------------------------------------------
def test_token_model_reference_equals_host_c(token_model):
    _, _, cm = token_model
    assert [op.name for op in cm.program.ops][0] == "embedding"
    (port,) = cm.ports()
    assert (port.dtype, port.scale, port.zero_point, port.ids_below) == ("int32", 0.0, 0, V)
    runner = crt.build_host_runner()
    for seed in range(20, 28):
        (q,) = cm.quantize_inputs([_ids(seed)])
        assert q.dtype == np.int32
        ours = cm.run_int8([q])
        theirs = crt.run_host(cm.program.to_bytes(), [q], runner)
        assert all(np.array_equal(a, b) for a, b in zip(ours, theirs))
    edge = np.array([[0, V - 1] * (T // 2)], np.int32)  # first and last rows
    assert np.array_equal(cm.run_int8([edge])[0], crt.run_host(cm.program, [edge], runner)[0])


def test_token_model_layer_by_layer_and_end_to_end(token_model):
    _, qmodel, cm = token_model
    ids = _ids(40, 8)
    for k in range(len(ids)):
        rows = {r["op"]: r for r in layer_by_layer(qmodel, (ids[k:k + 1],))}
        assert rows["embedding"]["exact"] == 1.0  # a row copy in the table's qparams
        assert min(r["within_1lsb"] for r in rows.values()) == 1.0, rows
    (port,) = cm.ports("outputs")
    lsb = ((cm.run(ids) - qmodel(ids)).abs() / port.scale).round()
    exact = (lsb == 0).float().mean().item()
    print(f"token model end to end vs fake-quant: {exact:.0%} of outputs equal, max "
          f"{lsb.max().item():.0f} LSB over {len(ids)} sequences")
    assert lsb.max().item() <= 2  # each layer within 1 LSB; their roundings add up end to end


def test_int64_int32_and_numpy_ids_agree(token_model):
    _, _, cm = token_model
    ids = _ids(50, 3)  # torch.long, a batch of three
    want = cm.run(ids)
    for x in (ids.int(), ids.numpy(), ids.numpy().astype(np.int16), ids.numpy().astype(np.uint8)):
        assert torch.equal(cm.run(x), want)
    assert torch.equal(torch.cat([cm.run(ids[k:k + 1]) for k in range(3)]), want)


@pytest.mark.parametrize("make,match", [
    (lambda x: x.float(), "got a float32 array; token ids are integers"),
    (lambda x: x.double().numpy(), "got a float64 array"),
    (lambda x: x > 3, "got a bool array"),
    (lambda x: x + V, r"got \d+ at index \[0, 0\] \(12 ids outside the range\)"),
    (lambda x: torch.where(torch.arange(T) == 5, -1, x), r"got -1 at index \[0, 5\]"),
    (lambda x: x[:, :5], r"got \[1, 5\]"),
])
def test_run_refuses_bad_ids_by_name(token_model, make, match):
    _, _, cm = token_model
    with pytest.raises(InputError, match=rf"input 0 \(ids\): expected int32 token ids in "
                                         rf"\[0, {V}\) of shape \[1, {T}\], .*{match}"):
        cm.run(make(_ids(60)))


def test_out_of_range_id_in_each_executor(token_model):
    """Past the host-side check (run_int8 / the C runner take raw int32): the reference raises,
    naming the op and the id; the C runtime returns MT_STATUS_BAD_INPUT before any read."""
    _, _, cm = token_model
    for bad in (V, -1, 2**31 - 1):
        q = np.zeros((1, T), np.int32)
        q[0, 7] = bad
        with pytest.raises(ExecutionError, match=rf"embedding.*token id {bad} at index \[0, 7\]"):
            cm.run_int8([q])
        with pytest.raises(McutorchError, match=rf"runtime status {BAD_INPUT} \(bad_input\)"):
            crt.run_host(cm.program, [q])
    with pytest.raises(InputError, match="expected int32 token ids"):
        cm.run_int8([np.zeros((1, T), np.int64)])


def test_summary_and_inspect_show_token_ids(token_model, capsys):
    from mcutorch.report import describe, render

    _, _, cm = token_model
    assert cm.summary()["token_ids"] == {"ids": V}
    text = render(describe(cm.program))
    assert f"input ids: int32 token ids in [0, {V}) [1, {T}]" in text


# --- program readers ----------------------------------------------------------------------
def _ids_tensor(cm) -> int:
    return cm.program.inputs[0]


def test_both_readers_refuse_qparams_on_token_ids(token_model):
    _, _, cm = token_model
    blob, k = cm.program.to_bytes(), _ids_tensor(cm)
    assert reason_of(blob) is None and crt.check_host([blob]) == [0]
    bad = [patch(blob, "tensors", k, "scale", 0.5), patch(blob, "tensors", k, "zero_point", 3)]
    assert [reason_of(b) for b in bad] == ["bad_tensor"] * 2
    assert crt.check_host(bad) == [S.ERROR_CODES["bad_tensor"]] * 2
    assert reason_of(patch(blob, "tensors", k, "scale", -0.0)) is None  # -0.0 is 0 in both
    assert crt.check_host([patch(blob, "tensors", k, "scale", -0.0)]) == [0]


def test_both_readers_apply_the_dtype_rule_to_ids(token_model):
    """int8 ids (a 1-byte tensor of the same shape) on an embedding: bad_op in both readers;
    int32 on an op whose rule has no int32 (the table's consumer made to read the ids)."""
    _, _, cm = token_model
    blob, k = cm.program.to_bytes(), _ids_tensor(cm)
    int8_ids = patch(patch(blob, "tensors", k, "dtype", S.DTYPES.index("int8")),
                     "tensors", k, "size", T)
    assert reason_of(int8_ids) == "bad_op"
    assert crt.check_host([int8_ids]) == [S.ERROR_CODES["bad_op"]]


# --- what the front end refuses, by name ------------------------------------------------------
class _MaxNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D, max_norm=1.0)

    def forward(self, ids):
        return self.emb(ids).mean(1)


class _Computed(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(V + 1, D))

    def forward(self, ids):
        return F.embedding(torch.flip(ids, [1]), self.w).mean(1)


class _IdsElsewhere(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)

    def forward(self, ids):
        return self.emb(ids).mean(1) + ids.sum()


@pytest.mark.parametrize("model,match", [
    (_MaxNorm, "embedding with max_norm renormalizes"),
    (_Computed, "aten.flip.*int64 tensor"),
    (_IdsElsewhere, "integer"),
])
def test_refused_by_name(model, match):
    with pytest.raises(UnsupportedOpError, match=match):
        mcutorch.quantize(model().eval(), (_ids(0),))


def test_f_embedding_with_a_parameter_table_compiles():
    torch.manual_seed(1)

    class Bag(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(V, 8))
            self.fc = nn.Linear(8 * T, 3)

        def forward(self, ids):
            return self.fc(F.embedding(ids, self.w).flatten(1))

    ids = _ids(3)
    q = mcutorch.quantize(Bag().eval(), (ids,), calibration=[_ids(s) for s in range(4)])
    cm = mcutorch.compile(q, (ids,))
    assert [op.name for op in cm.program.ops] == ["embedding", "fully_connected"]
    (qi,) = cm.quantize_inputs([ids])
    assert np.array_equal(cm.run_int8([qi])[0], crt.run_host(cm.program, [qi])[0])


def test_ethos_u_keeps_embedding_on_the_cpu(token_model):
    """TOSA GATHER cannot refuse an id outside the table: the embedding stays on the CPU (the
    registry says why), the conv1d after it is delegated, and the program equals the CPU one."""
    from mcutorch import ops

    reason = ops.get("embedding").tosa
    assert "run-time input" in reason and "status" in reason
    _, qmodel, cm = token_model
    npu = mcutorch.compile(qmodel, (_ids(0),), target="cortex-m55+ethos-u55-128")
    names = [npu.program.ops[i].name for i in npu.program.main_ops()]
    assert names[:2] == ["embedding", "delegate"]
    ids = _ids(80, 2)
    assert torch.equal(npu.run(ids), cm.run(ids))


@pytest.mark.slow
@pytest.mark.qemu
def test_token_model_on_m55_and_m0plus(token_model):
    """Firmware on the emulated M55 (and an Armv6-M build on mps2-an385): the reference's
    integers, and MT_STATUS_BAD_INPUT for an id outside the table."""
    _, qmodel, cm = token_model
    ids = _ids(70, 4)
    want = cm.run(ids)
    assert torch.equal(cm.run(ids, board="mps3-an547"), want)
    m0 = mcutorch.compile(qmodel, (_ids(0),), target="cortex-m0plus")
    assert torch.equal(m0.run(ids, board="mps2-an385"), want)
    bad = np.full((1, T), V, np.int32)
    with pytest.raises(McutorchError, match=rf"runtime status {BAD_INPUT} \(bad_input\)"):
        cm.run_on_board([bad], "mps3-an547")


@pytest.mark.slow
def test_token_digits_trained_float_vs_int8_and_host_c():
    """The zoo's token model on real data (scikit-learn's digits, each pixel row a token):
    trained briefly, quantized with integer calibration batches; int8 accuracy is measured
    against float, and the reference equals the host C runtime on every held-out digit."""
    from mcutorch.models.digits import digits_tokens, token_digits

    xtr, ytr, xte, yte = digits_tokens()
    model = token_digits()
    opt = torch.optim.Adam(model.parameters(), 1e-2)
    for epoch in range(15):
        order = torch.randperm(len(xtr), generator=torch.Generator().manual_seed(epoch))
        for i in range(0, len(xtr), 64):
            b = order[i:i + 64]
            opt.zero_grad()
            F.cross_entropy(model(xtr[b]), ytr[b]).backward()
            opt.step()
    model.eval()
    q = mcutorch.quantize(model, (xte[:1],), calibration=[xtr[i:i + 32] for i in range(0, 512, 32)])
    cm = mcutorch.compile(q, (xte[:1],))
    float_acc = (model(xte).argmax(1) == yte).float().mean().item()
    int8_acc = (cm.run(xte).argmax(1) == yte).float().mean().item()
    print(f"token_digits: float {float_acc:.1%}, int8 {int8_acc:.1%} on {len(xte)} digits")
    assert float_acc > 0.7 and abs(int8_acc - float_acc) < 0.03
    sets = [cm.quantize_inputs([xte[k:k + 1]]) for k in range(len(xte))]
    host, _ = crt.run_host_sequence(cm.program, sets)
    assert all(np.array_equal(cm.run_int8(s)[0], h[0]) for s, h in zip(sets, host))


def test_export_c_and_cli_take_token_ids(token_model, tmp_path, capsys):
    """export-c: the ids' byte size and range in NAME_config.h, no float helper for them, and
    the project builds warning-free; `mcutorch run` takes an integer .npy."""
    import shutil
    import subprocess

    from mcutorch.cli import main

    _, _, cm = token_model
    path = cm.save(tmp_path / "tok.mtp")
    assert main(["export-c", str(path), "-o", str(tmp_path / "out"), "--name", "tok"]) == 0
    config = (tmp_path / "out" / "tok_config.h").read_text()
    assert f"#define TOK_INPUT0_BYTES {4 * T}u /* int32 token ids [1, {T}]" in config
    assert f"#define TOK_INPUT0_IDS_BELOW {V}\n" in config
    assert "void tok_quantize_input" not in config + (tmp_path / "out" / "tok_io.c").read_text()
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.fail("arm-none-eabi-gcc not found: run `make toolchain`")
    build = subprocess.run(["make", "-C", str(tmp_path / "out")], capture_output=True, text=True)
    assert build.returncode == 0 and "warning" not in build.stderr, build.stderr[-2000:]
    ids = _ids(90, 2)
    np.save(tmp_path / "ids.npy", ids.numpy())
    capsys.readouterr()
    assert main(["run", str(path), "--input", str(tmp_path / "ids.npy"), "--output",
                 str(tmp_path / "y.npy")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), cm.run(ids).numpy())
