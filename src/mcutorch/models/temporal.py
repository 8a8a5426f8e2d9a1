"""1-D signal models of the zoo: TC-ResNet8 (keywords) and a 1-D CNN for activity recognition.

Both take [N, channels, time] and use `nn.Conv1d`; weights are random from `seed`. The global
average over time is `x.mean(-1)` (the same numbers as `AdaptiveAvgPool1d(1)` + flatten; it
lowers to mcutorch's reduction, so conv1d is the only 1-D op these models need).
"""

from __future__ import annotations

from torch import nn

from mcutorch.models.vision import init_weights, seeded


def conv1d_bn(cin: int, cout: int, kernel: int, stride: int = 1, relu: bool = True):
    layers = [nn.Conv1d(cin, cout, kernel, stride, kernel // 2, bias=False), nn.BatchNorm1d(cout)]
    return nn.Sequential(*layers, *([nn.ReLU()] if relu else []))


class TCBlock(nn.Module):
    """TC-ResNet block: relu(shortcut(x) + bn(conv9(relu(bn(conv9/s(x)))))); the shortcut is a
    1x1/s conv -> BatchNorm -> ReLU when the shape changes, the identity otherwise."""

    def __init__(self, cin: int, cout: int, stride: int, kernel: int = 9):
        super().__init__()
        self.branch = nn.Sequential(conv1d_bn(cin, cout, kernel, stride),
                                    conv1d_bn(cout, cout, kernel, relu=False))
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv1d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm1d(cout), nn.ReLU())
        self.relu = nn.ReLU()

    def forward(self, x):
        skip = x if self.shortcut is None else self.shortcut(x)
        return self.relu(skip + self.branch(x))


class TCResNet8(nn.Module):
    """TC-ResNet8 (Choi et al., Interspeech 2019, Fig. 2): MFCC features as channels, time as the
    1-D axis. conv 3 (16k channels) -> 3 blocks of 9-tap convs, stride 2, 24k/32k/48k channels
    -> global average -> Linear -> softmax. k is the width multiplier (1 for TC-ResNet8)."""

    def __init__(self, mfcc: int = 40, frames: int = 49, num_classes: int = 12, k: float = 1.0):
        super().__init__()
        self.input_shape = (1, mfcc, frames)
        self.input_range = (-1.0, 1.0)
        widths = [int(c * k) for c in (16, 24, 32, 48)]
        self.stem = nn.Conv1d(mfcc, widths[0], 3, 1, 1, bias=False)
        self.blocks = nn.Sequential(*[TCBlock(a, b, 2) for a, b in zip(widths, widths[1:])])
        self.classifier = nn.Linear(widths[-1], num_classes)
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        return self.softmax(self.classifier(self.blocks(self.stem(x)).mean(-1)))


def tc_resnet8(mfcc: int = 40, frames: int = 49, num_classes: int = 12,
               seed: int = 0) -> TCResNet8:
    """TC-ResNet8 on [N, 40 MFCC, 49 frames] (12 keywords, softmax).

    >>> import torch
    >>> tc_resnet8().eval()(torch.zeros(1, 40, 49)).shape
    torch.Size([1, 12])
    """
    return seeded(seed, lambda: init_weights(TCResNet8(mfcc, frames, num_classes)))


class HARCNN(nn.Module):
    """Human activity recognition from a 128-sample window of 9 IMU channels (body acc, gyro,
    total acc x/y/z, as in UCI-HAR): four Conv1d -> BatchNorm -> ReLU layers (the last three
    stride 2), global average, Linear. Our own design; no published network is followed."""

    def __init__(self, channels: int = 9, samples: int = 128, num_classes: int = 6,
                 dropout: float = 0.3):
        super().__init__()
        self.input_shape = (1, channels, samples)
        self.input_range = (-1.0, 1.0)
        self.features = nn.Sequential(conv1d_bn(channels, 32, 5), conv1d_bn(32, 32, 5, 2),
                                      conv1d_bn(32, 64, 5, 2), conv1d_bn(64, 64, 3, 2))
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(64, num_classes)

    def forward(self, x):
        return self.classifier(self.dropout(self.features(x).mean(-1)))


def har_cnn(channels: int = 9, samples: int = 128, num_classes: int = 6,
            seed: int = 0) -> HARCNN:
    """1-D CNN for activity recognition on [N, 9, 128] (6 classes, logits).

    >>> import torch
    >>> har_cnn().eval()(torch.zeros(1, 9, 128)).shape
    torch.Size([1, 6])
    """
    return seeded(seed, lambda: init_weights(HARCNN(channels, samples, num_classes)))
