"""A user's own PT2E flow: export -> prepare_pt2e(any quantizer) -> calibrate -> convert_pt2e ->
mcutorch.compile. Every scheme the numerics contract covers compiles (and agrees with the
converted model); every other one is refused with an error naming the node and the scheme."""
from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
import torch
from torch import nn

import mcutorch
from mcutorch.compiler import build_graph
from mcutorch.errors import UnsupportedOpError
from mcutorch.frontend._torchao import pt2e
from mcutorch.frontend.lift import lift

prepare_pt2e, convert_pt2e = pt2e()  # torchao imported quietly before the names below
from torchao.quantization.pt2e import MinMaxObserver  # noqa: E402
from torchao.quantization.pt2e.quantizer import QuantizationSpec  # noqa: E402
from torchao.quantization.pt2e.quantizer.arm_inductor_quantizer import (  # noqa: E402
    ArmInductorQuantizer, get_default_arm_inductor_quantization_config)
from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (  # noqa: E402
    X86InductorQuantizer, get_default_x86_inductor_quantization_config)

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    # torchao 0.18 ships its XNNPACK quantizer (deprecated there) under torchao.testing
    from torchao.testing.pt2e._xnnpack_quantizer import (
        XNNPACKQuantizer, get_symmetric_quantization_config)
    from torchao.testing.pt2e._xnnpack_quantizer_utils import QuantizationConfig

QD = torch.ops.quantized_decomposed


class ConvReluLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3)
        self.drop = nn.Dropout(0.25)
        self.fc = nn.Linear(6 * 6 * 6, 5)

    def forward(self, x):
        return self.fc(torch.flatten(self.drop(torch.relu(self.conv(x))), 1))


class Mixed(nn.Module):
    """A residual add, pooling, a float clamp into a concat, a ReLU and a reshape after a linear:
    the shapes torchao's XNNPACK quantizer leaves partly float between quantize nodes."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3, padding=1)
        self.fc = nn.Linear(6 * 4 * 4, 10)

    def forward(self, x):
        y = nn.functional.max_pool2d(torch.relu(self.conv(x) + x), 2)
        y = nn.functional.adaptive_avg_pool2d(y, 4)
        y = torch.cat([y, torch.clamp(y, -0.5, 0.5)], 1)
        return torch.relu(self.fc(torch.flatten(y, 1))).reshape(1, 2, 5)


def user_flow(model, x, quantizer, cal, guards=True, fold=True):
    """What a user writes: torch.export, .module() (guards on by default), PT2E."""
    ep = torch.export.export(model, (x,))
    m = prepare_pt2e(ep.module() if guards else ep.module(check_guards=False), quantizer)
    with torch.no_grad():
        for c in cal:
            m(c)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return convert_pt2e(m, fold_quantize=fold)


def lsb_diff(program, qmodel, x) -> float:
    out = program.program.tensors[program.program.outputs[0]]
    return float((program.run(x) - qmodel(x).detach()).abs().max() / out.scale)


def xnnpack(cfg) -> XNNPACKQuantizer:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return XNNPACKQuantizer().set_global(cfg)


def _x86_scheme():
    """torchao's x86 scheme (uint8 activations, int8 per-channel weights in [-128, 127], float
    bias) with XNNPACK's annotation, which quantizes op outputs too."""
    c = get_default_x86_inductor_quantization_config()
    return QuantizationConfig(c.input_activation, c.output_activation, c.weight, None, False)


def _arm_scheme():
    """torchao's Arm (inductor) scheme: int8 activations, int8 per-tensor symmetric weights in
    [-128, 127], float bias, with XNNPACK's annotation."""
    c = get_default_arm_inductor_quantization_config()
    return QuantizationConfig(c.input_activation, c.output_activation, c.weight, None, False)


TORCHAO = {
    "arm_scheme_int8": _arm_scheme,
    "xnnpack_per_channel": lambda: get_symmetric_quantization_config(is_per_channel=True),
    "xnnpack_per_tensor": lambda: get_symmetric_quantization_config(is_per_channel=False),
    "xnnpack_weights_to_-128": lambda: get_symmetric_quantization_config(is_per_channel=True,
                                                                         weight_qmin=-128),
    "x86_scheme_uint8": _x86_scheme,
}


@pytest.fixture(scope="module")
def data():
    torch.manual_seed(0)
    cal = [torch.randn(1, 3, 8, 8) for _ in range(4)]
    return cal[0], cal


def test_users_flow_with_guards_and_dropout(data):
    """ep.module() keeps its _guards_fn call_module and the eval-mode dropout; both go, the
    user's module is left as it was, and the program matches the converted model."""
    x, cal = data
    torch.manual_seed(1)
    model = ConvReluLinear().eval()
    qmodel = user_flow(model, x, mcutorch.Quantizer(), cal)
    before = [n.name for n in qmodel.graph.nodes]
    assert "_guards_fn" in before and any("dropout" in n for n in before)
    program = mcutorch.compile(qmodel, (x,))
    assert [n.name for n in qmodel.graph.nodes] == before
    assert [op.name for op in program.program.ops] == ["conv2d", "fully_connected"]
    for c in cal:
        assert lsb_diff(program, qmodel, c) <= 1
    ours = mcutorch.compile(mcutorch.quantize(model, (x,), calibration=cal), (x,))
    assert torch.equal(ours.run(cal[1]), program.run(cal[1]))


@pytest.mark.parametrize("scheme", sorted(TORCHAO))
def test_torchao_quantizers(data, scheme):
    x, cal = data
    torch.manual_seed(2)
    model = Mixed().eval()
    qmodel = user_flow(model, x, xnnpack(TORCHAO[scheme]()), cal)
    program = mcutorch.compile(qmodel, (x,))
    for c in cal[1:]:
        assert lsb_diff(program, qmodel, c) <= 1
    graph = build_graph(qmodel)
    weights = [n.inputs[1].data for n in graph.nodes if n.op in ("conv2d", "fully_connected")]
    biases = [n.inputs[2] for n in graph.nodes if n.op in ("conv2d", "fully_connected")]
    assert all(b.dtype == "int32" for b in biases)  # torchao leaves the bias float
    if scheme in ("xnnpack_weights_to_-128", "x86_scheme_uint8"):
        assert min(int(w.min()) for w in weights) == -128
    if scheme == "x86_scheme_uint8":
        q0 = next(n for n in qmodel.graph.nodes if n.target == QD.quantize_per_tensor.default)
        assert q0.args[5] == torch.uint8
        t = program.program.tensors[program.program.inputs[0]]
        assert (t.scale, t.zero_point) == (pytest.approx(q0.args[1], rel=1e-7), q0.args[2] - 128)
        want = q0.target(cal[1], *q0.args[1:]).to(torch.int16) - 128
        got = program.quantize_inputs([cal[1]])[0].transpose(0, 3, 1, 2)
        assert np.array_equal(got, want.numpy())


def test_weights_at_minus_128_are_bit_exact_in_every_executor(data):
    """-128 weights (torchao's symmetric configs with quant_min -128): the Python reference,
    the host C runtime (scalar kernels), the DSP and MVE kernels on QEMU boards and the TOSA
    reference model agree bit for bit."""
    from mcutorch.backends import tosa
    from mcutorch.device import crt

    x, cal = data
    torch.manual_seed(3)
    model = Mixed().eval()
    qmodel = user_flow(model, x, xnnpack(TORCHAO["xnnpack_weights_to_-128"]()), cal)
    graph = build_graph(qmodel)
    assert any(int(t.data.min()) == -128 for n in graph.nodes for t in n.inputs[1:2])
    tosa.verify_program_graph(graph)
    for target, board in (("cortex-m3", None), ("cortex-m33", "mps2-an505"),
                          ("cortex-m55", "mps3-an547")):
        program = mcutorch.compile(qmodel, (x,), target=target)
        qx = program.quantize_inputs([cal[2]])
        ref = program.run_int8(qx)
        assert all(np.array_equal(a, b) for a, b in zip(ref, crt.run_host(program.program, qx)))
        if board:
            got = program.run_on_board(qx, board)
            assert all(np.array_equal(a, b) for a, b in zip(ref, got)), board


def test_float_bias_is_quantized_as_the_derived_bias_spec(data):
    """A bias the quantizer leaves float becomes int32 at s_in * s_w bit for bit as torchao
    makes it from mcutorch's DerivedQuantizationSpec."""
    class FloatBias(mcutorch.Quantizer):
        def bias_spec(self, node):
            return None

    x, cal = data
    torch.manual_seed(4)
    model = Mixed().eval()
    derived = lift(user_flow(model, x, mcutorch.Quantizer(), cal))
    floats = user_flow(model, x, FloatBias(), cal)
    assert {"conv.bias", "fc.bias"} <= {n.target for n in floats.graph.nodes if n.op == "get_attr"}
    mine = lift(floats)
    pairs = [(a.inputs[2], b.inputs[2]) for a, b in zip(derived.nodes, mine.nodes)
             if a.op in ("conv2d", "fully_connected")]
    assert len(pairs) == 2
    for a, b in pairs:
        assert b.dtype == "int32" and np.array_equal(a.data, b.data)
        assert np.array_equal(np.float32(a.scale), np.float32(b.scale))


def test_int32_bias_at_another_scale_is_requantized(data):
    class OwnBias(mcutorch.Quantizer):
        def bias_spec(self, node):
            obs = MinMaxObserver.with_args(dtype=torch.int32, quant_min=-(2**31),
                                           quant_max=2**31 - 1, qscheme=torch.per_tensor_symmetric)
            return QuantizationSpec(dtype=torch.int32, quant_min=-(2**31), quant_max=2**31 - 1,
                                    qscheme=torch.per_tensor_symmetric,
                                    observer_or_fake_quant_ctr=obs)

    x, cal = data
    torch.manual_seed(5)
    qmodel = user_flow(ConvReluLinear().eval(), x, OwnBias(), cal)
    program = mcutorch.compile(qmodel, (x,))
    graph = build_graph(qmodel)
    for n in graph.nodes:
        if n.op in ("conv2d", "fully_connected"):
            x_, w, b = n.inputs[:3]
            assert np.array_equal(np.float32(b.scale),
                                  np.float32(x_.scale) * np.asarray(w.scale, np.float32))
    assert lsb_diff(program, qmodel, cal[1]) <= 1


def test_unfolded_quantize_nodes_are_folded(data):
    x, cal = data
    torch.manual_seed(6)
    model = ConvReluLinear().eval()
    folded = mcutorch.compile(user_flow(model, x, mcutorch.Quantizer(), cal), (x,))
    unfolded = user_flow(model, x, mcutorch.Quantizer(), cal, fold=False)
    assert any(n.target == QD.quantize_per_channel.default for n in unfolded.graph.nodes)
    program = mcutorch.compile(unfolded, (x,))
    qx = folded.quantize_inputs([cal[1]])
    assert all(np.array_equal(a, b) for a, b in zip(folded.run_int8(qx), program.run_int8(qx)))


@pytest.mark.parametrize("make", [ArmInductorQuantizer, X86InductorQuantizer])
def test_inductor_quantizers_leave_the_output_float(data, make):
    """torchao's Arm and x86 inductor quantizers leave the last op's output float (inductor
    fuses int8-in, float-out): that is no int8 program, and the error says where."""
    x, cal = data
    cfg = (get_default_arm_inductor_quantization_config() if make is ArmInductorQuantizer
           else get_default_x86_inductor_quantization_config())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quantizer = make().set_global(cfg)
    qmodel = user_flow(ConvReluLinear().eval(), x, quantizer, cal)
    with pytest.raises(UnsupportedOpError) as err:
        mcutorch.compile(qmodel, (x,))
    msg = str(err.value)
    assert "model output 0" in msg and "fc: torch.nn.Linear" in msg and "aten.linear" in msg
    assert "float" in msg


class PositiveWeights(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        with torch.no_grad():
            self.conv.weight.abs_().add_(0.1)

    def forward(self, x):
        return self.conv(x)


def _refused():
    sym = get_symmetric_quantization_config
    act16 = QuantizationSpec(dtype=torch.int16, quant_min=-(2**15), quant_max=2**15 - 1,
                             qscheme=torch.per_tensor_symmetric,
                             observer_or_fake_quant_ctr=MinMaxObserver.with_args(
                                 qscheme=torch.per_tensor_symmetric))

    class AsymmetricWeights(mcutorch.Quantizer):
        def weight_spec(self):
            return QuantizationSpec(dtype=torch.int8, quant_min=-128, quant_max=127,
                                    qscheme=torch.per_tensor_affine,
                                    observer_or_fake_quant_ctr=MinMaxObserver)

    return {
        "narrow": (lambda: xnnpack(sym(act_qmin=-127)),
                   ["quantize node", "model input x", "range [-127, 127]"]),
        "int16": (lambda: xnnpack(dataclasses.replace(sym(), input_activation=act16,
                                                      output_activation=act16)),
                  ["quantize node", "torch.int16"]),
        "dynamic": (lambda: xnnpack(sym(is_per_channel=True, is_dynamic=True)),
                    ["choose_qparams", "dynamic quantization"]),
        "asymmetric_weights": (AsymmetricWeights,
                               ["conv: torch.nn.Conv2d", "weight", "zero point -128",
                                "symmetric"]),
    }


@pytest.mark.parametrize("scheme", ["narrow", "int16", "dynamic", "asymmetric_weights"])
def test_other_schemes_are_refused_naming_node_and_scheme(data, scheme):
    x, cal = data
    make, words = _refused()[scheme]
    model = PositiveWeights().eval()
    if scheme == "dynamic":  # XNNPACK's dynamic config quantizes linear layers only
        model, x, cal = nn.Linear(4, 3).eval(), cal[0][0, 0, :1, :4], [c[0, 0, :1, :4] for c in cal]
    qmodel = user_flow(model, x, make(), cal)
    with pytest.raises(UnsupportedOpError) as err:
        mcutorch.compile(qmodel, (x,))
    for w in words:
        assert w in str(err.value), (w, str(err.value))


def test_float_op_between_quantized_ops_is_named():
    """Ops the quantizer left float (here: add and mul, which this quantizer does not
    annotate): mul's output is quantized (conv c's input), so mul is computable in int8, but
    add's output is not."""
    class NoAdd(mcutorch.Quantizer):
        def annotate_node(self, node):
            if node.target not in (torch.ops.aten.add.Tensor, torch.ops.aten.mul.Tensor):
                super().annotate_node(node)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c = nn.Conv2d(2, 2, 1), nn.Conv2d(2, 2, 1), nn.Conv2d(2, 2, 1)

        def forward(self, x):
            y = self.a(x) + self.b(x)
            return self.c(y * y)

    x = torch.randn(1, 2, 4, 4)
    qmodel = user_flow(M().eval(), x, NoAdd(), [x])
    with pytest.raises(UnsupportedOpError,
                       match=r"aten\.mul.* takes the float output of .*aten\.add"):
        mcutorch.compile(qmodel, (x,))


def test_lstm_of_an_own_export_is_refused_naming_the_module():
    """mcutorch.quantize unrolls an nn.LSTM (tests/py/test_rnn.py); an own torch.export keeps
    the fused aten.lstm, which no quantizer can observe: refused by name with the way out."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(4, 8, batch_first=True)

        def forward(self, x):
            return self.rnn(x)[0]

    x = torch.randn(1, 3, 4)
    qmodel = user_flow(M().eval(), x, mcutorch.Quantizer(), [x])
    with pytest.raises(UnsupportedOpError) as err:
        mcutorch.compile(qmodel, (x,))
    msg = str(err.value)
    assert "rnn: torch.nn.LSTM" in msg and "test_pt2e.py:" in msg and "aten.lstm" in msg
    assert "mcutorch.frontend.capture.capture" in msg


def test_training_mode_dropout_is_refused():
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    x = torch.randn(1, 4)
    ep = torch.export.export(model.train(), (x,))
    qmodel = prepare_pt2e(ep.module(), mcutorch.Quantizer())
    qmodel(x)
    qmodel = convert_pt2e(qmodel)
    with pytest.raises(UnsupportedOpError, match="training-mode dropout"):
        mcutorch.compile(qmodel, (x,))


def test_graph_modules_that_are_not_converted_are_named(data):
    x, _ = data
    model = ConvReluLinear().eval()
    exported = torch.export.export(model, (x,)).module()
    with pytest.raises(mcutorch.McutorchError, match="without quantize/dequantize nodes"):
        mcutorch.compile(exported, (x,))
    prepared = prepare_pt2e(exported, mcutorch.Quantizer())
    with pytest.raises(mcutorch.McutorchError, match="prepared PT2E module"):
        mcutorch.compile(prepared, (x,))


def test_float_clamps_fold_in_order():
    """clamp(clamp(v, 0, 1), 2, 3) left float by XNNPACK: the int8 clamp is the constant q(2),
    not an empty range."""
    from mcutorch.ir import compose_act

    assert compose_act((0, 5), (9, 20)) == (9, 9) and compose_act((9, 20), (0, 5)) == (5, 5)
    assert compose_act((-128, 127), (-3, 4)) == (-3, 4)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Conv2d(2, 2, 1), nn.Conv2d(2, 2, 1)

        def forward(self, x):
            y = self.a(x)
            return self.b(torch.clamp(torch.clamp(y, 0.0, 1.0), 2.0, 3.0) * torch.clamp(y, -9, 0.5))

    torch.manual_seed(7)
    x = torch.randn(1, 2, 4, 4)
    qmodel = user_flow(M().eval(), x, xnnpack(TORCHAO["xnnpack_per_channel"]()), [x])
    clamps = [n for n in lift(qmodel).nodes if n.op == "rescale" and n.attrs["act"][0] > -128]
    assert len(clamps) == 1 and clamps[0].attrs["act"] == (127, 127)
    assert lsb_diff(mcutorch.compile(qmodel, (x,)), qmodel, torch.randn(1, 2, 4, 4)) <= 1


def test_exported_again_and_decomposed(data):
    """A converted module exported again (an ExportedProgram) compiles; a decomposed one is
    refused with the reason."""
    x, cal = data
    torch.manual_seed(8)
    qmodel = user_flow(ConvReluLinear().eval(), x, mcutorch.Quantizer(), cal)
    ep = torch.export.export(qmodel, (x,))
    assert torch.equal(mcutorch.compile(ep, (x,)).run(cal[1]),
                       mcutorch.compile(qmodel, (x,)).run(cal[1]))
    with pytest.raises(UnsupportedOpError, match="aten.convolution.*run_decompositions"):
        mcutorch.compile(ep.run_decompositions().module(), (x,))
