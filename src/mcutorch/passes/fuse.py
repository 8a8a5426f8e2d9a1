"""Activation fusion: a standalone ReLU/ReLU6/clamp that keeps its input's qparams merges into the
clamp of the op that produced its input (when that op has no other reader), else becomes `clamp`.
"""
from __future__ import annotations

from mcutorch import ops
from mcutorch.ir import Graph, compose_act, same_qparams

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
