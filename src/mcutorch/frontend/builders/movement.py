"""Lift builders of data movement: reshape, permute/transpose, cat, constant padding, strided
slices (slice, select, narrow, flip, expand, repeat, tile; split and co. as slices), gathers
(index_select, one constant index tensor), and what is built of slices and concats (reflect,
replicate and circular padding, roll, stack).

Each builder is called as builder(lifter, fx node, output IR tensor, act) and emits IR nodes
through `lifter.emit` (frontend/lift.py Lifter)."""
from __future__ import annotations

import numpy as np
from torch.fx import Node as FxNode

from mcutorch.errors import UnsupportedOpError
from mcutorch.frontend.builders._common import A, node_arg
from mcutorch.frontend.capture import source_of
from mcutorch.ir import Tensor
from mcutorch.quant import quantize as quantize_float


def reshape(lf, n: FxNode, out: Tensor, act) -> None:
    lf.emit("reshape", [lf.operand(n.args[0], n)], out, {}, n)


def permute(lf, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    rank = len(x.shape)
    if n.target == A.transpose.int:
        perm = list(range(rank))
        i, j = int(n.args[1]) % rank, int(n.args[2]) % rank
        perm[i], perm[j] = perm[j], perm[i]
    else:
        perm = [int(p) % rank for p in n.args[1]]
    lf.emit("transpose", [x], out, {"perm": tuple(perm)}, n)


def cat(lf, n: FxNode, out: Tensor, act) -> None:
    """cat / concat; stack (each input given a unit dim, then a concat); roll (per dim, two
    slices then a concat)."""
    if n.target == A.roll.default:
        return roll(lf, n, out)
    xs = [lf.operand(v, n) for v in n.args[0]]
    axis = int(node_arg(n, 1, "dim", 0)) % len(out.shape)
    if n.target == A.stack.default:
        shape = out.shape[:axis] + (1,) + out.shape[axis + 1:]
        xs = [_lifted(lf, n, x, out, shape) for x in xs]
    lf.emit("concat", xs, out, {"axis": axis}, n)


def _piece(lf, n, x: Tensor, out: Tensor, d: int, start: int, step: int, size: int, tag: str):
    """x's slice along dim d (start, step, size), other dims whole."""
    starts, steps = _identity(len(x.shape))
    starts[d], steps[d] = start, step
    t = _tmp(lf, n, out, x.shape[:d] + (size,) + x.shape[d + 1:], tag)
    _emit_slice(lf, n, x, starts, steps, t)
    return t


def _join(lf, n, parts: list[Tensor], d: int, out: Tensor, last: bool, tag: str) -> Tensor:
    """concat of parts along d (into out when last)."""
    size = sum(p.shape[d] for p in parts)
    shape = parts[0].shape[:d] + (size,) + parts[0].shape[d + 1:]
    y = out if last else _tmp(lf, n, out, shape, tag)
    lf.emit("concat", parts, y, {"axis": d}, n)
    return y


def roll(lf, n: FxNode, out: Tensor) -> None:
    """torch.roll: along each dim, y = cat(x[n - s:], x[:n - s]) (s = shift mod n); without
    dims, the same on the flattened tensor."""
    x = lf.operand(n.args[0], n)
    shifts = [int(s) for s in node_arg(n, 1, "shifts")]
    dims = [int(d) for d in node_arg(n, 2, "dims", ())]
    flat = not dims
    if flat:
        x, dims = _lifted(lf, n, x, out, (int(np.prod(x.shape)),)), [0]
    moves = [(d % len(x.shape), s % x.shape[d % len(x.shape)]) for d, s in zip(dims, shifts)]
    moves = [(d, s) for d, s in moves if s]
    if not moves:
        lf.emit("reshape", [x], out, {}, n)
        return
    for i, (d, s) in enumerate(moves):
        size = x.shape[d]
        parts = [_piece(lf, n, x, out, d, size - s, 1, s, f"tail{d}"),
                 _piece(lf, n, x, out, d, 0, 1, size - s, f"head{d}")]
        x = _join(lf, n, parts, d, out, i == len(moves) - 1 and not flat, f"roll{d}")
    if flat:
        lf.emit("reshape", [x], out, {}, n)


def _pad_by_slices(lf, n: FxNode, x: Tensor, before, after, mode: str, out: Tensor) -> None:
    """reflect / replicate / circular padding: per padded dim, a concat of the input with the
    slices of it that the mode repeats (reflect: step -1 from the second element; replicate:
    step 0 on the edge element; circular: the other end)."""
    todo = [d for d in range(len(x.shape)) if before[d] or after[d]]
    for i, d in enumerate(todo):
        size, b, a = x.shape[d], before[d], after[d]
        left = {"reflect": (b, -1), "replicate": (0, 0), "circular": (size - b, 1)}[mode]
        right = {"reflect": (size - 2, -1), "replicate": (size - 1, 0), "circular": (0, 1)}[mode]
        parts = ([_piece(lf, n, x, out, d, *left, b, f"pad{d}_before")] if b else []) + [x] + (
            [_piece(lf, n, x, out, d, *right, a, f"pad{d}_after")] if a else [])
        x = _join(lf, n, parts, d, out, i == len(todo) - 1, f"pad{d}")


def pad(lf, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    mode = node_arg(n, 2, "mode", "constant") if n.target == A.pad.default else "constant"
    value = node_arg(n, 3 if n.target == A.pad.default else 2, "value", 0.0) or 0.0
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise UnsupportedOpError(f"{source_of(n)}: {mode} padding (constant, reflect, replicate "
                                 "and circular only)")
    flat = list(n.args[1])
    rank = len(x.shape)
    before, after = [0] * rank, [0] * rank
    for i in range(len(flat) // 2):  # torch lists the last dim first
        before[rank - 1 - i], after[rank - 1 - i] = int(flat[2 * i]), int(flat[2 * i + 1])
    if min(before + after) < 0:
        raise UnsupportedOpError(f"{source_of(n)}: negative padding (cropping)")
    if mode != "constant":
        if not any(before + after):
            return lf.emit("reshape", [x], out, {}, n)
        return _pad_by_slices(lf, n, x, before, after, mode, out)
    qvalue = int(quantize_float(np.float32(value), x.scale, x.zero_point))
    lf.emit("pad", [x], out, {"before": tuple(before), "after": tuple(after), "value": qvalue}, n)


# registry op name -> builder; ACT: the builders that apply `act` (the output clamp)


# --- strided_slice: slice, select, narrow, flip, expand, repeat, tile (split & co. via slices) --
SLICE_RANK = 6  # the program's start/step/size attributes cover 6 dims


def _tmp(lf, n: FxNode, out: Tensor, shape, suffix: str) -> Tensor:
    shape = tuple(int(d) for d in shape)
    return lf.new_tensor(f"{out.name}_{suffix}", shape, out.scale, out.zero_point,
                         layout="NCHW" if len(shape) == 4 else None)


def _emit_slice(lf, n: FxNode, x: Tensor, start, step, out: Tensor) -> None:
    """y = strided_slice(x) with out's shape (same rank as x); an empty result is refused."""
    if 0 in out.shape:
        raise UnsupportedOpError(f"{source_of(n)}: the slice is empty (shape {list(out.shape)}); "
                                 "mcutorch tensors have at least one element")
    if len(x.shape) > SLICE_RANK:
        raise UnsupportedOpError(f"{source_of(n)}: strided_slice of a {len(x.shape)}-D tensor "
                                 f"(the program's attributes cover ranks up to {SLICE_RANK})")
    assert len(x.shape) == len(out.shape) == len(start) == len(step), source_of(n)
    attrs = {"start": tuple(int(v) for v in start), "step": tuple(int(v) for v in step),
             "size": tuple(out.shape)}
    lf.emit("strided_slice", [x], out, attrs, n)


def _identity(rank: int):
    return [0] * rank, [1] * rank


def slice_tensor(lf, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    rank = len(x.shape)
    dim = int(node_arg(n, 1, "dim", 0)) % rank
    begin, end = node_arg(n, 2, "start", None), node_arg(n, 3, "end", None)
    step = int(node_arg(n, 4, "step", 1))
    begin, _, _ = slice(begin, end, step).indices(x.shape[dim])
    start, steps = _identity(rank)
    start[dim], steps[dim] = begin, step
    _emit_slice(lf, n, x, start, steps, out)


def narrow(lf, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    rank = len(x.shape)
    dim = int(node_arg(n, 1, "dim", 0)) % rank
    start, steps = _identity(rank)
    start[dim] = int(node_arg(n, 2, "start", 0)) % max(x.shape[dim], 1)
    _emit_slice(lf, n, x, start, steps, out)


def select(lf, n: FxNode, out: Tensor, act) -> None:
    """x.select(dim, i): a slice of size 1 at i, then a reshape dropping the dim."""
    x = lf.operand(n.args[0], n)
    rank = len(x.shape)
    dim = int(node_arg(n, 1, "dim", 0)) % rank
    start, steps = _identity(rank)
    start[dim] = int(node_arg(n, 2, "index", 0)) % x.shape[dim]
    kept = _tmp(lf, n, out, x.shape[:dim] + (1,) + x.shape[dim + 1:], "kept")
    _emit_slice(lf, n, x, start, steps, kept)
    lf.emit("reshape", [kept], out, {}, n)


def flip(lf, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    rank = len(x.shape)
    start, steps = _identity(rank)
    for d in {int(d) % rank for d in node_arg(n, 1, "dims", ())}:
        start[d], steps[d] = x.shape[d] - 1, -1
    _emit_slice(lf, n, x, start, steps, out)


def _lifted(lf, n: FxNode, x: Tensor, out: Tensor, shape) -> Tensor:
    """x reshaped to `shape` (same element count) when it differs, through a reshape node."""
    shape = tuple(int(d) for d in shape)
    if shape == x.shape:
        return x
    t = _tmp(lf, n, out, shape, "view")
    lf.emit("reshape", [x], t, {}, n)
    return t


def expand(lf, n: FxNode, out: Tensor, act) -> None:
    """x.expand(size): unit dims prepended, then step 0 along every dim of size 1 that grows."""
    x = lf.operand(n.args[0], n)
    rank = len(out.shape)
    x = _lifted(lf, n, x, out, (1,) * (rank - len(x.shape)) + x.shape)
    start, steps = _identity(rank)
    for d in range(rank):
        if x.shape[d] != out.shape[d]:
            steps[d] = 0
    _emit_slice(lf, n, x, start, steps, out)


def repeat(lf, n: FxNode, out: Tensor, act) -> None:
    """x.repeat(reps) / x.tile(reps): up to 4-D, one concat of copies per repeated dim (layout
    free); 5-D and 6-D, each repeated dim d becomes (reps_d, size_d) with step 0 along the new
    dim (neighbouring unrepeated dims merged to stay within 6), then a reshape."""
    x = lf.operand(n.args[0], n)
    reps = [int(r) for r in node_arg(n, 1, "repeats" if n.target == A.repeat.default else "dims")]
    rank = max(len(reps), len(x.shape))
    reps = [1] * (rank - len(reps)) + reps
    shape = (1,) * (rank - len(x.shape)) + x.shape
    if 0 in out.shape:
        raise UnsupportedOpError(f"{source_of(n)}: repeat {reps} is empty")
    if rank <= 4:
        y = _lifted(lf, n, x, out, shape)
        todo = [d for d in range(rank) if reps[d] > 1]
        for i, d in enumerate(todo):
            grown = y.shape[:d] + (y.shape[d] * reps[d],) + y.shape[d + 1:]
            z = out if i == len(todo) - 1 else _tmp(lf, n, out, grown, f"rep{d}")
            lf.emit("concat", [y] * reps[d], z, {"axis": d}, n)
            y = z
        if y is not out:
            lf.emit("reshape", [y], out, {}, n)
        return
    groups: list[list[int]] = []  # [rep, size]: one 6-D pair per repeated dim, merged otherwise
    for r, d in zip(reps, shape):
        if r == 1 and groups and groups[-1][0] == 1:
            groups[-1][1] *= d
        else:
            groups.append([r, d])
    view = [d for r, d in groups for d in ((1, d) if r > 1 else (d,))]
    if len(view) > SLICE_RANK:
        raise UnsupportedOpError(f"{source_of(n)}: repeat {reps} of shape {list(x.shape)} needs "
                                 f"a {len(view)}-D slice (at most {SLICE_RANK})")
    steps = [s for r, _ in groups for s in ((0, 1) if r > 1 else (1,))]
    xv = _lifted(lf, n, x, out, view)
    grown = tuple(d for r, d in groups for d in ((r, d) if r > 1 else (d,)))
    y = out if grown == out.shape else _tmp(lf, n, out, grown, "tiled")
    _emit_slice(lf, n, xv, [0] * len(view), steps, y)
    if y is not out:
        lf.emit("reshape", [y], out, {}, n)


# --- tuple ops (split, split_with_sizes, chunk, unbind): each getitem becomes a slice / select
SPLITS = {A.split.Tensor: 2, A.split_with_sizes.default: 2, A.chunk.default: 2,
          A.unbind.int: 1, A.tensor_split.sections: 2, A.tensor_split.indices: 2}


def split_tuples(gm) -> None:
    """Rewrite getitem(split-like(x, ..., dim), i) into aten.slice (select for unbind) of x, in
    place, so that every piece is one node whose value quantizes on its own."""
    import operator

    import torch

    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target not in SPLITS:
            continue
        x = node.args[0]
        shape = tuple(x.meta["val"].shape)
        dim = int(node_arg(node, SPLITS[node.target], "dim", 0)) % len(shape)
        pieces = node.target(torch.empty(shape, device="meta"), *node.args[1:], **node.kwargs)
        unbind = node.target == A.unbind.int
        offsets = np.cumsum([0] + [1 if unbind else p.shape[dim] for p in pieces]).tolist()
        for user in list(node.users):
            if user.target is not operator.getitem:
                continue
            i = int(user.args[1]) % len(pieces)
            args = (x, dim, i) if unbind else (x, dim, offsets[i], offsets[i + 1])
            with gm.graph.inserting_before(user):
                new = gm.graph.call_function(A.select.int if unbind else A.slice.Tensor, args)
            new.meta = {**node.meta, "val": user.meta["val"]}
            user.replace_all_uses_with(new)
            gm.graph.erase_node(user)
        if not node.users:
            gm.graph.erase_node(node)
    gm.graph.lint()
    gm.recompile()


# --- gather: index_select, x[:, idx] with one constant index tensor ---------------------------
def gather(lf, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    rank = len(x.shape)
    if n.target == A.index_select.default:
        dim, index = int(node_arg(n, 1, "dim")) % rank, node_arg(n, 2, "index")
    else:
        given = [(d, v) for d, v in enumerate(node_arg(n, 1, "indices")) if v is not None]
        if len(given) != 1:
            raise UnsupportedOpError(f"{source_of(n)}: indexing with {len(given)} index tensors "
                                     "(mcutorch gathers along one dim, with one)")
        dim, index = given[0]
    if not (isinstance(index, FxNode) and index.op == "get_attr"):
        raise UnsupportedOpError(f"{source_of(n)}: the indices are computed at run time; "
                                 "mcutorch gathers with constant indices")
    idx = lf._attr(index).numpy()
    size = x.shape[dim]
    if idx.dtype == np.bool_ or idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
        raise UnsupportedOpError(f"{source_of(n)}: a {idx.dtype} index of shape "
                                 f"{list(idx.shape)} (mcutorch: a 1-D integer index)")
    if idx.size == 0:
        raise UnsupportedOpError(f"{source_of(n)}: no indices (an empty result)")
    if idx.min() < -size or idx.max() >= size:
        raise UnsupportedOpError(f"{source_of(n)}: an index outside [-{size}, {size})")
    data = (idx.astype(np.int64) % size).astype(np.int32)
    table = lf.new_tensor(f"{out.name}_indices", data.shape, 1.0, 0, dtype="int32", data=data)
    lf.emit("gather", [x, table], out, {"axis": dim}, n)


_SLICES = {A.slice.Tensor: slice_tensor, A.select.int: select, A.narrow.default: narrow,
           A.flip.default: flip, A.expand.default: expand, A.repeat.default: repeat,
           A.tile.default: repeat}


def strided_slice(lf, n: FxNode, out: Tensor, act) -> None:
    _SLICES[n.target](lf, n, out, act)


# registry op name -> builder; ACT: the builders that apply `act` (the output clamp)
BUILDERS = {"transpose": permute, "concat": cat, "pad": pad, "reshape": reshape,
            "strided_slice": strided_slice, "gather": gather}
ACT = set()
