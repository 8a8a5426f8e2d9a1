"""Parameter and multiply-accumulate counts of a PyTorch module, and the figures papers publish.

MACs are counted with forward hooks on the layers that multiply a weight by an activation, as
the papers count "MAdds"/"FLOPs" for these networks:

- `Conv1d`/`Conv2d`/`Conv3d`: every output element costs `in_channels / groups * prod(kernel)`
  MACs (a bias add is not counted);
- `ConvTranspose1d/2d/3d`: every *input* element is scattered into `out_channels / groups *
  prod(kernel)` outputs, one MAC each, except the taps that land in the padding the layer
  crops (`padding`), which produce nothing (without padding: inputs x out/groups x kernel);
- `Linear`: every output element costs `in_features` MACs.

Pooling, BatchNorm (folded at compile time), activations, element-wise products (the
squeeze-excite gate) and additions are not counted. Parameters are every `nn.Parameter`
(BatchNorm's weight and bias included, its running statistics, which are buffers, not).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

CONV = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
CONV_T = (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)


@dataclass(frozen=True)
class Cost:
    params: int
    macs: int


def layer_macs(module: nn.Module, x: torch.Tensor, y: torch.Tensor) -> int:
    """MACs of one call of a conv / transposed conv / linear layer (0 for anything else)."""
    if isinstance(module, CONV):
        return y.numel() * module.in_channels // module.groups * math.prod(module.kernel_size)
    if isinstance(module, CONV_T):
        spatial = len(module.kernel_size)
        pairs = math.prod(
            _landing(x.shape[-spatial + a], y.shape[-spatial + a], module.kernel_size[a],
                     module.stride[a], module.dilation[a], module.padding[a])
            for a in range(spatial))
        batch_cin = x.numel() // math.prod(x.shape[-spatial:])
        return batch_cin * module.out_channels // module.groups * pairs
    if isinstance(module, nn.Linear):
        return y.numel() * module.in_features
    return 0


def _landing(size: int, out: int, kernel: int, stride: int, dilation: int, pad: int) -> int:
    """(input position i, tap k) pairs of one axis whose output i * stride - pad + k * dilation
    lies inside the `out` outputs."""
    return sum(0 <= i * stride - pad + k * dilation < out for i in range(size)
               for k in range(kernel))


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def count_macs(model: nn.Module, *inputs: torch.Tensor) -> int:
    """MACs of one forward pass on `inputs` (divided by the batch size), counted by hooks."""
    total = 0

    def hook(module, args, out):
        nonlocal total
        total += layer_macs(module, args[0], out)

    handles = [m.register_forward_hook(hook) for m in model.modules()
               if isinstance(m, (*CONV, *CONV_T, nn.Linear))]
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for h in handles:
            h.remove()
    return total // inputs[0].shape[0]


def cost(model: nn.Module, *inputs: torch.Tensor) -> Cost:
    """Parameters and MACs of a model on its input (its `example_input` when none is given).

    >>> from torch import nn
    >>> cost(nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.Flatten(), nn.Linear(8 * 16, 2)),
    ...      torch.zeros(1, 3, 4, 4))
    Cost(params=482, macs=3712)
    """
    if not inputs:
        from mcutorch.models.catalog import example_input
        inputs = (example_input(model),)
    was_training = model.training
    model.eval()
    try:
        return Cost(count_params(model), count_macs(model, *inputs))
    finally:
        model.train(was_training)


@dataclass(frozen=True)
class Published:
    """A published figure and the configuration it is for.

    `kwargs` builds our model in that configuration (so the figure is checked on the same
    network the paper describes); `params`/`macs` are the published values, `source` where they
    are from, `scale` how the MACs carry over to our catalog configuration.
    """

    kwargs: dict
    params: float
    macs: float
    source: str
    scale: str
