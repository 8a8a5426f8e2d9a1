"""Cortex-M backend: pick each op's kernel variant and scratch size for the target's ISA level."""
from __future__ import annotations

from ...ir import Graph
from ...targets import Target
from .kernels import scratch_bytes


def select_kernels(graph: Graph, target: Target) -> Graph:
    """Set node.variant / node.scratch for every op of the graph.

    Only the portable kernels ("ref") exist so far; they run on every ISA level.
    """
    for node in graph.nodes:
        if node.op == "reshape":
            continue
        node.variant = "ref"
        node.scratch = scratch_bytes(node.op, [t.shape for t in node.inputs], node.attrs,
                                     node.variant)
    return graph
