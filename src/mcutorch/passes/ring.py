"""Ring buffers for streaming histories (after passes/persistent.py).

A streaming model keeps the last k-1 frames of a signal in a buffer H and, per call, reads the
window cat(H, x) of k frames and keeps window[1:] as the new H (ds_cnn_sww_streaming:
`window = torch.cat([hist, x], 2); hist.copy_(window[:, :, 1:])`). As lifted, that is a concat
(k frames copied into the window) and a strided_slice (k-1 frames copied back into H) per call.
This pass replaces both by one `ring_write` of the frame into a ring window R (docs/numerics.md,
ring_write): a persistent block of 2k-1 slots and a position, the frame written to two slots,
and every op that read the window reads R in place, k contiguous slots at the position. The
bytes moved per call fall from (2k-1) frames to 2.

The pattern, on the NHWC IR: a persistent H read by nothing but the concat; concat(H, x) of
two inputs along an axis before which every dim is 1 (so a frame is contiguous), x one frame,
one set of qparams; H written by a strided_slice of the window from frame 1 (directly, or
through the persistent pass's copy); the window read only by ops (no reshape, no graph output).
Anything else keeps the concat + slice path, which is exact too.
"""
from __future__ import annotations

from mcutorch.ir import Graph, Node, Tensor, same_qparams
from mcutorch.ref.movement import SLICE_RANK, ring_block


def run(graph: Graph) -> Graph:
    for cat in [n for n in graph.nodes if n.op == "concat" and len(n.inputs) == 2]:
        found = _history(graph, cat)
        if found is not None:
            _rewrite(graph, cat, *found)
    return graph


def _history(graph: Graph, cat: Node):
    """(axis, writers of H) when `cat` is a history window this pass can turn into a ring."""
    (h, x), w = cat.inputs, cat.outputs[0]
    if h.init is None or h.ring or x.init is not None or x.is_const:
        return None
    d = cat.attrs["axis"] - (4 - len(w.shape))  # concat's 4-D axis -> w's dim
    n = w.shape[d] if 0 <= d < len(w.shape) else 0
    if (n < 2 or x.shape[d] != 1 or any(s != 1 for s in w.shape[:d]) or w in graph.outputs
            or not (same_qparams(h, w) and same_qparams(x, w)) or h.dtype != w.dtype):
        return None
    users = graph.consumers()
    writers = [m for m in graph.nodes if h in m.outputs]
    if users.get(h) != [cat] or len(writers) != 1:
        return None
    chain = [writers[0]]
    if chain[0].op == "copy":  # the persistent pass's copy of a slice it could not redirect
        made = [m for m in graph.nodes if chain[0].inputs[0] in m.outputs]
        if (len(made) != 1 or users.get(chain[0].inputs[0]) != chain
                or chain[0].inputs[0] in graph.outputs):
            return None
        chain.insert(0, made[0])
    sl = chain[0]
    lead = SLICE_RANK - len(w.shape)
    want = {**{f"start{lead + j}": int(j == d) for j in range(len(w.shape))},
            **{f"step{lead + j}": 1 for j in range(len(w.shape))},
            **{f"size{lead + j}": s - int(j == d) for j, s in enumerate(w.shape)}}
    if (sl.op != "strided_slice" or sl.inputs[0] is not w
            or any(sl.attrs.get(k) != v for k, v in want.items())):
        return None
    window_users = [m for m in users.get(w, []) if m is not sl]
    if any(m.op == "reshape" for m in window_users):
        return None  # a view of the window would alias the moving bytes: keep the copy path
    return n, chain


def _rewrite(graph: Graph, cat: Node, n: int, chain: list[Node]) -> None:
    (h, x), w = cat.inputs, cat.outputs[0]
    ring = Tensor(h.name, w.shape, w.dtype, w.scale, w.zero_point, layout=w.layout,
                  init=ring_block(h.init, n), ring=True)
    cat.op, cat.inputs, cat.outputs, cat.attrs = "ring_write", [x], [ring], {"slots": n}
    graph.nodes = [m for m in graph.nodes if all(m is not c for c in chain)]
    graph.replace_uses(w, ring)
    for entry in graph.meta.get("persistent", []):
        if entry["name"] == h.name:
            entry.update(shape=list(w.shape), ring=n)
