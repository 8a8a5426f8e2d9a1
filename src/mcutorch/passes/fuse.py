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
    add and skip, of y's shape, exists before the conv runs. The fused op takes the conv's place,
    so no input lives longer; it may then write y over skip's bytes (alias kind `residual`).
    Of two conv operands the later one fuses (the other's input would outlive it otherwise)."""
    producers, consumers = graph.producers(), graph.consumers()
    order = {id(n): i for i, n in enumerate(graph.nodes)}
    fused: dict[int, Node] = {}
    gone: set[int] = set()
    for add in graph.nodes:
        if add.op != "add" or len(add.inputs) != 2 or add.inputs[0] is add.inputs[1]:
            continue
        best = None
        for side, t in enumerate(add.inputs):
            conv, skip = producers.get(t), add.inputs[1 - side]
            if (conv is None or conv.op != "conv2d" or id(conv) in fused or t in graph.outputs
                    or len(consumers.get(t, [])) != 1 or skip.is_const or t.is_const
                    or tuple(skip.shape) != tuple(add.outputs[0].shape)
                    or tuple(t.shape) != tuple(skip.shape) or len(t.shape) != 4
                    or order.get(id(producers.get(skip)), -1) >= order[id(conv)]):
                continue
            if best is None or order[id(conv)] > order[id(best[0])]:
                best = (conv, side, skip)
        if best is None:
            continue
        conv, side, skip = best
        fused[id(conv)] = Node("conv2d_add", [*conv.inputs, skip], list(add.outputs),
                               {**conv.attrs, "add": dict(add.attrs), "mid": conv.outputs[0],
                                "conv_is_b": side == 1}, add.source or conv.source)
        gone.add(id(add))
    graph.nodes = [fused.get(id(n), n) for n in graph.nodes if id(n) not in gone]
    return graph


CONV_PART = {"conv_zp": "out_zp", "conv_min": "act_min", "conv_max": "act_max"}


def split_residual(node: Node) -> tuple[Node, Node, Tensor]:
    """The conv2d and add of a requantized conv2d_add, and the int8 tensor between them (for
    lowerings that emit the pair: TOSA)."""
    y, skip = node.outputs[0], node.inputs[5]
    d, a = ops.get("conv2d"), node.attrs
    mid = Tensor(y.name + "_conv", y.shape, "int8", 1.0, a["conv_zp"])
    conv = Node("conv2d", node.inputs[:5], [mid],
                {k: a[next((f for f, t in CONV_PART.items() if t == k), k)] for k in d.attrs},
                node.source)
    add = Node("add", [mid, skip], [y], {k: a[k] for k in ops.get("add").attrs}, node.source)
    return conv, add, mid
