"""The model zoo: our own PyTorch definitions of published MCU-class architectures, random
seeded weights, with their input and output shapes, parameter and MAC counts, and the figures
their papers publish.

>>> entry = ZOO["tc_resnet8"]
>>> entry.input_shape, entry.output_shapes
((1, 40, 49), ((1, 12),))

Published figures are for the configuration the paper reports (mostly ImageNet: 224x224,
1000 classes); `published_check` builds our network in exactly that configuration and compares,
so the layer lists are checked against the papers. Our catalog configuration (e.g. 96x96, 10
classes) is then measured, never extrapolated; the `scale` text says how the figure relates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from torch import nn

from mcutorch.models.counting import Cost, Published, cost
from mcutorch.models.dense import blazeface, conv_autoencoder, tiny_yolo, unet
from mcutorch.models.temporal import har_cnn, tc_resnet8
from mcutorch.models.vision import mbconv_net, mobilenet_v3_small, shufflenet_v2, squeezenet1_1

RES2 = "conv MACs scale with the pixel count, (R/224)^2; the classifier's with the classes"


@dataclass(frozen=True)
class ZooEntry:
    builder: Callable[..., nn.Module]
    input_shape: tuple[int, ...]
    output_shapes: tuple[tuple[int, ...], ...]
    published: Published | None
    summary: str


ZOO: dict[str, ZooEntry] = {
    "mobilenet_v3_small": ZooEntry(
        mobilenet_v3_small, (1, 3, 96, 96), ((1, 10),),
        Published({"resolution": 224, "num_classes": 1000}, 2.5e6, 56e6,
                  "Howard et al., Searching for MobileNetV3, ICCV 2019, Table 3 (V3-Small 1.0: "
                  "2.5 M params, 56 M MAdds at 224x224, 1000 classes)", RES2),
        "MobileNetV3-Small 1.0, hardswish, SE with hardsigmoid"),
    "mbconv_net": ZooEntry(
        mbconv_net, (1, 3, 96, 96), ((1, 10),),
        Published({"variant": "b0", "resolution": 224, "num_classes": 1000}, 5.3e6, 0.39e9,
                  "Tan & Le, EfficientNet, ICML 2019, Table 2 (B0: 5.3 M params, 0.39 B FLOPs, "
                  "counted as multiply-adds, at 224x224): our MBConv block in B0's layer table; "
                  "no published figure for the MCU-sized table, ours only", RES2),
        "MBConv net, kernels 3/5/7, expansion 3/6, SE, SiLU (MCUNet-style sizes)"),
    "shufflenet_v2": ZooEntry(
        shufflenet_v2, (1, 3, 96, 96), ((1, 10),),
        Published({"resolution": 224, "num_classes": 1000}, 1.4e6, 41e6,
                  "Ma et al., ShuffleNet V2, ECCV 2018, Table 5 (0.5x: 1.4 M params, 41 M "
                  "FLOPs, counted as multiply-adds, at 224x224)", RES2),
        "ShuffleNetV2 0.5x, chunk + channel shuffle"),
    "squeezenet1_1": ZooEntry(
        squeezenet1_1, (1, 3, 96, 96), ((1, 10),),
        Published({"resolution": 224, "num_classes": 1000}, 1.24e6, 0.35e9,
                  "Iandola et al., SqueezeNet (1.0: 1.25 M params); v1.1 per the DeepScale "
                  "release notes: 2.4x less computation than 1.0, same accuracy; torchvision's "
                  "table: 1.2 M params, 0.35 G multiply-adds at 224x224", RES2),
        "SqueezeNet 1.1, fire modules, ceil-mode max pool"),
    "tc_resnet8": ZooEntry(
        tc_resnet8, (1, 40, 49), ((1, 12),),
        Published({"frames": 98}, 66e3, 1.5e6,
                  "Choi et al., Temporal Convolution for Real-time Keyword Spotting, "
                  "Interspeech 2019, Table 1 (TC-ResNet8: 66 K params, 3.0 M FLOPs = 1.5 M "
                  "MACs at 2 FLOPs per MAC; 40 MFCC x 98 frames, 1 s at a 10 ms hop, assumed)",
                  "MACs scale with the frames: ours at 49 frames is about half"),
        "TC-ResNet8 keyword spotting, 40 MFCC x 49 frames, Conv1d"),
    "har_cnn": ZooEntry(har_cnn, (1, 9, 128), ((1, 6),), None,
                        "1-D CNN activity recognition, 9-axis IMU x 128 samples, 6 classes "
                        "(our own layer list; no published figure, ours only)"),
    "unet": ZooEntry(unet, (1, 3, 64, 64), ((1, 2, 64, 64),), None,
                     "U-Net, 4 levels of 8/16/32/64 channels, ConvTranspose2d up, skips "
                     "concatenated (no published figure at this size, ours only)"),
    "tiny_yolo": ZooEntry(tiny_yolo, (1, 3, 96, 96), ((1, 108, 6), (1, 432, 6)), None,
                          "YOLO-style detector, 1 class, heads at 6x6 and 12x12, nearest "
                          "upsample + concat, sigmoid heads (no published figure, ours only)"),
    "blazeface": ZooEntry(blazeface, (1, 3, 128, 128), ((1, 896, 1), (1, 896, 16)), None,
                          "BlazeFace-style, 5x5 depthwise, channel padding, max-pool shortcut "
                          "(the paper gives no params/MACs, ours only)"),
    "conv_autoencoder": ZooEntry(conv_autoencoder, (1, 1, 32, 32), ((1, 1, 32, 32),), None,
                                 "convolutional autoencoder, ConvTranspose2d decoder (no "
                                 "published figure, ours only)"),
}


def zoo_cost(name: str, **kwargs) -> Cost:
    """Params and MACs of a zoo model in its catalog configuration (or with `kwargs`)."""
    return cost(ZOO[name].builder(**kwargs))


def published_check(name: str) -> tuple[Cost, Published] | None:
    """Our counts for the model built in the published configuration, and the published figure
    (None where there is none)."""
    pub = ZOO[name].published
    return None if pub is None else (zoo_cost(name, **pub.kwargs), pub)
