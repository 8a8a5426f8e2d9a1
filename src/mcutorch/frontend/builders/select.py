"""Lift builders of comparisons and selection: `compare` (gt/ge/lt/le/eq/ne of two int8
tensors, or of one and a constant number) makes a uint8 0/1 mask; `where` / `masked_fill` pick
between two int8 values by a mask (computed, or a constant bool tensor), numpy broadcasting of
all three operands.

A comparison is lifted where its mask is used: its bool output has no quantize node (the
quantizer leaves it unobserved, rule "compare"), so `mask_of` lifts it when a where reads it.
A comparison with a constant number c is a threshold on the int8 codes of the tensor: the
decision PyTorch's fake-quant model makes, float32(dequantize(q)) KIND float32(c), is computed
for all 256 codes at compile time; it is monotone in q, so it is one comparison of q with an
int8 constant T (docs/numerics.md, compare)."""
from __future__ import annotations

import math

import numpy as np
from torch.fx import Node as FxNode

from mcutorch import ops
from mcutorch.errors import UnsupportedOpError
from mcutorch.frontend.builders._common import A
from mcutorch.frontend.builders.elementwise import _rank4
from mcutorch.frontend.capture import source_of
from mcutorch.ir import Tensor
from mcutorch.quant import dequantize, quantize
from mcutorch.ref.elementwise import COMPARE_KINDS, broadcast_shape3

CODES = np.arange(-128, 128)
MASKED_FILL = A.masked_fill.Scalar
COMPARE_SOURCES = {s.aten for s in ops.get("compare").sources}
WHERE_SOURCES = {s.aten for s in ops.get("where").sources}


def _kind(n: FxNode) -> str:
    return str(n.target).split(".")[1]


def _threshold(kind: str, x: Tensor, c) -> tuple[str, int]:
    """(kind', T) with  dq(q) KIND c  ==  q KIND' T  for every int8 code q (dq in float32)."""
    real = dequantize(CODES, x.scale, x.zero_point)
    truth = getattr(np, {"eq": "equal", "ne": "not_equal", "gt": "greater", "ge":
                         "greater_equal", "lt": "less", "le": "less_equal"}[kind])(
        real, np.float32(c))
    hits = CODES[truth]
    if kind in ("gt", "ge"):  # false ... false true ... true
        return ("ge", int(hits[0])) if hits.size else ("gt", 127)
    if kind in ("lt", "le"):  # true ... true false ... false
        return ("le", int(hits[-1])) if hits.size else ("lt", -128)
    if kind == "eq":  # at most one code: distinct codes dequantize to distinct float32 values
        return ("eq", int(hits[0])) if hits.size == 1 else ("gt", 127)
    misses = CODES[~truth]
    return ("ne", int(misses[0])) if misses.size == 1 else ("ge", -128)


def _constant(lf, name: str, value: int, like: Tensor, rank: int, dtype="int8") -> Tensor:
    data = np.full((1,) * max(rank, 1), value, dtype)
    return lf.new_tensor(name, data.shape, like.scale, like.zero_point, dtype=dtype, data=data)


def _to_rank(lf, n: FxNode, t: Tensor, out_shape) -> Tensor:
    if len(out_shape) != 4 and len(t.shape) == 4:
        raise UnsupportedOpError(f"{source_of(n)}: a 4-D operand (stored NHWC) broadcast to the "
                                 f"{len(out_shape)}-D {list(out_shape)}; mcutorch broadcasts 4-D "
                                 "tensors into 4-D outputs only")
    return _rank4(lf, n, t) if len(out_shape) == 4 else t


def compare_mask(lf, n: FxNode) -> Tensor:
    """The uint8 0/1 mask of a comparison node (lifted once; the node counts as lifted)."""
    if n in lf.values:
        return lf.values[n]
    kind, (a_arg, b_arg) = _kind(n), n.args[:2]
    shape = tuple(n.meta["val"].shape)
    a = lf.operand(a_arg, n)
    if isinstance(b_arg, FxNode):
        b = lf.operand(b_arg, n)
    else:
        if isinstance(b_arg, bool) or not isinstance(b_arg, (int, float)):
            raise UnsupportedOpError(f"{source_of(n)}: compares with {b_arg!r}; mcutorch takes "
                                     "a tensor or a constant number")
        kind, value = _threshold(kind, a, b_arg)
        b = _constant(lf, f"{n.name}_threshold", value, a, len(shape))
    try:
        got = broadcast_shape3(a.shape, b.shape, (), str(n.target))
    except ValueError as e:
        raise UnsupportedOpError(f"{source_of(n)}: {e}") from None
    if got != shape:
        raise UnsupportedOpError(f"{source_of(n)}: broadcasts to {list(got)}, not {list(shape)}")
    a, b = (_to_rank(lf, n, t, shape) for t in (a, b))
    out = lf.new_tensor(n.name, shape, 1.0, 0, dtype="uint8",
                        layout="NCHW" if len(shape) == 4 else None)
    lf.emit("compare", [a, b], out, {"kind": COMPARE_KINDS.index(kind)}, n)
    lf.values[n] = out
    lf.used.add(n)
    lf.qnodes[out.name] = n.name  # layer_by_layer compares it with PyTorch's mask
    return out


def is_comparison(node) -> bool:
    """Whether an fx node is a comparison lifted as `compare` (aten gt/ge/lt/le/eq/ne)."""
    return (isinstance(node, FxNode) and node.op == "call_function"
            and str(node.target) in COMPARE_SOURCES)


def _mask_arg(node: FxNode):
    return node.args[1] if node.target == MASKED_FILL else node.args[0]


def mask_refusal(node: FxNode) -> str:
    """"" when a comparison's bool output is only the mask of where / masked_fill (lifted with
    it), else why it is out of scope (lift's check before calibration)."""
    users = [u for u in node.users
             if str(u.target) not in WHERE_SOURCES or _mask_arg(u) is not node]
    if not users:
        return ""
    what = "the model output" if users[0].op == "output" else users[0].format_node()
    return (f"its output is a torch.bool mask used by {what}: mcutorch takes "
            "comparisons only as the mask of torch.where / masked_fill (a mask is not a model "
            "output, nor the input of other ops)")


def mask_of(lf, arg, user: FxNode) -> Tensor:
    """The uint8 mask behind where's condition: a comparison, or a constant bool tensor."""
    if isinstance(arg, FxNode) and arg.op == "get_attr":
        if arg in lf.values:
            return lf.values[arg]
        data = lf._attr(arg).numpy()
        if data.dtype != np.bool_:
            raise UnsupportedOpError(f"{source_of(user)}: its mask {arg.target} is a {data.dtype} "
                                     "tensor; mcutorch takes a bool mask")
        t = lf.new_tensor(str(arg.target).replace(".", "_"), data.shape, 1.0, 0, dtype="uint8",
                          data=data.astype(np.uint8))
        lf.values[arg] = t
        return t
    if is_comparison(arg):
        return compare_mask(lf, arg)
    what = arg.format_node() if isinstance(arg, FxNode) else repr(arg)
    raise UnsupportedOpError(f"{source_of(user)}: its mask is {what}; mcutorch computes masks "
                             "of one comparison (gt, ge, lt, le, eq, ne) or takes a constant "
                             "bool tensor")


def _value(lf, arg, n: FxNode, out: Tensor, rank: int, which: str) -> Tensor:
    if isinstance(arg, FxNode):
        return lf.operand(arg, n)
    if isinstance(arg, bool) or not isinstance(arg, (int, float)) or math.isnan(arg):
        raise UnsupportedOpError(f"{source_of(n)}: its {which} value is {arg!r}; mcutorch takes "
                                 "a tensor or a constant number (not NaN)")
    # the scalar in y's qparams, as the fake-quant model quantizes it: -inf saturates to -128
    # (an int16 y: to -32767)
    code = int(quantize(np.float32(arg), out.scale, out.zero_point, dtype=out.dtype))
    return _constant(lf, f"{out.name}_{which}", code, out, rank, out.dtype)


def where(lf, n: FxNode, out: Tensor, act) -> None:
    if n.target == MASKED_FILL:  # masked_fill(x, mask, value) == where(mask, value, x)
        cond, a_arg, b_arg = n.args[1], n.args[2], n.args[0]
    else:
        cond, a_arg, b_arg = n.args[:3]
    rank = len(out.shape)
    mask = mask_of(lf, cond, n)
    a = _value(lf, a_arg, n, out, rank, "a")
    b = _value(lf, b_arg, n, out, rank, "b")
    try:
        got = broadcast_shape3(mask.shape, a.shape, b.shape, str(n.target))
    except ValueError as e:
        raise UnsupportedOpError(f"{source_of(n)}: {e}") from None
    if got != out.shape:
        raise UnsupportedOpError(f"{source_of(n)}: broadcasts to {list(got)}, not "
                                 f"{list(out.shape)}")
    mask, a, b = (_to_rank(lf, n, t, out.shape) for t in (mask, a, b))
    lf.emit("where", [mask, a, b], out, {}, n)


def compare(lf, n: FxNode, out: Tensor, act) -> None:
    raise UnsupportedOpError(f"{source_of(n)}: a comparison's bool mask is quantized; mcutorch "
                             "takes masks in torch.where / masked_fill only")


# registry op name -> builder; compare is lifted by the where reading its mask (compare_mask)
BUILDERS = {"compare": compare, "where": where}
ACT: set = set()
