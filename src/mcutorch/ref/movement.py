"""Data movement: transpose, concat, pad, copy. No arithmetic; outputs share the input's qparams.
transpose, concat, pad, copy and strided_slice move int8 or int16 elements alike (the output has
the input's dtype; docs/numerics.md section 6); gather stays int8.

Rank convention (all movement attributes): a tensor of rank r <= 4 is addressed as the 4-D tensor
obtained by prepending 4 - r unit dims, so its dim k is 4-D dim k + 4 - r ("right-aligned", as in
numpy broadcasting). Attributes always name 4-D dims:
  - transpose: perm0..perm3 is a permutation of 0..3 that keeps the prepended dims in place
    (perm[i] == i for i < 4 - r); the output has rank r. [N, C] -> [C, N] is perm (0, 1, 3, 2).
  - concat: `axis` is a 4-D dim in [4 - r, 3] (never negative); the channel axis is always 3.
  - pad: before0..3 / after0..3 per 4-D dim; the prepended dims take no padding.
The helpers `transpose_attrs`, `concat_attrs` and `pad_attrs` convert rank-r PyTorch-style
arguments into these attributes.

strided_slice addresses ranks r <= 6 the same way as 6-D tensors (6 - r unit dims prepended);
`slice_attrs` converts rank-r (start, step, size) lists into its attributes; gather's `axis` is a
6-D dim too (`gather_attrs`).
"""
from __future__ import annotations

import numpy as np

from mcutorch.ref._common import INT8_MAX, INT8_MIN, INT16_MAX, as_activation, as_array, check


def _lead(x, op: str) -> int:
    """Number of unit dims prepended to view x as 4-D."""
    check(1 <= x.ndim <= 4, f"{op}: rank {x.ndim} not in 1..4")
    return 4 - x.ndim


def _local_axis(axis: int, rank: int, op: str) -> int:
    check(4 - rank <= axis <= 3, f"{op}: axis {axis} is not a 4-D dim of a rank-{rank} tensor")
    return axis - (4 - rank)


def transpose_attrs(perm) -> dict:
    """Attributes for a rank-r permutation (PyTorch/numpy `perm`, non-negative)."""
    lead = 4 - len(perm)
    full = list(range(lead)) + [p + lead for p in perm]
    return {f"perm{i}": p for i, p in enumerate(full)}


def concat_attrs(axis: int, rank: int) -> dict:
    """Attributes for concatenating rank-r tensors along rank-r `axis` (negative allowed here)."""
    return {"axis": axis % rank + 4 - rank}


def pad_attrs(pads, value: int) -> dict:
    """Attributes from rank-r [(before, after), ...] per dim, outermost first."""
    lead = [(0, 0)] * (4 - len(pads))
    full = lead + [tuple(p) for p in pads]
    attrs = {f"before{i}": b for i, (b, _) in enumerate(full)}
    attrs.update({f"after{i}": a for i, (_, a) in enumerate(full)})
    attrs["value"] = value
    return attrs


def transpose(x, *, perm0, perm1, perm2, perm3):
    """numpy-style x4.transpose(perm): y.shape[k] = x4.shape[perm_k]; output rank = input rank."""
    # x: rank r <= 4, int8  ->  y: rank r, int8
    as_activation(x, "x")
    lead = _lead(x, "transpose")
    perm = (perm0, perm1, perm2, perm3)
    check(sorted(perm) == [0, 1, 2, 3], f"transpose: {perm} is not a permutation of 0..3")
    check(all(perm[i] == i for i in range(lead)),
          f"transpose: {perm} moves a prepended unit dim of a rank-{x.ndim} tensor")
    y = x.reshape((1,) * lead + x.shape).transpose(perm)
    return np.ascontiguousarray(y.reshape(y.shape[lead:]))


def concat(*xs, axis):
    """Join same-rank int8 tensors along 4-D dim `axis`."""
    # xs: k >= 1 tensors of rank r, equal except along axis  ->  y: rank r, int8
    check(len(xs) >= 1, "concat: no inputs")
    for i, x in enumerate(xs):  # int8, or int16 (docs/numerics.md section 6): one dtype
        as_activation(x, f"input {i}")
        check(x.dtype == xs[0].dtype, f"concat: input {i} is {x.dtype}, input 0 {xs[0].dtype}")
    rank = xs[0].ndim
    _lead(xs[0], "concat")
    check(all(x.ndim == rank for x in xs), "concat: inputs differ in rank")
    local = _local_axis(axis, rank, "concat")
    other = [x.shape[:local] + x.shape[local + 1:] for x in xs]
    check(all(s == other[0] for s in other), "concat: inputs differ off the concat axis")
    return np.concatenate(xs, axis=local)


def pad_shape(x, *, before0, before1, before2, before3, after0, after1, after2, after3, **_):
    """The shape pad returns (ValueError outside its domain), without allocating it."""
    as_activation(x, "x")
    lead = _lead(x, "pad")
    before = (before0, before1, before2, before3)
    after = (after0, after1, after2, after3)
    check(min(before + after) >= 0, "pad: negative padding")
    check(not any(before[:lead]) and not any(after[:lead]),
          f"pad: padding on a prepended unit dim of a rank-{x.ndim} tensor")
    return tuple(d + b + a for d, b, a in zip(x.shape, before[lead:], after[lead:]))


def pad(x, *, before0, before1, before2, before3, after0, after1, after2, after3, value):
    """Constant padding with the int8 `value` (the input's zero point for a "zero" pad)."""
    # x: rank r <= 4, int8  ->  y: rank r, int8, dim k grows by before_k + after_k
    pad_shape(x, before0=before0, before1=before1, before2=before2, before3=before3,
              after0=after0, after1=after1, after2=after2, after3=after3)
    lo, hi = (-INT16_MAX, INT16_MAX) if x.dtype == np.int16 else (INT8_MIN, INT8_MAX)
    check(lo <= value <= hi, f"pad: value {value} is not {x.dtype} [{lo}, {hi}]")
    lead = 4 - x.ndim
    before = (before0, before1, before2, before3)[lead:]
    after = (after0, after1, after2, after3)[lead:]
    return np.pad(x, list(zip(before, after)), constant_values=x.dtype.type(value))


def copy(x):
    """Identity (a byte copy; the runtime uses it for reshapes that cannot alias)."""
    # x: (...) int8  ->  y: same shape, int8
    as_activation(x, "x")
    return x.copy()


SLICE_RANK = 6


def slice_attrs(start, step, size) -> dict:
    """strided_slice attributes from rank-r per-dim start, step and size (outermost first)."""
    lead = SLICE_RANK - len(start)
    attrs = {}
    for name, vals, pad in (("start", start, 0), ("step", step, 1), ("size", size, 1)):
        attrs.update({f"{name}{k}": int(v) for k, v in enumerate([pad] * lead + list(vals))})
    return attrs


def _slice_dims(x, attrs: dict) -> list[tuple[int, int, int]]:
    """(start, step, size) per 6-D dim, checked against x's 6-D shape (the domain)."""
    as_activation(x, "x")
    check(1 <= x.ndim <= SLICE_RANK, f"strided_slice: rank {x.ndim} not in 1..{SLICE_RANK}")
    lead = SLICE_RANK - x.ndim
    dims = (1,) * lead + x.shape
    found = []
    for k, n in enumerate(dims):
        start, step, size = (attrs[f"{a}{k}"] for a in ("start", "step", "size"))
        check(size >= 1 and (k >= lead or size == 1),
              f"strided_slice: size{k} = {size} (every size >= 1; 1 on a prepended unit dim)")
        check(0 <= start < n, f"strided_slice: start{k} = {start} outside [0, {n})")
        check(-n <= step <= n, f"strided_slice: step{k} = {step} outside [-{n}, {n}]")
        last = start + (size - 1) * step
        check(0 <= last < n, f"strided_slice: dim {k} reads index {last} outside [0, {n})")
        found.append((start, step, size))
    return found


def strided_slice_shape(x, **attrs):
    """The shape strided_slice returns (ValueError outside its domain), without allocating it."""
    dims = _slice_dims(x, attrs)
    return tuple(size for _, _, size in dims[SLICE_RANK - x.ndim:])


def strided_slice(x, *, start0, start1, start2, start3, start4, start5, step0, step1, step2,
                  step3, step4, step5, size0, size1, size2, size3, size4, size5):
    """y[i0..i5] = x6[start0 + i0 * step0, ..., start5 + i5 * step5]: slicing with any step
    (negative: flip; 0: repeat one element, as expand), output rank = input rank."""
    # x: rank r <= 6, int8  ->  y: rank r, int8, dim k of size size_k
    attrs = dict(locals())
    del attrs["x"]
    dims = _slice_dims(x, attrs)
    x6 = x.reshape((1,) * (SLICE_RANK - x.ndim) + x.shape)
    index = np.ix_(*[start + step * np.arange(size) for start, step, size in dims])
    return np.ascontiguousarray(x6[index].reshape(strided_slice_shape(x, **attrs)))


def gather_attrs(axis: int, rank: int) -> dict:
    """gather's attribute for rank-r `axis` (negative allowed here)."""
    return {"axis": axis % rank + SLICE_RANK - rank}


def gather_shape(x, indices, *, axis):
    """The shape gather returns (ValueError outside its domain), without allocating it."""
    as_array(x, np.int8, "x")
    as_array(indices, np.int32, "indices", 1)
    check(1 <= x.ndim <= SLICE_RANK, f"gather: rank {x.ndim} not in 1..{SLICE_RANK}")
    lead = SLICE_RANK - x.ndim
    check(lead <= axis < SLICE_RANK,
          f"gather: axis {axis} is not a 6-D dim of a rank-{x.ndim} tensor")
    n = x.shape[axis - lead]
    check(indices.size >= 1, "gather: no indices (an empty result)")
    check(int(indices.min()) >= 0 and int(indices.max()) < n,
          f"gather: an index outside [0, {n})")
    return x.shape[:axis - lead] + (indices.size,) + x.shape[axis - lead + 1:]


def gather(x, indices, *, axis):
    """y[..., j, ...] = x[..., indices[j], ...] along 6-D dim `axis` (index_select)."""
    # x: rank r <= 6, int8; indices: (W,) int32 in [0, n_axis)  ->  y: rank r, n_axis -> W
    gather_shape(x, indices, axis=axis)
    return np.ascontiguousarray(np.take(x, indices, axis=axis - (SLICE_RANK - x.ndim)))


EMBED_RANK = SLICE_RANK - 1  # ids of rank <= 5: y = ids' shape + (D,) stays within rank 6


def embedding_shape(ids, table):
    """The shape embedding returns (ValueError outside its domain), without allocating it."""
    as_array(ids, np.int32, "ids")
    as_array(table, np.int8, "table", 2)
    check(1 <= ids.ndim <= EMBED_RANK, f"embedding: ids of rank {ids.ndim} not in 1..{EMBED_RANK}")
    check(ids.size >= 1, "embedding: no token ids (an empty result)")
    n = table.shape[0]
    bad = np.flatnonzero((ids < 0) | (ids >= n))
    if bad.size:
        at = tuple(int(i) for i in np.unravel_index(bad[0], ids.shape))
        raise ValueError(f"embedding: token id {int(ids[at])} at index {list(at)} outside "
                         f"[0, {n}) (the table has {n} rows)")
    return ids.shape + table.shape[1:]


def embedding(ids, table):
    """y[i, :] = table[ids[i], :] for every index i of ids (nn.Embedding's lookup)."""
    # ids: rank r <= 5, int32 in [0, V); table: (V, D) int8  ->  y: ids' shape + (D,), int8
    embedding_shape(ids, table)
    return np.ascontiguousarray(table[ids])


RING_HEAD = 16  # a ring block: int32 position p (little-endian), 12 unused bytes, then slots


def ring_block(history: np.ndarray, slots: int) -> np.ndarray:
    """The initial block (uint8) of a ring window of `slots` frames whose first slots - 1 frames
    are `history` (its leading axis; the newest last), position 0: slots 1..n-1 hold them and
    slots n+1..2n-2 their mirror copies; slots 0 and n are written before anything reads them."""
    n, frames = slots, np.ascontiguousarray(history).view(np.uint8).reshape(slots - 1, -1)
    body = np.zeros((2 * n - 1, frames.shape[1]), np.uint8)
    body[1:n] = frames
    body[n + 1:] = frames[:n - 2]
    return np.concatenate([np.zeros(RING_HEAD, np.uint8), body.ravel()])


def ring_position(ring, slots: int) -> int:
    """p of a ring block (ValueError outside [0, slots): a corrupt state is never read through)."""
    p = int(np.asarray(ring, np.uint8)[:4].view("<i4")[0])
    check(0 <= p < slots, f"ring_write: position {p} outside [0, {slots})")
    return p


def ring_write(x, *block, slots):
    """One frame into a ring window's block (docs/numerics.md, ring_write): the new block.

    p = (p + 1) % n, then x goes to slot p + n - 1 and, when p >= 1, to its mirror slot p - 1;
    the window (slots p .. p + n - 1) is then the last n frames, oldest first. The block is the
    output's own bytes, not an operand (x is the op's one input): the caller passes it after x."""
    # x: one frame, int8/int16, s bytes; block: uint8[16 + (2n - 1) * s] -> the same, updated
    check(len(block) == 1, "ring_write: give x and the window's block")
    ring = block[0]
    x = np.ascontiguousarray(x)
    check(x.dtype in (np.int8, np.int16), f"ring_write: x is {x.dtype}, not int8/int16")
    s, ring = x.nbytes, as_array(ring, np.uint8, "ring", 1)
    check(slots >= 2 and ring.size == RING_HEAD + (2 * slots - 1) * s,
          f"ring_write: a block of {ring.size} bytes is no ring of {slots} frames of {s} bytes")
    p = (ring_position(ring, slots) + 1) % slots
    out, frame = ring.copy(), x.view(np.uint8).ravel()
    for slot in (p + slots - 1, p - 1) if p >= 1 else (p + slots - 1,):
        out[RING_HEAD + slot * s:RING_HEAD + (slot + 1) * s] = frame
    out[:4] = np.array([p], "<i4").view(np.uint8)
    return out
