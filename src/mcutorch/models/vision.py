"""Image classifiers of the model zoo: MobileNetV3-Small, an MBConv (MCUNet / EfficientNet-style)
net, ShuffleNetV2 and SqueezeNet 1.1, each written from its paper's layer table.

Weights are random, drawn from `torch.manual_seed(seed)` inside a forked RNG (the caller's
global RNG is untouched), so a seed always gives the same network. Inputs are NCHW floats in
-1..1 (`input_shape`, `input_range`), outputs logits (no softmax).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from mcutorch.models.mobilenet_v2 import make_divisible


def seeded(seed: int, make):
    """`make()` under `torch.manual_seed(seed)` without touching the caller's RNG state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return make()


def init_weights(model: nn.Module) -> nn.Module:
    """He-normal convs, unit BatchNorm, small-normal linears: a trainable starting point whose
    activations stay in range through deep stacks (the calibration sees realistic ranges)."""
    for m in model.modules():
        if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.ConvTranspose1d, nn.ConvTranspose2d)):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0, 0.01)
            nn.init.zeros_(m.bias)
    return model


def conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1,
            act: type[nn.Module] | None = nn.ReLU) -> nn.Sequential:
    """Conv2d ("same" padding for odd kernels, no bias) -> BatchNorm2d [-> activation]."""
    layers = [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
              nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, *([act()] if act else []))


class SqueezeExcite(nn.Module):
    """x * gate(fc2(act(fc1(mean(x))))): 1x1 convs on the global average, a per-channel gate."""

    def __init__(self, channels: int, squeeze: int, act: type[nn.Module] = nn.ReLU,
                 gate: type[nn.Module] = nn.Hardsigmoid):
        super().__init__()
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.act = act()
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.gate = gate()

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * self.gate(self.fc2(self.act(self.fc1(s))))


# ----------------------------------------------------------------------------- MobileNetV3-Small

# Howard et al., "Searching for MobileNetV3" (ICCV 2019), Table 2: (kernel, expansion size,
# output channels, squeeze-excite, activation, stride) of each bneck
V3_SMALL = [(3, 16, 16, True, "RE", 2), (3, 72, 24, False, "RE", 2), (3, 88, 24, False, "RE", 1),
            (5, 96, 40, True, "HS", 2), (5, 240, 40, True, "HS", 1), (5, 240, 40, True, "HS", 1),
            (5, 120, 48, True, "HS", 1), (5, 144, 48, True, "HS", 1), (5, 288, 96, True, "HS", 2),
            (5, 576, 96, True, "HS", 1), (5, 576, 96, True, "HS", 1)]
ACTS = {"RE": nn.ReLU, "HS": nn.Hardswish}


class Bneck(nn.Module):
    """MobileNetV3 block: [1x1 expand] -> kxk depthwise -> [SE] -> 1x1 linear projection,
    with the input added back when the shape is unchanged."""

    def __init__(self, cin, kernel, hidden, cout, se, act, stride):
        super().__init__()
        act = ACTS[act]
        layers = [] if hidden == cin else [conv_bn(cin, hidden, 1, act=act)]
        layers.append(conv_bn(hidden, hidden, kernel, stride, groups=hidden, act=act))
        if se:
            layers.append(SqueezeExcite(hidden, make_divisible(hidden / 4)))
        layers.append(conv_bn(hidden, cout, 1, act=None))
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.block(x) if self.residual else self.block(x)


class MobileNetV3Small(nn.Module):
    """MobileNetV3-Small: 3x3/2 hardswish stem, 11 bnecks, 1x1 conv to 6x the last width,
    global average, Linear -> hardswish -> Linear (the paper's 1x1 "NBN" convs on a 1x1 map)."""

    def __init__(self, width: float = 1.0, resolution: int = 96, num_classes: int = 10,
                 dropout: float = 0.2):
        super().__init__()
        self.input_shape = (1, 3, resolution, resolution)
        self.input_range = (-1.0, 1.0)
        cin = make_divisible(16 * width)
        layers = [conv_bn(3, cin, 3, 2, act=nn.Hardswish)]
        for k, exp, c, se, act, s in V3_SMALL:
            cout = make_divisible(c * width)
            layers.append(Bneck(cin, k, make_divisible(exp * width), cout, se, act, s))
            cin = cout
        last = make_divisible(576 * width)
        layers.append(conv_bn(cin, last, 1, act=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(last, 1024), nn.Hardswish(), nn.Dropout(dropout),
                                        nn.Linear(1024, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


def mobilenet_v3_small(width: float = 1.0, resolution: int = 96, num_classes: int = 10,
                       seed: int = 0) -> MobileNetV3Small:
    """MobileNetV3-Small (random weights from `seed`).

    >>> mobilenet_v3_small().eval()(torch.zeros(1, 3, 96, 96)).shape
    torch.Size([1, 10])
    """
    return seeded(seed, lambda: init_weights(MobileNetV3Small(width, resolution, num_classes)))


# ----------------------------------------------------------------------------- MBConv network

# (expansion, kernel, stride, output channels, repeats) per stage. MCU-sized: kernels 3/5/7 and
# expansions 3/6 as in MCUNet's searched networks (Lin et al., NeurIPS 2020), the MBConv block
# (SE on a quarter of the block's input channels, SiLU) of EfficientNet (Tan & Le, ICML 2019).
MCU_STAGES = [(1, 3, 1, 8, 1), (3, 5, 2, 16, 2), (6, 7, 2, 24, 2), (3, 3, 2, 40, 3),
              (6, 5, 1, 48, 2), (6, 7, 2, 96, 3), (3, 3, 1, 160, 1)]
# EfficientNet-B0, Tan & Le Table 1 (stem 32, head 1280): the same block at its published size
B0_STAGES = [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
             (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]


class MBConv(nn.Module):
    """[1x1 expand, SiLU] -> kxk depthwise, SiLU -> SE (SiLU, sigmoid gate) -> 1x1 projection
    (linear), plus the input when the shape is unchanged."""

    def __init__(self, cin, cout, kernel, stride, expansion, se_ratio=0.25):
        super().__init__()
        hidden = cin * expansion
        layers = [] if expansion == 1 else [conv_bn(cin, hidden, 1, act=nn.SiLU)]
        layers += [conv_bn(hidden, hidden, kernel, stride, groups=hidden, act=nn.SiLU),
                   SqueezeExcite(hidden, max(1, int(cin * se_ratio)), nn.SiLU, nn.Sigmoid),
                   conv_bn(hidden, cout, 1, act=None)]
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.block(x) if self.residual else self.block(x)


class MBConvNet(nn.Module):
    """Stem 3x3/2 conv -> MBConv stages -> 1x1 head conv -> global average -> Linear."""

    def __init__(self, stages=MCU_STAGES, stem: int = 16, head: int = 320, resolution: int = 96,
                 num_classes: int = 10, dropout: float = 0.2):
        super().__init__()
        self.input_shape = (1, 3, resolution, resolution)
        self.input_range = (-1.0, 1.0)
        layers = [conv_bn(3, stem, 3, 2, act=nn.SiLU)]
        cin = stem
        for t, k, s, c, n in stages:
            for i in range(n):
                layers.append(MBConv(cin, c, k, s if i == 0 else 1, t))
                cin = c
        layers.append(conv_bn(cin, head, 1, act=nn.SiLU))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(head, num_classes)

    def forward(self, x):
        return self.classifier(self.dropout(torch.flatten(self.pool(self.features(x)), 1)))


def mbconv_net(variant: str = "mcu", resolution: int = 96, num_classes: int = 10,
               seed: int = 0) -> MBConvNet:
    """The MCU-sized MBConv net ("mcu", 96x96) or EfficientNet-B0's layer table ("b0").

    >>> mbconv_net().eval()(torch.zeros(1, 3, 96, 96)).shape
    torch.Size([1, 10])
    """
    kw = {"mcu": {"stages": MCU_STAGES, "stem": 16, "head": 320},
          "b0": {"stages": B0_STAGES, "stem": 32, "head": 1280}}[variant]
    return seeded(seed, lambda: init_weights(MBConvNet(**kw, resolution=resolution,
                                                       num_classes=num_classes)))


# ----------------------------------------------------------------------------- ShuffleNetV2

# Ma et al., "ShuffleNet V2" (ECCV 2018), Table 5: output channels of conv1, stages 2-4, conv5
SHUFFLE_WIDTHS = {0.5: (24, 48, 96, 192, 1024), 1.0: (24, 116, 232, 464, 1024),
                  1.5: (24, 176, 352, 704, 1024), 2.0: (24, 244, 488, 976, 2048)}
SHUFFLE_REPEATS = (4, 8, 4)


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    """[N, g*c, H, W] -> [N, c*g, H, W]: channel i*c + j moves to j*g + i."""
    n, ch, h, w = x.shape
    return x.reshape(n, groups, ch // groups, h, w).transpose(1, 2).reshape(n, ch, h, w)


class ShuffleUnit(nn.Module):
    """Stride 1: split channels in halves, transform one (1x1, 3x3 depthwise, 1x1), concat,
    shuffle. Stride 2: both branches see the whole input and downsample."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        half = cout // 2
        self.stride = stride
        if stride == 2:
            self.branch1 = nn.Sequential(conv_bn(cin, cin, 3, 2, groups=cin, act=None),
                                         conv_bn(cin, half, 1))
        into = cin if stride == 2 else half
        self.branch2 = nn.Sequential(conv_bn(into, half, 1),
                                     conv_bn(half, half, 3, stride, groups=half, act=None),
                                     conv_bn(half, half, 1))

    def forward(self, x):
        if self.stride == 1:
            a, b = x.chunk(2, dim=1)
            out = torch.cat([a, self.branch2(b)], dim=1)
        else:
            out = torch.cat([self.branch1(x), self.branch2(x)], dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    """conv1 3x3/2 -> max pool 3x3/2 -> stages 2-4 -> conv5 1x1 -> global average -> Linear."""

    def __init__(self, width: float = 0.5, resolution: int = 96, num_classes: int = 10):
        super().__init__()
        self.input_shape = (1, 3, resolution, resolution)
        self.input_range = (-1.0, 1.0)
        c1, *stages, c5 = SHUFFLE_WIDTHS[width]
        layers = [conv_bn(3, c1, 3, 2), nn.MaxPool2d(3, 2, 1)]
        cin = c1
        for cout, n in zip(stages, SHUFFLE_REPEATS):
            layers += [ShuffleUnit(cin, cout, 2)] + [ShuffleUnit(cout, cout, 1)
                                                     for _ in range(n - 1)]
            cin = cout
        layers.append(conv_bn(cin, c5, 1))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(c5, num_classes)

    def forward(self, x):
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


def shufflenet_v2(width: float = 0.5, resolution: int = 96, num_classes: int = 10,
                  seed: int = 0) -> ShuffleNetV2:
    """ShuffleNetV2 at a width (0.5x by default).

    >>> shufflenet_v2().eval()(torch.zeros(1, 3, 96, 96)).shape
    torch.Size([1, 10])
    """
    return seeded(seed, lambda: init_weights(ShuffleNetV2(width, resolution, num_classes)))


# ----------------------------------------------------------------------------- SqueezeNet 1.1

# (squeeze, expand 1x1, expand 3x3) of the fire modules; "M" is a 3x3/2 ceil-mode max pool.
# SqueezeNet v1.1 (Iandola et al.; the DeepScale release notes): 3x3/2 64-channel first conv,
# pools moved earlier than in v1.0 (after conv1, fire3, fire5)
SQUEEZE_11 = ["M", (16, 64, 64), (16, 64, 64), "M", (32, 128, 128), (32, 128, 128), "M",
              (48, 192, 192), (48, 192, 192), (64, 256, 256), (64, 256, 256)]


class Fire(nn.Module):
    """squeeze 1x1 + ReLU, then 1x1 and 3x3 expand convs (each + ReLU) concatenated."""

    def __init__(self, cin: int, squeeze: int, e1: int, e3: int):
        super().__init__()
        self.squeeze = nn.Sequential(nn.Conv2d(cin, squeeze, 1), nn.ReLU())
        self.expand1 = nn.Sequential(nn.Conv2d(squeeze, e1, 1), nn.ReLU())
        self.expand3 = nn.Sequential(nn.Conv2d(squeeze, e3, 3, padding=1), nn.ReLU())

    def forward(self, x):
        s = self.squeeze(x)
        return torch.cat([self.expand1(s), self.expand3(s)], dim=1)


class SqueezeNet11(nn.Module):
    """SqueezeNet 1.1 (no BatchNorm): conv 3x3/2 -> fires and ceil-mode pools -> dropout ->
    1x1 conv to the classes + ReLU -> global average."""

    def __init__(self, resolution: int = 96, num_classes: int = 10, dropout: float = 0.5):
        super().__init__()
        self.input_shape = (1, 3, resolution, resolution)
        self.input_range = (-1.0, 1.0)
        layers: list[nn.Module] = [nn.Conv2d(3, 64, 3, 2), nn.ReLU()]
        cin = 64
        for entry in SQUEEZE_11:
            if entry == "M":
                layers.append(nn.MaxPool2d(3, 2, ceil_mode=True))
            else:
                layers.append(Fire(cin, *entry))
                cin = entry[1] + entry[2]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Conv2d(cin, num_classes, 1),
                                        nn.ReLU(), nn.AdaptiveAvgPool2d(1))

    def forward(self, x):
        return torch.flatten(self.classifier(self.features(x)), 1)


def squeezenet1_1(resolution: int = 96, num_classes: int = 10, seed: int = 0) -> SqueezeNet11:
    """SqueezeNet 1.1.

    >>> squeezenet1_1().eval()(torch.zeros(1, 3, 96, 96)).shape
    torch.Size([1, 10])
    """
    def make():
        model = SqueezeNet11(resolution, num_classes)
        for m in model.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        return model
    return seeded(seed, make)
