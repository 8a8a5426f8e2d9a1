"""MobileNetV2 (Sandler et al., 2018): inverted residuals with linear bottlenecks, ReLU6."""

from __future__ import annotations

import torch
from torch import nn

# (expansion t, output channels c, repeats n, first stride s) per stage, from the paper's Table 2
STAGES = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
          (6, 160, 3, 2), (6, 320, 1, 1)]


def make_divisible(value: float, divisor: int = 8) -> int:
    """Round a scaled channel count to the nearest multiple of `divisor`, never dropping more
    than 10% below `value` and never below `divisor`.

    >>> make_divisible(32 * 0.35), make_divisible(16 * 0.35), make_divisible(24 * 0.75)
    (16, 8, 24)
    """
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def _conv_bn_relu6(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1):
    return [nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout), nn.ReLU6(inplace=False)]


class InvertedResidual(nn.Module):
    """1x1 expand (skipped when t=1) -> 3x3 depthwise -> 1x1 linear projection; the input is
    added back when stride is 1 and the channel count is unchanged."""

    def __init__(self, cin: int, cout: int, stride: int, expansion: int):
        super().__init__()
        hidden = cin * expansion
        layers = _conv_bn_relu6(cin, hidden, 1) if expansion != 1 else []
        layers += _conv_bn_relu6(hidden, hidden, 3, stride, groups=hidden)
        layers += [nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.block(x) if self.residual else self.block(x)


class MobileNetV2(nn.Module):
    """MobileNetV2 classifier: [N,3,R,R] -> num_classes logits (no softmax).

    Channels scale with `width` and are rounded to multiples of 8; the last conv has 1280
    channels, scaled only when width > 1. Symmetric padding, as in PyTorch's usual form.
    """

    def __init__(self, width: float = 1.0, resolution: int = 224, num_classes: int = 1000,
                 dropout: float = 0.2):
        super().__init__()
        self.input_shape = (1, 3, resolution, resolution)
        self.input_range = (-1.0, 1.0)
        cin = make_divisible(32 * width)
        self.last_channels = make_divisible(1280 * max(1.0, width))
        layers: list[nn.Module] = _conv_bn_relu6(3, cin, 3, 2)
        for t, c, n, s in STAGES:
            cout = make_divisible(c * width)
            for i in range(n):
                layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        layers += _conv_bn_relu6(cin, self.last_channels, 1)
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(self.last_channels, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = torch.flatten(self.pool(self.features(x)), 1)
        return self.classifier(self.dropout(x))


def mobilenet_v2(width: float = 1.0, resolution: int = 224, num_classes: int = 1000,
                 **kwargs) -> MobileNetV2:
    """MobileNetV2 at a width multiplier and input resolution (randomly initialised).

    >>> m = mobilenet_v2(width=0.35, resolution=96, num_classes=2).eval()
    >>> m.input_shape, m(torch.zeros(m.input_shape)).shape
    ((1, 3, 96, 96), torch.Size([1, 2]))
    """
    return MobileNetV2(width, resolution, num_classes, **kwargs)
