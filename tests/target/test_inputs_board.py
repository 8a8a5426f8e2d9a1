"""The program boundary on an emulated board behaves as on the host: the same input checks and
messages (API and `mcutorch run --board`), a batch runs inference by inference in ONE QEMU run
with the host's answers, and a stripped program runs with the full program's layout."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import mcutorch
from mcutorch.api import CompiledModel
from mcutorch.cli import main
from mcutorch.device import firmware
from mcutorch.errors import InputError
from mcutorch.program import Program

pytestmark = pytest.mark.qemu
BOARD = "mps3-an547"


@pytest.fixture(scope="module")
def conv() -> CompiledModel:
    """Conv2d + ReLU + Linear on [1, 3, 8, 8], for the M55 board's memory."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                      nn.Linear(4 * 8 * 8, 5)).eval()
    g = torch.Generator().manual_seed(1)
    cal = [(torch.randn(1, 3, 8, 8, generator=g),) for _ in range(6)]
    return mcutorch.compile(mcutorch.quantize(m, cal[0], calibration=cal), cal[0],
                            target="cortex-m55", board=BOARD)


def _x(*shape, seed=0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def test_wrong_inputs_are_refused_on_the_board_as_on_the_host(conv):
    x = _x(1, 3, 8, 8)
    for bad in (x.permute(0, 2, 3, 1), x.long(), x[0], torch.full((1, 3, 8, 8), float("nan"))):
        with pytest.raises(InputError) as host:
            conv.run(bad)
        with pytest.raises(InputError) as board:
            conv.run(bad, board=BOARD)
        assert str(host.value) == str(board.value)
    (q,) = conv.quantize_inputs([x])
    with pytest.raises(InputError, match="an NCHW array"):
        conv.run_on_board([q.transpose(0, 3, 1, 2)], BOARD)
    with pytest.raises(InputError, match="got a float32 array"):
        conv.run_on_board([q.astype(np.float32)], BOARD)


def test_a_batch_runs_in_one_qemu_run_with_the_hosts_answers(conv):
    xs = _x(4, 3, 8, 8)
    host = conv.run(xs)
    board = conv.run(xs, board=BOARD, profile=True)
    assert torch.equal(host, board) and board.shape == (4, 5)
    run = conv.last_run
    assert len(run.per_inference) == 4 and all(n > 0 for n in run.per_inference)  # one run
    assert run.instructions == run.per_inference[-1] and set(run.per_op) == {0, 1}
    # per-op counts are the last inference's, not a sum over the batch
    assert sum(run.per_op.values()) <= run.instructions
    # firmware.run: a list of input sets in, a list of output sets out
    sets = [conv.quantize_inputs([xs[k:k + 1]]) for k in range(4)]
    out = firmware.run(conv.program, sets, BOARD)
    assert len(out.outputs) == 4
    for k in range(4):
        np.testing.assert_array_equal(out.outputs[k][0], conv.run_int8(sets[k])[0])


def test_a_stripped_program_runs_on_the_board_with_the_models_layout(conv):
    bare = CompiledModel(Program.from_bytes(conv.program.stripped().to_bytes()))
    xs = _x(2, 3, 8, 8, seed=3)
    assert torch.equal(bare.run(xs, board=BOARD), conv.run(xs))


def test_cli_board_runs_match_the_host(conv, tmp_path, capsys):
    mtp = conv.save(tmp_path / "m.mtp")
    xs = _x(3, 3, 8, 8, seed=5).numpy()
    np.save(tmp_path / "b.npy", xs)
    np.save(tmp_path / "nhwc.npy", xs[:1].transpose(0, 2, 3, 1))
    base = ["run", str(mtp), "--input"]
    assert main(base + [str(tmp_path / "b.npy"), "-o", str(tmp_path / "host.npy")]) == 0
    assert main(base + [str(tmp_path / "b.npy"), "--board", BOARD, "--profile",
                        "-o", str(tmp_path / "board.npy")]) == 0
    out = capsys.readouterr().out
    assert f"{BOARD}: 3 inferences in one run" in out
    assert np.array_equal(np.load(tmp_path / "host.npy"), np.load(tmp_path / "board.npy"))
    for extra in ([], ["--board", BOARD]):
        assert main(base + [str(tmp_path / "nhwc.npy"), *extra]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and "an NHWC array? transpose it with " \
            "x.transpose(0, 3, 1, 2)" in err
    assert main(base + [str(tmp_path / "b.npy"), "--board", BOARD, "--profile", "--exact"]) == 2
    assert "--exact profiles one inference" in capsys.readouterr().err
    (q,) = conv.quantize_inputs([torch.from_numpy(xs[:1])])
    np.save(tmp_path / "q.npy", q)
    assert main(base + [str(tmp_path / "q.npy"), "--int8", "--board", BOARD, "-o",
                        str(tmp_path / "qy.npy")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "qy.npy"), conv.run_int8([q])[0])
    np.save(tmp_path / "q_nchw.npy", q.transpose(0, 3, 1, 2))
    assert main(base + [str(tmp_path / "q_nchw.npy"), "--int8", "--board", BOARD]) == 2
    assert "an NCHW array? transpose it with x.transpose(0, 2, 3, 1)" in capsys.readouterr().err
