"""Which IR nodes lower to TOSA 1.0 exactly (`tosa_support`), and the lowerable runs of a graph.

An op is lowerable when its TOSA sequence (docs/numerics.md, "TOSA lowering") reproduces the
reference kernel on *every* input of the op's domain. The main place TOSA 1.0 is narrower than our
definition is `apply_scale_32`, behind every RESCALE: it requires the value being scaled to satisfy
-2^(shift-1) <= value < 2^(shift-1) (the reference model reports UNPREDICTABLE otherwise), while
our `rq` only requires the scaled result to fit int32. So for every requantization we bound the
value over all int8 inputs from the constants and attributes, and refuse the op when the bound
can break TOSA's rule. TOSA's int32 accumulators must also never overflow, in any summation order.
A channel with mult = 0 always yields 0, whatever its shift; the lowering gives it shift 62.
The other: a conv whose windows along an axis all lie in the padding (bias-only outputs) would need
an empty SLICE, which TOSA cannot express.
"""
from __future__ import annotations

import numpy as np

from mcutorch import ops
from mcutorch.ir import Graph, Node
from mcutorch.quant import reciprocal_scale
from mcutorch.ref.reduce import sum_range

INT32 = (-(1 << 31), (1 << 31) - 1)
MAC_OPS = tuple(d.name for d in ops.REGISTRY if d.macs is not None)


def rescale_shifts(mult, shift) -> np.ndarray:
    """Shifts as lowered: a zero multiplier gives 0 for any shift, so it takes shift 62."""
    mult, shift = np.asarray(mult, np.int64), np.asarray(shift, np.int64)
    return np.where(mult == 0, 62, shift)


def _rescale_problem(op: str, lo, hi, mult, shift, what: str) -> str:
    """'' if every value in [lo, hi] (per channel) is legal for apply_scale_32, else a reason."""
    lo, hi = np.broadcast_arrays(np.asarray(lo, object), np.asarray(hi, object))
    shifts = np.broadcast_to(rescale_shifts(mult, shift), lo.shape)
    for c, (a, b, s) in enumerate(zip(lo.ravel(), hi.ravel(), shifts.ravel())):
        limit = 1 << (int(s) - 1)
        if a < -limit or b >= limit:
            where = f" (channel {c})" if lo.size > 1 else ""
            return (f"{op}: {what}{where} spans [{a}, {b}], but TOSA RESCALE (apply_scale_32) "
                    f"requires values in [-2^{s - 1}, 2^{s - 1}) for shift {s}; the reference "
                    "accepts it, TOSA would be UNPREDICTABLE")
    return ""


INT16_MAX = (1 << 15) - 1  # int16 activations: [-32767, 32767], zero point 0
INT48 = (-(1 << 47), (1 << 47) - 1)  # the int16 MAC accumulator (TOSA i16 x i8 -> i48)
# ops lowered with int16 activations (docs/numerics.md section 6; the others refuse them)
INT16_OPS = frozenset({"conv2d", "depthwise_conv2d", "fully_connected", "add", "sub", "mul",
                       "rescale", "clamp", "max_pool2d", "lut", "transpose", "concat", "pad",
                       "copy", "strided_slice", "reshape", "reduce_sum", "matmul"})


def _delta_range(zp: int, wide: bool = False) -> tuple[int, int]:
    """Range of x - zp over int8 x (int16 x: zero point 0)."""
    return (-INT16_MAX, INT16_MAX) if wide else (-128 - int(zp), 127 - int(zp))


def _wide(node: Node) -> bool:
    return node.inputs[0].dtype == "int16"


def _mac_range(node: Node) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per output channel: (sum of the smallest products, sum of the largest, bias), exact ints.

    Every term (x - in_zp) * w lies between its min and max, and 0 lies in between (padding), so
    these bound every partial sum in any order; they are reached by windows inside the input.
    """
    w = node.inputs[1].data.astype(np.int64)
    bias = node.inputs[2].data.astype(np.int64)
    if node.op == "depthwise_conv2d":
        w = w.reshape(-1, w.shape[-1]).T  # (C*M, KH*KW)
    w = w.reshape(w.shape[0], -1)
    lo_d, hi_d = _delta_range(node.attrs["in_zp"], _wide(node))
    big = np.maximum(w * hi_d, w * lo_d).sum(axis=1)
    small = np.minimum(w * hi_d, w * lo_d).sum(axis=1)
    return small, big, bias


def _conv_windows(node: Node) -> str:
    """'' unless, along an axis, every window lies in the padding (TOSA has no empty SLICE)."""
    if node.op not in ("conv2d", "depthwise_conv2d"):  # no window (transposed: every tap lands)
        return ""
    a, shape = node.attrs, node.inputs[0].shape
    kernel = node.inputs[1].shape[1:3] if node.op == "conv2d" else node.inputs[1].shape[-3:-1]
    for axis, k, s, d, p0, p1 in ((1, kernel[0], a["stride_h"], a["dilation_h"], a["pad_top"],
                                   a["pad_bottom"]),
                                  (2, kernel[1], a["stride_w"], a["dilation_w"], a["pad_left"],
                                   a["pad_right"])):
        _, _, _, drop = window_fit(shape[axis], k, s, d, p0, p1)
        if drop >= shape[axis]:
            return f"{node.op}: no window reads the input along axis {axis} (all padding)"
    return ""


def check_mac(node: Node) -> str:
    why = _conv_windows(node)
    if why:
        return why
    small, big, bias = _mac_range(node)
    wide = _wide(node)
    acc, bits = (INT48, 48) if wide else (INT32, 32)
    for what, lo, hi in (("partial sum", small, big), ("accumulator", small + bias, big + bias)):
        if lo.min() < acc[0] or hi.max() > acc[1]:
            return f"{node.op}: the {what} can leave int{bits} (TOSA accumulates in int{bits})"
    mult, shift = node.inputs[3].data, node.inputs[4].data
    if wide:  # apply_scale_16: any int48 value; the scaled one must fit int32 (rq is monotone)
        lo, hi = (_rq_channels(v, mult, shift) for v in (small + bias, big + bias))
        bad = (lo < INT32[0]) | (hi > INT32[1])
        return (f"{node.op}: the rescaled accumulator (channel {int(np.argmax(bad))}) can leave "
                "int32 (TOSA apply_scale_16)" if bad.any() else "")
    return _rescale_problem(node.op, (small + bias).astype(object), (big + bias).astype(object),
                            mult, shift, "the accumulator")


def check_add(node: Node) -> str:
    """add and sub: both input RESCALEs, the int32 sum (difference) and its RESCALE."""
    a, op = node.attrs, node.op
    ranges = []
    for side in ("a", "b"):
        lo, hi = _delta_range(a[f"{side}_zp"], _wide(node))
        why = _rescale_problem(op, lo, hi, a[f"{side}_mult"], a[f"{side}_shift"],
                               f"input {side} - {side}_zp")
        if why:
            return why
        ranges.append([_rq(v, a[f"{side}_mult"], a[f"{side}_shift"]) for v in (lo, hi)])
    (alo, ahi), (blo, bhi) = ranges
    lo, hi = (alo + blo, ahi + bhi) if op == "add" else (alo - bhi, ahi - blo)
    what = "the int32 sum" if op == "add" else "the int32 difference"
    if lo < INT32[0] or hi > INT32[1]:
        return f"{op}: {what} can overflow"
    return _rescale_problem(op, lo, hi, a["out_mult"], a["out_shift"], what)


def _rq_channels(v, mult, shift) -> np.ndarray:
    return np.array([_rq(a, m, s) for a, m, s in zip(v, mult, shift)], dtype=object)


def _rq(v: int, mult: int, shift: int) -> int:
    mult, shift = int(mult), int(rescale_shifts(mult, shift))
    return (int(v) * mult + (1 << (shift - 1))) >> shift


def check_mul(node: Node) -> str:
    a = node.attrs
    (alo, ahi), (blo, bhi) = (_delta_range(a[f"{s}_zp"], _wide(node)) for s in "ab")
    products = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
    return _rescale_problem("mul", min(products), max(products), a["mult"], a["shift"],
                            "the product")


def check_rescale(node: Node) -> str:
    lo, hi = _delta_range(node.attrs["in_zp"], _wide(node))
    return _rescale_problem("rescale", lo, hi, node.attrs["mult"], node.attrs["shift"],
                            "x - in_zp")


def window_fit(size: int, kernel: int, stride: int, dilation: int, pad0: int, pad1: int):
    """Geometry TOSA 1.0 accepts for one spatial axis: (out, stride, pad1, rows_to_drop).

    TOSA requires (size + pads - span) to be divisible by the stride (`idiv_check`); the rows past
    the last window never matter, so pad1 shrinks first, then trailing input rows are dropped.
    A single output position makes the stride irrelevant: it becomes 1 (Vela needs stride <= 3).
    """
    span = dilation * (kernel - 1) + 1
    out = (size + pad0 + pad1 - span) // stride + 1
    stride = 1 if out == 1 else stride
    excess = size + pad0 + pad1 - ((out - 1) * stride + span)
    cut = min(excess, pad1)
    return out, stride, pad1 - cut, excess - cut


def pool_windows(node: Node) -> str:
    """'' if every window has a valid element and TOSA's pad < kernel rule then holds."""
    a, shape = node.attrs, node.inputs[0].shape
    for axis, k, s, p0, p1 in ((1, a["kernel_h"], a["stride_h"], a["pad_top"], a["pad_bottom"]),
                               (2, a["kernel_w"], a["stride_w"], a["pad_left"], a["pad_right"])):
        if shape[axis] + p0 + p1 < k:
            return f"{node.op}: kernel larger than the padded input"
        _, _, p1_fit, _ = window_fit(shape[axis], k, s, 1, p0, p1)
        if p0 >= k or p1_fit >= k:
            return f"{node.op}: a window lies entirely in the padding (outside the domain)"
    return ""


def check_avg_pool(node: Node) -> str:
    why = pool_windows(node)
    a = node.attrs
    if why or a["divisor"] <= 0 or a["divisor"] == a["kernel_h"] * a["kernel_w"]:
        return why  # AVG_POOL2D: |acc| <= 255 * count < 2^(29 + k), always legal
    mult, shift = reciprocal_scale(a["divisor"])
    lo, hi = _delta_range(a["in_zp"])
    n = a["kernel_h"] * a["kernel_w"]
    return _rescale_problem("avg_pool2d", lo * n, hi * n, mult, shift, "the window sum")


def check_reduce_sum(node: Node) -> str:
    """REDUCE_SUM adds at most 2^23 terms of 255 (int32 in any order); the sum's range must be
    legal for the output RESCALE."""
    a, shape = node.attrs, node.inputs[0].shape
    count = int(np.prod([d for i, d in enumerate(shape) if a["axes"] >> i & 1]))
    lo, hi = sum_range(1, a["in_zp"], _wide(node))  # int16: [-32768, 32767], count <= 2^16 - 1
    return _rescale_problem("reduce_sum", lo * count, hi * count, a["mult"], a["shift"],
                            "the sum")


def check_movement(node: Node) -> str:
    ranks = {len(t.shape) for t in (*node.inputs, *node.outputs) if not t.is_const}
    return "" if ranks <= {1, 2, 3, 4} else f"{node.op}: rank {sorted(ranks)} outside 1..4"


def exact(node: Node) -> str:
    """Ops whose TOSA sequence is exact on their whole domain (no rescale range to bound)."""
    return ""


def check_lut(node: Node) -> str:
    """int16: TOSA TABLE requires every slope in int16; half-LSB entries (|entry| <= 16383, the
    compiler's tables) guarantee it and keep the result within int16 unsaturated."""
    table = node.inputs[1].data
    if table.dtype == np.int16 and int(np.abs(table.astype(np.int32)).max()) > (1 << 14) - 1:
        return "lut: an int16 table entry beyond +-16383 (TOSA TABLE's slope must fit int16)"
    return ""


COMPARE_TOSA_FACTOR = 1 << 21  # RESCALE by M exactly: mult M * 2^10, shift 10 (|v - zp| < 2^9)


def check_compare(node: Node) -> str:
    """Each side's factor mult * 2^shift below 2^21: one exact RESCALE to int32 each."""
    big = max(node.attrs[f"{s}_mult"] << node.attrs[f"{s}_shift"] for s in "ab")
    return (f"compare: the scales' integer ratio has a factor {big} >= 2^21, more than one "
            "exact TOSA RESCALE (mult < 2^31, shift >= 10) multiplies by" if
            big >= COMPARE_TOSA_FACTOR else "")


def check_where(node: Node) -> str:
    a = node.attrs
    return next((why for why in (_rescale_problem("where", *_delta_range(a[f"{s}_zp"]),
                                                  a[f"{s}_mult"], a[f"{s}_shift"], f"{s} - zp")
                                 for s in "ab") if why), "")


MASKS = {"compare": "y", "where": "mask"}  # the uint8 0/1 operand (an int8 tensor in TOSA)


def _int8_activations(node: Node) -> str:
    for t in (*node.inputs, *node.outputs):
        if t.is_const or t.dtype == "int8" or (t.dtype == "uint8" and node.op in MASKS):
            continue
        if t.dtype == "int16" and node.op in INT16_OPS:
            continue
        return (f"{node.op}: activation {t.name} is {t.dtype}, the lowering handles int8 "
                f"(int16 for {', '.join(sorted(INT16_OPS))})")
    return ""


def tosa_support(node: Node) -> tuple[bool, str]:
    """(True, "") when `node` lowers to TOSA 1.0 bit-exactly; else (False, reason).

    The reason names the op and the TOSA limitation, e.g.
        >>> tosa_support(softmax_node)
        (False, 'softmax: TOSA 1.0 has no softmax, ...')
    """
    from mcutorch.backends.tosa.rules import RULES  # rules.py pairs each check with a lowering

    reason = ops.ALL[node.op].tosa if node.op in ops.ALL else ""
    if reason:
        return False, reason
    if node.op not in RULES:
        return False, f"{node.op}: no TOSA lowering"
    why = _int8_activations(node) or RULES[node.op][0](node)
    return (not why), why


def tosa_runs(graph: Graph) -> list[list[Node]]:
    """Maximal runs of consecutive lowerable nodes, split into connected pieces.

    Consecutive in the graph's (topological) order, so no path leaves a run and comes back: each
    run can become one TOSA graph. Runs made only of reshapes are skipped (nothing to compute).
    """
    runs, current = [], []
    for node in graph.nodes:
        if tosa_support(node)[0]:
            current.append(node)
        else:
            runs.append(current)
            current = []
    runs.append(current)
    pieces = [p for run in runs for p in _connected(run)]
    return [p for p in pieces if any(n.op != "reshape" for n in p)]


def _connected(nodes: list[Node]) -> list[list[Node]]:
    """Split nodes into weakly connected components (by shared activation tensors), in order."""
    parent = list(range(len(nodes)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    producer = {id(t): i for i, n in enumerate(nodes) for t in n.outputs}
    for i, n in enumerate(nodes):
        for t in n.inputs:
            if id(t) in producer:
                parent[find(i)] = find(producer[id(t)])
    groups: dict[int, list[Node]] = {}
    for i, n in enumerate(nodes):
        groups.setdefault(find(i), []).append(n)
    return sorted(groups.values(), key=lambda g: nodes.index(g[0]))
