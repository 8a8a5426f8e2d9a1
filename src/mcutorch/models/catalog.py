"""Models by name, their reference `.tflite` files, and example inputs."""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from mcutorch.errors import McutorchError
from mcutorch.models.mlperf_tiny import (ds_cnn_kws, ds_cnn_sww, fc_autoencoder, mobilenet_v1_vww,
                                         resnet8)
from mcutorch.models.mobilenet_v2 import mobilenet_v2
from mcutorch.models.zoo import ZOO

MODELS: dict[str, Callable[..., nn.Module]] = {
    "ds_cnn_kws": ds_cnn_kws,
    "mobilenet_v1_vww": mobilenet_v1_vww,
    "resnet8": resnet8,
    "fc_autoencoder": fc_autoencoder,
    "ds_cnn_sww": ds_cnn_sww,
    "mobilenet_v2": mobilenet_v2,
    **{name: entry.builder for name, entry in ZOO.items()},  # the model zoo (models/zoo.py)
}
# MLPerf Tiny task name -> model name
ALIASES = {"kws": "ds_cnn_kws", "vww": "mobilenet_v1_vww", "ic": "resnet8", "ad": "fc_autoencoder",
           "sww": "ds_cnn_sww"}
# model name -> reference int8 model file in the MLPerf Tiny data folder
REFERENCE_TFLITE = {
    "ds_cnn_kws": "kws_ref_model.tflite",
    "mobilenet_v1_vww": "vww_96_int8.tflite",
    "resnet8": "pretrainedResnet_quant.tflite",
    "fc_autoencoder": "ad01_int8.tflite",
    "ds_cnn_sww": "str_ww_ref_model.tflite",
}


def build(name: str, **kwargs) -> nn.Module:
    """A model by name ("resnet8", ...) or MLPerf Tiny task ("kws", "vww", "ic", "ad", "sww").

    >>> build("ic").input_shape
    (1, 3, 32, 32)
    """
    key = ALIASES.get(name, name)
    if key not in MODELS:
        raise McutorchError(f"unknown model {name!r}; known: {sorted(MODELS) + sorted(ALIASES)}")
    return MODELS[key](**kwargs)


def example_input(model: str | nn.Module, batch: int = 1, seed: int = 0) -> torch.Tensor:
    """A reproducible float input for a model (instance or name): uniform over the model's
    `input_range`, shaped like its `input_shape` with the batch size replaced.

    >>> example_input("kws").shape
    torch.Size([1, 1, 49, 10])
    """
    if isinstance(model, str):
        model = build(model)
    shape, (lo, hi) = model.input_shape, getattr(model, "input_range", (-1.0, 1.0))
    gen = torch.Generator().manual_seed(seed)
    return lo + (hi - lo) * torch.rand((batch, *shape[1:]), generator=gen)
