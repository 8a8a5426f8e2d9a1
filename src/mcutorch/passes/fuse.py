"""Activation fusion: a standalone ReLU/ReLU6/clamp that keeps its input's qparams merges into the
clamp of the op that produced its input (when that op has no other reader), else becomes `clamp`.
"""
from __future__ import annotations

from mcutorch import ops
from mcutorch.ir import Graph, Node, Tensor, compose_act, same_qparams

FUSABLE = ops.with_fact("fusable")  # ops with act_min/act_max that take a following clamp


def run(graph: Graph) -> Graph:
    producers, consumers = graph.producers(), graph.consumers()
    keep = []
    for node in graph.nodes:
        x, y = (node.inputs[0], node.outputs[0]) if node.inputs else (None, None)
        if node.op != "rescale" or not same_qparams(x, y):
            keep.append(node)
            continue
        prod = producers.get(x)
        if (prod is not None and prod.op in FUSABLE and len(consumers.get(x, [])) == 1
                and x not in graph.outputs):
            prod.attrs["act"] = compose_act(prod.attrs["act"], node.attrs["act"])
            prod.outputs = [y]
            continue
        node.op = "clamp"
        keep.append(node)
    graph.nodes = keep
    return graph


def residuals(graph: Graph) -> Graph:
    """add(conv2d(x), skip) -> conv2d_add(x, w, b, skip), when the conv's output feeds only that
    add and skip, of its shape, exists before the conv runs. The fused op takes the conv's place,
    so no input lives longer; it may then write y over skip's bytes (alias kind `residual`).
    Of two conv operands the later one fuses (the other's input would outlive it otherwise)."""
    producers, consumers = graph.producers(), graph.consumers()
    order = {id(n): i for i, n in enumerate(graph.nodes)}
    fused, gone = {}, set()
    for add in (n for n in graph.nodes if n.op == "add" and n.inputs[0] is not n.inputs[1]):
        best = None
        for side, (t, skip) in enumerate((add.inputs, add.inputs[::-1])):
            conv = producers.get(t)
            if (conv is not None and conv.op == "conv2d" and id(conv) not in fused
                    and consumers.get(t) == [add] and t not in graph.outputs and not skip.is_const
                    and len(t.shape) == 4 and t.shape == skip.shape == add.outputs[0].shape
                    and t.dtype == skip.dtype == "int8"  # conv2d_add has int8 kernels only
                    and order.get(id(producers.get(skip)), -1) < order[id(conv)]
                    and (best is None or order[id(conv)] > order[id(best[0])])):
                best = (conv, side, skip)
        if best is not None:
            conv, side, skip = best
            fused[id(conv)] = Node("conv2d_add", [*conv.inputs, skip], add.outputs,
                                   {**conv.attrs, "add": add.attrs, "mid": conv.outputs[0],
                                    "conv_is_b": side == 1}, add.source)
            gone.add(id(add))
    graph.nodes = [fused.get(id(n), n) for n in graph.nodes if id(n) not in gone]
    return graph


def split_residual(node: Node) -> tuple[Node, Node]:
    """The conv2d and the add of a requantized conv2d_add (for lowerings that emit the pair)."""
    a, y = node.attrs, node.outputs[0]
    mid = Tensor(y.name + "_conv", y.shape, "int8", 1.0, a["conv_zp"])
    names = {"out_zp": "conv_zp", "act_min": "conv_min", "act_max": "conv_max"}
    conv = Node("conv2d", node.inputs[:5], [mid],
                {k: a[names.get(k, k)] for k in ops.get("conv2d").attrs}, node.source)
    add = Node("add", [mid, node.inputs[5]], [y], {k: a[k] for k in ops.get("add").attrs})
    return conv, add
