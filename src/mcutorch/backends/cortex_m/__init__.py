"""Cortex-M backend: pick each op's kernel variant and scratch size for the target's ISA level."""
from __future__ import annotations

from ...ir import Graph
from ...targets import Target
from .kernels import scratch_bytes


def select_kernels(graph: Graph, target: Target) -> Graph:
    """Set node.variant / node.scratch for every op of the graph.

    One variant ("ref") per op: its C file holds the MVE, DSP and pure-C paths, and the
    firmware's -mcpu (the target's gcc flags) picks one at compile time, bit-exact at all.
    """
    for node in graph.nodes:
        if node.op == "reshape":
            continue
        node.variant = "ref"
        node.scratch = scratch_bytes(node.op, [t.shape for t in node.inputs], node.attrs,
                                     node.variant)
    return graph
