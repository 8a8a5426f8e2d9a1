"""Fused residuals (conv2d_add, alias kind `residual`): ResNet-8's plan fits 0.75x TFLite Micro's
arena with the runtime state, the fused program equals the unfused one bit for bit (Python
reference, host C with the arena exactly as planned, emulated boards), the fused node lowers to
TOSA exactly, and both program readers refuse an output placed over the wrong input."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import mcutorch
import needs
from mcutorch import passes
from mcutorch.api import CompiledModel
from mcutorch.compiler import build_graph, compile_graph, resolve_regions
from mcutorch.device.crt import run_host, state_size
from mcutorch.errors import ProgramError
from mcutorch.program import validate
from mcutorch.targets import parse_target

from test_mlperf import compiled
from test_program import unchecked_bytes

TFLM_RESNET8 = 55_984  # bench/peers.py: TFLite Micro's arena for the reference .tflite
UNFUSED = tuple(p for p in passes.PIPELINE if p[0] != "fuse_residuals")


def resnet8(target="cortex-m55", board=None, fused=True, monkeypatch=None):
    qmodel = compiled("resnet8")[1]
    if not fused:
        monkeypatch.setattr(passes, "PIPELINE", UNFUSED)
    try:
        regions, name = resolve_regions(board, None)
        return CompiledModel(compile_graph(build_graph(qmodel), parse_target(target), regions,
                                           name, "resnet8", verify=True))
    finally:
        if not fused:
            monkeypatch.undo()


def ram(program: CompiledModel) -> int:
    return sum(r.size for r in program.program.regions) + state_size(program.program, 4)


def test_resnet8_plan_fits_three_quarters_of_tflm(monkeypatch):
    fused, plain = resnet8(), resnet8(fused=False, monkeypatch=monkeypatch)
    names = [op.name for op in fused.program.ops]
    assert names.count("conv2d_add") == 3 and "add" not in names
    assert ram(fused) <= 0.75 * TFLM_RESNET8, ram(fused)
    assert ram(fused) < ram(plain)
    # each fused op's output is exactly its skip's bytes in the plan
    p = fused.program
    for op in p.ops:
        if op.name == "conv2d_add":
            y, skip = p.tensors[op.outputs[0]], p.tensors[op.inputs[5]]
            assert (y.region, y.offset, y.nbytes) == (skip.region, skip.offset, skip.nbytes)


def test_resnet8_fused_is_bit_exact_with_unfused(monkeypatch):
    fused, plain = resnet8(), resnet8(fused=False, monkeypatch=monkeypatch)
    xs = compiled("resnet8")[3]
    for x in xs:
        q = fused.quantize_inputs([x])
        want = plain.run_int8(q)
        assert all(np.array_equal(a, b) for a, b in zip(fused.run_int8(q), want))
    q = [fused.quantize_inputs([x])[0] for x in xs[:3]]
    for qi in q:  # host C, ASan + UBSan, each arena malloc'd at exactly its planned size
        assert all(np.array_equal(a, b) for a, b in zip(run_host(fused.program, [qi]),
                                                        plain.run_int8([qi])))


@pytest.mark.qemu
@pytest.mark.parametrize("board,target", [("mps3-an547", "cortex-m55"),
                                          ("mps2-an505", "cortex-m33"),
                                          ("mps2-an385", "cortex-m3")])
def test_resnet8_fused_on_board_with_the_planned_arena(board, target, monkeypatch):
    """The firmware's arenas and state are exactly the plan's sizes (mt_run_board.c)."""
    fused = resnet8(target, board)
    plain = resnet8(target, board, fused=False, monkeypatch=monkeypatch)
    assert ram(fused) <= 0.75 * TFLM_RESNET8
    q = fused.quantize_inputs([compiled("resnet8")[3][-1]])
    got = fused.run_on_board(q, board)
    assert all(np.array_equal(a, b) for a, b in zip(got, plain.run_int8(q)))


def _hostile(program, op_index: int, to_input: int):
    """The program with op `op_index`'s output moved onto input `to_input`'s bytes."""
    p = copy.deepcopy(program)
    op = p.ops[op_index]
    y, x = p.tensors[op.outputs[0]], p.tensors[op.inputs[to_input]]
    y.region, y.offset = x.region, x.offset
    return p


def test_readers_refuse_the_output_over_the_conv_input():
    p = resnet8().program
    k = next(i for i, op in enumerate(p.ops) if op.name == "conv2d_add")
    validate.validate(_hostile(p, k, 5))  # over the skip: the residual kind allows it
    bad = _hostile(p, k, 0)  # over x, which the conv still reads
    with pytest.raises(ProgramError, match="only the skip"):
        validate.validate(bad)
    with pytest.raises(mcutorch.McutorchError, match="bad_op"):  # the C loader too
        run_host(unchecked_bytes(bad), [np.zeros((1, 32, 32, 3), np.int8)])


def test_resnet8_on_ethos_u_lowers_the_fused_op():
    """conv2d_add goes to the NPU as CONV2D + add's sequence (verified bit for bit on the TOSA
    reference model at compile time, accepted by Vela); the delegate's CPU version runs it."""
    needs.module("tosa_reference_model")
    needs.module("ethosu.vela")
    npu = resnet8("cortex-m55+ethos-u55-128", "mps3-an547")
    p = npu.program
    assert p.ops[0].name == "delegate"
    assert [op.name for op in p.ops].count("conv2d_add") == 3  # the CPU version
    cpu = resnet8()
    q = cpu.quantize_inputs([compiled("resnet8")[3][0]])
    assert all(np.array_equal(a, b) for a, b in zip(npu.run_int8(q), cpu.run_int8(q)))
