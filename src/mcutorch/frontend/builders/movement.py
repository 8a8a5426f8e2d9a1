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
    if n.target in SHUFFLES:
        return shuffle(lf, n, out)
    x = lf.operand(n.args[0], n)
    rank = len(x.shape)
    if n.target in (A.transpose.int, A.t.default):  # x.t(): dims 0 and 1 (of at most two)
        perm = list(range(rank))
        i, j = (int(n.args[1]) % rank, int(n.args[2]) % rank) if len(n.args) > 1 else (0, rank - 1)
        perm[i], perm[j] = perm[j], perm[i]
    else:
        perm = [int(p) % rank for p in n.args[1]]
    if rank > 4:
        return _permute_any(lf, n, x, perm, out)
    lf.emit("transpose", [x], out, {"perm": tuple(perm)}, n)


# --- ranks 5 and 6 for transpose, concat and constant pad: 4-D ops on merged views ------------
# The program's transpose/concat/pad attributes cover 4 dims. A 5-D or 6-D one is lowered here to
# the same ops on reshaped views (free aliases), so no record changes: dims that stay neighbours
# merge; what still has more than 4 dims becomes a few 4-D ops. The views keep their own order
# (no NCHW layout: a 4-D view of a 6-D tensor is not an image).

def _raw(lf, out: Tensor, shape, suffix: str) -> Tensor:
    return lf.new_tensor(f"{out.name}_{suffix}", tuple(int(d) for d in shape), out.scale,
                         out.zero_point)


def _view(lf, n: FxNode, x: Tensor, shape, out: Tensor, suffix: str) -> Tensor:
    shape = tuple(int(d) for d in shape)
    if shape == x.shape:
        return x
    t = _raw(lf, out, shape, suffix)
    lf.emit("reshape", [x], t, {}, n)
    return t


def _into(lf, n: FxNode, y: Tensor, out: Tensor) -> None:
    if y is not out:
        lf.emit("reshape", [y], out, {}, n)


def _prod(dims) -> int:
    return int(np.prod(dims, dtype=np.int64))


def _permute_any(lf, n: FxNode, x: Tensor, perm, out: Tensor) -> None:
    """A permutation of any rank as 4-D transposes: unit dims dropped and input dims that stay
    neighbours merged; if more than 4 remain, one block move per misplaced dim (a transpose
    (0, 2, 1, 3) of the view [before, block, dim, after]), at most rank - 1 of them."""
    keep = [d for d in range(len(perm)) if x.shape[d] != 1]
    groups: list[list[int]] = []  # runs of input dims, in output order
    for p in (p for p in perm if x.shape[p] != 1):
        if groups and keep.index(p) == keep.index(groups[-1][-1]) + 1:
            groups[-1].append(p)
        else:
            groups.append([p])
    by_input = sorted(range(len(groups)), key=lambda g: groups[g][0])
    sizes = [_prod([x.shape[d] for d in groups[g]]) for g in by_input]  # merged input dims
    want = [by_input.index(g) for g in range(len(groups))]  # merged dim read at output k
    y = _view(lf, n, x, sizes, out, "merged")
    if len(want) <= 4 and want != sorted(want):
        t = _raw(lf, out, [sizes[w] for w in want], "permuted")
        lf.emit("transpose", [y], t, {"perm": tuple(want)}, n)
        return _into(lf, n, t, out)
    cur = list(range(len(want)))  # merged dims in memory order
    for i, w in enumerate(want if len(want) > 4 else ()):
        j = cur.index(w)
        if j == i:
            continue
        s = [sizes[c] for c in cur]
        v = _view(lf, n, y, (_prod(s[:i]), _prod(s[i:j]), s[j], _prod(s[j + 1:])), out, f"mv{i}")
        t = _raw(lf, out, (v.shape[0], v.shape[2], v.shape[1], v.shape[3]), f"moved{i}")
        lf.emit("transpose", [v], t, {"perm": (0, 2, 1, 3)}, n)
        cur = cur[:i] + [cur[j]] + cur[i:j] + cur[j + 1:]
        y = t
    _into(lf, n, y, out)


SHUFFLES = {A.pixel_shuffle.default, A.pixel_unshuffle.default, A.channel_shuffle.default}


def shuffle(lf, n: FxNode, out: Tensor) -> None:
    """pixel_shuffle, pixel_unshuffle, channel_shuffle: a view, a permutation, a view (the
    leading dims before C merged into one)."""
    x = lf.operand(n.args[0], n)
    r = int(n.args[1])
    lead, (c, h, w) = _prod(x.shape[:-3]), x.shape[-3:]
    if n.target == A.pixel_shuffle.default:
        view, perm = (lead, c // (r * r), r, r, h, w), (0, 1, 4, 2, 5, 3)
    elif n.target == A.pixel_unshuffle.default:
        view, perm = (lead, c, h // r, r, w // r, r), (0, 1, 3, 5, 2, 4)
    else:  # channel_shuffle: r groups
        view, perm = (lead, r, c // r, h * w), (0, 2, 1, 3)
    v = _view(lf, n, x, view, out, "split")
    t = _raw(lf, out, [view[p] for p in perm], "shuffled")
    _permute_any(lf, n, v, perm, t)
    _into(lf, n, t, out)


def _concat_any(lf, n: FxNode, xs: list[Tensor], axis: int, out: Tensor) -> None:
    """A concat of rank > 4 as a 3-D one: each input viewed as [before, axis, after]."""
    def as3(t: Tensor, tag: str) -> Tensor:
        shape = (_prod(t.shape[:axis]), t.shape[axis], _prod(t.shape[axis + 1:]))
        return _view(lf, n, t, shape, out, tag)
    y = _raw(lf, out, (_prod(out.shape[:axis]), out.shape[axis], _prod(out.shape[axis + 1:])),
             "joined")
    lf.emit("concat", [as3(x, f"in{i}") for i, x in enumerate(xs)], y, {"axis": 1}, n)
    _into(lf, n, y, out)


def _pad_any(lf, n: FxNode, x: Tensor, before, after, value: int, out: Tensor) -> None:
    """A constant pad of rank > 4: unpadded neighbours merged; if more than 4 dims remain, one
    3-D pad [before, dim, after] per padded dim."""
    groups: list[list[int]] = []
    for d in range(len(x.shape)):
        if groups and not (before[d] or after[d]) and not any(
                before[g] or after[g] for g in groups[-1]):
            groups[-1].append(d)
        else:
            groups.append([d])
    if len(groups) > 4:
        groups = [[d] for d in range(len(x.shape))]
    y = _view(lf, n, x, [_prod([x.shape[d] for d in g]) for g in groups], out, "merged")
    steps = [list(range(len(groups)))] if len(groups) <= 4 else [
        [d] for d in range(len(groups)) if before[d] or after[d]]
    for k, dims in enumerate(steps):
        if len(dims) == 1:  # [before, dim, after]
            d = dims[0]
            v = _view(lf, n, y, (_prod(y.shape[:d]), y.shape[d], _prod(y.shape[d + 1:])), out,
                      f"pv{k}")
            b, a, axes = [0, before[d], 0], [0, after[d], 0], (d,)
        else:
            v, axes = y, [g[0] for g in groups]
            b, a = [before[g] for g in axes], [after[g] for g in axes]
        t = _raw(lf, out, [s + p + q for s, p, q in zip(v.shape, b, a)], f"padded{k}")
        lf.emit("pad", [v], t, {"before": tuple(b), "after": tuple(a), "value": value}, n)
        if len(dims) == 1:
            grown = list(y.shape)
            grown[axes[0]] += before[axes[0]] + after[axes[0]]
            t = _view(lf, n, t, grown, out, f"at{k}")
        y = t
    _into(lf, n, y, out)


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
    if len(out.shape) > 4:
        return _concat_any(lf, n, xs, axis, out)
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
        if rank > 4:
            raise UnsupportedOpError(f"{source_of(n)}: {mode} padding of a {rank}-D tensor "
                                     "(up to 4-D; constant padding takes 6)")
        return _pad_by_slices(lf, n, x, before, after, mode, out)
    qvalue = int(quantize_float(np.float32(value), x.scale, x.zero_point))
    if rank > 4:
        return _pad_any(lf, n, x, before, after, qvalue, out)
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


# --- embedding: nn.Embedding / F.embedding of int32 token ids (a model input) ----------------
def embedding(lf, n: FxNode, out: Tensor, act) -> None:
    table, ids = lf.operand(n.args[0], n), lf.values.get(node_arg(n, 1, "indices"))
    if ids is None or ids.dtype != "int32":
        raise UnsupportedOpError(f"{source_of(n)}: its token ids are computed in the model; "
                                 "mcutorch takes them as a model input (an integer tensor)")
    if table.dtype != "int8" or len(table.shape) != 2 or not np.isscalar(table.scale):
        raise UnsupportedOpError(f"{source_of(n)}: its table is {table.dtype}{list(table.shape)} "
                                 "with per-row scales; mcutorch needs an int8 [V, D] table "
                                 "quantized per tensor")
    lf.emit("embedding", [ids, table], out, {}, n)  # padding_idx: training only (torch's rule)


def embedding_precheck(n: FxNode) -> None:
    """Before calibration: the ids are a model input of an integer dtype."""
    ids = node_arg(n, 1, "indices")
    if not (isinstance(ids, FxNode) and ids.op == "placeholder"):
        raise UnsupportedOpError(f"{source_of(n)}: its token ids are computed in the model; "
                                 "mcutorch takes them as a model input (an integer tensor)")


_SLICES = {A.slice.Tensor: slice_tensor, A.select.int: select, A.narrow.default: narrow,
           A.flip.default: flip, A.expand.default: expand, A.repeat.default: repeat,
           A.tile.default: repeat}


def strided_slice(lf, n: FxNode, out: Tensor, act) -> None:
    _SLICES[n.target](lf, n, out, act)


# registry op name -> builder; ACT: the builders that apply `act` (the output clamp)
BUILDERS = {"transpose": permute, "concat": cat, "pad": pad, "reshape": reshape,
            "strided_slice": strided_slice, "gather": gather, "embedding": embedding}
ACT = set()
PRECHECK = {embedding: embedding_precheck}
