"""TOSA 1.0 lowering of int16 activations (a16w8, docs/numerics.md section 6): each op with an
int16 lowering, built as a one-op graph with the qparams the compiler would give it, equals the
reference kernel bit for bit on the TOSA reference model (TOSA's i16 x i8 -> i48 convolutions,
RESCALE of the int48 accumulator with 16-bit multipliers, apply_scale_16), on extreme and random
inputs; an int16 MLP compiled for the Ethos-U55 goes to the NPU whole, verified at compile."""
from __future__ import annotations

import numpy as np
import needs
import pytest

needs.module("tosa_serializer")
needs.module("tosa_reference_model")

from mcutorch import quant  # noqa: E402
from mcutorch.backends import tosa  # noqa: E402
from mcutorch.backends.tosa.verify import random_array  # noqa: E402
from mcutorch.ir import Graph, Node, Tensor  # noqa: E402
from mcutorch.ref import KERNELS, concat_attrs, pad_attrs, transpose_attrs  # noqa: E402
from mcutorch.ref import OUT_DTYPE_OPS  # noqa: E402

I16 = 32767


def one_op(op, shapes, consts=(), dtypes=None, out_dtype="int16", **attrs) -> Graph:
    """A one-node graph: activations of `shapes` (int16 unless `dtypes` says), then constants."""
    dtypes = dtypes or ["int16"] * len(shapes)
    xs = [Tensor(f"x{i}", tuple(s), dtype=d) for i, (s, d) in enumerate(zip(shapes, dtypes))]
    cs = [Tensor(f"c{i}", a.shape, dtype=str(a.dtype), data=a) for i, a in enumerate(consts)]
    zeros = [np.zeros(s, np.dtype(d)) for s, d in zip(shapes, dtypes)]
    y = (OUT_DTYPE_OPS[op](*zeros, *consts, out_dtype, **attrs) if op in OUT_DTYPE_OPS else
         KERNELS[op](*zeros, *consts, **attrs))
    out = Tensor("y", y.shape, dtype=out_dtype)
    return Graph([Node(op, xs + cs, [out], dict(attrs))], xs, [out])


def inputs(graph: Graph, rng, n_random=3):
    """Extremes (every activation at its minimum, at its maximum) and random values."""
    def full(t, hi):
        lo_hi = (-I16, I16) if t.dtype == "int16" else (-128, 127)
        return np.full(t.shape, lo_hi[hi], np.dtype(t.dtype))

    sets = [[full(t, hi) for t in graph.inputs] for hi in (0, 1)]
    return sets + [[random_array(t, rng) for t in graph.inputs] for _ in range(n_random)]


def check(graph: Graph, seed=0):
    ok, why = tosa.tosa_support(graph.nodes[0])
    assert ok, why
    for arrays in inputs(graph, np.random.default_rng(seed)):
        tosa.verify(graph, None, arrays)


def mac16(rng, w_shape, cout, fan_in, bias_max=2**24):
    """int8 weights, an int48 bias (int64) and 16-bit multipliers giving int16 outputs of a useful
    size (accumulators up to ~2^22 * fan_in)."""
    w = rng.integers(-127, 128, w_shape, dtype=np.int8)
    bias = rng.integers(-bias_max, bias_max, cout).astype(np.int64)
    real = rng.uniform(0.5, 2.0, cout) * 8000 / (np.sqrt(fan_in) * I16 * 74)
    pairs = [quant.quantize_multiplier16(float(r)) for r in real]
    return [w, bias, np.array([m for m, _ in pairs], np.int32),
            np.array([s for _, s in pairs], np.int32)]


def conv_attrs(stride=(1, 1), dilation=(1, 1), pads=(0, 0, 0, 0), act=(-I16, I16)):
    return dict(stride_h=stride[0], stride_w=stride[1], dilation_h=dilation[0],
                dilation_w=dilation[1], pad_top=pads[0], pad_left=pads[1], pad_bottom=pads[2],
                pad_right=pads[3], in_zp=0, out_zp=0, act_min=act[0], act_max=act[1])


@pytest.mark.parametrize("n,cin,cout,act", [(1, 64, 32, (-I16, I16)), (2, 17, 9, (0, I16)),
                                            (1, 300, 5, (-1000, 2000))])
def test_fully_connected(n, cin, cout, act):
    rng = np.random.default_rng(cin)
    check(one_op("fully_connected", [(n, cin)], mac16(rng, (cout, cin), cout, cin), in_zp=0,
                 out_zp=0, act_min=act[0], act_max=act[1]))


def test_fully_connected_int48_bias_beyond_int32():
    """A bias of ~2^40 (int48, not int32) scaled down by a shift beyond 32: apply_scale_16."""
    rng = np.random.default_rng(7)
    w = rng.integers(-127, 128, (6, 40), dtype=np.int8)
    bias = rng.integers(-2**40, 2**40, 6).astype(np.int64)
    pairs = [quant.quantize_multiplier16(float(r)) for r in rng.uniform(0.5, 2, 6) * 2**-28]
    mult, shift = (np.array(v, np.int32) for v in zip(*pairs))
    assert shift.min() > 32
    g = one_op("fully_connected", [(2, 40)], [w, bias, mult, shift], in_zp=0, out_zp=0,
               act_min=-I16, act_max=I16)
    check(g)
    x = np.random.default_rng(0).integers(-I16, I16 + 1, (2, 40)).astype(np.int16)
    y = tosa.lower_graph(g).run([x])[0]
    assert np.abs(y).max() > 256 and np.abs(y).max() < I16  # not saturated, not all zero


@pytest.mark.parametrize("h,w,cin,cout,k,stride,dilation,pads,groups", [
    (9, 9, 3, 8, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 1),
    (1, 16, 4, 6, (1, 3), (1, 1), (1, 2), (0, 2, 0, 2), 1),  # a Conv1d as [N, C, 1, L]
    (6, 6, 4, 4, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 4),   # depthwise-form groups
])
def test_conv2d(h, w, cin, cout, k, stride, dilation, pads, groups):
    rng = np.random.default_rng(h * w)
    fan = cin // groups * k[0] * k[1]
    consts = mac16(rng, (cout, *k, cin // groups), cout, fan)
    check(one_op("conv2d", [(1, h, w, cin)], consts, groups=groups,
                 **conv_attrs(stride, dilation, pads)))


def test_depthwise_conv2d():
    rng = np.random.default_rng(5)
    c, mult = 6, 2
    consts = mac16(rng, (1, 3, 3, c * mult), c * mult, 9)
    check(one_op("depthwise_conv2d", [(1, 7, 5, c)], consts, depth_multiplier=mult,
                 **conv_attrs((2, 1), (1, 1), (1, 1, 1, 0), (-5000, I16))))


def test_mac_accumulator_that_can_leave_int32_after_scaling_is_refused():
    rng = np.random.default_rng(1)
    w, bias, _, _ = mac16(rng, (4, 64), 4, 64)
    mult, shift = np.full(4, 2**15 - 1, np.int32), np.full(4, 2, np.int32)  # x 8191: too big
    g = one_op("fully_connected", [(1, 64)], [w, np.zeros(4, np.int64), mult, shift], in_zp=0,
               out_zp=0, act_min=-I16, act_max=I16)
    ok, why = tosa.tosa_support(g.nodes[0])
    assert not ok and "int32" in why and "apply_scale_16" in why
    del bias


def _add_attrs(sa, sb, sy, op="add"):
    big = 2 * max(sa, sb)
    (am, ash), (bm, bsh), (om, osh) = (quant.quantize_multiplier(r) for r in (
        2**15 * sa / big, 2**15 * sb / big, big / (2**15 * sy)))
    return dict(a_zp=0, a_mult=am, a_shift=ash, b_zp=0, b_mult=bm, b_shift=bsh, out_zp=0,
                out_mult=om, out_shift=osh, act_min=-I16, act_max=I16)


@pytest.mark.parametrize("op", ["add", "sub"])
@pytest.mark.parametrize("shapes", [[(2, 3, 5), (2, 3, 5)], [(1, 4, 4, 8), (1, 1, 1, 8)]])
def test_add_sub(op, shapes):
    check(one_op(op, shapes, **_add_attrs(0.003, 0.0011, 0.004)))


def test_mul():
    m, s = quant.quantize_multiplier(0.003 * 0.0011 / 0.0002)
    check(one_op("mul", [(3, 4, 5), (4, 5)], a_zp=0, b_zp=0, out_zp=0, mult=m, shift=s,
                 act_min=-I16, act_max=I16))


@pytest.mark.parametrize("src,dst,real,in_zp,out_zp", [
    ("int8", "int16", 0.0123 / 0.0005, -7, 0), ("int16", "int8", 0.0002 / 0.05, 0, 3),
    ("int16", "int16", 0.7, 0, 0)])
def test_rescale(src, dst, real, in_zp, out_zp):
    m, s = quant.quantize_multiplier(real)
    lo, hi = (-I16, I16) if dst == "int16" else (-128, 127)
    check(one_op("rescale", [(2, 33)], dtypes=[src], out_dtype=dst, in_zp=in_zp, out_zp=out_zp,
                 mult=m, shift=s, act_min=lo, act_max=hi))


def test_max_pool2d_and_movement():
    check(one_op("max_pool2d", [(1, 6, 6, 3)], kernel_h=2, kernel_w=2, stride_h=2, stride_w=2,
                 pad_top=0, pad_left=0, pad_bottom=0, pad_right=0, act_min=-I16, act_max=I16))
    check(one_op("transpose", [(2, 3, 4)], **transpose_attrs([2, 0, 1])))
    check(one_op("concat", [(1, 4, 3), (1, 4, 5)], **concat_attrs(2, 3)))
    check(one_op("pad", [(1, 3, 4)], **pad_attrs([(0, 0), (1, 2), (0, 3)], -5)))


def _mean16(shape, axes, act=(-I16, I16)):
    count = int(np.prod([d for i, d in enumerate(shape) if axes >> i & 1]))
    m, s = quant.quantize_multiplier(1 / count)
    return one_op("reduce_sum", [shape], axes=axes, in_zp=0, out_zp=0, mult=m, shift=s,
                  act_min=act[0], act_max=act[1])


@pytest.mark.parametrize("shape,axes,act", [((2, 5, 9), 0b100, (-I16, I16)),
                                            ((1, 4, 6, 8), 0b0110, (-I16, I16)),
                                            ((3, 4, 5), 0b101, (-100, 20000)),
                                            ((1, 65535), 0b10, (-I16, I16))])
def test_reduce_sum(shape, axes, act):
    """A mean of int16 values, the longest sum (2^16 - 1 elements at the extremes) included."""
    check(_mean16(shape, axes, act))


def _matmul16(sa, sb, transpose_b):
    k = sa[-1]
    m, s = quant.quantize_multiplier16(8000 / (np.sqrt(k) * 3.6e8))
    return one_op("matmul", [sa, sb], transpose_b=transpose_b, a_zp=0, b_zp=0, out_zp=0, mult=m,
                  shift=s, act_min=-I16, act_max=I16)


@pytest.mark.parametrize("sa,sb,tb", [((2, 8, 16), (2, 8, 16), 1), ((2, 8, 8), (2, 8, 8), 0),
                                      ((3, 1, 4, 9), (1, 2, 9, 5), 0),
                                      ((1, 2, 300), (1, 3, 300), 1)])
def test_matmul(sa, sb, tb):
    """int16 a @ b (format 1.8): TOSA MATMUL i16 x i16 -> i48, RESCALE (apply_scale_16), CLAMP;
    the extremes reach |acc| = K * 32767^2."""
    check(_matmul16(sa, sb, tb))


def test_int16_activation_on_an_op_without_an_int16_lowering_stays_on_the_cpu():
    x, y = Tensor("x", (1, 4, 4, 8), dtype="int16"), Tensor("y", (1, 2, 2, 8), dtype="int16")
    ok, why = tosa.tosa_support(Node("avg_pool2d", [x], [y], {}))
    assert not ok and "int16" in why and "avg_pool2d" in why


@pytest.mark.parametrize("target", ["cortex-m55+ethos-u55-128", "cortex-m55+ethos-u85-256"])
def test_int16_mlp_goes_to_the_npu_whole_and_equals_the_cpu_program(target):
    import torch
    from torch import nn

    import mcutorch
    from mcutorch.ref.interpreter import Interpreter

    needs.module("ethosu.vela")
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(24, 16), nn.ReLU(), nn.Linear(16, 5)).eval()
    x = torch.randn(64, 24)
    q = mcutorch.quantize(m, (x[:1],), list(x.split(16)),
                          quantizer=mcutorch.Quantizer(activations="int16"))
    npu = mcutorch.compile(q, (x[:1],), target=target)  # verify=True: TOSA ref model at compile
    cpu = mcutorch.compile(q, (x[:1],), target="cortex-m55")
    assert [o.name for o in npu.program.ops if not o.name.startswith("[")][0] == "delegate"
    delegated = [o for o in npu.program.ops if o.name == "delegate"]
    assert len(delegated) == 1
    assert npu.program.tensors[npu.program.inputs[0]].dtype == "int16"
    for row in x[:4]:
        xs = cpu._quantize([row[None].numpy()])
        # the delegate's CPU version (run when no NPU driver is linked) equals the CPU program
        np.testing.assert_array_equal(Interpreter(npu.program).invoke(xs)[0],
                                      Interpreter(cpu.program).invoke(xs)[0])


def _vela_cases():
    rng = np.random.default_rng(0)
    m, s = quant.quantize_multiplier(0.003 * 0.0011 / 0.0002)
    return {
        "fully_connected": one_op("fully_connected", [(1, 64)], mac16(rng, (32, 64), 32, 64),
                                  in_zp=0, out_zp=0, act_min=-I16, act_max=I16),
        "conv2d": one_op("conv2d", [(1, 9, 9, 8)], mac16(rng, (8, 3, 3, 8), 8, 72), groups=1,
                         **conv_attrs(pads=(1, 1, 1, 1))),
        "depthwise_conv2d": one_op("depthwise_conv2d", [(1, 8, 8, 8)],
                                   mac16(rng, (1, 3, 3, 8), 8, 9), depth_multiplier=1,
                                   **conv_attrs(pads=(1, 1, 1, 1))),
        "add": one_op("add", [(1, 4, 4, 8)] * 2, **_add_attrs(0.003, 0.0011, 0.004)),
        "mul": one_op("mul", [(1, 4, 4, 8)] * 2, a_zp=0, b_zp=0, out_zp=0, mult=m, shift=s,
                      act_min=-I16, act_max=I16),
        "max_pool2d": one_op("max_pool2d", [(1, 6, 6, 8)], kernel_h=2, kernel_w=2, stride_h=2,
                             stride_w=2, pad_top=0, pad_left=0, pad_bottom=0, pad_right=0,
                             act_min=-I16, act_max=I16),
        "transpose": one_op("transpose", [(1, 3, 4, 8)], **transpose_attrs([0, 2, 1, 3])),
        "reduce_sum": _mean16((1, 4, 6, 8), 0b0110),
        "matmul": _matmul16((2, 8, 16), (2, 8, 16), 1),
    }


@pytest.mark.parametrize("npu", ["ethos-u55-128", pytest.param("ethos-u85-256",
                                                               marks=pytest.mark.slow)])
def test_vela_takes_the_int16_lowerings(npu):
    """Vela (the pinned version) compiles each int16 lowering for the NPU."""
    needs.module("ethosu.vela")
    from mcutorch.backends.ethos_u.vela import compile_tosa, vela_config

    from mcutorch.backends.ethos_u.constraints import npu_check

    config = vela_config(npu)
    for op, g in _vela_cases().items():
        check(g)
        if npu_check(g.nodes[0], npu):  # the int16 matmul on the U55: Vela refuses it
            assert op == "matmul" and npu.startswith("ethos-u55"), op
            with pytest.raises(Exception, match="MatMul"):
                compile_tosa(tosa.lower_graph(g).flatbuffer, config)
            continue
        result = compile_tosa(tosa.lower_graph(g).flatbuffer, config)
        assert result is not None, op


def test_an_int16_conv_net_is_one_npu_delegate_equal_to_the_cpu_program():
    """digits_tcn with int16 convs, rescales and an int16 classifier: one Ethos-U55 delegate,
    verified on the TOSA reference model at compile, its CPU version the CPU program's."""
    import torch

    import mcutorch
    from mcutorch.models.digits import digits_split, digits_tcn
    from mcutorch.ref.interpreter import Interpreter

    needs.module("ethosu.vela")
    xtr = digits_split("rows", 0)[0]
    q = mcutorch.quantize(digits_tcn("rows", width=8, depth=2).eval(), (xtr[:1],), [xtr[:128]],
                          quantizer=mcutorch.Quantizer(int16_layers=["features", "classifier"]))
    npu = mcutorch.compile(q, (xtr[:1],), target="cortex-m55+ethos-u55-128")
    cpu = mcutorch.compile(q, (xtr[:1],), target="cortex-m55")
    assert [o.name for o in npu.program.ops].count("delegate") == 1
    assert npu.program.ops[0].name == "delegate"
    with torch.no_grad():
        for row in xtr[:3]:
            xs = cpu._quantize([row[None].numpy()])
            np.testing.assert_array_equal(Interpreter(npu.program).invoke(xs)[0],
                                          Interpreter(cpu.program).invoke(xs)[0])
