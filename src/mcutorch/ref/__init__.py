"""Reference int8 kernels: the executable definition of every op of the registry (mcutorch.ops).

`KERNELS[name](*inputs, **attrs) -> np.ndarray` for every op except "delegate":
  - inputs are numpy arrays in the op's operand order (ops.OPS[...].inputs; concat takes any
    number), with exact dtypes: activations and weights int8, bias/mult/shift/exp_table int32;
  - attrs are keyword-only Python ints named exactly as ops.OPS[...].attrs;
  - the output (int8) has the shape implied by the inputs and attrs.
Arguments outside an op's domain (docs/numerics.md) raise ValueError. Kernels use integers only;
C kernels and TOSA lowerings must reproduce them bit for bit.
"""
from __future__ import annotations

from mcutorch import ops
from mcutorch.ref import conv, elementwise, movement, pool, recurrent, reduce, softmax
from mcutorch.ref.conv import fold_bias, fully_connected_folded
from mcutorch.ref.elementwise import make_lut, make_lut16, rescale_to
from mcutorch.ref.movement import (concat_attrs, gather_attrs, pad_attrs, slice_attrs,
                                   transpose_attrs)
from mcutorch.ref.softmax import softmax_exp_table

# The definition of op X is the function X of the module of its kernel family (ops.OpDef.family).
FAMILY_MODULES = {"conv": conv, "elementwise": elementwise, "pool": pool, "softmax": softmax,
                  "movement": movement, "reduce": reduce, "recurrent": recurrent}
KERNELS = {op.name: getattr(FAMILY_MODULES[op.family], op.name) for op in ops.OPS
           if op.family}

# (op, variant) -> kernel for the variants whose operands differ from the default (ops
# variants); a variant not listed here runs the op's KERNELS entry.
VARIANTS = {
    ("fully_connected", "folded"): fully_connected_folded,
}


# Ops whose output can be larger than their inputs (its size follows from attributes or from
# several operands): the shape their kernel returns, from operand shapes and attributes alone,
# allocating nothing (ValueError outside the domain, as the kernel). An executor compares it with
# the program's output before running the kernel, so a hostile program cannot make the kernel
# allocate more than a few times the operands the program declares.
SHAPES = {
    "conv2d": conv.conv2d_shape,
    "conv2d_add": conv.conv2d_add_shape,
    "depthwise_conv2d": conv.depthwise_conv2d_shape,
    "fully_connected": conv.fully_connected_shape,
    "matmul": conv.matmul_shape,
    "max_pool2d": pool.pool_shape,
    "avg_pool2d": pool.pool_shape,
    "resize": pool.resize_shape,
    "pad": movement.pad_shape,
    "strided_slice": movement.strided_slice_shape,
    "gather": movement.gather_shape,
    "embedding": movement.embedding_shape,
}


def output_shape(op: str, inputs, attrs: dict) -> tuple | None:
    """The shape KERNELS[op](*inputs, **attrs) returns (every variant), computed without running
    it; None for ops whose output is no larger than their inputs (element-wise, softmax,
    transpose, concat, copy)."""
    fn = SHAPES.get(op)
    return None if fn is None else tuple(fn(*inputs, **attrs))


# Ops whose output may take any shape of their input's element count (a byte copy that is also
# a reshape); the kernel returns the input's shape and the executor stores the same bytes.
RESHAPING = frozenset({"copy"})


def kernel_for(op: str, variant: str = ops.DEFAULT_VARIANT):
    """The reference kernel of (op, variant)."""
    return VARIANTS.get((op, variant), KERNELS[op])


OUT_DTYPE_OPS = {"rescale": rescale_to}  # told their output's dtype (x does not imply it)

__all__ = ["KERNELS", "OUT_DTYPE_OPS", "RESHAPING", "SHAPES", "VARIANTS", "concat_attrs",
           "fold_bias",
           "gather_attrs", "kernel_for", "make_lut", "make_lut16", "output_shape", "pad_attrs",
           "slice_attrs", "softmax_exp_table", "transpose_attrs"]
