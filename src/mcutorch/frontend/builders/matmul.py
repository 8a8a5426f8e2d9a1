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
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx import GraphModule, Node as FxNode

from mcutorch.errors import UnsupportedOpError
from mcutorch.frontend.builders._common import A, node_arg
from mcutorch.frontend.capture import source_of
from mcutorch.ir import Tensor
from mcutorch.ops.conv import MATMUL_MAX_K
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
    if node.target == A.t.default:
        return rank == 2
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


# --- capture-time rewrites (before PT2E: it then quantizes what is computed) --------------------
PRODUCTS = {A.matmul.default, A.mm.default, A.bmm.default}


class _Edit:
    """New fx nodes in front of `at` (its source location and module), each with the `val`
    torch.export gives (a FakeTensor of at's fake mode: PT2E observes only those)."""

    def __init__(self, gm: GraphModule, at: FxNode):
        self.gm, self.at, self.mode = gm, at, at.meta["val"].fake_mode

    def _fake(self, node: FxNode):
        v = node.meta["val"]
        return v if isinstance(v, FakeTensor) else self.mode.from_tensor(v, static_shapes=True)

    def call(self, target, *args) -> FxNode:
        with self.gm.graph.inserting_before(self.at):
            node = self.gm.graph.call_function(target, tuple(args))
        with self.mode:
            val = target(*(self._fake(a) if isinstance(a, FxNode) else a for a in args))
        node.meta.update(val=val, **{k: self.at.meta[k] for k in (
            "stack_trace", "nn_module_stack") if k in self.at.meta})
        return node

    def const(self, value: torch.Tensor) -> FxNode:
        name = f"_mcutorch_matmul_{len(list(self.gm.named_buffers()))}"
        self.gm.register_buffer(name, value.detach().contiguous().clone())
        with self.gm.graph.inserting_before(self.at):
            node = self.gm.graph.get_attr(name)
        node.meta.update(val=getattr(self.gm, name), stack_trace=self.at.meta.get("stack_trace"))
        return node

    def view(self, x: FxNode, shape) -> FxNode:
        return x if tuple(x.meta["val"].shape) == tuple(shape) else self.call(
            A.reshape.default, x, list(shape))

    def permute(self, x: FxNode, perm) -> FxNode:
        return x if list(perm) == sorted(perm) else self.call(A.permute.default, x, list(perm))


def _const(gm: GraphModule, node) -> torch.Tensor | None:
    """The tensor of a constant (get_attr) operand, else None."""
    if not (isinstance(node, FxNode) and node.op == "get_attr"):
        return None
    obj = gm
    for part in node.target.split("."):
        obj = getattr(obj, part)
    return obj.detach() if isinstance(obj, torch.Tensor) else None


def _with_constant(gm: GraphModule, n: FxNode) -> FxNode | None:
    """x @ W -> linear(x, W^T); W @ x -> linear(x^T, W)^T (x 1-D: linear(x, W)); 2-D W only."""
    a, b = n.args[:2]
    wa, wb = _const(gm, a), _const(gm, b)
    if (wa is None) == (wb is None):
        return None
    w = wa if wa is not None else wb
    if w.dim() != 2:
        raise UnsupportedOpError(f"{source_of(n)}: a product with a {w.dim()}-D constant; "
                                 "mcutorch takes a constant 2-D matrix (it becomes a linear "
                                 "layer's weight)")
    e = _Edit(gm, n)
    if wb is not None:
        return e.call(A.linear.default, a, e.const(wb.t()))
    if b.meta["val"].dim() == 1:
        return e.call(A.linear.default, b, e.const(wa))
    xt = e.call(A.transpose.int, b, -1, -2)
    return e.call(A.transpose.int, e.call(A.linear.default, xt, e.const(wa)), -1, -2)


def _addmm(gm: GraphModule, n: FxNode) -> FxNode:
    """beta * input + alpha * (m1 @ m2): one linear when m2 and a bias input are constant
    (alpha = beta = 1), else matmul, scalar muls and add."""
    inp, m1, m2 = n.args[:3]
    beta, alpha = node_arg(n, 3, "beta", 1), node_arg(n, 4, "alpha", 1)
    bias, w, e = _const(gm, inp), _const(gm, m2), _Edit(gm, n)
    if (n.target == A.addmm.default and alpha == 1 and beta == 1 and w is not None
            and bias is not None and _const(gm, m1) is None and bias.numel() == w.shape[1]):
        return e.call(A.linear.default, m1, e.const(w.t()), e.const(bias.reshape(-1)))
    y = e.call(A.matmul.default, m1, m2)
    if alpha != 1:
        y = e.call(A.mul.Tensor, y, float(alpha))
    if beta == 0:
        return y
    if bias is not None:
        other = e.const(bias * beta)
    else:
        other = inp if beta == 1 else e.call(A.mul.Tensor, inp, float(beta))
    return e.call(A.add.Tensor, other, y)


def _einsum(gm: GraphModule, n: FxNode) -> FxNode:
    """A two-operand einsum whose indices are batch (both operands and the output), contracted
    (both operands only) and free (one operand and the output) ones, as permutes, reshapes and
    one matmul; any other equation is refused, naming it."""
    eq, operands = str(n.args[0]).replace(" ", ""), n.args[1]
    ins, _, out = eq.partition("->")
    terms = ins.split(",")
    why = ("" if len(operands) == 2 and len(terms) == 2 and "->" in eq and "." not in eq
           else "two operands and an explicit output (no '...')")
    sa, sb = terms if len(terms) == 2 else ("", "")
    if not why and any(len(set(t)) != len(t) for t in (sa, sb, out)):
        why = "no index repeated within one operand (traces, diagonals)"
    if not why and (set(out) - set(sa + sb) or (set(sa) ^ set(sb)) - set(out)):
        why = "every index of one operand only in the output (no sums over one operand)"
    if why:
        raise UnsupportedOpError(f"{source_of(n)}: einsum {eq!r} is not a matrix product "
                                 f"mcutorch lowers: it takes {why}")
    a, b = operands
    size = {**dict(zip(sb, b.meta["val"].shape)), **dict(zip(sa, a.meta["val"].shape))}
    batch = [c for c in out if c in sa and c in sb]
    la, lb = [c for c in out if c not in sb], [c for c in out if c not in sa]
    red = [c for c in sa if c not in out]
    e, prod = _Edit(gm, n), lambda cs: math.prod(size[c] for c in cs)  # noqa: E731
    bsa = [a.meta["val"].shape[sa.index(c)] for c in batch]
    bsb = [b.meta["val"].shape[sb.index(c)] for c in batch]
    a2 = e.view(e.permute(a, [sa.index(c) for c in batch + la + red]),
                [*bsa, prod(la), prod(red)])
    b2 = e.view(e.permute(b, [sb.index(c) for c in batch + red + lb]),
                [*bsb, prod(red), prod(lb)])
    y = e.call(A.matmul.default, a2, b2)
    y = e.view(y, [*y.meta["val"].shape[:len(batch)], *(size[c] for c in la + lb)])
    order = batch + la + lb
    return e.permute(y, [order.index(c) for c in out])


def rewrite(gm: GraphModule) -> None:
    """Captured graph: einsum, addmm and baddbmm become matmul / linear and data movement; a
    product with a constant 2-D operand becomes a linear (its weight symmetric int8, a
    fully_connected kernel)."""
    for targets, fn in (({A.einsum.default}, _einsum),
                        ({A.addmm.default, A.baddbmm.default}, _addmm), (PRODUCTS, _with_constant)):
        for node in [n for n in gm.graph.nodes if n.op == "call_function" and n.target in targets]:
            new = fn(gm, node)
            if new is not None:
                node.replace_all_uses_with(new)
                gm.graph.erase_node(node)
    for node in [n for n in gm.graph.nodes if n.op == "call_function" and n.target in PRODUCTS]:
        k = node.args[0].meta["val"].shape[-1]
        if k > MATMUL_MAX_K:
            raise UnsupportedOpError(f"{source_of(node)}: a product over K={k}; mcutorch takes "
                                     f"K <= {MATMUL_MAX_K} (K * 255 * 255 fits int32)")
    gm.graph.eliminate_dead_code()
    gm.recompile()


# registry op name -> builder; ACT: the builders that apply `act` (the output clamp)
BUILDERS = {"matmul": matmul}
ACT = {matmul}
