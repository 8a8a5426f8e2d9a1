"""strided_slice: y[i] = x[start + i * step] per 6-D dim (docs/numerics.md).

The definition against numpy slicing (an independent formula), its domain at every edge in the
reference and the C kernel (host ASan/UBSan and every emulated board, bit-exact), the TOSA SLICE
lowering on the reference model, and end to end from torch modules (slice, select, narrow,
split, chunk, unbind, flip, expand, repeat, tile) against PyTorch's fake-quant model: data
movement, so every element is equal.
"""
from __future__ import annotations

import numpy as np
import needs
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from test_kernels_c import (BAD_ARGUMENT, BOARD_PARAMS, Case, reference_output, rng_for,
                            run_board, run_host, s8)

import mcutorch
from mcutorch.device import crt
from mcutorch.errors import UnsupportedOpError
from mcutorch.ref import KERNELS, output_shape, slice_attrs
from mcutorch.ref.interpreter import Interpreter

SLICE = KERNELS["strided_slice"]


def numpy_slice(x, start, step, size):
    """The same result by numpy basic slicing, dim by dim (step 0: one element repeated)."""
    y = x
    for d, (b, s, n) in enumerate(zip(start, step, size)):
        index = [slice(None)] * x.ndim
        if s == 0:
            index[d] = slice(b, b + 1)
            y = np.repeat(y[tuple(index)], n, axis=d)
            continue
        end = b + (n - 1) * s + (1 if s > 0 else -1)
        index[d] = slice(b, end if end >= 0 else None, s)
        y = y[tuple(index)]
    return y


def random_slice(rng, shape):
    """A random (start, step, size) in the domain for x of `shape`."""
    start, step, size = [], [], []
    for n in shape:
        b = int(rng.integers(0, n))
        s = int(rng.choice([-n, -2, -1, 0, 1, 1, 2, 3, n]))
        s = max(-n, min(n, s))
        room = b if s < 0 else n - 1 - b
        most = room // abs(s) + 1 if s else 5
        start.append(b)
        step.append(s)
        size.append(int(rng.integers(1, most + 1)))
    return start, step, size


def test_definition_matches_numpy_slicing():
    rng = np.random.default_rng(0)
    for i in range(400):
        rank = 1 + i % 6
        shape = tuple(int(v) for v in rng.integers(1, 6, rank))
        x = s8(rng, shape)
        start, step, size = random_slice(rng, shape)
        attrs = slice_attrs(start, step, size)
        y = SLICE(x, **attrs)
        np.testing.assert_array_equal(y, numpy_slice(x, start, step, size))
        assert y.shape == output_shape("strided_slice", [x], attrs) == tuple(size)


def _edges(x):
    """(name, attrs, accepted) at each edge of the domain for x of shape (4, 5): the last value
    both executors accept and the first they refuse (docs/numerics.md)."""
    def a(start=(0, 0), step=(1, 1), size=(4, 5), **over):
        attrs = slice_attrs(start, step, size)
        attrs.update(over)
        return attrs
    return [
        ("start_last", a(start=(3, 0), size=(1, 5)), True),
        ("start_end", a(start=(4, 0), size=(1, 5)), False),
        ("start_negative", a(start=(-1, 0), size=(1, 5)), False),
        ("step_dim", a(step=(4, 1), size=(1, 5)), True),
        ("step_above_dim", a(step=(5, 1), size=(1, 5)), False),
        ("step_minus_dim", a(start=(3, 0), step=(-4, 1), size=(1, 5)), True),
        ("step_below_minus_dim", a(start=(3, 0), step=(-5, 1), size=(1, 5)), False),
        ("last_index_max", a(start=(1, 0), step=(1, 2), size=(3, 3)), True),
        ("last_index_past", a(start=(1, 0), step=(1, 2), size=(3, 4)), False),
        ("flip_whole", a(start=(3, 4), step=(-1, -1)), True),
        ("flip_past_zero", a(start=(3, 4), step=(-1, -1), size=(4, 6)), False),
        ("repeat_any_size", a(start=(2, 0), step=(0, 1), size=(9, 5)), True),
        ("step0_wide", a(start=(2, 4), step=(0, 0), size=(3, 7)), True),
        ("size0", a(size=(0, 5)), False),
        ("size_negative", a(size=(-1, 5)), False),
        ("lead_size2", a(size4=1, size0=2), False),
        ("lead_start1", a(start0=1), False),
        ("lead_step_minus1", a(step0=-1), True),
        ("lead_step2", a(step0=2), False),
    ]


@pytest.mark.parametrize("name,attrs,accepted", _edges(None), ids=[e[0] for e in _edges(None)])
def test_domain_edges_in_the_definition(name, attrs, accepted):
    x = s8(rng_for(name), (4, 5))
    if accepted:
        size = tuple(attrs[f"size{k}"] for k in (4, 5))
        y = SLICE(x, **attrs)
        start = [attrs["start4"], attrs["start5"]]
        step = [attrs["step4"], attrs["step5"]]
        np.testing.assert_array_equal(y, numpy_slice(x, start, step, size))
    else:
        with pytest.raises(ValueError, match="strided_slice"):
            output_shape("strided_slice", [x], attrs)
        with pytest.raises(ValueError, match="strided_slice"):
            SLICE(x, **attrs)


def test_rank_limits():
    with pytest.raises(ValueError, match="rank 7"):
        SLICE(np.zeros((1,) * 7, np.int8), **slice_attrs([0] * 6, [1] * 6, [1] * 6))
    with pytest.raises(ValueError, match="expected a numpy array|dtype"):
        SLICE(np.zeros((2, 2), np.int32), **slice_attrs([0, 0], [1, 1], [2, 2]))


# ----------------------------------------------------------------------------- C kernel cases

def slice_cases():
    cases = []
    rng = rng_for("strided_slice")
    for i in range(60):
        rank = 1 + i % 6
        shape = tuple(int(v) for v in rng.integers(1, 7, rank))
        start, step, size = random_slice(rng, shape)
        cases.append(Case(f"slice_r{rank}_{i:03d}", "strided_slice", (s8(rng, shape),),
                          slice_attrs(start, step, size)))
    big = s8(rng, (2, 5, 7, 33))  # innermost runs around the memcpy / byte-loop paths
    for name, start, step, size in (
            ("row_copy", (1, 1, 2, 0), (1, 2, 1, 1), (1, 2, 3, 33)),
            ("row_tail", (0, 0, 0, 17), (1, 1, 1, 1), (2, 5, 7, 16)),
            ("channels_step2", (0, 4, 6, 1), (1, -1, -3, 2), (2, 5, 3, 16)),
            ("channels_flip", (1, 0, 0, 32), (-1, 1, 1, -1), (2, 5, 7, 33)),
            ("channels_repeat", (0, 0, 0, 5), (1, 1, 1, 0), (2, 5, 7, 40)),
            ("spatial_repeat", (1, 2, 3, 0), (0, 0, 0, 1), (3, 4, 2, 33))):
        cases.append(Case(f"slice_{name}", "strided_slice", (big,), slice_attrs(start, step, size)))
    six = s8(rng, (2, 1, 3, 2, 4, 3))
    cases.append(Case("slice_r6_all", "strided_slice", (six,),
                      slice_attrs((1, 0, 2, 0, 3, 2), (-1, 0, -1, 1, -1, -1), (2, 3, 3, 2, 2, 3))))
    x = s8(rng_for("slice_edges"), (4, 5))
    for name, attrs, accepted in _edges(x):
        if accepted:
            cases.append(Case(f"slice_edge_{name}", "strided_slice", (x,), attrs))
        else:
            good = tuple(max(1, min(attrs[f"size{k}"], 9)) for k in (4, 5))
            cases.append(Case(f"slice_edge_{name}", "strided_slice", (x,), attrs,
                              status=BAD_ARGUMENT, out_shape=good))
    base = Case("slice_base", "strided_slice", (x,), slice_attrs((1, 0), (1, 2), (2, 3)))
    cases += [Case("slice_bad_y_shape", "strided_slice", (x,), base.attrs, status=BAD_ARGUMENT,
                   out_shape=(3, 2), ref_raises=False),
              Case("slice_bad_y_rank", "strided_slice", (x,), base.attrs, status=BAD_ARGUMENT,
                   out_shape=(1, 2, 3), ref_raises=False)]  # rank 7: no program holds one
    reference_output(base)
    return cases


def test_strided_slice_kernel_host(tmp_path):
    run_host(slice_cases(), tmp_path)


@pytest.mark.qemu
@pytest.mark.parametrize("board,cpu", BOARD_PARAMS)
def test_strided_slice_kernel_qemu(tmp_path, board, cpu):
    run_board(slice_cases(), tmp_path, board, cpu)


# ----------------------------------------------------------------------------- TOSA

def test_tosa_slice_reverse_tile_and_reason_otherwise():
    needs.module("tosa_serializer")
    from test_tosa import check_op, single_op

    from mcutorch.backends import tosa
    from mcutorch.backends.tosa.rules import check_slice
    rng = np.random.default_rng(1)
    for shape, start, step, size in (
            ((7,), (2,), (1,), (4,)), ((3, 5), (1, 0), (1, 1), (2, 5)),
            ((2, 3, 5), (0, 2, 1), (1, 1, 1), (2, 1, 3)),
            ((2, 4, 5, 6), (1, 1, 0, 3), (1, 1, 1, 1), (1, 3, 5, 2)),
            ((2, 4, 5, 6), (1, 3, 4, 5), (-1, -1, -1, -1), (2, 4, 5, 6)),  # flip every dim
            ((2, 4, 5, 6), (0, 2, 3, 1), (1, -1, 0, 1), (2, 3, 7, 4)),  # flip + repeat
            ((3, 1, 4), (2, 0, 1), (0, 0, 1), (4, 5, 3)),  # expand two dims
            ((3, 6), (2, 4), (-3, 6), (1, 1))):  # steps on size-1 results read one element
        check_op("strided_slice", [shape], rng=rng, **slice_attrs(start, step, size))
    for step in ((2, 1), (-2, 1), (3, 1)):
        attrs = slice_attrs((0, 0) if step[0] > 0 else (3, 0), step, (2, 3))
        node = single_op("strided_slice", [(4, 3)], **attrs).nodes[0]
        assert "step" in check_slice(node)
        ok, why = tosa.tosa_support(node)
        assert not ok and "step" in why


# ----------------------------------------------------------------------------- end to end

class Slices(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        _, b = torch.split(y, [3, 5], dim=1)
        c1, c2 = y.chunk(2, dim=3)
        u = y.unbind(2)
        return (b, c1, c2, u[0], u[3], y[:, :, ::2, 1:], y[:, 1], y[..., -1],
                y.narrow(2, 1, 3), y.flip(3), y.flip((1, 2)), y[:, 2:3].expand(2, 4, 6, 6),
                y[:, :2].repeat(1, 2, 2, 1), y[0, :3, 0].tile((2, 3)),
                y.reshape(2, 2, 2, 6, 6)[:, :, 1:, ::2, 3:].expand(2, 2, 4, 3, 3),
                y.reshape(1, 2, 2, 2, 6, 6).repeat(1, 1, 1, 2, 1, 1))


def _fake_quant_ints(program, out_index, v):
    t = program.tensors[program.outputs[out_index]]
    return np.round(v.detach().numpy() / t.scale).astype(np.int64) + t.zero_point


@pytest.fixture(scope="module")
def slices_model():
    torch.manual_seed(0)
    model = Slices().eval()
    cal = [torch.randn(1, 3, 6, 6) for _ in range(4)]
    qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal)
    return qmodel, mcutorch.compile(qmodel, (cal[0],)), cal


def test_slices_end_to_end_equal_fake_quant(slices_model):
    qmodel, compiled, cal = slices_model
    ops = [op.name for op in compiled.program.ops]
    assert ops.count("strided_slice") >= 13, ops
    for x in cal:
        ours, theirs = compiled.run(x), qmodel(x)
        assert len(ours) == len(theirs)
        for i, (o, t) in enumerate(zip(ours, theirs)):
            assert tuple(o.shape) == tuple(t.shape), i
            q_o = _fake_quant_ints(compiled.program, i, o)
            q_t = _fake_quant_ints(compiled.program, i, t)
            np.testing.assert_array_equal(q_o, q_t, err_msg=f"output {i}")


def test_slices_c_runtime_equals_reference(slices_model):
    program = slices_model[1].program
    x = s8(rng_for("slices_e2e"), program.tensors[program.inputs[0]].shape)
    want = Interpreter(program).invoke([x])
    got = crt.run_host(program, [x])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


class FewSlices(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return y[:, 1:7:2, ::2].flip((2, 3)), y[:, 2:3].expand(1, 5, 6, 6), y.unbind(3)[4]


@pytest.mark.qemu
def test_slices_on_the_m55_and_m0_boards():
    torch.manual_seed(1)
    cal = [torch.randn(1, 3, 6, 6) for _ in range(3)]
    qmodel = mcutorch.quantize(FewSlices().eval(), (cal[0],), calibration=cal)
    for board, target in (("mps3-an547", "cortex-m55"), ("mps2-an385", "cortex-m0plus")):
        compiled = mcutorch.compile(qmodel, (cal[0],), target=target)
        ref = compiled.run(cal[2])
        got = compiled.run(cal[2], board=board)
        for g, r in zip(got, ref):
            np.testing.assert_array_equal(g.numpy(), r.numpy())


@pytest.mark.parametrize("fn,match", [
    (lambda x: x[:, 3:3], "empty"),
    (lambda x: x[:, :, 5:2], "empty"),
    (lambda x: x.reshape(1, 1, 1, 1, 1, 1, 3, 36)[..., :2], "7-D|8-D|ranks up to 6"),
])
def test_refused_with_the_source_line(fn, match):
    class M(nn.Module):
        def forward(self, x):
            return fn(torch.relu(x))
    x = torch.randn(1, 3, 6, 6)
    with pytest.raises(UnsupportedOpError, match=match):
        qmodel = mcutorch.quantize(M().eval(), (x,))
        mcutorch.compile(qmodel, (x,))


class NpuSlices(nn.Module):
    """Slices between convolutions: step 1 (SLICE), a flip (SLICE + REVERSE), an expand
    (SLICE + TILE), and a stride 2 (CPU)."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(5, 8, 1)

    def forward(self, x):
        y = self.a(x)
        top, rest = torch.split(y[:, :, 1:7, 2:], [3, 5], dim=1)
        return self.b(rest).flip(2), top, y[:, :, ::2], y[:, 2:3].expand(1, 4, 10, 10)


@pytest.mark.parametrize("target", ["cortex-m55+ethos-u55-128", "cortex-m55+ethos-u85-256"])
def test_slices_go_to_the_npu(target):
    needs.module("ethosu.vela")
    torch.manual_seed(2)
    cal = [torch.randn(1, 3, 10, 10) for _ in range(3)]
    qmodel = mcutorch.quantize(NpuSlices().eval(), (cal[0],), calibration=cal)
    npu = mcutorch.compile(qmodel, (cal[0],), target=target, board="mps3-an547")
    rows = [r for r in npu.program.metadata["placement"] if r["op"] == "strided_slice"]
    on = sorted((r["on"], r["why"].split(":")[0]) for r in rows)
    assert on == [("CPU", "strided_slice")] + [("NPU", "SLICE")] * 5 + [
        ("NPU", "SLICE -> REVERSE"), ("NPU", "SLICE -> TILE")], on
    cpu = mcutorch.compile(qmodel, (cal[0],), target="cortex-m55")
    for a, b in zip(npu.run(cal[1]), cpu.run(cal[1])):
        assert torch.equal(a, b)


# ----------------------------------------------------------------------------- cat, own qparams

class OwnQparams(mcutorch.Quantizer):
    """A user quantizer observing each input and the output of cat and maximum on its own (the
    inputs keep their producers' qparams; the output gets the union's range)."""

    def annotate_node(self, node):
        if node.target in (torch.ops.aten.cat.default, torch.ops.aten.maximum.default):
            from mcutorch.frontend.quantizer import _set
            act = self.activation_spec()
            args = node.args[0] if node.target == torch.ops.aten.cat.default else node.args[:2]
            _set(node, {a: act for a in args}, act)
        else:
            super().annotate_node(node)


class CatScales(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Conv2d(3, 4, 1), nn.Conv2d(3, 4, 1)

    def forward(self, x):
        a, b = self.a(x), self.b(x) * 8.0 + 3.0  # b's range is ~8x a's, shifted
        return torch.cat([a, b, torch.relu(a)], 1), torch.maximum(a, b)


def test_cat_and_maximum_of_inputs_with_other_qparams():
    """Each input is requantized straight into the output's qparams (one rescale, one rounding,
    as the fake-quant model computes it), never through the first input's range."""
    from mcutorch.frontend.capture import capture
    from mcutorch.frontend._torchao import pt2e
    prepare_pt2e, convert_pt2e = pt2e()
    torch.manual_seed(3)
    x, cal = torch.randn(1, 3, 8, 8), [torch.randn(1, 3, 8, 8) for _ in range(4)]
    prepared = prepare_pt2e(capture(CatScales().eval(), (x,)), OwnQparams())
    for c in cal:
        prepared(c)
    qmodel = convert_pt2e(prepared)
    compiled = mcutorch.compile(qmodel, (x,))
    program = compiled.program
    producer = {o: op.name for op in program.ops for o in op.outputs}
    assert [producer[o] for o in program.outputs] == ["concat", "maximum"]  # no rescale after
    assert [op.name for op in program.ops].count("rescale") == 5  # 3 into cat's, 2 into max's
    total, exact, within = 0, 0, 0
    for xs in cal + [x]:
        for i, (o, t) in enumerate(zip(compiled.run(xs), qmodel(xs))):
            d = np.abs(_fake_quant_ints(program, i, o) - _fake_quant_ints(program, i, t))
            total, exact, within = total + d.size, exact + (d == 0).sum(), within + (d <= 1).sum()
    print(f"cat/maximum with own qparams: {exact / total:.4%} exact, {within / total:.4%} "
          "within 1 LSB of fake-quant")
    assert within / total >= 0.99 and exact / total >= 0.99


# ----------------------------------------------------------------------------- pads, roll, stack

class PadsRollStack(nn.Module):
    """Reflect / replicate / circular padding, roll and stack, all as slices and concats."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return (F.pad(y, (1, 2, 2, 1), mode="reflect"), F.pad(y, (2, 0, 1, 3), mode="replicate"),
                F.pad(y, (1, 1, 2, 0), mode="circular"), F.pad(y[0], (2, 5), mode="reflect"),
                nn.ReflectionPad2d(5)(y), nn.ReplicationPad1d((0, 3))(y[0]),
                torch.roll(y, 2, 3), torch.roll(y, (1, -2), (1, 2)), torch.roll(y, 5),
                torch.roll(y, 6, 2), torch.stack([y[0], torch.relu(y[0])], 1),
                torch.stack([y[0, 0], y[0, 1], y[0, 3]], 2))


@pytest.fixture(scope="module")
def pads_model():
    torch.manual_seed(4)
    cal = [torch.randn(1, 3, 6, 6) for _ in range(4)]
    qmodel = mcutorch.quantize(PadsRollStack().eval(), (cal[0],), calibration=cal)
    return qmodel, mcutorch.compile(qmodel, (cal[0],)), cal


def test_pads_roll_stack_equal_fake_quant(pads_model):
    qmodel, compiled, cal = pads_model
    assert {op.name for op in compiled.program.ops} <= {"conv2d", "strided_slice", "concat",
                                                         "transpose", "clamp"}
    for x in cal:
        for i, (o, t) in enumerate(zip(compiled.run(x), qmodel(x))):
            assert tuple(o.shape) == tuple(t.shape), i
            np.testing.assert_array_equal(_fake_quant_ints(compiled.program, i, o),
                                          _fake_quant_ints(compiled.program, i, t),
                                          err_msg=f"output {i}")


def test_pads_roll_stack_c_runtime_equals_reference(pads_model):
    program = pads_model[1].program
    x = s8(rng_for("pads_e2e"), program.tensors[program.inputs[0]].shape)
    for g, w in zip(crt.run_host(program, [x]), Interpreter(program).invoke([x])):
        np.testing.assert_array_equal(g, w)


def test_reflect_padding_beyond_rank_4_refused():
    class M(nn.Module):
        def forward(self, x):
            return F.pad(torch.relu(x)[None], (1, 1, 1, 1, 1, 1), mode="reflect")
    x = torch.randn(1, 3, 6, 6)
    with pytest.raises(UnsupportedOpError, match="reflect padding of a 5-D tensor") as err:
        mcutorch.compile(mcutorch.quantize(M().eval(), (x,)), (x,))
    assert "test_move.py" in str(err.value)


# ----------------------------------------------------------------------------- ranks 5 and 6

def _perms(rng, rank, count):
    return [tuple(int(p) for p in rng.permutation(rank)) for _ in range(count)]


class Permutes(nn.Module):
    """5-D and 6-D permutations (every dim > 1 on some, so no dims merge), transposes, a 5-D
    concat, a stack of 4-D tensors, 5-D and 6-D constant pads."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        rng = np.random.default_rng(7)
        self.p5 = _perms(rng, 5, 12) + [(4, 3, 2, 1, 0), (1, 0, 2, 4, 3)]
        self.p6 = _perms(rng, 6, 12) + [(5, 4, 3, 2, 1, 0), (0, 1, 2, 3, 5, 4)]

    def forward(self, x):
        y = self.conv(x)  # (1, 8, 6, 6)
        five, six = y.reshape(2, 4, 3, 3, 4), y.reshape(2, 2, 2, 3, 2, 6)
        outs = [five.permute(p) for p in self.p5] + [six.permute(p) for p in self.p6]
        return (*outs, six.transpose(0, 5), torch.cat([five, five.flip(4)], 3),
                torch.stack([y, torch.relu(y)], 2),
                F.pad(six, (1, 0, 0, 0, 2, 1, 0, 0, 0, 1), value=0.25), F.pad(five, (0, 0, 3, 2)))


def test_ranks_5_and_6_equal_fake_quant():
    torch.manual_seed(6)
    cal = [torch.randn(1, 3, 6, 6) for _ in range(3)]
    qmodel = mcutorch.quantize(Permutes().eval(), (cal[0],), calibration=cal)
    compiled = mcutorch.compile(qmodel, (cal[0],))
    program = compiled.program
    assert all(len(program.tensors[t].shape) <= 4 for op in program.ops
               if op.name in ("transpose", "concat", "pad") for t in op.outputs)
    for x in cal[1:]:
        for i, (o, t) in enumerate(zip(compiled.run(x), qmodel(x))):
            assert tuple(o.shape) == tuple(t.shape), i
            np.testing.assert_array_equal(_fake_quant_ints(program, i, o),
                                          _fake_quant_ints(program, i, t), err_msg=f"output {i}")


def test_a_6d_permutation_takes_at_most_5_transposes():
    class P(nn.Module):
        def forward(self, x):
            return torch.relu(x).permute(5, 3, 1, 4, 0, 2)
    x = torch.randn(2, 3, 2, 3, 2, 3)
    qmodel = mcutorch.quantize(P().eval(), (x,))
    compiled = mcutorch.compile(qmodel, (x,))
    names = [op.name for op in compiled.program.ops]
    assert 1 <= names.count("transpose") <= 5, names
    np.testing.assert_array_equal(compiled.run(x).numpy(), qmodel(x).detach().numpy())


class Shuffles(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return (F.pixel_shuffle(y, 2), F.pixel_unshuffle(y, 2), nn.ChannelShuffle(4)(y),
                F.pixel_shuffle(y[0], 2))


def test_pixel_and_channel_shuffles_everywhere():
    """Equal to fake-quant on every element; the C runtime on the host, the M55 and the M0+
    board give the reference's bytes."""
    torch.manual_seed(8)
    cal = [torch.randn(1, 3, 6, 6) for _ in range(3)]
    qmodel = mcutorch.quantize(Shuffles().eval(), (cal[0],), calibration=cal)
    compiled = mcutorch.compile(qmodel, (cal[0],))
    program = compiled.program
    for i, (o, t) in enumerate(zip(compiled.run(cal[1]), qmodel(cal[1]))):
        assert tuple(o.shape) == tuple(t.shape), i
        np.testing.assert_array_equal(_fake_quant_ints(program, i, o),
                                      _fake_quant_ints(program, i, t), err_msg=f"output {i}")
    x = s8(rng_for("shuffles"), program.tensors[program.inputs[0]].shape)
    for g, w in zip(crt.run_host(program, [x]), Interpreter(program).invoke([x])):
        np.testing.assert_array_equal(g, w)


@pytest.mark.qemu
def test_shuffles_and_6d_permutes_on_boards():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)

        def forward(self, x):
            y = self.conv(x)
            return (F.pixel_shuffle(y, 2), y.reshape(2, 2, 2, 3, 2, 6).permute(5, 3, 1, 4, 0, 2),
                    F.pad(y.reshape(1, 2, 4, 6, 6), (1, 1, 0, 0, 2, 0)))
    torch.manual_seed(9)
    cal = [torch.randn(1, 3, 6, 6) for _ in range(3)]
    qmodel = mcutorch.quantize(M().eval(), (cal[0],), calibration=cal)
    for board, target in (("mps3-an547", "cortex-m55"), ("mps2-an385", "cortex-m0plus")):
        compiled = mcutorch.compile(qmodel, (cal[0],), target=target)
        for g, r in zip(compiled.run(cal[2], board=board), compiled.run(cal[2])):
            np.testing.assert_array_equal(g.numpy(), r.numpy())
