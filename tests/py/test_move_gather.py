"""gather: y[..., j, ...] = x[..., indices[j], ...] along one 6-D dim, constant int32 indices
(docs/numerics.md). The definition against numpy fancy indexing, its domain at every edge in
the reference and the C kernel (host and every board), the TOSA GATHER lowering on the reference
model, and end to end from index_select / x[:, idx] against PyTorch's fake-quant model (every
element equal: data movement)."""
from __future__ import annotations

import numpy as np
import needs
import pytest
import torch
from torch import nn
from test_kernels_c import BAD_ARGUMENT, BOARD_PARAMS, Case, i32, rng_for, run_board, run_host, s8

import mcutorch
from mcutorch.device import crt
from mcutorch.errors import UnsupportedOpError
from mcutorch.ref import KERNELS, gather_attrs, output_shape
from mcutorch.ref.interpreter import Interpreter

GATHER = KERNELS["gather"]


def fancy(x, idx, dim):
    """numpy fancy indexing along dim: an independent formula."""
    return x[(slice(None),) * dim + (np.asarray(idx, np.int64),)]


def test_definition_matches_fancy_indexing():
    rng = np.random.default_rng(0)
    for i in range(300):
        rank = 1 + i % 6
        shape = tuple(int(v) for v in rng.integers(1, 6, rank))
        dim = int(rng.integers(0, rank))
        idx = i32(rng.integers(0, shape[dim], int(rng.integers(1, 9))))
        x = s8(rng, shape)
        attrs = gather_attrs(dim, rank)
        y = GATHER(x, idx, **attrs)
        np.testing.assert_array_equal(y, fancy(x, idx, dim))
        assert y.shape == output_shape("gather", [x, idx], attrs)


def _edges():
    """(name, x shape, indices, axis (6-D), accepted): the last accepted / first refused value."""
    return [
        ("index_last", (3, 4), [3, 0], 5, True),
        ("index_past", (3, 4), [4, 0], 5, False),
        ("index_negative", (3, 4), [0, -1], 5, False),
        ("index_int32_max", (3, 4), [2**31 - 1], 5, False),
        ("one_index", (3, 4), [2], 4, True),
        ("many_indices", (3, 4), [2, 1, 0, 0, 1, 2, 2, 2, 0], 4, True),
        ("axis_first_dim", (3, 4), [1], 4, True),
        ("axis_lead", (3, 4), [0], 3, False),
        ("axis_6", (3, 4), [0], 6, False),
        ("axis_negative", (3, 4), [0], -1, False),
        ("rank6_axis0", (2, 1, 3, 1, 2, 2), [1, 1, 0], 0, True),
    ]


@pytest.mark.parametrize("name,shape,idx,axis,accepted", _edges(), ids=[e[0] for e in _edges()])
def test_domain_edges_in_the_definition(name, shape, idx, axis, accepted):
    x = s8(rng_for(name), shape)
    idx = i32(idx)
    if accepted:
        np.testing.assert_array_equal(GATHER(x, idx, axis=axis),
                                      fancy(x, idx, axis - (6 - len(shape))))
    else:
        with pytest.raises(ValueError, match="gather"):
            GATHER(x, idx, axis=axis)


def test_operand_checks():
    x = s8(rng_for("ops"), (3, 4))
    with pytest.raises(ValueError, match="no indices"):
        GATHER(x, i32([]), axis=5)
    with pytest.raises(ValueError, match="dtype"):
        GATHER(x, np.zeros(2, np.int64), axis=5)
    with pytest.raises(ValueError, match="rank"):
        GATHER(x, i32([[0, 1]]), axis=5)


def gather_cases():
    cases = []
    rng = rng_for("gather")
    for i in range(40):
        rank = 1 + i % 6
        shape = tuple(int(v) for v in rng.integers(1, 7, rank))
        dim = int(rng.integers(0, rank))
        idx = i32(rng.integers(0, shape[dim], int(rng.integers(1, 12))))
        cases.append(Case(f"gather_r{rank}_{i:03d}", "gather", (s8(rng, shape), idx),
                          gather_attrs(dim, rank)))
    big = s8(rng, (2, 5, 7, 33))
    cases += [Case("gather_channels", "gather", (big, i32([32, 0, 5, 5, 31])), {"axis": 5}),
              Case("gather_rows", "gather", (big, i32([6, 0, 3])), {"axis": 4}),
              Case("gather_batch", "gather", (big, i32([1, 0, 1])), {"axis": 2})]
    for name, shape, idx, axis, accepted in _edges():
        x = s8(rng_for(name), shape)
        if accepted:
            cases.append(Case(f"gather_edge_{name}", "gather", (x, i32(idx)), {"axis": axis}))
        else:
            y = list(shape)
            y[-1 if not 0 <= axis - (6 - len(shape)) < len(shape) else axis - 6] = len(idx)
            cases.append(Case(f"gather_edge_{name}", "gather", (x, i32(idx)), {"axis": axis},
                              status=BAD_ARGUMENT, out_shape=tuple(y)))
    x = s8(rng_for("gather_bad"), (3, 4))
    cases += [Case("gather_bad_y_shape", "gather", (x, i32([1, 2])), {"axis": 5},
                   status=BAD_ARGUMENT, out_shape=(3, 3), ref_raises=False),
              Case("gather_bad_indices_2d", "gather", (x, i32([[1, 2]])), {"axis": 5},
                   status=BAD_ARGUMENT, out_shape=(3, 2)),
              Case("gather_bad_indices_int8", "gather", (x, np.array([1, 2], np.int8)),
                   {"axis": 5}, status=BAD_ARGUMENT, out_shape=(3, 2))]
    return cases


def test_gather_kernel_host(tmp_path):
    run_host(gather_cases(), tmp_path)


@pytest.mark.qemu
@pytest.mark.parametrize("board,cpu", BOARD_PARAMS)
def test_gather_kernel_qemu(tmp_path, board, cpu):
    run_board(gather_cases(), tmp_path, board, cpu)


def test_tosa_gather():
    needs.module("tosa_serializer")
    from test_tosa import check_op
    rng = np.random.default_rng(2)
    for shape, dim, idx in (((7,), 0, [6, 0, 0]), ((3, 5), 1, [4, 1]), ((3, 5), 0, [2]),
                            ((2, 3, 5), 1, [2, 2, 0, 1]), ((2, 4, 5, 6), 3, [5, 0, 3]),
                            ((2, 4, 5, 6), 0, [1, 0, 1])):
        check_op("gather", [shape], [i32(idx)], rng=rng, **gather_attrs(dim, len(shape)))


class Gathers(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.register_buffer("idx", torch.tensor([5, 0, 0, 2]))

    def forward(self, x):
        y = self.conv(x)
        return (y.index_select(1, self.idx), y[:, [1, 3]], y[:, :, torch.tensor([-1, 0, 2, 2, 4])],
                y[0, 0][torch.tensor([3, 1])], torch.index_select(y, 3, torch.tensor([0])),
                y[..., [2, 2, 2, 2, 2, 2, 2]])


@pytest.fixture(scope="module")
def gathers():
    torch.manual_seed(5)
    cal = [torch.randn(1, 3, 6, 6) for _ in range(4)]
    qmodel = mcutorch.quantize(Gathers().eval(), (cal[0],), calibration=cal)
    return qmodel, cal


def _ints(program, i, v):
    t = program.tensors[program.outputs[i]]
    return np.round(v.detach().numpy() / t.scale).astype(np.int64) + t.zero_point


def test_gathers_end_to_end_equal_fake_quant(gathers):
    qmodel, cal = gathers
    compiled = mcutorch.compile(qmodel, (cal[0],))
    assert [op.name for op in compiled.program.ops].count("gather") == 6
    for x in cal:
        for i, (o, t) in enumerate(zip(compiled.run(x), qmodel(x))):
            assert tuple(o.shape) == tuple(t.shape), i
            np.testing.assert_array_equal(_ints(compiled.program, i, o),
                                          _ints(compiled.program, i, t), err_msg=f"output {i}")
    program = compiled.program
    xi = s8(rng_for("gather_e2e"), program.tensors[program.inputs[0]].shape)
    for g, w in zip(crt.run_host(program, [xi]), Interpreter(program).invoke([xi])):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("target,on", [("cortex-m55+ethos-u85-256", "NPU"),
                                       ("cortex-m55+ethos-u55-128", "CPU")])
def test_gather_placement(gathers, target, on):
    needs.module("ethosu.vela")
    qmodel, cal = gathers
    npu = mcutorch.compile(qmodel, (cal[0],), target=target, board="mps3-an547")
    rows = [r for r in npu.program.metadata["placement"] if r["op"] == "gather"]
    assert len(rows) == 6 and {r["on"] for r in rows} == {on}, rows
    if on == "CPU":
        assert all("no GATHER" in r["why"] for r in rows)
    cpu = mcutorch.compile(qmodel, (cal[0],), target="cortex-m55")
    for a, b in zip(npu.run(cal[1]), cpu.run(cal[1])):
        assert torch.equal(a, b)


class FewGathers(Gathers):
    def forward(self, x):
        return super().forward(x)[2:]  # the board runner writes up to 4 outputs


@pytest.mark.qemu
def test_gathers_on_the_m0_board():
    torch.manual_seed(5)
    cal = [torch.randn(1, 3, 6, 6) for _ in range(3)]
    qmodel = mcutorch.quantize(FewGathers().eval(), (cal[0],), calibration=cal)
    compiled = mcutorch.compile(qmodel, (cal[0],), target="cortex-m0plus")
    for g, r in zip(compiled.run(cal[2], board="mps2-an385"), compiled.run(cal[2])):
        np.testing.assert_array_equal(g.numpy(), r.numpy())


@pytest.mark.parametrize("fn,match", [
    (lambda x: x[:, [0, 1]][:, :, [1, 2]][:, torch.tensor([0]), torch.tensor([1])],
     "2 index tensors"),
    (lambda x: x[:, x[0, :, 0, 0].argmax(0, keepdim=True)], "integer|run time"),
    (lambda x: x[:, torch.tensor([True, False, True])], "depends on the data"),
    (lambda x: x[:, torch.tensor([[0, 1]])], "index of shape"),
])
def test_gather_refusals_name_the_source(fn, match):
    class M(nn.Module):
        def forward(self, x):
            return fn(torch.relu(x))
    x = torch.randn(1, 3, 6, 6)
    with pytest.raises(UnsupportedOpError, match=match) as err:
        mcutorch.compile(mcutorch.quantize(M().eval(), (x,)), (x,))
    assert "test_move_gather.py" in str(err.value)


# ----------------------------------------------------------------------------- both readers

def _gather_program(indices, axis=5, x_shape=(3, 4)):
    from test_program import one_op_program
    y = list(x_shape)
    y[min(max(axis - 6 + len(x_shape), 0), len(x_shape) - 1)] = max(len(indices), 1)
    return one_op_program("gather", [(x_shape, 0), np.asarray(indices)], (tuple(y), 64),
                          {"axis": axis})


READER_CASES = [  # name, indices, axis, reason (None: loads)
    ("in_range", np.array([3, 0, 2], np.int32), 5, None),
    ("index_last_of_dim0", np.array([2], np.int32), 4, None),
    ("index_past", np.array([0, 4], np.int32), 5, "bad_op"),
    ("index_negative", np.array([-1], np.int32), 5, "bad_op"),
    ("index_past_dim0", np.array([3], np.int32), 4, "bad_op"),
    ("axis_lead", np.array([0], np.int32), 3, "bad_op"),
    ("axis_6", np.array([0], np.int32), 6, "bad_op"),
    ("indices_int8", np.array([0, 1], np.int8), 5, "bad_op"),
    ("indices_2d", np.array([[0, 1]], np.int32), 5, "bad_op"),
]


def test_both_readers_check_the_indices():
    """The Python reader and the C loader refuse a gather whose constant indices leave x's
    gathered dim (or are not an int32 vector) with the same error; an accepted one runs alike in
    both executors."""
    from test_crt import python_code
    from test_program import unchecked_bytes

    from mcutorch.program import schema as S
    blobs = [unchecked_bytes(_gather_program(idx, axis)) for _, idx, axis, _ in READER_CASES]
    want = [S.ERROR_CODES[r] if r else 0 for *_, r in READER_CASES]
    assert [python_code(b) for b in blobs] == want, [c[0] for c in READER_CASES]
    assert crt.check_host(blobs) == want, [c[0] for c in READER_CASES]
    p = _gather_program(np.array([3, 0, 2], np.int32))
    xs = [s8(rng_for("reader"), (3, 4))]
    for g, w in zip(crt.run_host(p, xs), Interpreter(p).invoke(xs)):
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(w, xs[0][:, [3, 0, 2]])
