"""Lift builders of matrix products between two int8 activations: matmul / bmm / mm / `@`.

torch's rules (torch.matmul): a 1-D left operand is a row [1, K] whose M dim is dropped from
the result, a 1-D right operand a column [K, 1] whose N dim is dropped; batch dims broadcast
(numpy rules). The `matmul` op takes a, b and y of one rank (2..6): leading unit dims are made
explicit with reshapes (free views). A right operand that is the transpose of its last two dims
(`q @ k.transpose(-1, -2)`) is read in place as [..., N, K] (`transpose_b`), no data moved.

Products with a constant operand, addmm / baddbmm and einsum are rewritten at capture into
linear, matmul and data movement (`rewrite`, below), so that PT2E quantizes what is computed.

Each builder is called as builder(lifter, fx node, output IR tensor, act) and emits IR nodes
through `lifter.emit` (frontend/lift.py Lifter)."""
from __future__ import annotations

import math

import torch
from torch.fx import GraphModule, Node as FxNode

from mcutorch.errors import UnsupportedOpError
from mcutorch.frontend.builders._common import A, node_arg
from mcutorch.frontend.capture import source_of
from mcutorch.ir import Tensor
from mcutorch.ref.elementwise import broadcast_shape

MAX_RANK = 6
QD = torch.ops.quantized_decomposed


def _swaps_last_two(node) -> bool:
    """A transpose / permute node that swaps the last two dims of its input only."""
    if not (isinstance(node, FxNode) and node.op == "call_function"):
        return False
    rank = node.meta["val"].dim() if "val" in node.meta else 0
    if rank < 2:
        return False
    if node.target == A.transpose.int:
        return sorted((int(node.args[1]) % rank, int(node.args[2]) % rank)) == [rank - 2, rank - 1]
    if node.target == A.permute.default:
        return [int(p) % rank for p in node.args[1]] == [*range(rank - 2), rank - 1, rank - 2]
    return False


def _untransposed(lf, arg):
    """(the fx value whose int8 tensor holds b, transpose_b): looks through a transpose of the
    last two dims, possibly requantized with the same qparams (dq(q(t(dq(x)))), PT2E's form of
    a shared-qparams op)."""
    t = arg
    if isinstance(t, FxNode) and t.target in (QD.dequantize_per_tensor.default,
                                              QD.dequantize_per_tensor.tensor):
        q = t.args[0]
        if not (isinstance(q, FxNode) and q.op == "call_function" and "quantize_per_tensor"
                in str(q.target) and len(q.users) == 1):
            return arg, 0
        t = q.args[0]
        inner = t.args[0] if _swaps_last_two(t) else None
        if not (isinstance(inner, FxNode) and inner.target == arg.target and len(arg.users) == 1
                and tuple(inner.args[1:]) == tuple(arg.args[1:]) and len(t.users) == 1
                and t.meta["val"].dim() <= 4):
            return arg, 0
        moved = lf.values.get(q)  # lifted already (quantize nodes lift in graph order): drop it
        lf.nodes = [nd for nd in lf.nodes if moved is None or moved not in nd.outputs]
        lf.used.update((arg, q, t))
        return inner, 1
    if _swaps_last_two(t) and len(t.users) == 1:
        lf.used.add(t)
        return t.args[0], 1
    return arg, 0


def _view(lf, n: FxNode, t: Tensor, shape, suffix: str) -> Tensor:
    if tuple(shape) == t.shape:
        return t
    v = lf.new_tensor(f"{t.name}_{suffix}", shape, t.scale, t.zero_point,
                      layout="NCHW" if len(shape) == 4 else None)
    lf.emit("reshape", [t], v, {}, n)
    return v


def matmul(lf, n: FxNode, out: Tensor, act) -> None:
    b_arg, transpose_b = _untransposed(lf, n.args[1])
    a, b = lf.operand(n.args[0], n), lf.operand(b_arg, n)
    if a.is_const or b.is_const:
        raise UnsupportedOpError(f"{source_of(n)}: a matrix product with a constant operand "
                                 "left after capture (mcutorch.frontend.capture rewrites it)")
    a_shape, b_shape = list(a.shape), list(b.shape)
    if len(a_shape) == 1 and len(b_shape) == 1:
        raise UnsupportedOpError(f"{source_of(n)}: the dot product of two 1-D tensors (a 0-D "
                                 "result); write it as a [1, K] @ [K, 1] matmul")
    if len(a_shape) == 1:
        a_shape = [1, *a_shape]
    if len(b_shape) == 1:
        b_shape = [*b_shape, 1]
    rank = max(len(a_shape), len(b_shape))
    if rank > MAX_RANK:
        raise UnsupportedOpError(f"{source_of(n)}: a {rank}-D matmul; mcutorch takes ranks up "
                                 f"to {MAX_RANK}")
    a_shape = [1] * (rank - len(a_shape)) + a_shape
    b_shape = [1] * (rank - len(b_shape)) + b_shape
    m, k = a_shape[-2:]
    kb, nn = b_shape[-1:-3:-1] if transpose_b else b_shape[-2:]
    try:
        batch = broadcast_shape(tuple(a_shape[:-2]), tuple(b_shape[:-2]), str(n.target))
    except ValueError as e:
        raise UnsupportedOpError(f"{source_of(n)}: {e}") from None
    full = (*batch, m, nn)
    if k != kb or math.prod(full) != math.prod(out.shape):
        raise UnsupportedOpError(f"{source_of(n)}: {list(a.shape)} @ {list(b.shape)} does not "
                                 f"give {list(out.shape)}")
    a, b = _view(lf, n, a, a_shape, "mm"), _view(lf, n, b, b_shape, "mm")
    y = out if full == out.shape else lf.new_tensor(
        out.name + "_mm", full, out.scale, out.zero_point,
        layout="NCHW" if len(full) == 4 else None)
    lf.emit("matmul", [a, b], y, {"act": act, "transpose_b": transpose_b}, n)
    if y is not out:
        lf.emit("reshape", [y], out, {}, n)


# registry op name -> builder; ACT: the builders that apply `act` (the output clamp)
BUILDERS = {"matmul": matmul}
ACT = {matmul}
