"""Persistent tensors: a stateful model's state pairs (frontend/state.py) -> one tensor each.

The lifted graph reads state k as an extra input and writes its new value as an extra output.
This pass (last in the pipeline) takes both off the program boundary: the read becomes a
persistent tensor (`Tensor.init`: its initial value, quantized with the read's qparams, in the
program's layout), and the new value is written into it: by the op that computes it, when that
op runs after every read of the old value and reads none itself (SWW's history: the newest k-1
frames of the conv's window, sliced straight into the state), else by a `copy` appended as the
graph's last op. The two share qparams (the quantizer's SharedQuantizationSpec),
so the copy moves bytes. The planner keeps persistent tensors out of the per-invoke arenas.
"""
from __future__ import annotations

from mcutorch.errors import McutorchError
from mcutorch.ir import Graph, Node, same_qparams
from mcutorch.quant import quantize


def run(graph: Graph) -> Graph:
    records = graph.meta.pop("state", [])
    if not records:
        return graph
    reads = [graph.inputs[r["input"]] for r in records]
    news = [graph.outputs[r["output"]] for r in records]
    drop_in = {r["input"] for r in records}
    drop_out = {r["output"] for r in records}
    for k, (read, new, r) in enumerate(zip(reads, news, records)):
        if not same_qparams(read, new) or read.shape != new.shape or read.dtype != new.dtype:
            raise McutorchError(
                f"state {r['name']}: the value written ({new}) and the buffer read ({read}) "
                "need one dtype, shape and qparams (mcutorch's Quantizer shares them; a custom "
                "quantizer must too)")
        init = r["init"].detach().float().numpy()
        if read.layout == "NHWC" and init.ndim == 4:
            init = init.transpose(0, 2, 3, 1)
        read.init = quantize(init.reshape(read.shape), read.scale, read.zero_point)
        read.name = r["name"]
        if not _write_in_place(graph, read, new, news):
            graph.nodes.append(Node("copy", [new], [read], {}, source=f"state {r['name']}"))
    for key in ("inputs", "outputs"):
        drop = drop_in if key == "inputs" else drop_out
        if key in graph.meta:
            graph.meta[key] = [m for i, m in enumerate(graph.meta[key]) if i not in drop]
    graph.inputs = [t for i, t in enumerate(graph.inputs) if i not in drop_in]
    graph.outputs = [t for i, t in enumerate(graph.outputs) if i not in drop_out]
    graph.meta["persistent"] = [{"name": r["name"], "shape": list(t.shape)}
                                for r, t in zip(records, reads)]
    return graph


def _write_in_place(graph: Graph, read, new, news) -> bool:
    """Let the op computing the new value write it into the persistent tensor itself (no copy)
    when it runs after every read of the old value, reads none itself, and the new value is
    nothing else's (no other output, no other state's)."""
    at = {id(n): i for i, n in enumerate(graph.nodes)}
    producer = next((n for n in graph.nodes if new in n.outputs), None)
    if (producer is None or producer.op == "reshape" or len(producer.outputs) != 1
            or any(t is read for t in producer.inputs) or new in graph.inputs
            or sum(t is new for t in graph.outputs) != 1 or sum(t is new for t in news) != 1):
        return False
    readers = [at[id(n)] for n in graph.nodes if any(t is read for t in n.inputs)]
    if readers and max(readers) > at[id(producer)]:
        return False
    later = graph.nodes[at[id(producer)] + 1:]
    if any(new in n.inputs and n.op == "reshape" for n in later):
        return False  # a view of the new value would alias the persistent buffer: keep a copy
    producer.outputs = [read]
    for n in later:
        n.inputs = [read if t is new else t for t in n.inputs]
    return True


def is_persistent(t) -> bool:
    return getattr(t, "init", None) is not None

