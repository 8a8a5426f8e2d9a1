"""Explicit asymmetric padding: a constant pad of H/W with the input's zero point (real 0.0) that
feeds only a convolution folds into the convolution's own (top, left, bottom, right) padding.
"""
from __future__ import annotations

from mcutorch.ir import Graph


def run(graph: Graph) -> Graph:
    producers, consumers = graph.producers(), graph.consumers()
    dead = set()
    for node in graph.nodes:
        if node.op != "conv2d":
            continue
        pad = producers.get(node.inputs[0])
        if pad is None or pad.op != "pad" or len(consumers[pad.outputs[0]]) != 1:
            continue
        src = pad.inputs[0]
        before, after = pad.attrs["before"], pad.attrs["after"]
        if (len(before) != 4 or before[:2] != (0, 0) or after[:2] != (0, 0)
                or pad.attrs["value"] != src.zero_point or pad.outputs[0] in graph.outputs):
            continue
        top, left, bottom, right = node.attrs["padding"]
        node.attrs["padding"] = (top + before[2], left + before[3], bottom + after[2],
                                 right + after[3])
        node.inputs[0] = src
        dead.add(id(pad))
    graph.nodes = [n for n in graph.nodes if id(n) not in dead]
    return graph
