"""Convolution variants end to end: conv1d (+ BatchNorm1d folding), conv_transpose1d/2d, conv3d.

Each model is compiled from a torch module and compared with PyTorch's fake-quant model (within
1 LSB on >= 99 % of the elements, end to end and layer by layer); the program runs bit-exactly
on the C runtime (host, ASan/UBSan) and, where it lowers, on the TOSA reference model.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import mcutorch
from mcutorch.compare import layer_by_layer
from mcutorch.compiler import build_graph
from mcutorch.device import crt
from mcutorch.errors import UnsupportedOpError


class ConvBnRelu1d(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv1d(6, 12, 5, padding="same"), nn.BatchNorm1d(12),
                                  nn.ReLU(), nn.Conv1d(12, 12, 3, stride=2, groups=12),
                                  nn.BatchNorm1d(12), nn.ReLU(),
                                  nn.Conv1d(12, 8, 3, dilation=2, groups=4, padding=1))

    def forward(self, x):
        return self.body(x)


class TcResBlock(nn.Module):
    """A TC-ResNet block on MFCC frames [N, 40, T]: conv k9 s2 -> BN -> ReLU -> conv k9 -> BN,
    shortcut conv k1 s2 -> BN -> ReLU, add, ReLU; then the mean over time and a classifier."""

    def __init__(self, c_in=40, c=24):
        super().__init__()
        self.stem = nn.Conv1d(c_in, 16, 3, padding=1, bias=False)
        self.a = nn.Sequential(nn.Conv1d(16, c, 9, stride=2, padding=4, bias=False),
                               nn.BatchNorm1d(c), nn.ReLU(),
                               nn.Conv1d(c, c, 9, padding=4, bias=False), nn.BatchNorm1d(c))
        self.short = nn.Sequential(nn.Conv1d(16, c, 1, stride=2, bias=False), nn.BatchNorm1d(c),
                                   nn.ReLU())
        self.fc = nn.Linear(c, 12)

    def forward(self, x):
        x = self.stem(x)
        y = torch.relu(self.a(x) + self.short(x))
        return self.fc(y.mean(dim=2))


class Decoder(nn.Module):
    """A conv-transpose decoder: a latent through a Linear to 32 x 4 x 4, up to 3 x 16 x 16."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(10, 32 * 4 * 4)
        self.up1 = nn.Sequential(nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1),
                                 nn.BatchNorm2d(16), nn.ReLU())
        self.up2 = nn.ConvTranspose2d(16, 16, 3, stride=2, padding=1, output_padding=1,
                                      groups=16, bias=False)  # depthwise
        self.up3 = nn.ConvTranspose2d(16, 8, 3, stride=1, padding=1, groups=2)
        self.out = nn.ConvTranspose2d(8, 3, 2, stride=3, dilation=2, padding=(2, 1))

    def forward(self, z):
        y = self.up1(self.fc(z).reshape(-1, 32, 4, 4))
        return torch.sigmoid(self.out(torch.relu(self.up3(torch.relu(self.up2(y))))))


class Upsample1d(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.ConvTranspose1d(6, 4, 5, stride=3, padding=2, output_padding=2)
        self.conv = nn.Conv1d(4, 4, 3, padding=1)

    def forward(self, x):
        return self.conv(torch.relu(self.up(x)))


class Conv3dNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Conv3d(3, 8, 3, stride=(2, 1, 1), padding=1)
        self.bn = nn.BatchNorm3d(8)
        self.b = nn.Conv3d(8, 4, (2, 3, 3), dilation=(2, 1, 1), groups=2)

    def forward(self, x):
        return self.b(torch.relu(self.bn(self.a(x))))


MODELS = {  # name: (module, input shape, ops the program must hold)
    "conv1d_bn_relu": (ConvBnRelu1d, (1, 6, 33), {"conv2d", "depthwise_conv2d"}),
    "tc_resnet_block": (TcResBlock, (1, 40, 49), {"conv2d", "add", "fully_connected"}),
    "convT_decoder": (Decoder, (1, 10), {"conv_transpose2d", "fully_connected"}),
    "convT1d": (Upsample1d, (1, 6, 11), {"conv_transpose2d", "conv2d"}),
    "conv3d": (Conv3dNet, (1, 3, 7, 6, 5), {"conv2d"}),
}


def _model(name):
    torch.manual_seed(7)
    cls, shape, _ = MODELS[name]
    model = cls().eval()
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
    return model, [torch.randn(*shape) for _ in range(8)]


@pytest.mark.parametrize("name", MODELS)
def test_end_to_end_within_one_lsb(name):
    from test_pipeline import compile_and_compare

    model, cal = _model(name)
    program, ours, theirs = compile_and_compare(model, cal[0], cal)
    diff = np.abs(ours - theirs)
    within = float(np.mean(diff <= 1))
    print(f"{name}: {within:.2%} within 1 LSB, worst {diff.max()}")
    assert within >= 0.99 and diff.max() <= 2
    names = {op.name for op in program.program.ops}
    assert MODELS[name][2] <= names, names
    assert "norm" not in names  # every BatchNorm folded into its conv
    qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal)
    for r in layer_by_layer(qmodel, (cal[1],)):
        assert r["within_1lsb"] >= 0.99, r
    ins = program.quantize_inputs([cal[2]])
    np.testing.assert_array_equal(crt.run_host(program, ins)[0], program.run_int8(ins)[0])


def test_batchnorm1d_folds_into_conv1d():
    model = nn.Sequential(nn.Conv1d(4, 8, 3), nn.BatchNorm1d(8), nn.ReLU()).eval()
    model[1].running_var.uniform_(0.5, 2)
    x = torch.randn(1, 4, 16)
    program = mcutorch.compile(mcutorch.quantize(model, (x,), calibration=[x]), (x,))
    assert [op.name for op in program.program.ops] == ["transpose", "conv2d", "transpose"]


@pytest.mark.parametrize("conv,shape", [
    (nn.ConvTranspose2d(4, 6, 4, stride=2, padding=1, bias=False), (1, 4, 6, 6)),
    (nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2), (1, 4, 5, 5)),
    (nn.ConvTranspose1d(4, 6, 5, stride=3, padding=2, groups=2), (1, 4, 9))],
    ids=["convT2d", "convT2d_groups", "convT1d_groups"])
def test_batchnorm_folds_into_transposed_convs(conv, shape):
    """A BatchNorm after a transposed conv scales the weight's output channels (dim 1 of
    [I, O/g, k...], per group): one conv_transpose2d, no depthwise 1x1 conv after it."""
    from mcutorch.frontend.capture import capture

    torch.manual_seed(5)
    bn = (nn.BatchNorm2d if len(shape) == 4 else nn.BatchNorm1d)(6)
    bn.running_mean.uniform_(-0.5, 0.5)
    bn.running_var.uniform_(0.5, 2.0)
    bn.weight.data.uniform_(-1.5, 1.5)
    bn.bias.data.uniform_(-0.5, 0.5)
    model = nn.Sequential(conv, bn, nn.ReLU()).eval()
    cal = [torch.randn(*shape) for _ in range(4)]
    gm = capture(model, (cal[0],))
    calls = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
    assert not any("batch_norm" in c for c in calls), calls
    torch.testing.assert_close(gm(cal[1]), model(cal[1]), rtol=1e-5, atol=1e-5)
    program = mcutorch.compile(mcutorch.quantize(model, (cal[0],), calibration=cal), (cal[0],))
    names = [op.name for op in program.program.ops]
    assert names.count("conv_transpose2d") == 1 and "depthwise_conv2d" not in names, names
    ins = program.quantize_inputs([cal[2]])
    np.testing.assert_array_equal(crt.run_host(program, ins)[0], program.run_int8(ins)[0])


def test_conv1d_chain_stays_channels_last():
    """Consecutive 1-D convs read each other's [N, C, 1, L] tensors: no transposes between."""
    model = nn.Sequential(nn.Conv1d(4, 8, 3), nn.ReLU(), nn.Conv1d(8, 8, 3, groups=8),
                          nn.Conv1d(8, 4, 1)).eval()
    x = torch.randn(1, 4, 20)
    program = mcutorch.compile(mcutorch.quantize(model, (x,), calibration=[x]), (x,))
    assert [op.name for op in program.program.ops] == [
        "transpose", "conv2d", "depthwise_conv2d", "conv2d", "transpose"]


@pytest.mark.parametrize("name", ["convT_decoder", "convT1d", "conv1d_bn_relu"])
def test_tosa_reference_model_agrees(name):
    from mcutorch.backends import tosa

    model, cal = _model(name)
    qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal)
    tosa.verify_program_graph(build_graph(qmodel))


def test_conv_transpose_per_tensor_weights():
    """groups > 1 quantizes the transposed weight per tensor (axis 1 would share scales across
    groups); with per_channel=False every transposed conv does."""
    from test_pipeline import compile_and_compare

    torch.manual_seed(3)
    model = nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2).eval()
    x = torch.randn(1, 4, 5, 5)
    _, ours, theirs = compile_and_compare(model, x, [torch.randn(1, 4, 5, 5) for _ in range(4)])
    assert np.abs(ours - theirs).max() <= 1


def test_conv3d_rank_other_than_5_is_refused():
    class Bad(nn.Module):
        def forward(self, x):
            return nn.functional.conv3d(x, torch.ones(2, 3, 1, 1, 1))

    x = torch.randn(3, 4, 4, 4)  # unbatched 4-D input
    with pytest.raises(UnsupportedOpError, match="conv3d"):
        mcutorch.quantize(Bad(), (x,), calibration=[x])


@pytest.mark.parametrize("target", ["cortex-m55+ethos-u55-128", "cortex-m55+ethos-u85-256"])
def test_conv_transpose_on_ethos_u(target):
    """Vela 5.2 takes the decoder's transposed convs (stride 2, 1, 3 with dilation 1); the U55
    stride rule (backends/ethos_u/constraints.py) keeps stride 3 on the CPU there, checked on
    both sides of the limit; the program computes what the CPU-only one does."""
    torch.manual_seed(4)
    model = nn.Sequential(nn.ConvTranspose2d(8, 8, 4, stride=2, padding=1), nn.ReLU(),
                          nn.ConvTranspose2d(8, 4, 3, stride=1, padding=1), nn.ReLU(),
                          nn.ConvTranspose2d(4, 4, 3, stride=3)).eval()
    cal = [torch.randn(1, 8, 4, 4) for _ in range(4)]
    qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal)
    npu = mcutorch.compile(qmodel, (cal[0],), target=target)
    rows = [r for r in npu.program.metadata["placement"] if r["op"] == "conv_transpose2d"]
    want = ["NPU", "NPU", "CPU" if "u55" in target else "NPU"]
    assert [r["on"] for r in rows] == want, rows
    cpu = mcutorch.compile(qmodel, (cal[0],), target="cortex-m55")
    assert torch.equal(npu.run(cal[1]), cpu.run(cal[1]))
