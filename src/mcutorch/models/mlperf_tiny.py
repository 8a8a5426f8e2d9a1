"""The five MLPerf Tiny reference networks in trainable PyTorch form.

Each network mirrors the layer order, kernels, strides, channels, padding and activations of the
reference int8 `.tflite` it was converted to, written the way it is trained: Conv -> BatchNorm ->
ReLU (the tflite files hold the BatchNorm folded into the conv biases). Inputs are NCHW.
TensorFlow "SAME" padding is reproduced exactly: the conv's own `padding=` when it is symmetric,
an explicit `nn.ZeroPad2d` before an unpadded conv when it is not (stride-2 convs on even sizes
pad only bottom/right).

Every model carries `input_shape` (the float NCHW / NC shape its forward takes, batch 1) and
`input_range` (the float range the reference model's int8 input covers).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.modules.utils import _pair


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """Zero padding (before, after) that TensorFlow "SAME" adds along one axis.

    >>> same_padding(96, 3, 2), same_padding(49, 10, 2), same_padding(25, 3, 1)
    ((0, 1), (4, 5), (1, 1))
    """
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def same_conv(cin: int, cout: int, kernel, stride, in_hw: tuple[int, int], *, groups: int = 1,
              bias: bool = True) -> tuple[list[nn.Module], tuple[int, int]]:
    """A "SAME"-padded `nn.Conv2d` for an `in_hw` input: ([ZeroPad2d,] Conv2d), output (H, W).

    >>> layers, hw = same_conv(3, 8, 3, 2, (96, 96))
    >>> layers[0].padding, hw
    ((0, 1, 0, 1), (48, 48))
    """
    (kh, kw), (sh, sw) = _pair(kernel), _pair(stride)
    (top, bottom), (left, right) = same_padding(in_hw[0], kh, sh), same_padding(in_hw[1], kw, sw)
    out_hw = (-(-in_hw[0] // sh), -(-in_hw[1] // sw))
    if top == bottom and left == right:
        return [nn.Conv2d(cin, cout, (kh, kw), (sh, sw), (top, left), groups=groups,
                          bias=bias)], out_hw
    return [nn.ZeroPad2d((left, right, top, bottom)),
            nn.Conv2d(cin, cout, (kh, kw), (sh, sw), 0, groups=groups, bias=bias)], out_hw


def _conv_bn_relu(cin, cout, kernel, stride, in_hw, groups=1):
    layers, hw = same_conv(cin, cout, kernel, stride, in_hw, groups=groups)
    return layers + [nn.BatchNorm2d(cout), nn.ReLU(inplace=False)], hw


def _range(scale: float, zero_point: int) -> tuple[float, float]:
    """Float range an int8 tensor with these qparams covers."""
    return (scale * (-128 - zero_point), scale * (127 - zero_point))


class DSCNNKWS(nn.Module):
    """DS-CNN keyword spotting: MFCC [N,1,49,10] -> 12 class probabilities (ends in softmax)."""

    def __init__(self, num_classes: int = 12, filters: int = 64):
        super().__init__()
        self.input_shape = (1, 1, 49, 10)
        self.input_range = _range(0.5847029, 83)
        layers, hw = _conv_bn_relu(1, filters, (10, 4), 2, self.input_shape[2:])
        layers.append(nn.Dropout(0.2))
        for _ in range(4):
            dw, hw = _conv_bn_relu(filters, filters, 3, 1, hw, groups=filters)
            pw, hw = _conv_bn_relu(filters, filters, 1, 1, hw)
            layers += dw + pw
        layers += [nn.Dropout(0.4), nn.AvgPool2d(hw)]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(filters, num_classes)
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        return self.softmax(self.classifier(torch.flatten(self.features(x), 1)))


class MobileNetV1VWW(nn.Module):
    """MobileNetV1 (width 0.25) visual wake words: RGB [N,3,96,96] in 0..1 -> 2 probabilities."""

    # (output channels at width 1.0, stride) of the depthwise-separable blocks
    BLOCKS = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 + [
        (1024, 2), (1024, 1)]

    def __init__(self, num_classes: int = 2, width: float = 0.25, resolution: int = 96):
        super().__init__()
        self.input_shape = (1, 3, resolution, resolution)
        self.input_range = _range(1 / 255, -128)
        cin = int(32 * width)
        layers, hw = _conv_bn_relu(3, cin, 3, 2, (resolution, resolution))
        for channels, stride in self.BLOCKS:
            cout = int(channels * width)
            dw, hw = _conv_bn_relu(cin, cin, 3, stride, hw, groups=cin)
            pw, hw = _conv_bn_relu(cin, cout, 1, 1, hw)
            layers += dw + pw
            cin = cout
        layers.append(nn.AvgPool2d(hw))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(cin, num_classes)
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        return self.softmax(self.classifier(torch.flatten(self.features(x), 1)))


class ResidualStack(nn.Module):
    """ResNet-8 stack: relu(shortcut(x) + bn(conv(relu(bn(conv(x)))))); 1x1 conv shortcut (no
    BatchNorm) when the shape changes."""

    def __init__(self, cin: int, cout: int, stride: int, in_hw: tuple[int, int]):
        super().__init__()
        first, hw = _conv_bn_relu(cin, cout, 3, stride, in_hw)
        second, self.out_hw = same_conv(cout, cout, 3, 1, hw)
        self.branch = nn.Sequential(*first, *second, nn.BatchNorm2d(cout))
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(*same_conv(cin, cout, 1, stride, in_hw)[0])
        self.relu = nn.ReLU(inplace=False)

    def forward(self, x):
        skip = x if self.shortcut is None else self.shortcut(x)
        return self.relu(skip + self.branch(x))


class ResNet8(nn.Module):
    """ResNet-8 CIFAR-10 classifier: RGB [N,3,32,32] in raw 0..255 pixels -> 10 probabilities."""

    def __init__(self, num_classes: int = 10, filters: int = 16):
        super().__init__()
        self.input_shape = (1, 3, 32, 32)
        self.input_range = _range(1.0, -128)
        stem, hw = _conv_bn_relu(3, filters, 3, 1, (32, 32))
        self.stem = nn.Sequential(*stem)
        self.stack1 = ResidualStack(filters, filters, 1, hw)
        self.stack2 = ResidualStack(filters, 2 * filters, 2, self.stack1.out_hw)
        self.stack3 = ResidualStack(2 * filters, 4 * filters, 2, self.stack2.out_hw)
        self.pool = nn.AvgPool2d(self.stack3.out_hw)
        self.classifier = nn.Linear(4 * filters, num_classes)
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        x = self.stack3(self.stack2(self.stack1(self.stem(x))))
        return self.softmax(self.classifier(torch.flatten(self.pool(x), 1)))


class FCAutoencoder(nn.Module):
    """Anomaly-detection autoencoder: [N,640] log-mel windows -> [N,640] reconstruction.

    Dense 640->128->128->128->128->8->128->128->128->128 (each Linear -> BatchNorm -> ReLU),
    then a plain Linear 128->640. No softmax.
    """

    def __init__(self, dim: int = 640, hidden: int = 128, bottleneck: int = 8):
        super().__init__()
        self.input_shape = (1, dim)
        self.input_range = _range(0.39101523, 89)
        sizes = [dim] + [hidden] * 4 + [bottleneck] + [hidden] * 4
        layers: list[nn.Module] = []
        for a, b in zip(sizes, sizes[1:]):
            layers += [nn.Linear(a, b), nn.BatchNorm1d(b), nn.ReLU(inplace=False)]
        layers.append(nn.Linear(hidden, dim))
        self.layers = nn.Sequential(*layers)

    def forward(self, x):
        return self.layers(x)


class DSCNNSWW(nn.Module):
    """1-D DS-CNN streaming wake word, 30-frame non-streaming form: [N,40,30,1] -> 3 probabilities.

    Features are channels and time is H (tflite's NHWC [N,30,1,40] transposed to NCHW). Each
    block: depthwise (k,1) conv without bias or activation, 1x1 conv -> BatchNorm -> ReLU ->
    Dropout, all "VALID", so the time axis shrinks 30 -> 28 -> 24 -> 15 -> 1.
    """

    def __init__(self, num_classes: int = 3, features: int = 40, frames: int = 30,
                 filters=(128, 128, 128, 32), kernels=(3, 5, 10, 15), dropout: float = 0.2):
        super().__init__()
        self.input_shape = (1, features, frames, 1)
        self.input_range = _range(0.00370104, -128)
        layers: list[nn.Module] = []
        cin = features
        for cout, k in zip(filters, kernels):
            layers += [nn.Conv2d(cin, cin, (k, 1), groups=cin, bias=False), nn.Conv2d(cin, cout, 1),
                       nn.BatchNorm2d(cout), nn.ReLU(inplace=False), nn.Dropout(dropout)]
            cin, frames = cout, frames - k + 1
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(cin * frames, num_classes)
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        return self.softmax(self.classifier(torch.flatten(self.features(x), 1)))


class DSCNNSWWStreaming(DSCNNSWW):
    """The streaming form of DSCNNSWW (MLPerf Tiny v1.3): one 40-value frame [N,40,1,1] per call.

    The same layers (so `load_tflite_weights` fills it from the 30-frame model's .tflite); in
    front of each depthwise (k,1) conv a history buffer of the last k-1 frames of its input
    (2, 4, 9 and 14 frames), a registered buffer the forward updates: the conv reads the history
    and the new frame, then the history keeps the newest k-1 frames. After 30 frames from zero
    histories (`reset_state`), the output is the 30-frame model's on those frames; before, the
    zeros stand for frames not seen yet.
    """

    def __init__(self, num_classes: int = 3, features: int = 40, filters=(128, 128, 128, 32),
                 kernels=(3, 5, 10, 15), dropout: float = 0.2):
        super().__init__(num_classes, features, sum(k - 1 for k in kernels) + 1, filters,
                         kernels, dropout)
        self.input_shape = (1, features, 1, 1)
        self.kernels = tuple(kernels)
        for k, (cin, kern) in enumerate(zip((features, *filters[:-1]), kernels)):
            self.register_buffer(f"hist{k}", torch.zeros(1, cin, kern - 1, 1))

    def reset_state(self) -> None:
        for k in range(len(self.kernels)):
            getattr(self, f"hist{k}").zero_()

    def forward(self, x):
        layers = list(self.features)
        for k in range(len(self.kernels)):
            hist = getattr(self, f"hist{k}")
            window = torch.cat([hist, x], 2)  # the last k frames of this block's input
            hist.copy_(window[:, :, 1:])
            for layer in layers[5 * k:5 * k + 5]:
                window = layer(window)
            x = window
        return self.softmax(self.classifier(torch.flatten(x, 1)))


def ds_cnn_kws(**kwargs) -> DSCNNKWS:
    """MLPerf Tiny keyword spotting DS-CNN (input [1,1,49,10], softmax over 12 classes).

    >>> ds_cnn_kws()(torch.zeros(1, 1, 49, 10)).shape
    torch.Size([1, 12])
    """
    return DSCNNKWS(**kwargs)


def mobilenet_v1_vww(**kwargs) -> MobileNetV1VWW:
    """MLPerf Tiny visual wake words MobileNetV1 0.25 (input [1,3,96,96], softmax over 2).

    >>> mobilenet_v1_vww()(torch.zeros(1, 3, 96, 96)).shape
    torch.Size([1, 2])
    """
    return MobileNetV1VWW(**kwargs)


def resnet8(**kwargs) -> ResNet8:
    """MLPerf Tiny image classification ResNet-8 (input [1,3,32,32], softmax over 10).

    >>> resnet8()(torch.zeros(1, 3, 32, 32)).shape
    torch.Size([1, 10])
    """
    return ResNet8(**kwargs)


def fc_autoencoder(**kwargs) -> FCAutoencoder:
    """MLPerf Tiny anomaly detection FC autoencoder (input [1,640], output [1,640]).

    >>> fc_autoencoder().eval()(torch.zeros(1, 640)).shape
    torch.Size([1, 640])
    """
    return FCAutoencoder(**kwargs)


def ds_cnn_sww(**kwargs) -> DSCNNSWW:
    """MLPerf Tiny streaming wake word 1-D DS-CNN (input [1,40,30,1], softmax over 3).

    >>> ds_cnn_sww().eval()(torch.zeros(1, 40, 30, 1)).shape
    torch.Size([1, 3])
    """
    return DSCNNSWW(**kwargs)


def ds_cnn_sww_streaming(**kwargs) -> DSCNNSWWStreaming:
    """MLPerf Tiny streaming wake word, streaming form: one frame [1,40,1,1] per call, four
    history buffers (2, 4, 9, 14 frames) kept as the program's persistent tensors.

    >>> m = ds_cnn_sww_streaming().eval()
    >>> [m(torch.zeros(1, 40, 1, 1)) for _ in range(30)][-1].shape
    torch.Size([1, 3])
    """
    return DSCNNSWWStreaming(**kwargs)
