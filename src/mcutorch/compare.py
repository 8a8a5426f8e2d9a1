"""Agreement with PyTorch, layer by layer: each op fed PyTorch's own int8 input.

PT2E's converted module computes each layer in float between quantize/dequantize pairs; our int8
kernels compute it in integers. Feeding every op the int8 tensor PyTorch produced for its input
isolates each layer's rounding from the errors that accumulate end to end.
"""
from __future__ import annotations

import numpy as np
import torch

from mcutorch.compiler import build_graph
from mcutorch.frontend.capture import as_tuple
from mcutorch.ref import KERNELS


class _Recorder(torch.fx.Interpreter):
    """Runs the converted module and keeps the int8 output of every quantize node (and the bool
    mask of every comparison, as uint8 0/1)."""

    def __init__(self, gm):
        super().__init__(gm)
        self.values: dict[str, np.ndarray] = {}

    def run_node(self, n):
        out = super().run_node(n)
        if (isinstance(out, torch.Tensor) and out.dtype in (torch.int8, torch.bool)
                and n.op == "call_function"):
            self.values[n.name] = out.detach().numpy().astype(np.int8 if out.dtype == torch.int8
                                                              else np.uint8)
        return out


def _ours_layout(value: np.ndarray, t, flattened=None) -> np.ndarray:
    """PyTorch's NCHW value of tensor t in our layout (NHWC; NHWC order in folded flattens)."""
    if t.layout == "NHWC":
        value = value.transpose(0, 2, 3, 1)
    if flattened is not None:
        value = value.reshape(-1, *flattened).transpose(0, 2, 3, 1)
    return value.reshape(t.shape)


def layer_by_layer(qmodel, example_inputs) -> list[dict]:
    """Per op: share of int8 outputs equal to / within 1 LSB of PyTorch's fake-quant layer.

    Example:
        >>> rows = layer_by_layer(qmodel, (x,))
        >>> min(r["within_1lsb"] for r in rows)
        1.0
    """
    graph = build_graph(qmodel)
    rec = _Recorder(qmodel)
    rec.run(*as_tuple(example_inputs))
    qnodes = graph.meta["qnodes"]
    rows = []
    for node in graph.nodes:
        y = node.outputs[0]
        acts = [t for t in node.inputs if not t.is_const]
        if node.op == "reshape" or y.name not in qnodes or any(t.name not in qnodes for t in acts):
            continue
        flat = graph.meta.get("nhwc_flattened", {})
        feed = {id(t): _ours_layout(rec.values[qnodes[t.name]], t, flat.get(t.name))
                for t in acts}
        args = [t.data if t.is_const else feed[id(t)] for t in node.inputs]
        ours = KERNELS[node.op](*args, **node.attrs).astype(np.int32)
        theirs = _ours_layout(rec.values[qnodes[y.name]], y).astype(np.int32)
        diff = np.abs(ours - theirs)
        rows.append({"op": node.op, "output": y.name, "source": node.source,
                     "elements": int(diff.size), "exact": float((diff == 0).mean()),
                     "within_1lsb": float((diff <= 1).mean()), "max_lsb": int(diff.max())})
    return rows
