"""Pooling (runtime/kernels/pool/): the output shares the input's scale."""
from __future__ import annotations

from mcutorch.ops.conv import OUT_ATTRS, PAD4
from mcutorch.ops.defs import OpDef, Source

WINDOW = ("kernel_h", "kernel_w", "stride_h", "stride_w", *PAD4)

OPS = (
    OpDef("max_pool2d", 5, ("x",), ("y",), (*WINDOW, "act_min", "act_max"),
          {"x": "NHWC", "y": "NHWC"}, family="pool",
          sources=(Source("aten.max_pool2d.default", "shared"),
                   Source("aten.max_pool1d.default", "shared"),
                   Source("aten.adaptive_max_pool2d.default", "shared"),
                   Source("aten.adaptive_max_pool1d.default", "shared")),
          qparams="shared", fusable=True,
          doc="padding never wins; 1-D pools lift as [N, C, 1, L], dilated and uneven adaptive "
              "max pooling as gathers + one max_pool2d (frontend/builders/pool.py)"),
    OpDef("avg_pool2d", 6, ("x",), ("y",), (*WINDOW, "count_include_pad", "divisor", *OUT_ATTRS),
          {"x": "NHWC", "y": "NHWC"}, family="pool",
          sources=(Source("aten.avg_pool2d.default", "shared"),
                   Source("aten.adaptive_avg_pool2d.default", "shared"),
                   Source("aten.avg_pool1d.default", "shared"),
                   Source("aten.adaptive_avg_pool1d.default", "shared")),
          qparams="shared", fusable=True,
          doc="sum(x - in_zp) * reciprocal(count) (TOSA reciprocal_scale); divisor>0 overrides; "
              "a mean over H, W (or every element) lifts to it (frontend/builders/reduce.py)"),
)
