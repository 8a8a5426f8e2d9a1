"""Attention at capture: aten.scaled_dot_product_attention as the math it stands for.

`F.scaled_dot_product_attention`, `nn.MultiheadAttention` (need_weights=False, the form
`nn.TransformerEncoderLayer` calls) and the encoder layers built on them record one fused
`aten.scaled_dot_product_attention` node. `decompose_attention` rewrites it, before PT2E
annotates the graph, into the ops it computes, so that every intermediate gets its own observer
and quantize node and lowers to an existing int8 op:

    scores = matmul(q, k^T)             matmul, k read in place (transpose_b)
    scores = scores * scale             lut (1/sqrt(E) unless `scale=` is given)
    scores = masked_fill(scores, m, -inf)   a constant bool mask (False = masked), is_causal,
                                            or a float mask of 0 / -inf only
    scores = scores + mask              a constant float mask of finite values
    p = softmax(scores, -1)             softmax (int8, fixed output qparams 1/256, -128)
    y = matmul(p, v)

What stays out is refused by name and source line before calibration: a mask computed from the
model's inputs (a key_padding_mask or attn_mask given at run time), dropout_p > 0, enable_gqa,
a float mask mixing -inf with other values. `need_weights=True` (MultiheadAttention's default)
records the attention weights as plain bmm / softmax / mean ops, which lower as they are.
"""
from __future__ import annotations

import math
import operator

import torch
from torch.fx import GraphModule, Node

from mcutorch.errors import UnsupportedOpError
from mcutorch.frontend.builders._common import A, node_arg
from mcutorch.frontend.capture import source_of

SDPA = (A.scaled_dot_product_attention.default,)


class _Input(Exception):
    """The value depends on a model input."""


def _evaluate(gm: GraphModule, node):
    if not isinstance(node, Node):
        return node
    if node.op == "get_attr":  # a copy: an in-place op of the mask's code must not change it
        return operator.attrgetter(node.target)(gm).detach().clone()
    if node.op != "call_function":
        raise _Input(node.name)
    args = torch.fx.node.map_aggregate(node.args, lambda a: _evaluate(gm, a))
    kwargs = torch.fx.node.map_aggregate(node.kwargs, lambda a: _evaluate(gm, a))
    return node.target(*args, **kwargs)


def _constant(gm: GraphModule, node) -> torch.Tensor | None:
    """The value of a mask computed from constants, buffers and parameters only (a capture of
    a stateless model: nothing writes them), or None when it depends on a model input."""
    try:
        with torch.no_grad():
            return _evaluate(gm, node)
    except _Input:
        return None


def _call(gm: GraphModule, like: Node, target, *args) -> Node:
    """A call_function node computing target(*args), its meta (value, source, module) filled in."""
    new = gm.graph.call_function(target, args)
    fake = [a.meta["val"] if isinstance(a, Node) else a for a in args]
    with torch._guards.detect_fake_mode([f for f in fake if isinstance(f, torch.Tensor)]):
        new.meta["val"] = target(*fake)
    for key in ("stack_trace", "nn_module_stack", "source_fn_stack"):
        if key in like.meta:
            new.meta[key] = like.meta[key]
    return new


def _buffer(gm: GraphModule, node: Node, value: torch.Tensor, what: str) -> Node:
    name = f"_attn_{what}_{node.name}"
    gm.register_buffer(name, value.contiguous().clone())
    attr = gm.graph.get_attr(name)
    attr.meta["val"] = torch._guards.detect_fake_mode([node.meta["val"]]).from_tensor(value)
    return attr


def _mask(gm: GraphModule, node: Node, mask, causal: bool, shape) -> tuple[str, torch.Tensor]:
    """("fill", True where masked) or ("add", the float mask) or ("", None) of an SDPA node."""
    where = source_of(node)
    length, source = shape[-2], shape[-1]
    if causal:
        if mask is not None:
            raise UnsupportedOpError(f"{where}: attn_mask together with is_causal=True is "
                                     "refused by torch and by mcutorch")
        return "fill", torch.ones(length, source, dtype=torch.bool).triu(1)
    if mask is None:
        return "", None
    value = _constant(gm, mask)
    if value is None:
        raise UnsupportedOpError(
            f"{where}: the attention mask is computed from the model's inputs (a key_padding_mask "
            "or attn_mask given at run time); mcutorch takes a constant mask only (a buffer, a "
            "parameter or a value computed from constants)")
    if len(shape) == 4 and value.dim() > 2:  # as the [B*H, L, S] scores
        value = value.expand(shape).reshape(-1, length, source)
    if value.dtype == torch.bool:
        return "fill", ~value
    if torch.isnan(value).any() or torch.isposinf(value).any():
        raise UnsupportedOpError(f"{where}: the float attention mask holds NaN or +inf")
    minus_inf = torch.isneginf(value)
    if not minus_inf.any():
        return "add", value.float()
    if bool(((value == 0) | minus_inf).all()):
        return "fill", minus_inf
    raise UnsupportedOpError(f"{where}: a float attention mask mixing -inf with values other "
                             "than 0 has no int8 lowering in mcutorch (use 0 / -inf or a bool "
                             "mask, or finite values)")


VIEWS = (A.view.default, A.reshape.default, A._unsafe_view.default)


def _rows(gm: GraphModule, node: Node, t: Node) -> Node:
    """A 4-D [B, H, L, D] operand as [B*H, L, D], read from the tensor it is a view of when it
    is one (MultiheadAttention's head split): mcutorch stores a 4-D activation channels-last, so
    3-D keeps the products in torch's order without transposes."""
    b, h, length, d = t.meta["val"].shape
    src = t.args[0] if t.op == "call_function" and t.target in VIEWS else t
    if tuple(src.meta["val"].shape) == (b * h, length, d):
        return src
    return _call(gm, node, A.reshape.default, src, [b * h, length, d])


def _output(gm: GraphModule, node: Node, y: Node) -> Node:
    """The [B*H, L, Dv] result in the place of the 4-D SDPA output: MultiheadAttention's
    permute(2, 0, 1, 3) + reshape to [L*B, E] reads it as transpose(0, 1) (the same element
    order, all 3-D); any other reader gets the 4-D view."""
    shape = list(node.meta["val"].shape)
    users = list(node.users)
    if (len(users) == 1 and users[0].target == A.permute.default
            and list(users[0].args[1]) == [2, 0, 1, 3] and users[0].users
            and all(u.target in VIEWS for u in users[0].users)):
        with gm.graph.inserting_before(users[0]):
            t = _call(gm, node, A.transpose.int, y, 0, 1)
        for u in list(users[0].users):
            u.replace_input_with(users[0], t)
        gm.graph.erase_node(users[0])
        return None
    with gm.graph.inserting_before(node):
        return _call(gm, node, A.reshape.default, y, shape)


def _decompose(gm: GraphModule, node: Node) -> None:
    q, k, v = node.args[:3]
    rank = q.meta["val"].dim()
    where = source_of(node)
    if float(node_arg(node, 4, "dropout_p", 0.0)) != 0.0:
        raise UnsupportedOpError(f"{where}: attention dropout (dropout_p > 0) in the exported "
                                 "graph; compile the model in eval mode (dropout is then none)")
    if node.kwargs.get("enable_gqa", False):
        raise UnsupportedOpError(f"{where}: enable_gqa=True (grouped-query attention) has no "
                                 "int8 lowering in mcutorch; repeat k and v per head instead")
    shape = tuple(node.meta["val"].shape[:-1]) + (k.meta["val"].shape[-2],)
    kind, mask = _mask(gm, node, node_arg(node, 3, "attn_mask"),
                       bool(node_arg(node, 5, "is_causal", False)), shape)
    scale = node.kwargs.get("scale")
    scale = 1.0 / math.sqrt(q.meta["val"].shape[-1]) if scale is None else float(scale)
    with gm.graph.inserting_before(node):
        if rank == 4:
            q, k, v = (_rows(gm, node, t) for t in (q, k, v))
        kt = _call(gm, node, A.transpose.int, k, -2, -1)
        s = _call(gm, node, A.mul.Tensor, _call(gm, node, A.matmul.default, q, kt), scale)
        if kind == "fill":
            s = _call(gm, node, A.masked_fill.Scalar, s, _buffer(gm, node, mask, "mask"),
                      float("-inf"))
        elif kind == "add":
            s = _call(gm, node, A.add.Tensor, s, _buffer(gm, node, mask, "mask"))
        p = _call(gm, node, A.softmax.int, s, -1)
        y = _call(gm, node, A.matmul.default, p, v)
    if rank == 4:
        y = _output(gm, node, y)
    if y is not None:
        node.replace_all_uses_with(y)
    code = node_arg(node, 3, "attn_mask")
    gm.graph.erase_node(node)
    _erase_unused(gm, code)


def _erase_unused(gm: GraphModule, node) -> None:
    """The mask's code, now read by nothing (in-place ops included, which dead-code
    elimination keeps)."""
    if isinstance(node, Node) and node.op == "call_function" and not node.users:
        args = node.all_input_nodes
        gm.graph.erase_node(node)
        for a in args:
            _erase_unused(gm, a)


def decompose_attention(gm: GraphModule) -> None:
    """Every scaled_dot_product_attention node of a captured graph as matmul, scale, mask,
    softmax, matmul (module docstring); UnsupportedOpError for what stays out. Then
    MultiheadAttention's packed q/k/v projection becomes three Linears and transposes that only
    move unit dims become reshapes (`split_packed_projections`, `unit_transposes_as_views`)."""
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target in SDPA:
            _decompose(gm, node)
    split_packed_projections(gm)
    unit_transposes_as_views(gm)


def _chain(node: Node, steps) -> Node | None:
    """The node reached from `node` through single users with these (target, args) steps."""
    for target, args in steps:
        if len(node.users) != 1:
            return None
        (node,) = node.users
        if node.target != target or list(node.args[1:]) != list(args):
            return None
    return node


def split_packed_projections(gm: GraphModule) -> None:
    """MultiheadAttention's in_proj (one Linear to [.., 3E], unflatten(-1, [3, E]),
    unsqueeze(0), transpose(0, -2), squeeze(-2), select(0, i)) as three Linears with the rows of
    q, k and v: the same values, each quantized on its own range, and no 5-D data movement."""
    for lin in [n for n in gm.graph.nodes if n.target == A.linear.default]:
        e3 = lin.meta["val"].shape[-1]
        e = e3 // 3
        end = _chain(lin, [(A.unflatten.int, (-1, [3, e])), (A.unsqueeze.default, (0,)),
                           (A.transpose.int, (0, -2)), (A.squeeze.dim, (-2,))])
        w, b = lin.args[1], lin.args[2] if len(lin.args) > 2 else None
        if (end is None or not end.users or w.op != "get_attr" or e3 != 3 * e
                or any(u.target != A.select.int or u.args[1] != 0 for u in end.users)
                or (b is not None and b.op != "get_attr")):
            continue
        weight = operator.attrgetter(w.target)(gm).detach()
        bias = None if b is None else operator.attrgetter(b.target)(gm).detach()
        for sel in list(end.users):
            i = int(sel.args[2])
            params = []
            for what, t in (("w", weight), ("b", bias)):
                if t is None:
                    params.append(None)
                    continue
                name = f"_attn_in_proj_{what}{i}_{lin.name}"
                gm.register_parameter(name, torch.nn.Parameter(t[i * e:(i + 1) * e].clone(),
                                                               requires_grad=False))
                with gm.graph.inserting_before(lin):
                    params.append(gm.graph.get_attr(name))
                params[-1].meta["val"] = t[i * e:(i + 1) * e]
            with gm.graph.inserting_before(sel):
                new = _call(gm, lin, A.linear.default, lin.args[0], *params)
            sel.replace_all_uses_with(new)
            gm.graph.erase_node(sel)
        _erase_unused(gm, end)


def unit_transposes_as_views(gm: GraphModule) -> None:
    """A transpose / permute that keeps the order of the dims longer than 1 (MultiheadAttention's
    batch_first transposes at batch 1) moves no data: a reshape (ranks up to 3: a 4-D tensor is
    stored channels-last)."""
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in (A.transpose.int, A.permute.default):
            continue
        src, val = node.args[0].meta.get("val"), node.meta.get("val")
        if src is None or val is None or src.dim() > 3:
            continue  # a 4-D tensor is stored channels-last: its reshapes are not free
        rank = src.dim()
        if node.target == A.transpose.int:
            perm = list(range(rank))
            a, b = int(node.args[1]) % rank, int(node.args[2]) % rank
            perm[a], perm[b] = perm[b], perm[a]
        else:
            perm = [int(p) % rank for p in node.args[1]]
        moved = [p for p in perm if src.shape[p] != 1]
        if moved == sorted(moved):
            node.target, node.args = A.reshape.default, (node.args[0], list(val.shape))
