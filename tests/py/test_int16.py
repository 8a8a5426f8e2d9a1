"""int16 activations (a16w8): the quantizer's int16 specs, per-layer selection, the rescale at an
int8/int16 boundary, refusals by name, the 16-bit requantization multiplier and the int16 boundary
quantize (docs/numerics.md, "int16 activations")."""
from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import mcutorch
from mcutorch import quant
from mcutorch.ref import pad_attrs, slice_attrs
from mcutorch.errors import QuantizeError, UnsupportedOpError
from mcutorch.frontend._torchao import pt2e
from mcutorch.program import schema as S

pt2e()
QD = torch.ops.quantized_decomposed


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = nn.functional.max_pool2d(self.conv2(x) + x, 2)
        return self.fc(x.flatten(1))


class Mlp(nn.Module):
    def __init__(self, head=None):
        super().__init__()
        self.fc1, self.fc2, self.head = nn.Linear(16, 32), nn.Linear(32, 8), head

    def forward(self, x):
        x = self.fc2(torch.relu(self.fc1(x)))
        return self.head(x) if self.head is not None else x


def _quantize(model, x, cal=None, **kw):
    torch.manual_seed(1)
    cal = cal or [torch.randn_like(x) for _ in range(8)]
    return mcutorch.quantize(model.eval(), (x,), calibration=cal,
                             quantizer=mcutorch.Quantizer(**kw))


def _q_nodes(gm):
    """(input's producer name, dtype, quant_min, quant_max, zero point) of every per-tensor
    activation quantize node."""
    found = []
    for n in gm.graph.nodes:
        if n.target == QD.quantize_per_tensor.default:
            found.append((n.args[0].name, n.args[5], n.args[3], n.args[4], n.args[2]))
    return found


def test_whole_model_int16_specs_are_symmetric_full_range():
    torch.manual_seed(0)
    gm = _quantize(Cnn(), torch.randn(1, 1, 8, 8), activations="int16")
    nodes = _q_nodes(gm)
    assert len(nodes) >= 5
    assert {(d, lo, hi, zp) for _, d, lo, hi, zp in nodes} == {(torch.int16, -32767, 32767, 0)}
    weights = [n for n in gm.graph.nodes if n.target == QD.dequantize_per_channel.default]
    # (input, scales, zero points, axis, quant_min, quant_max, dtype): int8 weights only; the
    # int16 MAC layers keep a float bias (the compiler stores it as int48): no int32 bias
    assert len(weights) == 3
    assert all(n.args[6] == torch.int8 and tuple(n.args[4:6]) == (-127, 127) for n in weights)


@pytest.mark.parametrize("layers", [["conv2"], [nn.Conv2d], "conv2"])
def test_int16_layers_by_name_or_type_and_the_boundary_rescale(layers):
    torch.manual_seed(0)
    gm = _quantize(Cnn(), torch.randn(1, 1, 8, 8), int16_layers=layers)
    nodes = _q_nodes(gm)
    wide = {src for src, d, *_ in nodes if d == torch.int16}
    assert wide and any(d == torch.int8 for _, d, *_ in nodes)
    if layers == [nn.Conv2d]:  # both convs: conv1's output (after its fused relu) is int16
        assert "relu" in wide
    # conv2 computes in int16: its input is requantized int8 -> int16 (q16(dq8(relu)))
    conv2 = next(n for n in gm.graph.nodes if n.target == torch.ops.aten.conv2d.default
                 and "conv2" in str(n.meta.get("nn_module_stack")))
    dq = conv2.args[0]
    assert dq.target == QD.dequantize_per_tensor.default and dq.args[5] == torch.int16
    q16 = dq.args[0]
    assert q16.args[5] == torch.int16
    if layers != [nn.Conv2d]:
        dq8 = q16.args[0]
        assert dq8.target == QD.dequantize_per_tensor.default and dq8.args[5] == torch.int8
    # and its output back to int8 for the add of the int8 model
    add = next(iter(conv2.users))
    while add.target != torch.ops.aten.add.Tensor:
        add = next(iter(add.users))
    assert {a.args[5] for a in add.args[:2]} == {torch.int8}  # the add is not a Conv2d


@pytest.mark.parametrize("kw, match", [
    ({"activations": "int4"}, "activations='int4'"),
    ({"int16_layers": ["conv9"]}, "no module named 'conv9'.*conv1"),
    ({"int16_layers": [nn.GRU]}, "no module of type 'torch.nn.modules.rnn.GRU'"),
    ({"int16_layers": [3]}, "int16_layers entry 3"),
])
def test_bad_int16_requests_are_named(kw, match):
    with pytest.raises(QuantizeError, match=match):
        _quantize(Cnn(), torch.randn(1, 1, 8, 8), **kw)


class VarHead(nn.Module):
    def forward(self, x):
        return x.var(-1, keepdim=True)


@pytest.mark.parametrize("head, op", [(nn.LogSoftmax(dim=-1), "log_softmax"),
                                      (VarHead(), "reduce_var")])
def test_an_op_without_int16_form_is_refused_by_name(head, op):
    x = torch.randn(2, 16)
    with pytest.raises(UnsupportedOpError, match=rf"test_int16.py:\d+ in head.*\({op}\), which "
                                                 "has no int16 form"):
        _quantize(Mlp(head), x, activations="int16")
    with pytest.raises(UnsupportedOpError, match=rf"\({op}\)"):
        _quantize(Mlp(head), x, int16_layers=["head"])
    # the same model with only the MAC layers int16: the head stays int8, as asked
    gm = _quantize(Mlp(head), x, int16_layers=["fc1", "fc2"])
    assert {d for _, d, *_ in _q_nodes(gm)} == {torch.int8, torch.int16}


def test_a_constant_scalar_product_is_an_int16_table():
    """x * 0.5 is a table (`lut`); with int16 activations, a 513-entry int16 one (format 1.6)."""
    class Half(nn.Module):
        def forward(self, x):
            return x * 0.5

    x = torch.randn(2, 4)
    p = mcutorch.compile(_quantize(Half(), x, activations="int16"), (x,))
    (op,) = [o for o in p.program.ops if o.name == "lut"]
    assert p.program.tensors[op.inputs[1]].dtype == "int16"
    assert p.program.tensors[op.inputs[1]].shape == (513,)


def _sqnr(ref, y):
    ref, y = ref.double(), y.double()
    return 10 * math.log10(float((ref ** 2).sum() / ((ref - y) ** 2).sum()))


def test_int16_activations_shrink_the_activation_error():
    """With the weights fixed (int8 either way), int16 activations leave only weight error:
    the fake-quant output is much closer to the float model with the weights fake-quantized."""
    torch.manual_seed(0)
    model, x = Mlp().eval(), torch.randn(64, 16)
    with torch.no_grad():
        for lin in (model.fc1, model.fc2):  # make the weights exact in int8 per channel
            s = lin.weight.abs().amax(1, keepdim=True) / 127
            lin.weight.copy_(torch.round(lin.weight / s) * s)
        ref = model(x)
    y8 = _quantize(model, x, [x])(x)  # calibrated on x: no clipping either way
    y16 = _quantize(model, x, [x], activations="int16")(x)
    s8, s16 = _sqnr(ref, y8), _sqnr(ref, y16)
    print(f"MLP SQNR vs float (int8-exact weights): int8 {s8:.1f} dB, int16 {s16:.1f} dB")
    assert s16 > s8 + 30  # 8 more bits: ~48 dB in theory


def test_a_standalone_relu_of_an_int16_tensor_keeps_the_int16_range():
    """A ReLU the producer cannot absorb (after a slice) is an int16 rescale clamped to
    [0, 32767], not to int8's 127 (an unrolled nn.RNN(relu)'s first step is one)."""
    class SliceRelu(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            return torch.relu(self.fc(x)[:, :4])

    torch.manual_seed(0)
    model, x = SliceRelu().eval(), 3 * torch.randn(16, 8)
    gm = _quantize(model, x, [x], activations="int16")
    compiled = mcutorch.compile(gm, (x,))
    assert [(o.name, o.attrs["act_min"], o.attrs["act_max"]) for o in compiled.program.ops
            if o.name == "rescale"] == [("rescale", 0, 32767)]
    with torch.no_grad():
        want = gm(x)
    scale = compiled.program.tensors[compiled.program.outputs[0]].scale
    got = compiled.run(x)
    assert float(got.max()) / scale > 1000  # far above int8's 127, where it was clamped
    assert float((got - want).abs().max()) < 0.01 * float(want.max())  # was 99.6 % off


class Mlp3(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(16, 32), nn.Linear(32, 24), nn.Linear(24, 8)

    def forward(self, x):
        x = x.flatten(1)  # a view: a free alias in the program
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


@pytest.mark.parametrize("kw", [dict(activations="int16"), dict(int16_layers=["fc2"])],
                         ids=["all", "fc2"])
def test_an_int16_mlp_compiles_and_runs_like_pytorch(kw):
    """Linear -> ReLU -> Linear -> ReLU -> Linear in a16w8 (all int16, or fc2 only): int64 bias
    at s_in * s_w, 16-bit multipliers, ReLU as the int16 clamp, a rescale at each int8/int16
    edge, int16 tensors planned at 2 bytes. The reference and the host C runtime agree bit for
    bit, and the outputs are within 1 LSB of PyTorch's converted model on >= 99 %."""
    from mcutorch.device import crt
    from mcutorch.ref.interpreter import Interpreter

    torch.manual_seed(0)
    model, x = Mlp3().eval(), torch.randn(8, 4, 4)
    gm = _quantize(model, x, **kw)
    compiled = mcutorch.compile(gm, (x,))
    p = compiled.program
    ops_ = [o.name for o in p.ops]
    wide = kw.get("activations") == "int16"
    assert ops_ == (["fully_connected"] * 3 if wide else
                    ["fully_connected", "rescale", "fully_connected", "rescale",
                     "fully_connected"])
    port_in, port_out = compiled.ports("inputs")[0], compiled.ports("outputs")[0]
    assert port_in.dtype == port_out.dtype == ("int16" if wide else "int8")
    fcs = [o for o in p.ops if o.name == "fully_connected"]
    sixteen = fcs if wide else fcs[1:2]
    for o in fcs:
        xt, bias, mult = (p.tensors[o.inputs[i]] for i in (0, 2, 3))
        assert bias.dtype == ("int64" if o in sixteen else "int32")
        assert xt.dtype == ("int16" if o in sixteen else "int8")
        if o in sixteen:  # 16-bit multipliers, int16 ReLU bounds
            assert 2**14 <= p.const_array(o.inputs[3]).min() <= p.const_array(
                o.inputs[3]).max() < 2**15
            assert mult.dtype == "int32"
    acts = [(o.attrs["act_min"], o.attrs["act_max"]) for o in sixteen]  # ReLU: int16 clamp
    assert acts == ([(0, 32767), (0, 32767), (-32767, 32767)] if wide else [(0, 32767)])
    for t in p.tensors:  # the planner sizes each tensor from its dtype
        assert t.nbytes == math.prod(t.shape) * np.dtype(t.dtype).itemsize
    # fc2's float bias as int48 at s_in * s_w (float64, half to even), held in int64
    fc2 = sixteen[1] if wide else sixteen[0]
    lin = next(n for n in gm.graph.nodes if n.target == torch.ops.aten.linear.default
               and "fc2" in str(n.meta.get("nn_module_stack")))
    def attr(node):
        obj = gm
        for part in node.target.split("."):
            obj = getattr(obj, part)
        return obj.detach().double().numpy()

    bias_f, s_w = attr(lin.args[2]), attr(lin.args[1].args[1])
    s_in = np.float64(p.tensors[fc2.inputs[0]].scale)
    b = p.const_array(fc2.inputs[2])
    assert b.dtype == np.int64 and 2**15 < np.abs(b).max() < 2**47
    np.testing.assert_array_equal(b, np.round(bias_f.astype(np.float32) / (s_in * s_w)))

    torch.manual_seed(5)
    xs_all = torch.randn(64, 4, 4)
    with torch.no_grad():
        want_f = gm(xs_all).numpy()
    close = equal = total = 0
    for i in range(0, 64, 8):
        xs = compiled.quantize_inputs([xs_all[i:i + 8].numpy()])
        (ref,) = Interpreter(p).invoke(xs)
        (got,) = crt.run_host(p, xs)
        np.testing.assert_array_equal(got, ref)
        torch_q = quant.quantize(want_f[i:i + 8], port_out.scale, port_out.zero_point,
                                 port_out.dtype).astype(np.int64)
        d = np.abs(ref.astype(np.int64).reshape(torch_q.shape) - torch_q)
        close, equal, total = close + (d <= 1).sum(), equal + (d == 0).sum(), total + d.size
    print(f"a16w8 MLP {kw}: within 1 LSB {close / total:.2%}, equal {equal / total:.2%}")
    assert close / total >= 0.99 and len(np.unique(ref)) > 20


@pytest.mark.slow
@pytest.mark.parametrize("target,board", [("cortex-m55", "mps3-an547"),
                                          ("cortex-m0plus", "mps2-an385")])
def test_int16_mlps_on_boards(target, board):
    """The compiled a16w8 MLPs (all int16, fc2 only) as firmware: the reference's integers."""
    from mcutorch.device import firmware
    from mcutorch.ref.interpreter import Interpreter

    for kw in (dict(activations="int16"), dict(int16_layers=["fc2"])):
        torch.manual_seed(0)
        x = torch.randn(8, 4, 4)
        compiled = mcutorch.compile(_quantize(Mlp3().eval(), x, **kw), (x,), target=target)
        xs = compiled.quantize_inputs([torch.randn(8, 4, 4).numpy()])
        run = firmware.run(compiled.program, xs, board)
        np.testing.assert_array_equal(run.outputs[0], Interpreter(compiled.program).invoke(xs)[0])
        print(f"{board} a16w8 MLP {kw}: {run.instructions} instructions")


class Peak(nn.Module):
    def forward(self, x):
        return x.amax(-1, keepdim=True)  # reduce_max: no int16 form


class _AnyInt16(mcutorch.Quantizer):
    """A custom quantizer that asks int16 of every op, int16 form or not."""

    def _check_int16(self, node, rule, scalar=False):
        return self.is_int16(node)


def test_compile_refuses_an_int16_op_without_an_int16_kernel():
    """Every op of INT16_OPS has an int16 C kernel (format 1.8: matmul too); an op without one
    that a custom quantizer made int16 is refused by compile, by name."""
    from mcutorch.frontend.quantizer import INT16_OPS
    from mcutorch.ref.interpreter import C_INT16_OPS

    assert INT16_OPS - C_INT16_OPS == {"clamp", "reshape"}  # a rescale / a free view in lift
    x = torch.randn(1, 4, 8)
    torch.manual_seed(1)
    gm = mcutorch.quantize(Peak().eval(), (x,), calibration=[torch.randn_like(x)],
                           quantizer=_AnyInt16(activations="int16"))
    with pytest.raises(UnsupportedOpError, match=r"reduce_max with int16 activations .*no int16 "
                                                 r"kernel"):
        mcutorch.compile(gm, (x,))


class PadFlatten(torch.nn.Module):
    def forward(self, x):
        return torch.flatten(F.pad(x, (1, 1, 1, 1)), 1)


def test_an_int16_cnn_and_the_transpose_a_pass_adds_compile_and_run_in_c():
    """The int16 Cnn (conv2d, ReLU, conv2d + residual add, max_pool2d, fully_connected; the add
    stays unfused: conv2d_add has int8 kernels only) and an int16 pad + flatten, whose NHWC
    layout pass adds an int16 transpose: reference = host C bit for bit."""
    from mcutorch.device import crt
    from mcutorch.ref.interpreter import Interpreter

    for model, x in ((Cnn(), torch.randn(2, 1, 8, 8)), (PadFlatten(), torch.randn(1, 4, 3, 3))):
        compiled = mcutorch.compile(_quantize(model, x, activations="int16"), (x,))
        p = compiled.program
        names = [o.name for o in p.ops]
        assert "transpose" in names if isinstance(model, PadFlatten) else (
            {"conv2d", "add", "max_pool2d", "fully_connected"} <= set(names)
            and "conv2d_add" not in names)
        assert {t.dtype for t in p.tensors if t.storage == "arena"} == {"int16"}
        xs = compiled.quantize_inputs([torch.randn(*x.shape).numpy()])
        (want,) = Interpreter(p).invoke(xs)
        (got,) = crt.run_host(p, xs)
        np.testing.assert_array_equal(got, want)


# --- the 16-bit requantization multiplier ---------------------------------------------------

@pytest.mark.parametrize("real, expected", [(0.5, (2**14, 15)), (1.0, (2**14, 14)),
                                            (0.75, (3 * 2**13, 15)), (0.0, (0, 2)),
                                            (2.0**12, (2**14, 2)), (1 - 2**-17, (2**14, 14))])
def test_quantize_multiplier16_values(real, expected):
    assert quant.quantize_multiplier16(real) == expected


def test_quantize_multiplier16_domain_and_precision():
    rng = np.random.default_rng(0)
    for real in 2.0 ** rng.uniform(-40, 12.9, 2000):
        mult, shift = quant.quantize_multiplier16(real)
        assert 2**14 <= mult < 2**15 and 2 <= shift <= 62
        assert abs(mult * 2.0**-shift - real) <= 2.0 ** (-shift - 1)  # rounded to nearest
    assert quant.quantize_multiplier16(2.0**-48)[1] == 62  # below 2^-47: fewer bits
    assert quant.quantize_multiplier16(2.0**-80) == (0, 2)
    for bad in (2.0**13, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            quant.quantize_multiplier16(bad)


def test_rq_with_a_16_bit_multiplier_is_exact_on_int48_accumulators():
    """TOSA apply_scale_16: (acc * mult + 2^(shift-1)) >> shift, acc in int48, no int64
    overflow; checked against Python's unbounded integers."""
    rng = np.random.default_rng(1)
    acc = np.concatenate([rng.integers(-(2**47), 2**47, 4000),
                          [2**47 - 1, -(2**47), 0, 1, -1]]).astype(np.int64)
    for real in (2.0**-34, 3e-6, 0.013, 0.99):
        mult, shift = quant.quantize_multiplier16(real)
        got = quant.rq(acc, mult, shift)
        want = [(int(a) * mult + (1 << (shift - 1))) >> shift for a in acc]
        assert got.tolist() == want


def test_int16_boundary_quantize_matches_pytorch_on_ties():
    scale = 0.25
    x = np.concatenate([np.arange(-9000, 9000) * 0.125, [1e9, -1e9, np.inf, -np.inf]])
    x = x.astype(np.float32)
    want = QD.quantize_per_tensor(torch.from_numpy(x), scale, 0, -32767, 32767, torch.int16)
    got = quant.quantize(x, scale, 0, dtype="int16")
    assert got.dtype == np.int16 and np.array_equal(got, want.numpy())
    assert got.min() == -32767  # symmetric: -32768 is never produced
    back = QD.dequantize_per_tensor(want, scale, 0, -32767, 32767, torch.int16)
    assert np.array_equal(quant.dequantize(got, scale, 0), back.numpy())


def _recorded(gm, x):
    """Every node's value in one run of the converted model."""
    env = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            value = super().run_node(n)
            env[n] = value.detach() if isinstance(value, torch.Tensor) else value
            return value

    with torch.no_grad():
        Recorder(gm).run(x)
    return env


def _int16_out(node):
    """(quantize node of a node's int16 output, act_min): through a fused ReLU."""
    out = next(iter(node.users))
    act_min = 0 if out.target == torch.ops.aten.relu.default else -32767
    out = out if act_min == -32767 else next(iter(out.users))
    assert out.target == QD.quantize_per_tensor.default and out.args[5] == torch.int16
    return out, act_min


def _a16w8_mac(env, node, multiplier=quant.quantize_multiplier16):
    """The a16w8 definition of one quantized linear or conv2d layer (docs/numerics.md, int16
    activations; the reference kernel) on the converted model's integers: (its output,
    PyTorch's); with a 32-bit `multiplier` the same arithmetic, for comparison."""
    dq_x, dq_w = node.args[0], node.args[1]
    xq, wq = env[dq_x.args[0]].double(), env[dq_w.args[0]].double()
    s_in, s_w = float(dq_x.args[1]), env[dq_w.args[1]].numpy().astype(np.float64)
    out, act_min = _int16_out(node)
    s_out = float(out.args[1])
    bias = np.clip(np.round(env[node.args[2]].numpy().astype(np.float64) / (s_in * s_w)),
                   -(2**47 - 1), 2**47 - 1).astype(np.int64)  # int48
    mult, shift = (np.array(v, np.int32) for v in
                   zip(*(multiplier(s_in * s / s_out) for s in s_w)))
    want = env[out].numpy().astype(np.int64)
    linear = node.target == torch.ops.aten.linear.default
    if multiplier is quant.quantize_multiplier16:  # the definition: the reference kernels
        from mcutorch import ref

        x16, w8 = xq.numpy().astype(np.int16), wq.numpy().astype(np.int8)
        stage = dict(in_zp=0, out_zp=0, act_min=act_min, act_max=32767)
        if linear:
            return ref.KERNELS["fully_connected"](x16, w8, bias, mult, shift, **stage), want
        stride, pad = (list(node.args[i]) if len(node.args) > i else d
                       for i, d in ((3, [1, 1]), (4, [0, 0])))
        y = ref.KERNELS["conv2d"](x16.transpose(0, 2, 3, 1), w8.transpose(0, 2, 3, 1), bias,
                                  mult, shift, stride_h=stride[0], stride_w=stride[1],
                                  dilation_h=1, dilation_w=1, pad_top=pad[0], pad_left=pad[1],
                                  pad_bottom=pad[0], pad_right=pad[1], groups=1, **stage)
        return y.transpose(0, 3, 1, 2).astype(np.int64), want
    if linear:  # a 32-bit multiplier, for comparison only: the same formula
        acc = (xq @ wq.T).numpy().astype(np.int64) + bias  # float64: exact below 2^53
    else:  # conv2d(x, w, b, stride, padding): NCHW, channel axis 1
        acc = torch.nn.functional.conv2d(xq, wq, None, *node.args[3:5]).numpy().astype(np.int64)
        acc = acc + bias[:, None, None]
        mult, shift = mult[:, None, None], shift[:, None, None]
    return np.clip(quant.rq(acc, mult, shift), act_min, 32767), want


def _a16_add(env, node):
    """add of two int16 tensors by the reference kernel, the left-shift scheme with 15 bits
    (docs/numerics.md): (its output, PyTorch's)."""
    (qa, sa), (qb, sb) = ((env[d.args[0]].numpy().astype(np.int64), float(d.args[1]))
                          for d in node.args[:2])
    out, act_min = _int16_out(node)
    big = 2 * max(sa, sb)
    from mcutorch import ref

    (am, ash), (bm, bsh), (om, osh) = (quant.quantize_multiplier(r) for r in (
        2**15 * sa / big, 2**15 * sb / big, big / (2**15 * float(out.args[1]))))
    y = ref.KERNELS["add"](qa.astype(np.int16), qb.astype(np.int16), a_zp=0, a_mult=am,
                           a_shift=ash, b_zp=0, b_mult=bm, b_shift=bsh, out_zp=0, out_mult=om,
                           out_shift=osh, act_min=act_min, act_max=32767)
    return y.astype(np.int64), env[out].numpy().astype(np.int64)


@pytest.mark.parametrize("model, shape", [(Mlp, (256, 16)), (Cnn, (16, 1, 8, 8))])
def test_the_a16w8_definitions_are_within_one_lsb_of_pytorch(model, shape):
    """int64 accumulation, int48 bias, 16-bit multiplier (MAC layers) and the 15-bit left-shift
    add: each layer of an int16 MLP and CNN, fed PyTorch's own int16 inputs, gives PyTorch's
    int16 output within 1 LSB on >= 99 % of elements."""
    torch.manual_seed(0)
    x = torch.randn(*shape)
    gm = _quantize(model(), x, activations="int16")
    env = _recorded(gm, x)
    mac = (torch.ops.aten.linear.default, torch.ops.aten.conv2d.default)
    layers = [n for n in gm.graph.nodes if n.target in mac or n.target == torch.ops.aten.add.Tensor]
    assert len(layers) == (2 if model is Mlp else 4)
    for node in layers:
        if node.target in mac:
            y, want = _a16w8_mac(env, node)
            y32 = (_a16w8_mac(env, node, quant.quantize_multiplier)[0] == want).mean()
            also = f" (a 32-bit multiplier: {100 * y32:.2f} %)"
        else:
            (y, want), also = _a16_add(env, node), ""
        diff = np.abs(y - want)
        print(f"{node.name}: within 1 LSB {100 * (diff <= 1).mean():.2f} %, max |diff| "
              f"{diff.max()} LSB, exact {100 * (diff == 0).mean():.2f} %{also}, output range "
              f"[{want.min()}, {want.max()}], {diff.size} elements")
        assert (diff <= 1).mean() >= 0.99


# --- the reference kernels' int16 form (the definition) ----------------------------------------

def _mac16_case(rng, n=2, h=6, w=5, cin=3, cout=4, k=3):
    x = rng.integers(-32767, 32768, (n, h, w, cin)).astype(np.int16)
    wt = rng.integers(-127, 128, (cout, k, k, cin)).astype(np.int8)
    bias = rng.integers(-(2**40), 2**40, cout).astype(np.int64)
    pairs = [quant.quantize_multiplier16(r) for r in 2.0 ** rng.uniform(-24, -16, cout)]
    mult, shift = (np.array(v, np.int32) for v in zip(*pairs))
    return x, wt, bias, mult, shift


def _expected(acc, mult, shift, lo=-32767, hi=32767):
    """Independent of ref: Python integers, floor((acc * mult + 2^(shift-1)) / 2^shift)."""
    flat = [(int(a) * int(m) + (1 << (int(s) - 1))) >> int(s) for a, m, s in
            zip(acc.ravel(), np.broadcast_to(mult, acc.shape).ravel(),
                np.broadcast_to(shift, acc.shape).ravel())]
    return np.clip(np.array(flat, np.int64).reshape(acc.shape), lo, hi)


WIN = dict(stride_h=1, stride_w=2, dilation_h=1, dilation_w=1, pad_top=1, pad_left=0,
           pad_bottom=1, pad_right=1)


def test_ref_conv2d_int16_is_the_int48_definition():
    from mcutorch import ref

    rng = np.random.default_rng(2)
    x, wt, bias, mult, shift = _mac16_case(rng)
    y = ref.KERNELS["conv2d"](x, wt, bias, mult, shift, groups=1, in_zp=0, out_zp=0,
                              act_min=-1000, act_max=32767, **WIN)
    xt = torch.from_numpy(x.astype(np.float64)).permute(0, 3, 1, 2)
    xt = torch.nn.functional.pad(xt, (0, 1, 1, 1))  # (left, right, top, bottom)
    acc = torch.nn.functional.conv2d(xt, torch.from_numpy(wt.astype(np.float64)).permute(0, 3, 1,
                                                                                           2),
                                     stride=(1, 2)).permute(0, 2, 3, 1).numpy().astype(np.int64)
    assert y.dtype == np.int16
    assert np.array_equal(y, _expected(acc + bias, mult, shift, -1000))


def test_ref_depthwise_and_fully_connected_int16():
    from mcutorch import ref

    rng = np.random.default_rng(3)
    x, _, bias, mult, shift = _mac16_case(rng, cin=4)
    wd = rng.integers(-127, 128, (3, 3, 4)).astype(np.int8)
    y = ref.KERNELS["depthwise_conv2d"](x, wd, bias, mult, shift, depth_multiplier=1, in_zp=0,
                                        out_zp=0, act_min=-32767, act_max=32767, **WIN)
    xt = torch.from_numpy(x.astype(np.float64)).permute(0, 3, 1, 2)
    acc = torch.nn.functional.conv2d(torch.nn.functional.pad(xt, (0, 1, 1, 1)),
                                     torch.from_numpy(wd.astype(np.float64)).permute(2, 0, 1)
                                     [:, None], stride=(1, 2), groups=4)
    acc = acc.permute(0, 2, 3, 1).numpy().astype(np.int64) + bias
    assert y.dtype == np.int16 and np.array_equal(y, _expected(acc, mult, shift))

    xf = rng.integers(-32767, 32768, (5, 300)).astype(np.int16)
    xf[0] = 32767  # the extremes: |acc| near 300 * 32767 * 127
    wf = rng.integers(-127, 128, (4, 300)).astype(np.int8)
    wf[:, :] = np.where(wf == 0, 127, wf)
    yf = ref.KERNELS["fully_connected"](xf, wf, bias, mult, shift, in_zp=0, out_zp=0,
                                        act_min=-32767, act_max=32767)
    accf = np.array([[sum(int(a) * int(b) for a, b in zip(r, c)) for c in wf] for r in xf]) + bias
    assert yf.dtype == np.int16 and np.array_equal(yf, _expected(accf, mult, shift))
    # the same layer in int8 is unchanged: int8 in, int8 out
    y8 = ref.KERNELS["fully_connected"](xf.astype(np.int8), wf, bias.astype(np.int32), mult,
                                        shift, in_zp=0, out_zp=0, act_min=-128, act_max=127)
    assert y8.dtype == np.int8


@pytest.mark.parametrize("change, match", [
    ({"in_zp": 3}, "in_zp=3: int16 activations have zero point 0"),
    ({"out_zp": 1}, "out_zp=1: int16 activations have zero point 0"),
    ({"act_min": -32768}, "not an int16 range"),
    ({"bias": np.zeros(4, np.int32)}, "bias: expected dtype int64"),
    ({"bias": np.full(4, 2**47, np.int64)}, "must fit int48"),
    ({"mult": np.full(4, 2**15, np.int32)}, "int16 MAC multiplier outside"),
    ({"shift": np.full(4, 63, np.int32)}, "shift outside"),
    ({"mult": np.full(4, 2**14, np.int32), "shift": np.full(4, 2, np.int32)},
     "requantized accumulator overflows int32"),
])
def test_ref_int16_mac_domain_is_refused_by_name(change, match):
    from mcutorch import ref

    rng = np.random.default_rng(4)
    x, _, bias, mult, shift = _mac16_case(rng)
    wf = rng.integers(-127, 128, (4, 3)).astype(np.int8)
    args = dict(bias=bias, mult=mult, shift=shift, in_zp=0, out_zp=0, act_min=-32767,
                act_max=32767)
    args.update(change)
    operands = [args.pop(k) for k in ("bias", "mult", "shift")]
    with pytest.raises(ValueError, match=match):
        ref.KERNELS["fully_connected"](x.reshape(-1, 3), wf, *operands, **args)


def test_ref_int16_accumulator_beyond_int48_is_refused():
    from mcutorch import ref

    k = 33_900_000 // 1000  # rows of 1000 at full scale, then an int48-sized bias on top
    x = np.full((1, k), 32767, np.int16)
    w = np.full((1, k), 127, np.int8)
    bias = np.array([2**47 - 1 - 10], np.int64)
    with pytest.raises(ValueError, match="accumulator overflows int48"):
        ref.KERNELS["fully_connected"](x, w, bias, np.array([1], np.int32),
                                       np.array([62], np.int32), in_zp=0, out_zp=0,
                                       act_min=-32767, act_max=32767)


def _rq_int(v, mult, shift):
    return (int(v) * mult + (1 << (shift - 1))) >> shift


@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_ref_add_sub_mul_int16(op):
    """Two int16 tensors (broadcast), the 15-bit left-shift scheme for add/sub, against Python
    integers; the extremes included."""
    from mcutorch import ref

    rng = np.random.default_rng(5)
    a = rng.integers(-32767, 32768, (3, 1, 5)).astype(np.int16)
    b = rng.integers(-32767, 32768, (4, 5)).astype(np.int16)
    a[0, 0, :2], b[0, :2] = 32767, -32767
    sa, sb, sy = 0.003, 0.0011, 0.004
    stage = dict(out_zp=0, act_min=-32767, act_max=32767)
    if op == "mul":
        m, s = quant.quantize_multiplier(sa * sb / sy)
        y = ref.KERNELS["mul"](a, b, a_zp=0, b_zp=0, mult=m, shift=s, **stage)
        want = np.vectorize(lambda u, v: _rq_int(int(u) * int(v), m, s))(*np.broadcast_arrays(
            a, b))
    else:
        big = 2 * max(sa, sb)
        (am, ash), (bm, bsh), (om, osh) = (quant.quantize_multiplier(r) for r in (
            2**15 * sa / big, 2**15 * sb / big, big / (2**15 * sy)))
        y = ref.KERNELS[op](a, b, a_zp=0, a_mult=am, a_shift=ash, b_zp=0, b_mult=bm, b_shift=bsh,
                            out_mult=om, out_shift=osh, **stage)
        sign = 1 if op == "add" else -1
        want = np.vectorize(lambda u, v: _rq_int(_rq_int(u, am, ash) + sign * _rq_int(v, bm, bsh),
                                                 om, osh))(*np.broadcast_arrays(a, b))
    assert y.dtype == np.int16 and y.shape == (3, 4, 5)
    assert np.array_equal(y, np.clip(want, -32767, 32767))


@pytest.mark.parametrize("change, match", [
    ({"b": np.zeros(5, np.int8)}, "a is int16, b is int8; both int8 or both int16"),
    ({"a_zp": 2}, "int16 activations have 0"),
    ({"out_zp": -1}, "out_zp=-1: int16 activations have zero point 0"),
    ({"act_max": 40000}, "not an int16 range"),
    ({"mult": 2**30, "shift": 2}, "can overflow int32"),
])
def test_ref_int16_elementwise_domain_is_refused_by_name(change, match):
    from mcutorch import ref

    args = dict(a=np.full(5, 300, np.int16), b=np.full(5, -7, np.int16), a_zp=0, b_zp=0,
                mult=2**30, shift=40, out_zp=0, act_min=-32767, act_max=32767)
    args.update(change)
    with pytest.raises(ValueError, match=match):
        ref.KERNELS["mul"](args.pop("a"), args.pop("b"), **args)
    if "a_zp" not in change and "mult" not in change:  # div has no int16 form
        with pytest.raises(ValueError, match="expected dtype int8"):
            ref.KERNELS["div"](np.ones(5, np.int16), np.ones(5, np.int16), a_zp=0, b_zp=0,
                               out_zp=0, mult=2**30, shift=30, act_min=-128, act_max=127)


POOL = dict(kernel_h=3, kernel_w=2, stride_h=2, stride_w=1, pad_top=1, pad_left=1, pad_bottom=1,
            pad_right=0)


def test_ref_pools_int16():
    """max_pool2d: the max of the valid window elements; avg_pool2d: floor(sum/count + 1/2)
    through reciprocal_scale (exact away from ties), int16 in and out."""
    from mcutorch import ref

    rng = np.random.default_rng(6)
    x = rng.integers(-32767, 32768, (2, 7, 6, 3)).astype(np.int16)
    x[0, 0, 0] = 32767
    y = ref.KERNELS["max_pool2d"](x, act_min=-32767, act_max=30000, **POOL)
    xt = torch.from_numpy(x.astype(np.float64)).permute(0, 3, 1, 2)
    padded = torch.nn.functional.pad(xt, (1, 0, 1, 1), value=-np.inf)
    want = torch.nn.functional.max_pool2d(padded, (3, 2), (2, 1)).permute(0, 2, 3, 1).numpy()
    assert y.dtype == np.int16 and np.array_equal(y, np.minimum(want, 30000))

    avg = ref.KERNELS["avg_pool2d"](x, count_include_pad=0, divisor=0, in_zp=0, out_zp=0,
                                    act_min=-32767, act_max=32767, **POOL)
    s = torch.nn.functional.avg_pool2d(torch.nn.functional.pad(xt, (1, 0, 1, 1)), (3, 2), (2, 1),
                                       divisor_override=1)
    n = torch.nn.functional.avg_pool2d(torch.nn.functional.pad(torch.ones_like(xt), (1, 0, 1, 1)),
                                       (3, 2), (2, 1), divisor_override=1)
    q = (s / n).permute(0, 2, 3, 1).numpy()
    diff = avg - np.floor(q + 0.5)
    tie = q - np.floor(q) == 0.5  # exact in float64 (counts 1..6): may go either way
    assert avg.dtype == np.int16 and (diff[~tie] == 0).all() and np.isin(diff[tie], (0, -1)).all()
    with pytest.raises(ValueError, match="in_zp=2: int16 activations have zero point 0"):
        ref.KERNELS["avg_pool2d"](x, count_include_pad=0, divisor=0, in_zp=2, out_zp=0,
                                  act_min=-32767, act_max=32767, **POOL)
    with pytest.raises(ValueError, match="not an int16 range"):
        ref.KERNELS["max_pool2d"](x, act_min=-32768, act_max=0, **POOL)


def test_ref_movement_ops_move_int16_elements():
    from mcutorch import ref

    rng = np.random.default_rng(7)
    x = rng.integers(-32767, 32768, (2, 3, 4, 5)).astype(np.int16)
    y = ref.KERNELS["transpose"](x, perm0=0, perm1=3, perm2=1, perm3=2)
    assert y.dtype == np.int16 and np.array_equal(y, x.transpose(0, 3, 1, 2))
    c = ref.KERNELS["concat"](x, x[:, :, :1], axis=2)
    assert c.dtype == np.int16 and np.array_equal(c, np.concatenate([x, x[:, :, :1]], 2))
    p = ref.KERNELS["pad"](x, before0=0, before1=1, before2=0, before3=2, after0=0, after1=0,
                           after2=1, after3=0, value=-32767)
    assert p.dtype == np.int16 and p[0, 0, 0, 0] == -32767
    assert np.array_equal(p[:, 1:, :4, 2:], x)
    sl = ref.KERNELS["strided_slice"](x, **ref.slice_attrs([1, 2, 1, 4], [1, -1, 2, 0],
                                                           [1, 2, 2, 3]))
    assert sl.dtype == np.int16 and np.array_equal(sl, x[1:2, 2::-1][:, :2, 1::2][..., [4] * 3])
    assert np.array_equal(ref.KERNELS["copy"](x), x)
    with pytest.raises(ValueError, match="concat: input 1 is int8, input 0 int16"):
        ref.KERNELS["concat"](x, x.astype(np.int8), axis=3)
    with pytest.raises(ValueError, match=r"pad: value -32768 is not int16 \[-32767, 32767\]"):
        ref.KERNELS["pad"](x, before0=0, before1=0, before2=0, before3=1, after0=0, after1=0,
                           after2=0, after3=0, value=-32768)
    with pytest.raises(ValueError, match="expected dtype int8"):  # gather has no int16 form
        ref.KERNELS["gather"](x, np.array([0], np.int32), axis=5)


def test_a_program_with_int16_activations_is_refused_by_the_reference_as_by_c():
    """The reference kernels define int16 forms, but a program holds them only where the C
    runtime has a kernel (OpDef.dtypes: section 6's ops but matmul and clamp): an int8
    program edited to int16 tensors is refused by name by both program readers at load (bad_op)
    and by the interpreter."""
    from mcutorch import ops

    from mcutorch.errors import ExecutionError, ProgramError
    from mcutorch.ref.interpreter import C_INT16_OPS
    from test_program import reason_of, unchecked_bytes

    assert C_INT16_OPS == {op.name for op in ops.OPS if op.dtypes is not None and any(
        "int16" in pair for pair in op.dtypes)} == {
        "rescale", "concat", "copy", "pad", "fully_connected", "conv2d", "depthwise_conv2d",
        "add", "sub", "mul", "max_pool2d", "avg_pool2d", "transpose", "strided_slice", "lut",
        "ring_write", "reduce_sum", "matmul", "softmax", "norm", "where", "lstm", "gru",
        "rnn_tanh", "rnn_relu"}
    x = torch.randn(4, 16)

    class Pool(nn.Module):
        def forward(self, v):
            return v.amax(1, keepdim=True)  # reduce_max: no int16 form

    compiled = mcutorch.compile(_quantize(Pool(), x), (x,))
    program = compiled.program
    import dataclasses as dc

    wide = dc.replace(program, tensors=[dc.replace(t, dtype="int16", offset=2 * t.offset)
                                        if t.storage == "arena" else t for t in program.tensors],
                      regions=[dc.replace(r, size=2 * r.size) for r in program.regions])
    with pytest.raises(ProgramError, match=r"op 0 \(reduce_max\): int16 inputs -> int16 output: "
                                           r"its kernels take int8 -> int8") as e:
        wide.to_bytes()
    assert e.value.reason == "bad_op"
    blob = unchecked_bytes(wide)
    assert reason_of(blob) == "bad_op"
    from mcutorch.device import crt  # the C loader gives the same verdict

    assert crt.check_host([program.to_bytes(), blob]) == [0, S.ERROR_CODES["bad_op"]]
    from mcutorch.ref.interpreter import Interpreter

    inputs = [np.zeros(wide.tensors[i].shape, np.int16) for i in wide.inputs]
    with pytest.raises(ExecutionError, match=r"op 0 \(.*int16 activations .a16w8. are not run "
                                             "yet"):
        Interpreter(wide).invoke(inputs)


def _one_op16(name: str, ins: list, out: tuple, attrs: dict, target: str = "cortex-m55"):
    """One op over arena tensors (dtype, shape) placed one after another (format 1.5)."""
    from mcutorch.program import OpInfo, Program, RegionInfo, TensorInfo
    from test_program import _target_info

    tensors, at = [], 0
    for dtype, shape in (*ins, out):
        tensors.append(TensorInfo.arena(dtype, shape, 0, at, 0.5))
        at += -(-tensors[-1].nbytes // 16) * 16
    return Program(_target_info(target), [RegionInfo("ram", at)], tensors,
                   [OpInfo(name, list(range(len(ins))), [len(ins)], attrs)],
                   list(range(len(ins))), [len(ins)], b"")


def _rescale_program(x_dtype: str, y_dtype: str, attrs: dict, shape=(3, 37),
                     target: str = "cortex-m55"):
    """One rescale from an x_dtype tensor to a y_dtype one."""
    return _one_op16("rescale", [(x_dtype, shape)], (y_dtype, shape), attrs, target)


MOVES16 = {  # int16 movement programs: (op, input shapes, output shape, attributes)
    "concat_channels": ("concat", [(2, 3, 5, 4), (2, 3, 5, 7), (2, 3, 5, 1)], (2, 3, 5, 12),
                        {"axis": 3}),
    "concat_rows": ("concat", [(2, 3, 5, 4), (2, 1, 5, 4)], (2, 4, 5, 4), {"axis": 1}),
    "concat_rank2": ("concat", [(3, 9), (5, 9)], (8, 9), {"axis": 2}),
    "copy": ("copy", [(3, 37)], (111,), {}),
    "pad_hw": ("pad", [(1, 5, 6, 3)], (1, 8, 7, 3), {**pad_attrs([(0, 0), (1, 2), (0, 1), (0, 0)],
                                                                     -32767)}),
    "pad_rank2": ("pad", [(4, 9)], (5, 12), {**pad_attrs([(1, 0), (2, 1)], 12345)}),
}


def _move_program(case: str, target: str = "cortex-m55"):
    op, shapes, out, attrs = MOVES16[case]
    return _one_op16(op, [("int16", s) for s in shapes], ("int16", out), attrs, target)


@pytest.mark.parametrize("case", list(MOVES16))
def test_int16_concat_copy_pad_alike_in_the_reference_and_host_c(case):
    """concat, copy and pad move int16 elements (2 bytes each): the program's reference run is
    numpy's concatenate / reshape / pad, and the C runtime on the host (ASan + UBSan) gives the
    same."""
    from mcutorch.device import crt
    from mcutorch.program import Program
    from mcutorch.ref.interpreter import Interpreter

    p = Program.from_bytes(_move_program(case).to_bytes())
    xs = [_rescale_inputs("int16", p.tensors[i].shape, seed=i) for i in p.inputs]
    (want,) = Interpreter(p).invoke(xs)
    op, shapes, out, attrs = MOVES16[case]
    if op == "pad":
        lead = 4 - len(out)
        widths = [(attrs[f"before{k}"], attrs[f"after{k}"]) for k in range(lead, 4)]
        expect = np.pad(xs[0], widths, constant_values=attrs["value"])
    else:
        expect = (xs[0].reshape(out) if op == "copy" else
                  np.concatenate(xs, axis=attrs["axis"] - 4 + len(out)))
    np.testing.assert_array_equal(want, expect)
    (got,) = crt.run_host(p, xs)
    np.testing.assert_array_equal(got, want)


RESCALE16 = {  # (x dtype, y dtype): attributes; M = mult / 2^shift
    ("int8", "int16"): dict(in_zp=-7, out_zp=0, mult=1_616_421_456, shift=23, act_min=-32767,
                            act_max=32767),
    ("int16", "int8"): dict(in_zp=0, out_zp=5, mult=1_299_090_612, shift=39, act_min=-128,
                            act_max=127),
    ("int16", "int16"): dict(in_zp=0, out_zp=0, mult=1_874_919_424, shift=31, act_min=-30000,
                             act_max=32767),
}


def _rescale_inputs(x_dtype: str, shape, seed: int = 0) -> np.ndarray:
    info = np.iinfo(x_dtype)
    x = np.random.default_rng(seed).integers(info.min, info.max + 1, shape).astype(x_dtype)
    x.flat[:4] = [info.min, info.max, 0, -1]
    return x


@pytest.mark.parametrize("pair", list(RESCALE16), ids="->".join)
def test_rescale_int8_int16_alike_in_the_reference_and_host_c(pair):
    """rescale int8 -> int16, int16 -> int8, int16 -> int16 (docs/numerics.md section 6): the
    program's reference run is the integer definition, and the C runtime on the host (ASan +
    UBSan) gives the same integers."""
    from mcutorch.device import crt
    from mcutorch.program import Program
    from mcutorch.ref.interpreter import Interpreter

    attrs = RESCALE16[pair]
    p = Program.from_bytes(_rescale_program(*pair, attrs).to_bytes())
    x = _rescale_inputs(pair[0], p.tensors[0].shape)
    (want,) = Interpreter(p).invoke([x])
    r = quant.rq(x.astype(np.int64) - attrs["in_zp"], attrs["mult"], attrs["shift"])
    expect = np.clip(r + attrs["out_zp"], attrs["act_min"], attrs["act_max"]).astype(pair[1])
    np.testing.assert_array_equal(want, expect)
    assert want.dtype == np.dtype(pair[1]) and len(np.unique(want)) > 20
    (got,) = crt.run_host(p, [x])
    np.testing.assert_array_equal(got, want)


@pytest.mark.slow
@pytest.mark.parametrize("target,board", [("cortex-m55", "mps3-an547"),
                                          ("cortex-m0plus", "mps2-an385")])
def test_int16_programs_on_boards(target, board):
    """The same rescales, concats and copies as firmware on an emulated M55 and M0+: the
    reference's integers."""
    from mcutorch.device import firmware
    from mcutorch.ref.interpreter import Interpreter

    programs = [_rescale_program(*pair, attrs, target=target)
                for pair, attrs in RESCALE16.items()]
    programs += [_move_program(case, target) for case in MOVES16]
    programs.append(_fc16_program(target=target))
    for k, p in enumerate(programs):
        xs = [_rescale_inputs(p.tensors[i].dtype, p.tensors[i].shape, seed=i) for i in p.inputs]
        run = firmware.run(p, xs, board)
        np.testing.assert_array_equal(run.outputs[0], Interpreter(p).invoke(xs)[0],
                                      err_msg=f"{p.ops[0].name} {k} on {board}")
        print(f"{board} {p.ops[0].name} {[p.tensors[i].dtype for i in p.inputs]} -> "
              f"{p.tensors[p.outputs[0]].dtype}: {run.instructions} instructions")


@pytest.mark.parametrize("pair,change", [
    (("int16", "int8"), {"in_zp": 3}), (("int8", "int16"), {"out_zp": 1}),
    (("int8", "int16"), {"act_min": -32768}), (("int16", "int16"), {"shift": 1}),
    (("int16", "int8"), {"mult": 2**31 - 1, "shift": 2})])
def test_rescale_int16_domain_refused_by_both_executors(pair, change):
    """A zero point on an int16 side, an int16 range beyond +-32767, an illegal scale or an rq
    that leaves int32: the reference refuses by name, the C kernel with bad_argument."""
    from mcutorch.device import crt
    from mcutorch.errors import ExecutionError, McutorchError
    from mcutorch.ref.interpreter import Interpreter

    p = _rescale_program(*pair, {**RESCALE16[pair], **change})
    x = np.zeros(p.tensors[0].shape, pair[0])
    with pytest.raises(ExecutionError, match=r"op 0 \(rescale\): "):
        Interpreter(p).invoke([x])
    with pytest.raises(McutorchError, match="bad_argument"):
        crt.run_host(p, [x])


def test_int16_pad_value_refused_by_both_executors():
    """An int16 pad value outside [-32767, 32767]: the reference refuses it by name, the C kernel
    with bad_argument (the readers load it: the value is an attribute)."""
    from mcutorch.device import crt
    from mcutorch.errors import ExecutionError, McutorchError
    from mcutorch.ref.interpreter import Interpreter

    p = _one_op16("pad", [("int16", (4, 9))], ("int16", (5, 12)),
                  pad_attrs([(1, 0), (2, 1)], -32768))
    x = np.zeros((4, 9), np.int16)
    with pytest.raises(ExecutionError, match=r"pad: value -32768 is not int16"):
        Interpreter(p).invoke([x])
    with pytest.raises(McutorchError, match="bad_argument"):
        crt.run_host(p, [x])


FC16 = dict(in_zp=0, out_zp=0, act_min=-32767, act_max=32767)


def _fc16_program(n=3, k=37, m=11, seed=0, bias_dtype="int64", target="cortex-m55", **change):
    """fully_connected on an int16 x: int8 weight, int64 bias (format 1.5), 16-bit multipliers."""
    from mcutorch.program import ConstantPool, OpInfo, Program, RegionInfo, TensorInfo
    from test_program import _target_info

    rng = np.random.default_rng(seed)
    consts = change.pop("consts", {})
    w = consts.get("weight", rng.integers(-128, 128, (m, k))).astype(np.int8)
    bias = consts.get("bias", rng.integers(-2**22, 2**22, m)).astype(bias_dtype)
    mult = consts.get("mult", rng.integers(2**14, 2**15, m)).astype(np.int32)
    shift = consts.get("shift", np.full(m, 24)).astype(np.int32)
    pool = ConstantPool()
    tensors = [TensorInfo.arena("int16", (n, k), 0, 0, 0.5),
               *(pool.tensor(a) for a in (w, bias, mult, shift)),
               TensorInfo.arena("int16", (n, m), 0, -(-2 * n * k // 16) * 16, 0.5)]
    return Program(_target_info(target), [RegionInfo("ram", 4 * n * (k + m) + 32)], tensors,
                   [OpInfo("fully_connected", [0, 1, 2, 3, 4], [5], {**FC16, **change})],
                   [0], [5], pool.to_bytes())


def _fc16_expect(p, x):
    w, bias, mult, shift = (p.const_array(i).astype(np.int64) for i in (1, 2, 3, 4))
    acc = bias + np.einsum("nk,mk->nm", x.astype(np.int64), w)
    attrs = p.ops[0].attrs
    r = (acc * mult + (np.int64(1) << (shift - 1))) >> shift
    return np.clip(r, attrs["act_min"], attrs["act_max"]).astype(np.int16)


@pytest.mark.parametrize("case", [dict(), dict(n=1, k=1, m=1), dict(n=5, k=200, m=3, seed=2),
                                  dict(n=2, k=1100, m=3, seed=4, consts={"shift": np.full(3, 26)}),
                                  dict(n=1, k=1100, m=2, fill=-32768, consts={
                                      "weight": np.full((2, 1100), -128), "shift": np.full(2, 40),
                                      "bias": np.zeros(2)}),
                                  dict(act_min=-1000, act_max=20000, seed=3)],
                         ids=["3x37x11", "1x1x1", "5x200x3", "2x1100x3", "extremes", "clamped"])
def test_fully_connected_int16_alike_in_the_reference_and_host_c(case):
    """The a16w8 fully_connected (int64 accumulator within int48, 16-bit multiplier): the
    program's reference run is the integer definition, host C (ASan + UBSan) the same integers."""
    from mcutorch.device import crt
    from mcutorch.program import Program
    from mcutorch.ref.interpreter import Interpreter

    case = dict(case)
    fill = case.pop("fill", None)
    p = Program.from_bytes(_fc16_program(**case).to_bytes())
    x = (_rescale_inputs("int16", p.tensors[0].shape, seed=7) if fill is None
         else np.full(p.tensors[0].shape, fill, np.int16))
    (want,) = Interpreter(p).invoke([x])
    np.testing.assert_array_equal(want, _fc16_expect(p, x))
    assert want.size < 8 or len(np.unique(want)) > want.size // 2
    (got,) = crt.run_host(p, [x])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("change,reason", [
    (dict(bias_dtype="int32"), "bad_op"),  # an int16 x takes an int64 bias
    (dict(consts={"mult": np.full(11, 2**15)}), "bad_op"),  # not a 16-bit multiplier
    (dict(in_zp=1), "bad_op"),  # zero point 0
    (dict(consts={"bias": np.full(11, 2**47 - 2**20), "shift": np.full(11, 50)}),
     "bad_op"),  # the accumulator leaves int48 (its rq would fit)
    (dict(consts={"bias": np.full(11, 2**47)}), "bad_tensor"),  # an int64 value beyond int48
    (dict(consts={"shift": np.full(11, 8)}), "bad_op"),  # rq leaves int32
    (dict(consts={"bias": np.full(11, 2**47 - 2**28), "shift": np.full(11, 50)}),
     None),  # within int48: 2^28 > 32768 * 37 * 128
])
def test_fully_connected_int16_domain_at_load_in_both_readers(change, reason):
    """Both readers bound an int16 fully_connected from its constants (docs/numerics.md section
    6) and give the same verdict."""
    from mcutorch.device import crt
    from test_program import reason_of, unchecked_bytes

    blob = unchecked_bytes(_fc16_program(**change))
    assert reason_of(blob) == reason
    assert crt.check_host([blob]) == [S.ERROR_CODES[reason] if reason else 0]


# --- int16 C kernels: conv2d, depthwise_conv2d (and the element-wise, pool and movement ops) ----

def _op16(name: str, ins: list, consts: list, out: tuple, attrs: dict,
          target: str = "cortex-m55", inplace: bool = False):
    """One op over arena inputs (dtype, shape) then constant operands (arrays), one arena
    output (dtype, shape); `inplace`: the output on the first input's bytes."""
    from mcutorch.program import ConstantPool, OpInfo, Program, RegionInfo, TensorInfo
    from test_program import _target_info

    pool, tensors, at = ConstantPool(), [], 0
    for dtype, shape in ins:
        tensors.append(TensorInfo.arena(dtype, shape, 0, at, 0.5))
        at += -(-tensors[-1].nbytes // 16) * 16
    tensors += [pool.tensor(np.ascontiguousarray(c)) for c in consts]
    tensors.append(TensorInfo.arena(out[0], out[1], 0, 0 if inplace else at, 0.5))
    at += 0 if inplace else -(-tensors[-1].nbytes // 16) * 16
    k = len(tensors) - 1
    return Program(_target_info(target), [RegionInfo("ram", at)], tensors,
                   [OpInfo(name, list(range(k)), [k], attrs)], list(range(len(ins))), [k],
                   pool.to_bytes())


def _win(kh, kw, stride=(1, 1), dilation=(1, 1), pads=(0, 0, 0, 0)):
    return dict(stride_h=stride[0], stride_w=stride[1], dilation_h=dilation[0],
                dilation_w=dilation[1], pad_top=pads[0], pad_left=pads[1], pad_bottom=pads[2],
                pad_right=pads[3])


def _out_hw(h, w, kh, kw, a):
    return tuple((size + a[p0] + a[p1] - a[d] * (k - 1) - 1) // a[s] + 1 for size, k, p0, p1, d, s
                 in ((h, kh, "pad_top", "pad_bottom", "dilation_h", "stride_h"),
                     (w, kw, "pad_left", "pad_right", "dilation_w", "stride_w")))


CONV16 = {  # (N, H, W, Cin), Cout, (KH, KW), window attributes, groups, fill
    "3x3_pad1": ((1, 6, 7, 3), 5, (3, 3), _win(3, 3, pads=(1, 1, 1, 1)), 1, None),
    "stride2_dil2_asym": ((2, 9, 8, 4), 4, (3, 2), _win(3, 2, (2, 1), (2, 3), (2, 0, 1, 3)), 1,
                          None),
    "groups2": ((1, 5, 5, 6), 6, (3, 3), _win(3, 3, (1, 2), pads=(1, 1, 1, 1)), 2, None),
    "1x1_tail": ((1, 3, 4, 17), 9, (1, 1), _win(1, 1), 1, None),
    "1xk_conv1d": ((2, 1, 19, 8), 7, (1, 5), _win(1, 5, (1, 1), (1, 2), (0, 4, 0, 4)), 1, None),
    "wide_cin": ((1, 3, 3, 33), 3, (3, 3), _win(3, 3, pads=(0, 1, 2, 1)), 1, None),
    "extremes": ((1, 4, 4, 16), 4, (3, 3), _win(3, 3, pads=(1, 1, 1, 1)), 1, 32767),
    "extremes_neg": ((1, 4, 4, 16), 4, (3, 3), _win(3, 3), 1, -32768),
}
DW16 = {  # (N, H, W, C), M, (KH, KW), window attributes, weight rank
    "3x3_c5": ((1, 6, 5, 5), 1, (3, 3), _win(3, 3, pads=(1, 1, 1, 1)), 3),
    "c20_stride2": ((2, 7, 8, 20), 1, (3, 3), _win(3, 3, (2, 2), pads=(0, 1, 1, 0)), 3),
    "m2_dilated": ((1, 8, 7, 3), 2, (2, 3), _win(2, 3, (1, 2), (3, 2), (1, 2, 2, 1)), 4),
    "c4_1xk": ((1, 1, 21, 4), 1, (1, 7), _win(1, 7, pads=(0, 3, 0, 3)), 3),
}


def _mac16_consts(rng, cout, k, wshape, fill=None):
    w = rng.integers(-127, 128, wshape).astype(np.int8)
    if fill is not None:  # the extremes: every weight at +-127 or -128, x all at fill
        w[...] = np.where(rng.random(wshape) < 0.5, 127, -128)
    bias = rng.integers(-(2**22), 2**22, cout).astype(np.int64)
    shift = np.full(cout, 21 + int(np.ceil(np.log2(k) / 2)) + (6 if fill is not None else 0),
                    np.int32)
    return [w, bias, rng.integers(2**14, 2**15, cout).astype(np.int32), shift]


def _conv16_program(case, target="cortex-m55", **change):
    (n, h, w, cin), cout, (kh, kw), win, groups, fill = CONV16[case]
    rng = np.random.default_rng(len(case))
    consts = _mac16_consts(rng, cout, kh * kw * cin // groups, (cout, kh, kw, cin // groups), fill)
    attrs = {**win, "groups": groups, **FC16, **change}
    return _op16("conv2d", [("int16", (n, h, w, cin))], consts,
                 ("int16", (n, *_out_hw(h, w, kh, kw, win), cout)), attrs, target), fill


def _dw16_program(case, target="cortex-m55", **change):
    (n, h, w, c), m, (kh, kw), win, rank = DW16[case]
    rng = np.random.default_rng(len(case))
    consts = _mac16_consts(rng, c * m, kh * kw, (1,) * (rank - 3) + (kh, kw, c * m))
    attrs = {**win, "depth_multiplier": m, **FC16, **change}
    return _op16("depthwise_conv2d", [("int16", (n, h, w, c))], consts,
                 ("int16", (n, *_out_hw(h, w, kh, kw, win), c * m)), attrs, target), None


def _mac16_inputs(p, fill):
    shape = p.tensors[0].shape
    return [_rescale_inputs("int16", shape, seed=3) if fill is None
            else np.full(shape, fill, np.int16)]


@pytest.mark.parametrize("case", [("conv2d", c) for c in CONV16] + [("dw", c) for c in DW16],
                         ids="-".join)
def test_int16_conv_and_depthwise_alike_in_the_reference_and_host_c(case):
    """a16w8 conv2d and depthwise_conv2d (int64 accumulator within int48, 16-bit multipliers,
    padding skipped): the program's reference run and the host C runtime (ASan + UBSan) give the
    same integers, across the MVE/DSP widths (8-element MACs, 4 rows, 16-channel blocks) and their
    tails, strides, dilations, asymmetric padding, groups, a depth multiplier, 1xK windows (an
    int16 Conv1d) and full-scale inputs."""
    from mcutorch.device import crt
    from mcutorch.program import Program
    from mcutorch.ref.interpreter import Interpreter

    kind, name = case
    p, fill = (_conv16_program if kind == "conv2d" else _dw16_program)(name)
    p = Program.from_bytes(p.to_bytes())  # both readers' load checks pass
    xs = _mac16_inputs(p, fill)
    (want,) = Interpreter(p).invoke(xs)
    assert want.dtype == np.int16 and (fill is not None or len(np.unique(want)) > want.size // 3)
    (got,) = crt.run_host(p, xs)
    np.testing.assert_array_equal(got, want)


TOP32 = 2**31 - 1


def _forms16(rng, name):
    """One case of FORMS16: (op, x, weight, bias, shift) with x an array. Cases at the int32
    bound put every product at +-2^22 (x = -32768, w = -128) or -32768 * 127, and a bias so
    that |bias| + 32768 * sum |w| is exactly 2^31 - 1 (the 32-bit form) or 2^31 (64-bit)."""
    op, xs, ws, kind = FORMS16[name]
    cout = ws[-1] if op == "depthwise_conv2d" else ws[0]
    taps = int(np.prod(ws)) // cout
    x = rng.integers(-32767, 32768, xs).astype(np.int16)
    w = rng.integers(-127, 128, ws).astype(np.int8)
    bias = rng.integers(-(2**22), 2**22, cout).astype(np.int64)
    shift = np.full(cout, 21 + int(np.ceil(np.log2(taps) / 2)), np.int64)
    if kind == "tight":  # more than 511 products: only sum |w| itself shows the int32 bound
        w = rng.integers(-20, 21, ws).astype(np.int8)
    elif kind in ("bound", "bound+1", "bound_neg"):
        x[...] = -32768
        w[...] = 127 if kind == "bound_neg" else -128
        top = TOP32 - taps * 2**22 + (kind == "bound+1")
        bias[...] = -top if kind == "bound_neg" else top
        shift[...] = 40
    elif kind == "bias_big":  # a bias beyond int32: the 64-bit form
        bias = rng.integers(2**31, 2**32, cout).astype(np.int64) * rng.choice([-1, 1], cout)
        shift[...] = 34
    elif kind == "shift16":  # M >= 2^-2 (shift 16): no 32-bit rq, the 64-bit form
        x //= 64
        w = rng.integers(-3, 4, ws).astype(np.int8)
        bias = rng.integers(-1000, 1000, cout).astype(np.int64)
        shift[...] = 16
    elif kind == "shift47":  # a shift beyond 46: the 64-bit form (outputs set by the bias)
        bias = rng.integers(2**44, 2**46, cout).astype(np.int64)
        shift[...] = 47
    return op, x, w, bias, shift.astype(np.int32)


FORMS16 = {  # op, x shape, weight shape, what the constants test (_forms16)
    "conv_3x3_fast": ("conv2d", (1, 5, 6, 7), (9, 3, 3, 7), "random"),
    "conv_1x1_fast": ("conv2d", (2, 3, 5, 13), (6, 1, 1, 13), "random"),
    "conv1d_fast": ("conv2d", (1, 1, 23, 5), (11, 1, 7, 5), "random"),
    "conv_tight_k576": ("conv2d", (1, 4, 4, 64), (5, 3, 3, 64), "tight"),
    "conv_bound": ("conv2d", (1, 3, 3, 16), (5, 1, 1, 16), "bound"),
    "conv_bound_neg": ("conv2d", (1, 3, 3, 16), (5, 1, 1, 16), "bound_neg"),
    "conv_bound+1": ("conv2d", (1, 3, 3, 16), (5, 1, 1, 16), "bound+1"),
    "conv_bias_big": ("conv2d", (1, 4, 5, 6), (7, 3, 3, 6), "bias_big"),
    "conv_shift16": ("conv2d", (1, 4, 5, 6), (7, 3, 3, 6), "shift16"),
    "conv_shift47": ("conv2d", (1, 4, 5, 6), (7, 3, 3, 6), "shift47"),
    "fc_fast": ("fully_connected", (3, 45), (13, 45), "random"),
    "fc_tight_n9": ("fully_connected", (9, 600), (6, 600), "tight"),
    "fc_bound": ("fully_connected", (2, 40), (5, 40), "bound"),
    "fc_bound+1": ("fully_connected", (2, 40), (5, 40), "bound+1"),
    "fc_bias_big": ("fully_connected", (2, 40), (5, 40), "bias_big"),
    "dw_c13_fast": ("depthwise_conv2d", (1, 6, 5, 13), (3, 3, 13), "random"),
    "dw_c8_fast": ("depthwise_conv2d", (2, 4, 4, 8), (3, 3, 8), "random"),
    "dw_c3_fast": ("depthwise_conv2d", (1, 5, 4, 3), (3, 3, 3), "random"),
    "dw_bound": ("depthwise_conv2d", (1, 3, 3, 21), (3, 3, 21), "bound"),
    "dw_bound_neg": ("depthwise_conv2d", (1, 3, 3, 21), (3, 3, 21), "bound_neg"),
    "dw_bound+1": ("depthwise_conv2d", (1, 3, 3, 21), (3, 3, 21), "bound+1"),
    "dw_bias_big": ("depthwise_conv2d", (1, 4, 4, 10), (3, 3, 10), "bias_big"),
    "dw_shift47": ("depthwise_conv2d", (1, 4, 4, 10), (3, 3, 10), "shift47"),
}


def _form16_program(name, target="cortex-m55"):
    """FORMS16[name] as a one-op program (random multipliers in [2^14, 2^15)) and its input:
    windows padded by 1 (the bound cases: none, so every tap is inside x)."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    op, x, w, bias, shift = _forms16(rng, name)
    cout = bias.size
    mult = rng.integers(2**14, 2**15, cout).astype(np.int32)
    attrs = dict(FC16)
    if op == "fully_connected":
        y = (x.shape[0], cout)
    else:
        kh, kw = w.shape[-3:-1] if op == "depthwise_conv2d" else w.shape[1:3]
        pad = 0 if FORMS16[name][3].startswith("bound") or kh == 1 else 1
        attrs.update(_win(kh, kw, pads=(pad, pad, pad, pad)))
        attrs.update(groups=1) if op == "conv2d" else attrs.update(depth_multiplier=1)
        y = (x.shape[0], *_out_hw(x.shape[1], x.shape[2], kh, kw, attrs), cout)
    p = _op16(op, [("int16", x.shape)], [w, bias, mult, shift], ("int16", y), attrs, target)
    return p, x


@pytest.mark.parametrize("name", list(FORMS16))
def test_int16_mac_forms_alike_in_the_reference_and_host_c(name):
    """The int16 MAC kernels' two output-stage forms (docs/numerics.md section 6): the 32-bit form
    (int32 sums from the bias, rq in 32-bit operations) where |bias| + 32768 * sum |w| <= 2^31 - 1
    and 17 <= shift <= 46, shown from the shape alone or from sum |w| (576 or 600 products), up
    to the bound itself (+-(2^31 - 1) reached); the 64-bit form one past the bound, for a bias
    beyond int32, shift 16 and shift 47. Reference = host C (ASan + UBSan) in every case."""
    from mcutorch.device import crt
    from mcutorch.program import Program
    from mcutorch.ref.interpreter import Interpreter

    p, x = _form16_program(name)
    p = Program.from_bytes(p.to_bytes())  # both readers' load checks pass
    (want,) = Interpreter(p).invoke([x])
    assert want.dtype == np.int16
    if FORMS16[name][3] in ("random", "tight", "bias_big", "shift16"):
        assert len(np.unique(want)) > min(8, want.size // 4), "a flat output tests little"
    (got,) = crt.run_host(p, [x])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("change,reason", [
    (dict(in_zp=1), "bad_op"), (dict(out_zp=-1), None), (dict(act_min=-32768), None),
    (dict(act_min=5, act_max=4), None), (dict(stride_h=2), None),  # not the output's shape
    (dict(consts={1: np.zeros(5, np.int32)}), "bad_op"),  # an int32 bias with an int16 x
    (dict(consts={2: np.full(5, 2**15, np.int32)}), "bad_op"),  # not a 16-bit multiplier
    (dict(consts={3: np.full(5, 8, np.int32)}), "bad_op"),  # rq leaves int32
    (dict(y_dtype="int8"), "bad_op"),  # int16 -> int8 is no dtype pair of conv2d
])
def test_int16_conv2d_refused_by_both_readers(change, reason):
    """An int16 conv2d outside section 6's domain: both program readers give the same verdict at
    load; what they load (attributes) both executors refuse at run time, the C kernel with
    bad_argument before writing."""
    from mcutorch.device import crt
    from mcutorch.errors import ExecutionError, McutorchError
    from mcutorch.ref.interpreter import Interpreter
    from test_program import reason_of, unchecked_bytes

    change = dict(change)
    consts, y_dtype = change.pop("consts", {}), change.pop("y_dtype", "int16")
    p, _ = _conv16_program("3x3_pad1", **change)
    import dataclasses as dc

    if consts or y_dtype != "int16":
        c = [p.const_array(i).copy() for i in range(1, 5)]
        for k, v in consts.items():
            c[k] = v
        q = _op16("conv2d", [("int16", p.tensors[0].shape)], c,
                  (y_dtype, p.tensors[-1].shape), p.ops[0].attrs)
        p = dc.replace(q)
    blob = unchecked_bytes(p)
    assert reason_of(blob) == reason
    assert crt.check_host([blob]) == [S.ERROR_CODES[reason] if reason else 0]
    if reason is None:
        x = np.zeros(p.tensors[0].shape, np.int16)
        with pytest.raises(ExecutionError, match=r"op 0 \(conv2d\): "):
            Interpreter(p).invoke([x])
        with pytest.raises(McutorchError, match="bad_argument"):
            crt.run_host(p, [x])


BINARY16 = {  # a's shape, b's shape, in place (y on a's bytes)
    "same_tail": ((37,), (37,), False), "bcast_rows": ((3, 1, 5), (4, 5), False),
    "per_channel": ((2, 3, 9), (9,), False), "scalar": ((5, 6), (1,), False),
    "column": ((4, 1), (4, 7), False), "rank6": ((2, 1, 2, 1, 3, 2), (1, 3, 1, 2, 1, 2), False),
    "inplace": ((6, 11), (11,), True),
}


def _binary16_attrs(op, rng, extreme=False):
    sa, sb, sy = (float(v) for v in rng.uniform(1e-3, 4e-3, 3))
    if extreme:  # the largest output scale the domain allows: outputs reach +-32767
        sy = min(sa, sb) / 4
    stage = dict(out_zp=0, act_min=-32767, act_max=32767)
    if op == "mul":
        m, s = quant.quantize_multiplier(sa * sb / (sy * 30))
        return dict(a_zp=0, b_zp=0, mult=m, shift=s, **stage)
    big = 2 * max(sa, sb)
    (am, ash), (bm, bsh), (om, osh) = (quant.quantize_multiplier(r) for r in (
        2**15 * sa / big, 2**15 * sb / big, big / (2**15 * sy)))
    return dict(a_zp=0, a_mult=am, a_shift=ash, b_zp=0, b_mult=bm, b_shift=bsh, out_mult=om,
                out_shift=osh, **stage)


def _binary16_program(op, case, target="cortex-m55", extreme=False, **change):
    a, b, inplace = BINARY16[case]
    y = np.broadcast_shapes(a, b)
    attrs = {**_binary16_attrs(op, np.random.default_rng(len(case)), extreme), **change}
    return _op16(op, [("int16", a), ("int16", b)], [], ("int16", y), attrs, target, inplace)


def _pool_win(kh, kw, sh, sw):
    return dict(kernel_h=kh, kernel_w=kw, stride_h=sh, stride_w=sw, pad_top=0, pad_left=0,
                pad_bottom=0, pad_right=0)


POOL16 = {  # op, x shape, window attributes (and avg's count rule)
    "max_3x2": ("max_pool2d", (2, 7, 6, 3), dict(POOL, act_min=-32767, act_max=30000)),
    "max_2x2": ("max_pool2d", (1, 8, 8, 17), dict(_pool_win(2, 2, 2, 2), act_min=-32767,
                                                  act_max=32767)),
    "avg_valid": ("avg_pool2d", (2, 7, 6, 3), dict(POOL, count_include_pad=0, divisor=0,
                                                   act_min=-1000, act_max=32767)),
    "avg_include_pad": ("avg_pool2d", (1, 5, 9, 4), dict(POOL, count_include_pad=1, divisor=0)),
    "avg_divisor": ("avg_pool2d", (1, 6, 6, 2), dict(_pool_win(3, 3, 3, 3), count_include_pad=0,
                                                     divisor=7)),
    "avg_global": ("avg_pool2d", (1, 4, 16, 8), dict(_pool_win(4, 16, 1, 1), count_include_pad=0,
                                                     divisor=0)),
}
AVG16 = dict(in_zp=0, out_zp=0, act_min=-32767, act_max=32767)


def _pool16_program(case, target="cortex-m55", **change):
    op, shape, attrs = POOL16[case]
    attrs = {**(AVG16 if op == "avg_pool2d" else {}), **attrs, **change}
    n, h, w, c = shape
    ho, wo = (
        (size + attrs[p0] + attrs[p1] - k) // attrs[s] + 1 for size, k, p0, p1, s in
        ((h, attrs["kernel_h"], "pad_top", "pad_bottom", "stride_h"),
         (w, attrs["kernel_w"], "pad_left", "pad_right", "stride_w")))
    return _op16(op, [("int16", shape)], [], ("int16", (n, ho, wo, c)), attrs, target)


MOVES16_MORE = {  # transpose and strided_slice of int16 elements: (op, x shape, y shape, attrs)
    "transpose_nchw": ("transpose", (2, 3, 4, 5), (2, 5, 3, 4),
                       dict(perm0=0, perm1=3, perm2=1, perm3=2)),
    "transpose_rank2": ("transpose", (7, 9), (9, 7), dict(perm0=0, perm1=1, perm2=3, perm3=2)),
    "transpose_merged": ("transpose", (2, 3, 4, 5), (3, 2, 4, 5),
                         dict(perm0=1, perm1=0, perm2=2, perm3=3)),
    "slice_flip_step": ("strided_slice", (2, 3, 4, 5), (1, 2, 2, 3),
                        slice_attrs([1, 2, 0, 4], [1, -1, 2, -1], [1, 2, 2, 3])),
    "slice_inner_copy": ("strided_slice", (3, 17), (2, 9),
                         slice_attrs([1, 4], [1, 1], [2, 9])),
}


def _move16_program(case, target="cortex-m55"):
    op, x, y, attrs = MOVES16_MORE[case]
    return _op16(op, [("int16", x)], [], ("int16", y), attrs, target)


REDUCE16 = {  # reduce_sum of int16 x: (x shape, axes mask, scale of the sum, clamp)
    "mean_rows": ((3, 37), 0b10, 1 / 37, (-32767, 32767)),  # rows: a mean over the last dim
    "mean_rows_odd": ((2, 3, 9), 0b100, 1 / 9, (-32767, 32767)),  # a pair tail (DSP)
    "mean_hw": ((2, 5, 7, 6), 0b0110, 1 / 35, (-32767, 32767)),  # columns, a channel tail
    "mean_hw_c8": ((1, 3, 4, 8), 0b0110, 1 / 12, (-100, 20000)),  # columns, a clamp
    "sum_any": ((2, 3, 4, 5), 0b0101, 1 / 16, (-32767, 32767)),  # the odometer
    "sum_all_rank6": ((2, 1, 3, 2, 2, 3), 0b111111, 1 / 64, (-32767, 32767)),
    "mean_long": ((1, 4000), 0b10, 1 / 4000, (-32767, 32767)),
}


def _reduce16_program(case, target="cortex-m55", **change):
    from mcutorch.quant import quantize_multiplier

    shape, axes, scale, (lo, hi) = REDUCE16[case]
    mult, shift = quantize_multiplier(scale)
    attrs = {"axes": axes, "in_zp": 0, "out_zp": 0, "mult": mult, "shift": shift,
             "act_min": lo, "act_max": hi, **change}
    out = tuple(1 if axes >> i & 1 else d for i, d in enumerate(shape))
    return _op16("reduce_sum", [("int16", shape)], [], ("int16", out), attrs, target)


def _elementwise16_cases():
    return ([("binary", op, c) for op in ("add", "sub", "mul") for c in BINARY16] +
            [("binary", op, "extreme") for op in ("add", "sub", "mul")] +
            [("pool", c) for c in POOL16] + [("move", c) for c in MOVES16_MORE] +
            [("reduce", c) for c in REDUCE16])


def _elementwise16_program(case, target="cortex-m55"):
    if case[0] == "binary":
        op, name = case[1:]
        return (_binary16_program(op, "same_tail", target, extreme=True) if name == "extreme"
                else _binary16_program(op, name, target))
    return {"pool": _pool16_program, "move": _move16_program,
            "reduce": _reduce16_program}[case[0]](case[1], target)


def test_ref_reduce_sum_int16_is_the_int32_sum_requantized():
    """reduce_sum of int16 x: sum in int32 (zero points 0), the int8 output stage's rq, an int16
    clamp; the extremes of a 2^16 - 1 element sum stay exact."""
    from mcutorch.quant import quantize_multiplier
    from mcutorch.ref.reduce import reduce_sum

    rng = np.random.default_rng(3)
    x = rng.integers(-32768, 32768, (4, 6, 5), dtype=np.int16)
    mult, shift = quantize_multiplier(1 / 30)
    y = reduce_sum(x, axes=0b110, in_zp=0, out_zp=0, mult=mult, shift=shift, act_min=-32767,
                   act_max=32767)
    acc = x.astype(np.int64).sum(axis=(1, 2), keepdims=True)
    assert y.dtype == np.int16 and y.shape == (4, 1, 1)
    np.testing.assert_array_equal(y, _expected(acc, mult, shift))
    top = np.full((1, 65535), -32768, np.int16)  # the most negative sum: -2^31 + 2^15
    mult, shift = quantize_multiplier(1 / 65535)
    y = reduce_sum(top, axes=0b10, in_zp=0, out_zp=0, mult=mult, shift=shift, act_min=-32767,
                   act_max=32767)
    assert y.item() == -32767  # -32768 exactly, clamped to the int16 activation range


@pytest.mark.parametrize("change, match", [
    (dict(in_zp=1), "zero point 0"), (dict(out_zp=-1), "zero point 0"),
    (dict(act_min=-32768), "int16 range"), (dict(mult=2**30, shift=2), "leaves int32")])
def test_ref_reduce_sum_int16_domain_refused_by_both_executors(change, match):
    """Attributes outside the int16 reduce_sum domain: the reference names the reason, the C
    kernel returns bad_argument."""
    from mcutorch.device import crt
    from mcutorch.errors import ExecutionError, McutorchError
    from mcutorch.ref.interpreter import Interpreter

    p = _reduce16_program("mean_rows", **change)
    xs = [np.zeros((3, 37), np.int16)]
    with pytest.raises(ExecutionError, match=match):
        Interpreter(p).invoke(xs)
    with pytest.raises(McutorchError, match="bad_argument"):
        crt.run_host(p, xs)


def test_reduce_sum_int16_of_more_than_2_16_elements_is_refused():
    """At most 2^16 - 1 int16 values per sum (int32 stays exact): the reference refuses more by
    name, the C kernel with bad_argument."""
    from mcutorch.device import crt
    from mcutorch.errors import ExecutionError, McutorchError
    from mcutorch.quant import quantize_multiplier
    from mcutorch.ref.interpreter import Interpreter

    mult, shift = quantize_multiplier(1 / 65536)
    p = _op16("reduce_sum", [("int16", (1, 65536))], [], ("int16", (1, 1)),
              {"axes": 0b10, "in_zp": 0, "out_zp": 0, "mult": mult, "shift": shift,
               "act_min": -32767, "act_max": 32767})
    xs = [np.ones((1, 65536), np.int16)]
    with pytest.raises(ExecutionError, match="more than 2"):
        Interpreter(p).invoke(xs)
    with pytest.raises(McutorchError, match="bad_argument"):
        crt.run_host(p, xs)


def _inputs16(p, seed=0):
    return [_rescale_inputs("int16", p.tensors[i].shape, seed=seed + i) for i in p.inputs]


@pytest.mark.parametrize("case", _elementwise16_cases(), ids="-".join)
def test_int16_elementwise_pool_movement_alike_in_the_reference_and_host_c(case):
    """add, sub, mul (numpy broadcasting, in place, the 15-bit left-shift scheme), max_pool2d,
    avg_pool2d (count rules, a fused clamp) and transpose / strided_slice on int16 tensors: the
    program's reference run and the host C runtime (ASan + UBSan) give the same integers."""
    from mcutorch.device import crt
    from mcutorch.program import Program
    from mcutorch.ref.interpreter import Interpreter

    p = Program.from_bytes(_elementwise16_program(case).to_bytes())
    xs = _inputs16(p)
    if case[1:] in (("add", "extreme"), ("sub", "extreme"), ("mul", "extreme")):
        xs[0][:4], xs[1][:4] = [32767, -32767, 32767, -32767], [32767, -32767, -32767, 32767]
    (want,) = Interpreter(p).invoke(xs)
    assert want.dtype == np.int16 and len(np.unique(want)) > min(4, want.size - 1)  # not flat
    (got,) = crt.run_host(p, xs)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op,change", [
    ("add", dict(a_zp=1)), ("sub", dict(out_zp=2)), ("mul", dict(b_zp=-1)),
    ("add", dict(act_min=-32768)), ("mul", dict(act_max=40000)),
    ("add", dict(a_mult=2**31 - 1, a_shift=2)),  # a32 can leave int32
    ("mul", dict(mult=2**30, shift=2)),  # rq of a * b can leave int32
])
def test_int16_binary_domain_refused_by_both_executors(op, change):
    """Attributes outside section 6's int16 domain: the reference refuses them by name, the C
    kernel with bad_argument."""
    from mcutorch.device import crt
    from mcutorch.errors import ExecutionError, McutorchError
    from mcutorch.ref.interpreter import Interpreter

    p = _binary16_program(op, "bcast_rows", **change)
    xs = [np.zeros(p.tensors[i].shape, np.int16) for i in p.inputs]
    with pytest.raises(ExecutionError, match=rf"op 0 \({op}\): "):
        Interpreter(p).invoke(xs)
    with pytest.raises(McutorchError, match="bad_argument"):
        crt.run_host(p, xs)


BOARDS16 = [("cortex-m55", "mps3-an547"), ("cortex-m0plus", "mps2-an385"),
            ("cortex-m3", "mps2-an385"), ("cortex-m33", "mps2-an505"), ("cortex-m4", "mps2-an386")]


@pytest.mark.slow
@pytest.mark.parametrize("target,board", BOARDS16)
def test_int16_kernels_on_boards(target, board):
    """Every int16 kernel case above (conv2d, depthwise_conv2d, fully_connected and their
    32-bit and 64-bit output-stage forms, add, sub, mul, the pools, transpose, strided_slice) as
    firmware on the M55 (MVE), M0+ (Armv6-M, unaligned access trapping), M3 (Armv7-M, C), M33
    and M4 (DSP): the reference's integers."""
    from mcutorch.device import firmware
    from mcutorch.ref.interpreter import Interpreter

    cases = ([(_conv16_program(c, target)) for c in CONV16] +
             [(_dw16_program(c, target)) for c in DW16] +
             [(_fc16_program(target=target, **kw), None) for kw in (
                 dict(), dict(n=2, k=203, m=7, seed=2), dict(n=1, k=1100, m=2, seed=4))] +
             [(_elementwise16_program(c, target), None) for c in _elementwise16_cases()] +
             [_form16_program(c, target) for c in FORMS16])
    for p, fill in cases:
        xs = ([fill] if isinstance(fill, np.ndarray) else
              _mac16_inputs(p, fill) if p.ops[0].name in ("conv2d", "depthwise_conv2d") else
              _inputs16(p))
        run = firmware.run(p, xs, board)
        np.testing.assert_array_equal(run.outputs[0], Interpreter(p).invoke(xs)[0],
                                      err_msg=f"{p.ops[0].name} {p.ops[0].attrs} on {board}")


def _digits_tcn16():
    """digits_tcn("rows", width=4, depth=2) with its conv1d stack and classifier int16, compiled
    for the M55: (qmodel, compiled, held-out digits)."""
    from mcutorch.models.digits import digits_split, digits_tcn

    xtr, _, xte, _ = digits_split("rows", seed=0)
    q = mcutorch.quantize(digits_tcn("rows", width=4, depth=2).eval(), (xtr[:16],),
                          calibration=[xtr[i:i + 64] for i in range(0, 256, 64)],
                          quantizer=mcutorch.Quantizer(int16_layers=["features", "classifier"]))
    return q, mcutorch.compile(q, (xtr[:16],), target="cortex-m55"), xte


def test_an_int16_digits_tcn_is_bit_exact_in_c_and_within_one_lsb_of_pytorch():
    """An int16 CNN end to end: the conv1d layers run as int16 conv2d on [N, C, 1, L] views, the
    mean between them (in no named module) follows its int16 input, the classifier int16.
    Reference = host C bit for bit; each layer fed PyTorch's own input is within 1 LSB of its
    fake-quant output on >= 99 % of elements (compare.layer_by_layer)."""
    from mcutorch import compare
    from mcutorch.device import crt
    from mcutorch.ref.interpreter import Interpreter

    q, compiled, xte = _digits_tcn16()
    p = compiled.program
    convs = [o for o in p.ops if o.name == "conv2d"]
    assert len(convs) == 2 and all(p.tensors[o.inputs[0]].dtype == "int16" for o in convs)
    assert p.tensors[next(o for o in p.ops if o.name == "fully_connected").inputs[0]].dtype == (
        "int16")
    for i in range(0, 64, 16):
        xs = compiled.quantize_inputs([xte[i:i + 16].numpy()])
        (want,) = Interpreter(p).invoke(xs)
        (got,) = crt.run_host(p, xs)
        np.testing.assert_array_equal(got, want)
    rows = [r for i in range(0, 64, 16) for r in compare.layer_by_layer(q, (xte[i:i + 16],))]
    assert not [o for o in p.ops if o.name == "rescale"]  # int16 from the input to the output
    assert {r["op"] for r in rows} >= {"conv2d", "fully_connected"}
    for op in sorted({r["op"] for r in rows}):
        mine = [r for r in rows if r["op"] == op]
        n = sum(r["elements"] for r in mine)
        close = sum(r["within_1lsb"] * r["elements"] for r in mine) / n
        exact = sum(r["exact"] * r["elements"] for r in mine) / n
        print(f"digits_tcn a16w8 {op}: within 1 LSB {close:.2%}, exact {exact:.2%}, {n} elements")
        assert close >= 0.99


def test_an_all_int16_digits_tcn_keeps_its_mean_int16():
    """activations="int16": the mean over time between the conv1d stack and the classifier is an
    int16 reduce_sum (no rescale to int8 and back); reference = host C bit for bit, each layer
    within 1 LSB of PyTorch's fake-quant on >= 99 % of elements, the mean included."""
    from mcutorch import compare
    from mcutorch.device import crt
    from mcutorch.models.digits import digits_split, digits_tcn
    from mcutorch.ref.interpreter import Interpreter

    xtr, _, xte, _ = digits_split("pixels", seed=0)
    q = mcutorch.quantize(digits_tcn("pixels", width=4, depth=3, norm=False).eval(), (xtr[:16],),
                          calibration=[xtr[i:i + 64] for i in range(0, 256, 64)],
                          quantizer=mcutorch.Quantizer(activations="int16"))
    p = mcutorch.compile(q, (xtr[:16],), target="cortex-m55").program
    (mean,) = [o for o in p.ops if o.name == "reduce_sum"]
    assert {p.tensors[t].dtype for t in (*mean.inputs, *mean.outputs)} == {"int16"}
    assert not [o for o in p.ops if o.name == "rescale"]
    xs = [np.round(xte[:16].numpy() / p.tensors[p.inputs[0]].scale).clip(-32767, 32767)
          .astype(np.int16)]
    np.testing.assert_array_equal(crt.run_host(p, xs)[0], Interpreter(p).invoke(xs)[0])
    rows = [r for i in range(0, 64, 16) for r in compare.layer_by_layer(q, (xte[i:i + 16],))]
    for op in ("conv2d", "fully_connected"):
        mine = [r for r in rows if r["op"] == op]
        n = sum(r["elements"] for r in mine)
        close = sum(r["within_1lsb"] * r["elements"] for r in mine) / n
        print(f"digits_tcn all-int16 {op}: within 1 LSB {close:.2%}, {n} elements")
        assert close >= 0.99, op
    # the mean (its input is the layout pass's transpose, which PyTorch has not): against
    # PyTorch's fake-quant of a mean sharing its input's qparams, on the int16 range
    from mcutorch.quant import quantize_multiplier
    from mcutorch.ref.reduce import reduce_sum

    x = np.random.default_rng(0).integers(-32767, 32768, (64, 4, 64)).astype(np.int16)
    theirs = torch.round(torch.from_numpy(x.astype(np.float64)).mean(2, keepdim=True)).numpy()
    mult, shift = quantize_multiplier(1 / 64)
    ours = reduce_sum(x, axes=0b100, in_zp=0, out_zp=0, mult=mult, shift=shift, act_min=-32767,
                      act_max=32767)
    diff = np.abs(ours - theirs)
    print(f"int16 mean: max {diff.max():.0f} LSB, exact {(diff == 0).mean():.2%}")
    assert diff.max() <= 1 and (diff == 0).mean() >= 0.99


@pytest.mark.slow
def test_an_int16_digits_tcn_on_the_m55():
    """The same compiled int16 TCN as M55 firmware (MVE paths): the reference's integers."""
    from mcutorch.device import firmware
    from mcutorch.ref.interpreter import Interpreter

    _, compiled, xte = _digits_tcn16()
    xs = compiled.quantize_inputs([xte[:16].numpy()])
    run = firmware.run(compiled.program, xs, "mps3-an547")
    np.testing.assert_array_equal(run.outputs[0], Interpreter(compiled.program).invoke(xs)[0])
    print(f"mps3-an547 int16 digits_tcn (16 digits): {run.instructions} instructions")
