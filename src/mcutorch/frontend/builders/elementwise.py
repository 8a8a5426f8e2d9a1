"""Lift builders of element-wise ops: add/mul/maximum/minimum of two int8 tensors (numpy
broadcasting), clamps,
and every function of one tensor as a 256-entry `lut` (the registry's Source.fn).

Each builder is called as builder(lifter, fx node, output IR tensor, act) and emits IR nodes
through `lifter.emit` (frontend/lift.py Lifter)."""
from __future__ import annotations

import functools

from torch.fx import Node as FxNode

from mcutorch import ops
from mcutorch.errors import UnsupportedOpError
from mcutorch.frontend.builders._common import A, act_range, bounds, node_arg
from mcutorch.frontend.capture import source_of
from mcutorch.ir import Tensor, compose_act
from mcutorch.ref.elementwise import broadcast_shape


def broadcast_operands(lf, n: FxNode, out: Tensor, args=None) -> tuple[Tensor, Tensor]:
    """The two int8 operands of a binary element-wise op, numpy-broadcastable to the output.
    A 4-D output's operand of lower rank gets its leading unit dims made explicit (a reshape;
    a constant's data), so that the layout pass turns it NHWC with the output ([C, 1, 1] ->
    [1, 1, 1, C])."""
    a, b = (lf.operand(v, n) for v in (args or n.args[:2]))
    try:
        shape = broadcast_shape(a.shape, b.shape, str(n.target))
    except ValueError as e:
        raise UnsupportedOpError(f"{source_of(n)}: {e}") from None
    if shape != out.shape:
        raise UnsupportedOpError(f"{source_of(n)}: {list(a.shape)} with {list(b.shape)} "
                                 f"broadcasts to {list(shape)}, not to {list(out.shape)}")
    if len(out.shape) != 4 and 4 in (len(a.shape), len(b.shape)):  # NHWC, but y is not
        raise UnsupportedOpError(f"{source_of(n)}: a 4-D operand (stored NHWC) broadcast to the "
                                 f"{len(out.shape)}-D {list(out.shape)}; mcutorch broadcasts 4-D "
                                 "tensors into 4-D outputs only")
    return tuple(_rank4(lf, n, t) if len(out.shape) == 4 else t for t in (a, b))


def _rank4(lf, n: FxNode, t: Tensor) -> Tensor:
    if len(t.shape) == 4:
        return t
    shape = (1,) * (4 - len(t.shape)) + t.shape
    if t.is_const:
        return lf.new_tensor(t.name + "_4d", shape, t.scale, t.zero_point, dtype=t.dtype,
                             data=t.data.reshape(shape))
    t4 = lf.new_tensor(t.name + "_4d", shape, t.scale, t.zero_point, dtype=t.dtype,
                       layout="NCHW")
    lf.emit("reshape", [t], t4, {}, n)
    return t4


def binary(lf, n: FxNode, out: Tensor, act) -> None:
    if not all(isinstance(v, FxNode) for v in n.args[:2]):  # x + 1, x * 0.5: a function of x
        return lut(lf, n, out, act)
    op = ops.SOURCES[str(n.target)][0].name
    if op in ("mul", "div"):
        return lf.emit(op, list(broadcast_operands(lf, n, out)), out, {"act": act}, n)
    # add, sub: x + alpha * y, x - alpha * y; rsub(y, x) = x - alpha * y
    args = n.args[1::-1] if n.target == A.rsub.Tensor else n.args[:2]
    alpha = node_arg(n, 2, "alpha", 1)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or alpha == 0:
        raise UnsupportedOpError(f"{source_of(n)}: {op} with alpha={alpha!r}; mcutorch takes a "
                                 "nonzero constant number")
    if alpha < 0:  # x + (-2) * y == x - 2 * y
        op, alpha = {"add": "sub", "sub": "add"}[op], -alpha
    attrs = {"act": act, **({"alpha": float(alpha)} if alpha != 1 else {})}
    lf.emit(op, list(broadcast_operands(lf, n, out, args)), out, attrs, n)


def activation(lf, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    act = compose_act(act_range(bounds(n), out.scale, out.zero_point, out.dtype), act)
    lf.emit("rescale", [x], out, {"act": act}, n)


def lut(lf, n: FxNode, out: Tensor, act) -> None:
    x, fn = lut_function(n)
    lf.emit("lut", [lf.operand(x, n)], out, {"fn": fn, "act": act}, n)


def lut_function(n: FxNode):
    """(the tensor argument, the float64 function of it) of a node lifted as a `lut`: the
    registry's Source.fn with the node's constant arguments bound, read by aten schema name
    (schema defaults for the ones left out); a tensor where fn needs a constant is refused."""
    src = ops.SOURCES[str(n.target)][1]
    values = {}
    for i, a in enumerate(n.target._schema.arguments):
        if i < len(n.args):
            values[a.name] = n.args[i]
        elif a.name in n.kwargs:
            values[a.name] = n.kwargs[a.name]
        elif a.has_default_value():
            values[a.name] = a.default_value
    kw = {name: values[name] for name in src.args}
    for name, v in kw.items():
        if not (v is None or isinstance(v, (bool, int, float, str))):
            what = f"the tensor {v.name}" if isinstance(v, FxNode) else type(v).__name__
            raise UnsupportedOpError(
                f"{source_of(n)}: its {name} is {what}; mcutorch computes this op as a "
                f"256-entry table of one int8 tensor, so {name} must be a constant number (of "
                "two tensors it computes add, sub, mul, div, maximum and minimum)")
    return values[src.operand], functools.partial(src.fn, **kw) if kw else src.fn


def minmax(lf, n: FxNode, out: Tensor, act) -> None:
    a, b = broadcast_operands(lf, n, out)
    lf.emit(ops.SOURCES[str(n.target)][0].name, [a, b], out, {"act": act}, n)


# registry op name -> builder; ACT: the builders that apply `act` (the output clamp)
BUILDERS = {"add": binary, "sub": binary, "mul": binary, "div": binary, "clamp": activation,
            "lut": lut, "maximum": minmax, "minimum": minmax}
ACT = {binary, activation, lut, minmax}
PRECHECK = {lut: lut_function}  # a tensor where a constant is needed (x - y, x / y)
