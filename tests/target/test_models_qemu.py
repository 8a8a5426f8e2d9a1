"""The MLPerf Tiny networks on every emulated board: the C runtime's int8 outputs equal the
Python reference's bit for bit (M0+ with unaligned-access trapping, M3, M4, M7, M33, M55)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import mcutorch
from mcutorch.compiler import compile_graph, resolve_regions
from mcutorch.api import CompiledModel
from mcutorch.targets import parse_target

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "py"))
from test_mlperf import MLPERF, compiled  # noqa: E402

pytestmark = pytest.mark.qemu

BOARDS = [("mps2-an385", "cortex-m0plus"), ("mps2-an385", "cortex-m3"),
          ("mps2-an386", "cortex-m4"), ("mps2-an500", "cortex-m7"),
          ("mps2-an505", "cortex-m33"), ("mps3-an547", "cortex-m55")]


def program_for(name: str, board: str, target: str) -> CompiledModel:
    """The network compiled for `target` with `board`'s memory map (same quantized model)."""
    from mcutorch.compiler import build_graph

    qmodel = compiled(name)[1]
    regions, board_name = resolve_regions(board, None)
    return CompiledModel(compile_graph(build_graph(qmodel), parse_target(target), regions,
                                       board_name, name))


@pytest.mark.parametrize("board,target", BOARDS, ids=[t for _, t in BOARDS])
@pytest.mark.parametrize("name", MLPERF)
def test_network_bit_exact_on_board(name, board, target):
    program = program_for(name, board, target)
    x = compiled(name)[3][-1]
    q = program.quantize_inputs([x])
    expected = program.run_int8(q)
    got = program.run_on_board(q, board)
    assert all(np.array_equal(a, b) for a, b in zip(got, expected))
    assert program.last_run.instructions > 0


def test_an_mve_program_is_refused_on_the_m33_board():
    program = program_for("ds_cnn_kws", "mps3-an547", "cortex-m55")
    with pytest.raises(mcutorch.McutorchError, match="cannot run"):
        program.run_on_board(program.quantize_inputs([compiled("ds_cnn_kws")[3][0]]),
                             "mps2-an505")
