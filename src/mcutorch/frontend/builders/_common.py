"""What every lift builder shares: fx argument access and the int8 clamp of float bounds."""
from __future__ import annotations

import math

import numpy as np
import torch
from torch.fx import Node as FxNode

from mcutorch.quant import quantize as quantize_float

A = torch.ops.aten
ACT_BOUNDS = {A.relu.default: (0.0, math.inf), A.relu_.default: (0.0, math.inf),
              A.relu6.default: (0.0, 6.0)}
HARDTANH = {A.hardtanh.default, A.hardtanh_.default}
FULL = (-128, 127)


def node_arg(node: FxNode, i: int, name: str, default=None):
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def pair(v, n=2) -> tuple[int, ...]:
    return tuple(v) * (n // len(v)) if isinstance(v, (list, tuple)) else (int(v),) * n


def bounds(node: FxNode) -> tuple[float, float] | None:
    """Float clamp bounds of an activation node, or None if it is not one."""
    if node.target in ACT_BOUNDS:
        return ACT_BOUNDS[node.target]
    if node.target in HARDTANH:
        return (float(node_arg(node, 1, "min_val", -1.0)), float(node_arg(node, 2, "max_val", 1.0)))
    if node.target == A.clamp.default:
        lo, hi = node_arg(node, 1, "min", None), node_arg(node, 2, "max", None)
        return (-math.inf if lo is None else float(lo), math.inf if hi is None else float(hi))
    return None


def act_range(bounds, s: float, zp: int, dtype: str = "int8") -> tuple[int, int]:
    """The int8 clamp of float bounds: q(lo), q(hi) as PyTorch's quantize computes them
    (quantize is monotone, so q(clamp(v, lo, hi)) == clamp(q(v), q(lo), q(hi)) exactly)."""
    full = (-32767, 32767) if dtype == "int16" else FULL
    if bounds is None:
        return full
    lo, hi = bounds
    qlo = full[0] if lo == -math.inf else int(quantize_float(np.float32(lo), s, zp, dtype))
    qhi = full[1] if hi == math.inf else int(quantize_float(np.float32(hi), s, zp, dtype))
    return (qlo, qhi)
