"""Cortex-M backend: pick each op's kernel variant and scratch size (the same on every target)."""
from __future__ import annotations

import numpy as np

from mcutorch.ir import Graph, Node, Tensor
from mcutorch.ref import fold_bias
from mcutorch.backends.cortex_m.kernels import scratch_bytes

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def _fold(node: Node) -> bool:
    """Make `node` (fully_connected) a "folded" op: its bias becomes bias - in_zp * sum(w), a new
    constant, and its in_zp attribute 0. False (node unchanged) if bias' does not fit int32.

    Zeroing in_zp keeps the node exact for every reader of the IR (TOSA lowering, Ethos-U
    delegation, the "ref" kernels): ref(x, w, bias', in_zp=0) = ref(x, w, bias, in_zp).
    """
    x, weight, bias = node.inputs[:3]
    if weight.data is None or bias.data is None:
        return False
    in_zp = int(node.attrs["in_zp"])
    folded = fold_bias(weight.data, bias.data, in_zp)
    if folded.min(initial=0) < INT32_MIN or folded.max(initial=0) > INT32_MAX:
        return False
    if in_zp != 0:
        node.inputs[2] = Tensor(f"{bias.name}_folded", bias.shape, "int32", bias.scale,
                                bias.zero_point, folded.astype(np.int32), bias.layout)
        node.attrs["in_zp"] = 0
    return True


def select_kernels(graph: Graph) -> Graph:
    """Set node.variant / node.scratch for every op of the graph.

    No variant depends on the target: "ref" kernels hold the MVE, DSP and pure-C paths in one C
    file, and the firmware's -mcpu (the gcc flags of the target the program records) picks one
    at compile time, bit-exact at all. (A variant for one ISA level would take the target as a
    parameter again.) fully_connected takes the
    "folded" variant on every target (it pays on all: no per-call weight sums) whenever its
    folded bias fits int32 (`_fold`). Running this twice is harmless (folding is idempotent).
    """
    for node in graph.nodes:
        if node.op == "reshape":
            continue
        if node.op == "fully_connected" and (node.variant == "folded" or _fold(node)):
            node.variant = "folded"
        else:
            node.variant = "ref"
        node.scratch = scratch_bytes(node.op, [t.shape for t in node.inputs], node.attrs,
                                     node.variant)
    return graph
