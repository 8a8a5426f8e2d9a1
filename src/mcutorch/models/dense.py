"""Dense-output models of the zoo: a U-Net, a YOLO-style detector, a BlazeFace-style face
detector and a convolutional autoencoder. Weights are random from `seed`; inputs NCHW."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from mcutorch.models.vision import conv_bn, init_weights, seeded


# ----------------------------------------------------------------------------- U-Net

def double_conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(conv_bn(cin, cout, 3), conv_bn(cout, cout, 3))


class UNet(nn.Module):
    """U-Net (Ronneberger et al., 2015) at MCU size: per level two 3x3 conv -> BN -> ReLU, 2x2
    max pool down; up by a 2x2/2 transposed conv, concatenated with the level's skip, two convs;
    1x1 conv to the class logits at full resolution."""

    def __init__(self, resolution: int = 64, in_channels: int = 3, num_classes: int = 2,
                 widths=(8, 16, 32, 64)):
        super().__init__()
        self.input_shape = (1, in_channels, resolution, resolution)
        self.input_range = (-1.0, 1.0)
        self.down = nn.ModuleList()
        cin = in_channels
        for w in widths:
            self.down.append(double_conv(cin, w))
            cin = w
        self.pool = nn.MaxPool2d(2)
        self.up = nn.ModuleList()
        self.merge = nn.ModuleList()
        for w in reversed(widths[:-1]):
            self.up.append(nn.ConvTranspose2d(cin, w, 2, 2))
            self.merge.append(double_conv(2 * w, w))
            cin = w
        self.head = nn.Conv2d(cin, num_classes, 1)

    def forward(self, x):
        skips = []
        for i, block in enumerate(self.down):
            x = block(x if i == 0 else self.pool(x))
            skips.append(x)
        for up, merge, skip in zip(self.up, self.merge, reversed(skips[:-1])):
            x = merge(torch.cat([up(x), skip], dim=1))
        return self.head(x)


def unet(resolution: int = 64, num_classes: int = 2, seed: int = 0) -> UNet:
    """U-Net 64x64x3 -> [N, 2, 64, 64] mask logits, levels of 8/16/32/64 channels.

    >>> unet().eval()(torch.zeros(1, 3, 64, 64)).shape
    torch.Size([1, 2, 64, 64])
    """
    return seeded(seed, lambda: init_weights(UNet(resolution, num_classes=num_classes)))


# ----------------------------------------------------------------------------- YOLO-style

class TinyYOLO(nn.Module):
    """A YOLOv3-tiny-style detector: a stride-2 conv backbone, a head on the stride-16 map, and
    a second head on the stride-8 map fed by the deeper features upsampled 2x (nearest) and
    concatenated with the stride-8 features. Each head: 1x1 conv to anchors * (5 + classes),
    sigmoid, reshaped to [N, anchors * H * W, 5 + classes] (box x, y, w, h, objectness, class
    scores per anchor and cell, YOLOv5's all-sigmoid decoding input)."""

    def __init__(self, resolution: int = 96, num_classes: int = 1, anchors: int = 3):
        super().__init__()
        self.input_shape = (1, 3, resolution, resolution)
        self.input_range = (0.0, 1.0)
        self.anchors, self.outputs = anchors, 5 + num_classes
        act = nn.LeakyReLU
        self.stem = nn.Sequential(conv_bn(3, 16, 3, 2, act=act), conv_bn(16, 32, 3, 2, act=act),
                                  conv_bn(32, 64, 3, 2, act=act))  # stride 8
        self.deep = nn.Sequential(conv_bn(64, 128, 3, 2, act=act), conv_bn(128, 64, 1, act=act),
                                  conv_bn(64, 128, 3, act=act))  # stride 16
        self.lateral = conv_bn(128, 32, 1, act=act)
        self.fine = conv_bn(64 + 32, 64, 3, act=act)
        self.head16 = nn.Conv2d(128, anchors * self.outputs, 1)
        self.head8 = nn.Conv2d(64, anchors * self.outputs, 1)

    def decode(self, y: torch.Tensor) -> torch.Tensor:
        n, _, h, w = y.shape
        y = y.reshape(n, self.anchors, self.outputs, h, w).permute(0, 1, 3, 4, 2)
        return torch.sigmoid(y).reshape(n, self.anchors * h * w, self.outputs)

    def forward(self, x):
        s8 = self.stem(x)
        s16 = self.deep(s8)
        up = F.interpolate(self.lateral(s16), scale_factor=2, mode="nearest")
        s8 = self.fine(torch.cat([up, s8], dim=1))
        return self.decode(self.head16(s16)), self.decode(self.head8(s8))


def tiny_yolo(resolution: int = 96, num_classes: int = 1, seed: int = 0) -> TinyYOLO:
    """YOLO-style 1-class detector on 96x96: outputs [N, 108, 6] (6x6) and [N, 432, 6] (12x12).

    >>> [y.shape for y in tiny_yolo().eval()(torch.zeros(1, 3, 96, 96))]
    [torch.Size([1, 108, 6]), torch.Size([1, 432, 6])]
    """
    return seeded(seed, lambda: init_weights(TinyYOLO(resolution, num_classes)))


# ----------------------------------------------------------------------------- BlazeFace-style

class BlazeBlock(nn.Module):
    """Single: 5x5 depthwise -> 1x1 conv. Double: 5x5 depthwise -> 1x1 to `mid` -> ReLU -> 5x5
    depthwise -> 1x1 to `cout`. Added to the shortcut (2x2 max pool when strided, channels
    zero-padded when widened), then ReLU."""

    def __init__(self, cin: int, cout: int, stride: int = 1, mid: int | None = None):
        super().__init__()
        layers = [conv_bn(cin, cin, 5, stride, groups=cin, act=None)]
        if mid is None:
            layers.append(conv_bn(cin, cout, 1, act=None))
        else:
            layers += [conv_bn(cin, mid, 1), conv_bn(mid, mid, 5, groups=mid, act=None),
                       conv_bn(mid, cout, 1, act=None)]
        self.branch = nn.Sequential(*layers)
        self.pool = nn.MaxPool2d(2) if stride == 2 else None
        self.extra = cout - cin
        self.relu = nn.ReLU()

    def forward(self, x):
        skip = x if self.pool is None else self.pool(x)
        if self.extra:
            skip = F.pad(skip, (0, 0, 0, 0, 0, self.extra))  # zero channels appended
        return self.relu(skip + self.branch(x))


# BlazeFace front model (Bazarevsky et al., 2019, Table 4): (output channels, stride, double
# block's middle channels or None) of the blocks after the 5x5/2 24-channel stem
BLAZE_BLOCKS = [(24, 1, None), (28, 1, None), (32, 2, None), (36, 1, None), (42, 1, None),
                (48, 2, None), (56, 1, None), (64, 1, None), (72, 1, None), (80, 1, None),
                (88, 1, None), (96, 2, 24), (96, 1, 24), (96, 1, 24), (96, 1, 24), (96, 1, 24)]


class BlazeFace(nn.Module):
    """BlazeFace-style detector, 128x128: stem, BlazeBlocks down to 16x16x88 (2 anchors per cell)
    and 8x8x96 (6 anchors); per anchor a face score and 16 box/keypoint regressors. Outputs
    scores [N, 896, 1] and boxes [N, 896, 16] (16x16x2 + 8x8x6 = 896 anchors)."""

    def __init__(self, resolution: int = 128, anchors=(2, 6), coords: int = 16):
        super().__init__()
        self.input_shape = (1, 3, resolution, resolution)
        self.input_range = (-1.0, 1.0)
        self.coords = coords
        layers: list[nn.Module] = [conv_bn(3, 24, 5, 2)]
        cin = 24
        for cout, stride, mid in BLAZE_BLOCKS:
            layers.append(BlazeBlock(cin, cout, stride, mid))
            cin = cout
        split = next(i for i, (_, s, m) in enumerate(BLAZE_BLOCKS) if m is not None) + 1
        self.backbone16 = nn.Sequential(*layers[:split])
        self.backbone8 = nn.Sequential(*layers[split:])
        self.score16, self.score8 = nn.Conv2d(88, anchors[0], 1), nn.Conv2d(96, anchors[1], 1)
        self.box16 = nn.Conv2d(88, anchors[0] * coords, 1)
        self.box8 = nn.Conv2d(96, anchors[1] * coords, 1)

    @staticmethod
    def flat(y: torch.Tensor, per_anchor: int) -> torch.Tensor:
        n = y.shape[0]
        return y.permute(0, 2, 3, 1).reshape(n, -1, per_anchor)

    def forward(self, x):
        f16 = self.backbone16(x)
        f8 = self.backbone8(f16)
        scores = torch.cat([self.flat(self.score16(f16), 1), self.flat(self.score8(f8), 1)], 1)
        boxes = torch.cat([self.flat(self.box16(f16), self.coords),
                           self.flat(self.box8(f8), self.coords)], 1)
        return scores, boxes


def blazeface(resolution: int = 128, seed: int = 0) -> BlazeFace:
    """BlazeFace-style face detector on 128x128x3.

    >>> [y.shape for y in blazeface().eval()(torch.zeros(1, 3, 128, 128))]
    [torch.Size([1, 896, 1]), torch.Size([1, 896, 16])]
    """
    return seeded(seed, lambda: init_weights(BlazeFace(resolution)))


# ----------------------------------------------------------------------------- autoencoder

class ConvAutoencoder(nn.Module):
    """32x32x1 -> three 3x3/2 conv -> BN -> ReLU (16/32/64 channels, 4x4) -> three 4x4/2
    transposed convs back to 32x32 (BN + ReLU between, sigmoid at the end)."""

    def __init__(self, resolution: int = 32, channels: int = 1, widths=(16, 32, 64)):
        super().__init__()
        self.input_shape = (1, channels, resolution, resolution)
        self.input_range = (0.0, 1.0)
        enc: list[nn.Module] = []
        cin = channels
        for w in widths:
            enc.append(conv_bn(cin, w, 3, 2))
            cin = w
        self.encoder = nn.Sequential(*enc)
        dec: list[nn.Module] = []
        for w in [*reversed(widths[:-1]), channels]:
            dec.append(nn.ConvTranspose2d(cin, w, 4, 2, 1, bias=w == channels))
            dec += [nn.BatchNorm2d(w), nn.ReLU()] if w != channels else [nn.Sigmoid()]
            cin = w
        self.decoder = nn.Sequential(*dec)

    def forward(self, x):
        return self.decoder(self.encoder(x))


def conv_autoencoder(resolution: int = 32, seed: int = 0) -> ConvAutoencoder:
    """Convolutional autoencoder 32x32x1 -> 32x32x1.

    >>> conv_autoencoder().eval()(torch.zeros(1, 1, 32, 32)).shape
    torch.Size([1, 1, 32, 32])
    """
    return seeded(seed, lambda: init_weights(ConvAutoencoder(resolution)))
