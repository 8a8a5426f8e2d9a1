"""Cortex-M backend: pick each op's kernel variant and scratch size (the same on every target)."""
from __future__ import annotations

import numpy as np

from mcutorch.ir import Graph, Node, Tensor
from mcutorch import ops
from mcutorch.ops import DEFAULT_VARIANT
from mcutorch.ref import fold_bias

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def _fold(node: Node) -> bool:
    """Make `node` (fully_connected) a "folded" op: its bias becomes bias - in_zp * sum(w), a new
    constant, and its in_zp attribute 0. False (node unchanged) if bias' does not fit int32.

    Zeroing in_zp keeps the node exact for every reader of the IR (TOSA lowering, Ethos-U
    delegation, the default kernels): f(x, w, bias', in_zp=0) = f(x, w, bias, in_zp).
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


# conv2d_add stages the conv's output of whole pixels, about this many bytes, for add's own
# loop (runtime/kernels/conv/mt_conv_gather.h): one call of that loop per stage, 7 per ResNet-8
# inference (bench.residual); the row blocks of format 1.5 also re-ran the conv's set-up.
CONV_ADD_STAGE = 4096


def scratch_bytes(op: str, shapes, attrs, variant: str = DEFAULT_VARIANT,
                  itemsize: int = 1) -> int:
    """Planned scratch bytes the C kernel of (op, variant) needs for these operand shapes.

    The planner reserves this much in `mt_op_args.scratch`. Every kernel today (all ISA levels)
    accumulates in registers or in bounded stack buffers (a few KiB at most: the gathered windows
    of conv2d and conv_transpose2d, the latter's re-laid phase weights); only matmul without
    transpose_b needs scratch (b transposed, one batch), conv2d_add (a stage of whole output
    pixels: CONV_ADD_STAGE bytes, or 4 pixels or one output row above it, at most the output)
    and the recurrent ops (one step's gates, [B, G*H] in the gates' dtype: 1 B int8, 2 B int16;
    G = 4 lstm, 3 gru, 1 rnn_tanh / rnn_relu; both program readers check the same size).
    `itemsize`: bytes per element of the activations (2 for an int16 matmul).

    >>> scratch_bytes("depthwise_conv2d", [(1, 25, 5, 64), (3, 3, 64)], {"depth_multiplier": 1})
    0
    """
    if op not in ops.BY_NAME or variant not in ops.BY_NAME[op].variants:
        raise KeyError(f"no kernel variant {variant!r} for op {op!r}")
    if op == "matmul" and shapes and not attrs.get("transpose_b"):  # b^T of one batch: K * N
        return shapes[1][-2] * shapes[1][-1] * itemsize
    if op in ("lstm", "gru", "rnn_tanh", "rnn_relu") and shapes:  # one step's gates: B * G * e
        return shapes[0][0] * shapes[0][2] * itemsize
    if op == "conv2d_add" and shapes:  # whole pixels of the conv before the add, >= one row
        n, ho, wo, cout = shapes[5]
        return min(n * ho * wo, max(4, wo, CONV_ADD_STAGE // max(cout, 1))) * cout
    return 0


def select_kernels(graph: Graph) -> Graph:
    """Set node.variant / node.scratch for every op of the graph.

    No variant depends on the target: the default kernels hold the MVE, DSP and pure-C paths in
    one C file, and the firmware's -mcpu (the gcc flags of the target the program records) picks
    one at compile time, bit-exact at all. (A variant for one ISA level would take the target as a
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
            node.variant = DEFAULT_VARIANT
        node.scratch = scratch_bytes(node.op, [t.shape for t in node.inputs], node.attrs,
                                     node.variant, 2 if node.inputs[0].dtype == "int16" else 1)
    return graph
