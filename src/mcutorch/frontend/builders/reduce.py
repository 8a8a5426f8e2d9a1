"""Lift builders of reductions: sum, mean, amax/amin (and max/min of every element) over any
dims of a rank 1..6 tensor, with or without keepdim.

Each builder is called as builder(lifter, fx node, output IR tensor, act) and emits IR nodes
through `lifter.emit` (frontend/lift.py Lifter). The IR op keeps the input's rank (reduced dims
1, bit mask `axes` over torch's dims: passes/layout.py renumbers it for NHWC); keepdim=False is
a reshape after it. The mean over H, W of [N, C, H, W] and the mean of every element stay the
avg_pool2d they always were (frontend/builders/pool.py); other means are a reduce_sum whose
multiplier holds 1/count (passes/requant.py)."""
from __future__ import annotations

import math
import operator

from torch.fx import GraphModule, Node as FxNode

from mcutorch.errors import UnsupportedOpError
from mcutorch.frontend.builders import pool
from mcutorch.frontend.builders._common import A, node_arg
from mcutorch.frontend.capture import source_of
from mcutorch.ir import Tensor
from mcutorch.ref.reduce import MAX_COUNT, MAX_RANK

WHOLE = {A.sum.default, A.mean.default, A.max.default, A.min.default, A.var.default,
         A.std.default}  # every element, no dim
VALUES = {A.max.dim: A.amax.default, A.min.dim: A.amin.default}  # (values, indices) -> values


def max_values(gm: GraphModule) -> None:
    """Before PT2E: max/min(x, dim, keepdim) whose values alone are used become amax/amin(x,
    [dim], keepdim); its int64 indices (argmax) are refused, naming the node."""
    for n in [n for n in gm.graph.nodes if n.op == "call_function" and n.target in VALUES]:
        items = list(n.users)
        if any(u.target is not operator.getitem or (u.args[1] != 0 and u.users) for u in items):
            raise UnsupportedOpError(
                f"{source_of(n)}: its indices output (an int64 argmax) is used; mcutorch "
                "programs compute quantized real numbers: use amax/amin, or take the argmax of "
                "the program's output on the host")
        with gm.graph.inserting_before(n):
            values = gm.graph.call_function(VALUES[n.target], (n.args[0], [n.args[1]],
                                                               bool(node_arg(n, 2, "keepdim"))))
        values.meta.update(n.meta)
        for u in items:
            if u.args[1] == 0:
                values.meta["val"] = u.meta["val"]
                u.replace_all_uses_with(values)
            gm.graph.erase_node(u)
        gm.graph.erase_node(n)


def reduced(n: FxNode, rank: int) -> tuple[list[int], bool]:
    """(sorted reduced dims, keepdim) of a reduction node; dim None or [] reduces every dim."""
    if n.target in WHOLE:
        return list(range(rank)), False
    dim = node_arg(n, 1, "dim", None)
    dims = [dim] if isinstance(dim, int) else list(dim or range(rank))
    if any(not -rank <= d < rank for d in dims) or not rank:
        raise UnsupportedOpError(f"{source_of(n)}: dims {dim} of a {rank}-D tensor")
    at = 3 if n.target in (A.var.dim, A.std.dim) else 2  # var/std.dim: (x, dim, unbiased, keepdim)
    return sorted({d % rank for d in dims}), bool(node_arg(n, at, "keepdim", False))


def _emit(lf, n: FxNode, op: str, x: Tensor, out: Tensor, act, **attrs) -> None:
    rank = len(x.shape)
    dims, keepdim = reduced(n, rank)
    if not 1 <= rank <= MAX_RANK:
        raise UnsupportedOpError(f"{source_of(n)}: {op} of a {rank}-D tensor (ranks 1..6)")
    count = math.prod(x.shape[d] for d in dims)
    if op in ("reduce_sum", "reduce_var") and count > MAX_COUNT:
        raise UnsupportedOpError(f"{source_of(n)}: a sum over {count} elements; mcutorch sums "
                                 "at most 2^23 (the int32 accumulator stays exact)")
    if count == 0:
        raise UnsupportedOpError(f"{source_of(n)}: a reduction over an empty tensor")
    shape = tuple(1 if i in dims else d for i, d in enumerate(x.shape))
    y = out if tuple(out.shape) == shape else lf.new_tensor(
        out.name + "_keep", shape, out.scale, out.zero_point, dtype=out.dtype,
        layout="NCHW" if rank == 4 else None)
    axes = sum(1 << d for d in dims)
    lf.emit(op, [x], y, {"axes": axes, "act": act, **attrs}, n)
    if y is not out:  # keepdim=False
        lf.emit("reshape", [y], out, {}, n)


def reduce_sum(lf, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    if n.target in (A.mean.dim, A.mean.default):
        dims, _ = reduced(n, len(x.shape))
        if dims == list(range(len(x.shape))) or (len(x.shape) == 4 and dims == [2, 3]):
            return pool.global_pool(lf, n, out, act)
        count = math.prod(x.shape[d] for d in dims)
        return _emit(lf, n, "reduce_sum", x, out, act, divide=count)
    _emit(lf, n, "reduce_sum", x, out, act, divide=1)


def reduce_max(lf, n: FxNode, out: Tensor, act) -> None:
    _emit(lf, n, "reduce_max", lf.operand(n.args[0], n), out, act)


def reduce_min(lf, n: FxNode, out: Tensor, act) -> None:
    _emit(lf, n, "reduce_min", lf.operand(n.args[0], n), out, act)


def correction(n: FxNode) -> float:
    """The divisor's correction of var/std (n - correction): 1 unless unbiased=False or given."""
    if n.target in (A.var.correction, A.std.correction):
        c = n.kwargs.get("correction")
        return 1.0 if c is None else float(c)
    at = 1 if n.target in (A.var.default, A.std.default) else 2
    return 1.0 if node_arg(n, at, "unbiased", True) else 0.0


def reduce_var(lf, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    dims, _ = reduced(n, len(x.shape))
    count, c = math.prod(x.shape[d] for d in dims), correction(n)
    if count - c <= 0:
        raise UnsupportedOpError(f"{source_of(n)}: var/std of {count} elements with correction "
                                 f"{c:g} divides by {count - c:g}")
    root = int(n.target in (A.std.correction, A.std.dim, A.std.default))
    _emit(lf, n, "reduce_var", x, out, act, root=root, correction=c)


# registry op name -> builder; ACT: the builders that apply `act` (the output clamp)
BUILDERS = {"reduce_sum": reduce_sum, "reduce_max": reduce_max, "reduce_min": reduce_min,
            "reduce_var": reduce_var}
ACT = {reduce_sum, reduce_max, reduce_min, reduce_var}
