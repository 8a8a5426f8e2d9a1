"""The pass pipeline: each pass is `run(graph) -> graph`; verify() runs after every one."""
from __future__ import annotations

from mcutorch.ir import Graph, verify
from mcutorch.passes import fuse, layout, padding, persistent, recurrent, requant, ring

PIPELINE = (
    ("fuse_activations", fuse.run),  # standalone clamp -> producer's act range, or a clamp op
    ("fold_padding", padding.run),  # zero-point pad -> conv's explicit asymmetric padding
    ("to_nhwc", layout.run),  # NCHW -> NHWC, weight re-layout, flatten order into FC weights
    ("fuse_residuals", fuse.residuals),  # add(conv2d(x), skip) -> conv2d_add, y over skip
    ("requantize", requant.run),  # scales -> int attributes, mult/shift/table constants
    ("persistent", persistent.run),  # state pairs -> persistent tensors + a last copy each
    ("ring_buffers", ring.run),  # history = cat(history, frame)[1:] -> ring_write + ring window
    ("fuse_recurrent", recurrent.run),  # an unrolled LSTM / GRU's equal steps -> one lstm / gru
)


def run_all(graph: Graph, skip: tuple[str, ...] = ()) -> Graph:
    """Run every pass in order but those named in `skip` (optional ones: "ring_buffers",
    "fuse_recurrent"); the
    result is ready for planning and emission."""
    from mcutorch.frontend.lift import check_int16

    for name, fn in PIPELINE:
        if name not in skip:
            graph = verify(fn(graph), stage=name)
    check_int16(graph.nodes)  # the ops passes added (a layout transpose) meet the int16 rule too
    return verify(graph, final=True, stage="passes")
