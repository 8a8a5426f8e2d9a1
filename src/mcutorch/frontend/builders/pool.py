"""Lift builders of pooling and means: max/avg pooling, adaptive and global average pooling,
the mean of every element.

Each builder is called as builder(lifter, fx node, output IR tensor, act) and emits IR nodes
through `lifter.emit` (frontend/lift.py Lifter)."""
from __future__ import annotations

import math
import operator

import numpy as np
from torch.fx import Node as FxNode

from mcutorch.errors import UnsupportedOpError
from mcutorch.frontend.builders._common import FULL, A, node_arg, pair
from mcutorch.frontend.capture import source_of
from mcutorch.ir import Tensor
from mcutorch.ref.pool import resize_axis


VALUES_INDICES = {A.adaptive_max_pool2d.default, A.adaptive_max_pool1d.default}
INDICES = ("return_indices=True: the indices of the maxima (int64) cannot reach a quantized op "
           "or the model output; mcutorch lowers the pooled values only (return_indices=False)")


def indices_used(node: FxNode) -> bool:
    """Whether an adaptive max pool's indices (getitem 1) are used (refused before calibration)."""
    return node.target in VALUES_INDICES and any(u.args[1] != 0 for u in node.users)


def is_values(node: FxNode) -> bool:
    """getitem(adaptive max pool, 0): the pooled values."""
    return (node.op == "call_function" and node.target is operator.getitem
            and getattr(node.args[0], "target", None) in VALUES_INDICES)


def take_values(gm) -> None:
    """getitem(adaptive_max_pool(x), 0) -> the pool node itself, its value the pooled tensor
    (lift's tidied copy of the graph; the indices were refused)."""
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target in VALUES_INDICES:
            node.meta["val"] = node.meta["val"][0]
            for user in list(node.users):
                if is_values(user):
                    user.replace_all_uses_with(node)
                    gm.graph.erase_node(user)


MAX_1D = {A.max_pool1d.default, A.adaptive_max_pool1d.default}
ONE_D = MAX_1D | {A.avg_pool1d.default, A.adaptive_avg_pool1d.default}
MAX = MAX_1D | {A.max_pool2d.default, A.adaptive_max_pool2d.default}


def as_2d(lf, n: FxNode, x: Tensor, out: Tensor):
    """(x, out, finish) of a pooling node; `finish()` emits the reshape back to out. A 1-D pool
    on [N, C, L] is a 2-D pool with a 1 x k window: on [N, C, 1, L] (stored NHWC [N, 1, L, C]:
    transposes in and out, the kernels' channel-innermost loops), or for a max pool of fewer
    than 8 channels on [N, 1, C, L] (stored [N, C, L, 1], the bytes of [N, C, L]: the reshapes
    move nothing, and the max kernel's one-channel path is faster than the transposes)."""
    if n.target not in ONE_D:
        return x, out, lambda: None
    if len(x.shape) != 3:
        raise UnsupportedOpError(f"{source_of(n)}: 1-D pooling needs an [N, C, L] input")
    rows = n.target in MAX_1D and x.shape[1] < 8
    as4 = (lambda s: (s[0], 1, *s[1:])) if rows else (lambda s: (*s[:2], 1, s[2]))
    x4 = lf.new_tensor(out.name + "_in2d", as4(x.shape), x.scale, x.zero_point, dtype=x.dtype,
                       layout="NCHW")
    y4 = lf.new_tensor(out.name + "_2d", as4(out.shape), out.scale, out.zero_point,
                       dtype=out.dtype, layout="NCHW")
    lf.emit("reshape", [x], x4, {}, n)
    return x4, y4, lambda: lf.emit("reshape", [y4], out, {}, n)


def _window_args(n: FxNode):
    """(kernel, stride, padding, dilation) of a max/avg pool node as (h, w) pairs (1-D: h = 1)."""
    one = n.target in ONE_D
    fix = (lambda v, d: (d, pair(v, 1)[0])) if one else (lambda v, d: pair(v))
    kernel = fix(n.args[1], 1)
    stride = fix(node_arg(n, 2, "stride", None) or n.args[1], 1)
    padding = fix(node_arg(n, 3, "padding", 0), 0)
    dilation = fix(node_arg(n, 4, "dilation", 1), 1) if n.target in MAX else (1, 1)
    return kernel, stride, padding, dilation


def pool(lf, n: FxNode, out: Tensor, act) -> None:
    """max_pool1d/2d, avg_pool1d/2d; dilated max pooling is `max_windows` (exact)."""
    x, out, finish = as_2d(lf, n, lf.operand(n.args[0], n), out)
    is_max = n.target in MAX
    kernel, stride, (ph, pw), dilation = _window_args(n)
    if is_max:
        ceil = bool(node_arg(n, 5, "ceil_mode", False))
        include_pad, divisor = False, 0
    else:
        ceil = bool(node_arg(n, 4, "ceil_mode", False))
        include_pad = bool(node_arg(n, 5, "count_include_pad", True))
        divisor = int(node_arg(n, 6, "divisor_override", None) or 0)
    if dilation != (1, 1):
        axes = [[[o * s - p + j * d for j in range(k)] for o in range(want)]
                for want, k, s, p, d in zip(out.shape[2:], kernel, stride, (ph, pw), dilation)]
        max_windows(lf, n, x, out, axes, act)
        return finish()
    padding = [ph, pw, ph, pw]
    extras = []
    for i, (size, k, s) in enumerate(zip(x.shape[2:], kernel, stride)):
        want = out.shape[2 + i]
        extra = (want - 1) * s + k - (size + 2 * padding[i])
        if extra > 0 and not ceil:
            raise UnsupportedOpError(f"{source_of(n)}: inconsistent pooling shape")
        extras.append(max(extra, 0))
    if any(extras) and not is_max and include_pad and not divisor and (ph or pw):
        # ceil_mode counting padding: PyTorch counts the padding but not the ceil overhang past
        # it, i.e. the window's elements inside the padded input. Pad explicitly (the zero point:
        # real 0) and count only what lies inside the padded tensor.
        xs = (*x.shape[:2], x.shape[2] + 2 * ph, x.shape[3] + 2 * pw)
        padded = lf.new_tensor(out.name + "_padded", xs, x.scale, x.zero_point, layout="NCHW")
        lf.emit("pad", [x], padded, {"before": (0, 0, ph, pw), "after": (0, 0, ph, pw),
                                     "value": x.zero_point}, n)
        x, padding, include_pad = padded, [0, 0, 0, 0], False
    elif any(extras) and not is_max and include_pad and not divisor:
        include_pad = False  # no padding to count: the ceil overhang is never counted
    padding[2] += extras[0]
    padding[3] += extras[1]
    attrs = {"kernel": kernel, "stride": stride, "padding": tuple(padding), "act": act,
             "count_include_pad": int(include_pad), "divisor": divisor}
    lf.emit("max_pool2d" if is_max else "avg_pool2d", [x], out, attrs, n)
    finish()


def max_windows(lf, n: FxNode, x: Tensor, out: Tensor, axes, act) -> None:
    """y[i, j] = max of x over rows axes[0][i] x columns axes[1][j] (index lists; an index
    outside x is padding, which never wins), exact and one axis at a time (max is separable):
    every window of the axis is made K long by repeating one of its own elements (max is
    idempotent), the windows are gathered side by side along the axis, and a max_pool2d with
    kernel = stride = K along it takes the max of each (the last one applies the clamp)."""
    for axis, windows in ((2, axes[0]), (3, axes[1])):
        size = x.shape[axis]
        if any(all(not 0 <= i < size for i in w) for w in windows):  # PyTorch: -inf
            raise UnsupportedOpError(f"{source_of(n)}: a max pooling window of padding only")
        k = max(len(w) for w in windows)
        index = []
        for w in windows:
            inside = [i for i in w if 0 <= i < size]
            index += inside + [inside[-1]] * (k - len(inside))
        name = f"{out.name}_{'rows' if axis == 2 else 'cols'}"
        x = _gather(lf, n, x, axis, index, name)
        if k == 1 and axis == 2:
            continue
        kernel = (k, 1) if axis == 2 else (1, k)
        y = out if axis == 3 else lf.new_tensor(
            name + "_max", (*x.shape[:2], len(windows), x.shape[3]), x.scale, x.zero_point,
            layout="NCHW")
        lf.emit("max_pool2d", [x], y, {"kernel": kernel, "stride": kernel, "padding": (0,) * 4,
                                       "act": act if axis == 3 else FULL,
                                       "count_include_pad": 0, "divisor": 0}, n)
        x = y


def adaptive_max(lf, n: FxNode, out: Tensor, act) -> None:
    """adaptive_max_pool1d/2d (the values; the indices are refused before calibration):
    max_pool2d when the windows tile the input, else `max_windows` on PyTorch's windows."""
    x, out, finish = as_2d(lf, n, lf.operand(n.args[0], n), out)
    (h, w), (oh, ow) = x.shape[2:], out.shape[2:]
    if h % oh == 0 and w % ow == 0:
        k = (h // oh, w // ow)
        lf.emit("max_pool2d", [x], out, {"kernel": k, "stride": k, "padding": (0, 0, 0, 0),
                                         "act": act, "count_include_pad": 0, "divisor": 0}, n)
    else:
        axes = [[list(range(a, b)) for a, b in adaptive_windows(size, o)]
                for size, o in ((h, oh), (w, ow))]
        max_windows(lf, n, x, out, axes, act)
    finish()


def mean_all(lf, n: FxNode, x: Tensor, out: Tensor, act) -> None:
    """The mean of every element: one avg_pool2d window over x reshaped to [1, 1, size/W, W]."""
    window = (math.prod(x.shape) // x.shape[-1], x.shape[-1]) if x.shape else (1, 1)
    flat = lf.new_tensor(out.name + "_flat", (1, 1, *window), x.scale, x.zero_point,
                         layout="NCHW")
    pooled = lf.new_tensor(out.name + "pool", (1, 1, 1, 1), out.scale, out.zero_point,
                           layout="NCHW")
    lf.emit("reshape", [x], flat, {}, n)
    lf.emit("avg_pool2d", [flat], pooled, {"kernel": window, "stride": window, "act": act,
                                           "padding": (0, 0, 0, 0), "count_include_pad": 0,
                                           "divisor": 0}, n)
    lf.emit("reshape", [pooled], out, {}, n)


def global_pool(lf, n: FxNode, out: Tensor, act) -> None:
    x = lf.operand(n.args[0], n)
    rank, mean = len(x.shape), n.target in (A.mean.dim, A.mean.default)
    dims = sorted({d % max(rank, 1) for d in node_arg(n, 1, "dim", None) or range(rank)} if mean
                  else ())
    if mean and dims == list(range(rank)):
        return mean_all(lf, n, x, out, act)
    x, out, finish = as_2d(lf, n, x, out)
    if len(x.shape) != 4:
        raise UnsupportedOpError(f"{source_of(n)}: pooling needs a 4-D input")
    h, w = x.shape[2:]
    if n.target == A.mean.dim:
        oh = ow = 1
    else:
        oh, ow = out.shape[2:]
    pooled_shape = (x.shape[0], x.shape[1], oh, ow)
    pooled = out if tuple(out.shape) == pooled_shape else lf.new_tensor(
        out.name + "pool", pooled_shape, out.scale, out.zero_point, layout="NCHW")
    if h % oh or w % ow:
        uneven_adaptive(lf, n, x, pooled, act)
    else:
        k = (h // oh, w // ow)
        attrs = {"kernel": k, "stride": k, "padding": (0, 0, 0, 0), "act": act,
                 "count_include_pad": 0, "divisor": 0}
        lf.emit("avg_pool2d", [x], pooled, attrs, n)
    if pooled is not out:  # mean without keepdim
        lf.emit("reshape", [pooled], out, {}, n)
    finish()


def adaptive_windows(size: int, out: int) -> list[tuple[int, int]]:
    """PyTorch's adaptive pooling windows along one dim:
    [floor(i * size / out), ceil((i + 1) * size / out))."""
    return [(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]


def _gather(lf, n, x: Tensor, axis: int, index: list[int], name: str, into=None) -> Tensor:
    """x gathered along `axis` (NCHW) at `index` (into `into` when given); x itself when that
    is every index in order."""
    if index == list(range(x.shape[axis])):
        return x
    shape = tuple(len(index) if d == axis else s for d, s in enumerate(x.shape))
    y = into or lf.new_tensor(name, shape, x.scale, x.zero_point, layout="NCHW")
    table = lf.new_tensor(name + "_indices", (len(index),), 1.0, 0, dtype="int32",
                          data=np.asarray(index, np.int32))
    lf.emit("gather", [x, table], y, {"axis": axis}, n)
    return y


def _concat(lf, n, parts: list[Tensor], axis: int, name: str) -> Tensor:
    if len(parts) == 1:
        return parts[0]
    shape = list(parts[0].shape)
    shape[axis] = sum(t.shape[axis] for t in parts)
    y = lf.new_tensor(name, shape, parts[0].scale, parts[0].zero_point, layout="NCHW")
    lf.emit("concat", parts, y, {"axis": axis}, n)
    return y


def uneven_adaptive(lf, n, x: Tensor, pooled: Tensor, act) -> None:
    """Adaptive average pooling with windows of different sizes (H % oh or W % ow != 0), exact:
    the windows of one size (kh, kw) are gathered side by side and averaged by one avg_pool2d
    with kernel = stride = (kh, kw) (each output still one window, one rounding); the pieces are
    concatenated and gathered back into output order."""
    (h, w), (oh, ow) = x.shape[2:], pooled.shape[2:]
    rows, cols = adaptive_windows(h, oh), adaptive_windows(w, ow)

    def classes(windows):
        found: dict[int, list[int]] = {}
        for i, (a, b) in enumerate(windows):
            found.setdefault(b - a, []).append(i)
        return sorted(found.items())

    row_parts, row_order = [], []
    for kh, r_idx in classes(rows):
        xr = _gather(lf, n, x, 2, [rows[i][0] + d for i in r_idx for d in range(kh)],
                     f"{pooled.name}_rows{kh}")
        col_parts, col_order = [], []
        for kw, c_idx in classes(cols):
            xc = _gather(lf, n, xr, 3, [cols[j][0] + d for j in c_idx for d in range(kw)],
                         f"{pooled.name}_rows{kh}_cols{kw}")
            part = lf.new_tensor(f"{pooled.name}_{kh}x{kw}", (*x.shape[:2], len(r_idx),
                                                              len(c_idx)),
                                 pooled.scale, pooled.zero_point, layout="NCHW")
            lf.emit("avg_pool2d", [xc], part, {"kernel": (kh, kw), "stride": (kh, kw),
                                               "padding": (0, 0, 0, 0), "act": act,
                                               "count_include_pad": 0, "divisor": 0}, n)
            col_parts.append(part)
            col_order += c_idx
        row_parts.append(_concat(lf, n, col_parts, 3, f"{pooled.name}_band{kh}"))
        row_order += r_idx
    grid = _concat(lf, n, row_parts, 2, f"{pooled.name}_grid")
    grid = _gather(lf, n, grid, 2, [row_order.index(i) for i in range(oh)],
                   f"{pooled.name}_rows_in_order")
    result = _gather(lf, n, grid, 3, [col_order.index(j) for j in range(ow)],
                     f"{pooled.name}_in_order", into=pooled)
    if result is not pooled:  # the columns were in order: the rows' gather is the result
        lf.emit("reshape", [result], pooled, {}, n)


def avg_pool(lf, n: FxNode, out: Tensor, act) -> None:
    pools = (A.avg_pool2d.default, A.avg_pool1d.default)
    (pool if n.target in pools else global_pool)(lf, n, out, act)


RESIZE_MODES = {"upsample_nearest": "nearest", "_upsample_nearest_exact": "nearest-exact",
                "upsample_bilinear": "linear", "upsample_linear": "linear"}


def resize_geometry(n: FxNode, shapes=None) -> tuple[int, tuple]:
    """(mode, per-axis TOSA geometry) of an upsample node from (x, y) shapes (by default its
    traced ones; ref/pool.py resize_axis), or UnsupportedOpError; run before calibration
    (PRECHECK) and by lift. aten: (input, output_size, [align_corners,] scale_factors)."""
    mode = RESIZE_MODES[str(n.target).split(".")[1][:-2]]
    linear = mode == "linear"
    align = bool(node_arg(n, 2, "align_corners", False)) if linear else False
    scales = node_arg(n, 3 if linear else 2, "scale_factors", None)
    x_shape, y_shape = shapes or (tuple(n.args[0].meta["val"].shape), tuple(n.meta["val"].shape))
    if len(x_shape) not in (3, 4):
        raise UnsupportedOpError(f"{source_of(n)}: resize of a rank-{len(x_shape)} tensor "
                                 "(takes [N, C, L] and [N, C, H, W])")
    scales = list(scales) if scales else [None] * (len(x_shape) - 2)
    try:
        geometry = [resize_axis(int(size), int(want), mode, align, scale)
                    for size, want, scale in zip(x_shape[2:], y_shape[2:], scales)]
    except ValueError as exc:
        raise UnsupportedOpError(f"{source_of(n)}: {exc}") from None
    return int(linear), tuple([(1, 1, 0, 0)] * (4 - len(x_shape)) + geometry)


def resize(lf, n: FxNode, out: Tensor, act) -> None:
    """F.interpolate / nn.Upsample (nearest, nearest-exact, bilinear; [N, C, L] as H = 1): one
    resize whose per-axis coordinates are PyTorch's source coordinates exactly."""
    x = lf.operand(n.args[0], n)
    mode, geometry = resize_geometry(n, (x.shape, out.shape))
    y = out
    if len(x.shape) == 3:  # [N, C, L] as [N, C, 1, L]
        flat = lf.new_tensor(x.name + "_2d", (*x.shape[:2], 1, x.shape[2]), x.scale,
                             x.zero_point, dtype=x.dtype, layout="NCHW")
        lf.emit("reshape", [x], flat, {}, n)
        x = flat
        y = lf.new_tensor(out.name + "_2d", (*out.shape[:2], 1, out.shape[2]), out.scale,
                          out.zero_point, dtype=out.dtype, layout="NCHW")
    lf.emit("resize", [x], y, {"mode": mode, "geometry": geometry, "act": act}, n)
    if y is not out:
        lf.emit("reshape", [y], out, {}, n)


# registry op name -> builder; ACT: the builders that apply `act` (the output clamp)
def max_pool(lf, n: FxNode, out: Tensor, act) -> None:
    (pool if n.target in (A.max_pool2d.default, A.max_pool1d.default) else adaptive_max)(
        lf, n, out, act)


BUILDERS = {"max_pool2d": max_pool, "avg_pool2d": avg_pool,
            "resize": resize}  # means: builders/reduce.py
ACT = {max_pool, avg_pool, resize}
PRECHECK = {resize: resize_geometry}  # builder -> check run before calibration
