"""Reference int8 kernels: the executable definition of every op in mcutorch.ops.

`KERNELS[name](*inputs, **attrs) -> np.ndarray` for every op except "delegate":
  - inputs are numpy arrays in the op's operand order (ops.OPS[...].inputs; concat takes any
    number), with exact dtypes: activations and weights int8, bias/mult/shift/exp_table int32;
  - attrs are keyword-only Python ints named exactly as ops.OPS[...].attrs;
  - the output (int8) has the shape implied by the inputs and attrs.
Arguments outside an op's domain (docs/numerics.md) raise ValueError. Kernels use integers only;
C kernels and TOSA lowerings must reproduce them bit for bit.
"""
from __future__ import annotations

from mcutorch.ref.conv import conv2d, depthwise_conv2d, fold_bias, fully_connected, fully_connected_folded
from mcutorch.ref.elementwise import add, clamp, lut, make_lut, mul, rescale
from mcutorch.ref.movement import concat, concat_attrs, copy, pad, pad_attrs, transpose, transpose_attrs
from mcutorch.ref.pool import avg_pool2d, max_pool2d
from mcutorch.ref.softmax import softmax, softmax_exp_table

KERNELS = {
    "conv2d": conv2d,
    "depthwise_conv2d": depthwise_conv2d,
    "fully_connected": fully_connected,
    "add": add,
    "mul": mul,
    "max_pool2d": max_pool2d,
    "avg_pool2d": avg_pool2d,
    "clamp": clamp,
    "lut": lut,
    "rescale": rescale,
    "softmax": softmax,
    "transpose": transpose,
    "concat": concat,
    "pad": pad,
    "copy": copy,
}

# (op, variant) -> kernel for the variants whose operands differ from "ref" (ops.py variants);
# a variant not listed here runs the op's KERNELS entry.
VARIANTS = {
    ("fully_connected", "folded"): fully_connected_folded,
}


def kernel_for(op: str, variant: str = "ref"):
    """The reference kernel of (op, variant)."""
    return VARIANTS.get((op, variant), KERNELS[op])


__all__ = ["KERNELS", "VARIANTS", "kernel_for", "fold_bias", "make_lut", "softmax_exp_table", "transpose_attrs", "concat_attrs",
           "pad_attrs", *KERNELS]
