"""Pooling (runtime/kernels/pool/): the output shares the input's scale."""
from __future__ import annotations

from mcutorch.ops.conv import OUT_ATTRS, PAD4
from mcutorch.ops.defs import OpDef, Source

# mode (0 nearest, 1 bilinear), then per axis (y = H, x = W) TOSA RESIZE's scale, offset, border
RESIZE_AXES = ("mode", "scale_y_n", "scale_y_d", "offset_y", "border_y", "scale_x_n",
               "scale_x_d", "offset_x", "border_x")
WINDOW = ("kernel_h", "kernel_w", "stride_h", "stride_w", *PAD4)

SAME16 = (("int8", "int8"), ("int16", "int16"))  # int16 x and y (a16w8, format 1.5)


def _c16(op: str) -> dict:
    return {"default": (f"pool/mt_{op}_s8.c", "pool/mt_pool_s16.c")}


OPS = (
    OpDef("max_pool2d", 5, ("x",), ("y",), (*WINDOW, "act_min", "act_max"),
          {"x": "NHWC", "y": "NHWC"}, family="pool",
          sources=(Source("aten.max_pool2d.default", "shared"),
                   Source("aten.max_pool1d.default", "shared"),
                   Source("aten.adaptive_max_pool2d.default", "shared"),
                   Source("aten.adaptive_max_pool1d.default", "shared")),
          qparams="shared", fusable=True, dtypes=SAME16, c_sources=_c16("max_pool2d"),
          doc="padding never wins; 1-D pools lift as [N, C, 1, L], dilated and uneven adaptive "
              "max pooling as gathers + one max_pool2d (frontend/builders/pool.py)"),
    OpDef("avg_pool2d", 6, ("x",), ("y",), (*WINDOW, "count_include_pad", "divisor", *OUT_ATTRS),
          {"x": "NHWC", "y": "NHWC"}, family="pool",
          sources=(Source("aten.avg_pool2d.default", "shared"),
                   Source("aten.adaptive_avg_pool2d.default", "shared"),
                   Source("aten.avg_pool1d.default", "shared"),
                   Source("aten.adaptive_avg_pool1d.default", "shared")),
          qparams="shared", fusable=True, dtypes=SAME16, c_sources=_c16("avg_pool2d"),
          doc="sum(x - in_zp) * reciprocal(count) (TOSA reciprocal_scale); divisor>0 overrides; "
              "a mean over H, W (or every element) lifts to it (frontend/builders/reduce.py)"),
    OpDef("resize", 31, ("x",), ("y",), (*RESIZE_AXES, "mult", "shift", "act_min", "act_max"),
          {"x": "NHWC", "y": "NHWC"}, family="pool", qparams="shared", fusable=True, since=4,
          sources=tuple(Source(f"aten.{v}", "shared") for v in (
              "upsample_nearest2d.vec", "_upsample_nearest_exact2d.vec",
              "upsample_bilinear2d.vec", "upsample_nearest1d.vec",
              "_upsample_nearest_exact1d.vec", "upsample_linear1d.vec")),
          doc="TOSA RESIZE's coordinates: y = o * scale_d + offset, i = floor(y / scale_n); "
              "nearest copies x[i + (2 (y - i n) >= n)], bilinear rq's the 4-tap sum in units "
              "of 1/(scale_y_n scale_x_n); y shares x's qparams"),
)
