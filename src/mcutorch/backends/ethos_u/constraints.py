"""What an Ethos-U accepts, per IR node: the Vela 5.2 TOSA constraints that bite on our lowering.

Vela 5.2 compiles TOSA with its C++ core (regor), which documents its TOSA limits in
`ethosu.vela.vela.generate_supported_ops` (Ethos-U55/U65: per-operator constraints; Ethos-U85:
the TOSA 1.0 PRO-INT level 8k baseline) and decomposes many cases it lists (stride > 3, kernels
taller than 64, HWC past 65536 are split into several NPU ops). Each rule below was checked against
Vela 5.2 on graphs from `mcutorch.backends.tosa.lower_graph`: Vela refuses the case, and accepts
it at the limit. Documented limits Vela 5.2 did not enforce on our graphs are left out (e.g. the
TOSA level 8k kernel size: a 1x8200 average pool compiles for U55 and U85). Whatever these rules
miss, Vela still refuses at compile time; the delegate builder then moves the refused op to the
CPU with Vela's own message.

Not mirrored: `ethosu/vela/tosa_supported_operators.py`. It belongs to Vela's deprecated Python
core, which Vela 5.2 never runs on a `.tosa` network ("All Ethos-U85 or TOSA network compilations
always use Vela's C++ compilation core", vela.py), and its checks (dims <= 65535, rank-4 batch 1,
no AVG_POOL2D padding, ...) refuse graphs Vela 5.2 compiles, e.g. a 3x3 padded average pool.

    >>> npu_check(node, "ethos-u55-128")   # '' when the NPU takes it
    'avg_pool2d: Ethos-U55 AVG_POOL2D with padding needs kernel <= 8x8 (got 9x9, ...)'
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mcutorch.backends.tosa.support import MAC_OPS, window_fit
from mcutorch.ir import Node

MAX_CHANNELS = 65536  # "Tensor axis: C in range 1..65536" (CONV2D; 65536 taken, 66000 refused)
AVG_POOL_PADDED_KERNEL = 8  # U55/U65 AVG_POOL2D: "IF padding is used: 1 <= kernel <= 8"


def family(npu: str) -> str:
    """'ethos-u55-128' -> 'u55' (also u65, u85).

        >>> family("ethos-u85-1024")
        'u85'
    """
    fam = npu.removeprefix("ethos-").split("-")[0]
    if fam not in ("u55", "u65", "u85"):
        raise ValueError(f"not an Ethos-U configuration: {npu!r}")
    return fam


@dataclass(frozen=True)
class Rule:
    """One constraint: the NPU families it applies to, the ops it looks at, and a check that
    returns '' when the node is fine, else the reason."""

    name: str
    families: tuple[str, ...]
    ops: tuple[str, ...]
    check: Callable[[Node], str]
    origin: str  # where Vela states it


def _channels(node: Node) -> str:
    x, y = node.inputs[0].shape[-1], node.outputs[0].shape[-1]
    if max(x, y) > MAX_CHANNELS:
        return (f"{node.op}: {x} input / {y} output channels; Ethos-U convolutions take "
                f"1..{MAX_CHANNELS} channels")
    return ""


def _padded_avg_pool(node: Node) -> str:
    """The lowering keeps padding inside AVG_POOL2D only when padding is not counted (it pads
    explicitly otherwise, and uses a DEPTHWISE_CONV2D for a divisor override)."""
    a = node.attrs
    kh, kw = a["kernel_h"], a["kernel_w"]
    counted = a["count_include_pad"] or (a["divisor"] > 0)
    if counted or max(kh, kw) <= AVG_POOL_PADDED_KERNEL:
        return ""
    _, h, w, _ = node.inputs[0].shape
    _, _, bottom, _ = window_fit(h, kh, a["stride_h"], 1, a["pad_top"], a["pad_bottom"])
    _, _, right, _ = window_fit(w, kw, a["stride_w"], 1, a["pad_left"], a["pad_right"])
    pads = (a["pad_top"], a["pad_left"], bottom, right)
    if not any(pads):
        return ""
    return (f"avg_pool2d: Ethos-U55/U65 AVG_POOL2D with padding needs kernel <= "
            f"{AVG_POOL_PADDED_KERNEL}x{AVG_POOL_PADDED_KERNEL} (got {kh}x{kw}, padding "
            f"t/l/b/r {'/'.join(map(str, pads))}); the U85 takes it")


def _gather(node: Node) -> str:
    return "gather: Ethos-U55/U65 have no GATHER (Vela refuses it); the U85 takes it"


U55_RESIZE_SCALES = (2, 4, 8)  # U55/U65 RESIZE: nearest, half-pixel, these upscales per axis


def _resize(node: Node) -> str:
    """Vela 5.2 runs RESIZE on the U55/U65 only as nearest with a half-pixel upscale by 2, 4 or
    8 on both axes (scale (2k)/2, offset 1 - k): x16, x1 on an axis, a shrink, any fractional
    scale and every bilinear resize are refused ("Non-passthrough operation (Resize)")."""
    a = node.attrs
    axes = [(a[f"scale_{k}_n"], a[f"scale_{k}_d"], a[f"offset_{k}"]) for k in "yx"]
    if not a["mode"] and all(d == 2 and n / 2 in U55_RESIZE_SCALES and 2 * off == 2 - n
                             for n, d, off in axes):
        return ""
    return (f"resize: Ethos-U55/U65 RESIZE takes nearest half-pixel upscales by 2, 4 or 8 on "
            f"both axes only, not {'bilinear' if a['mode'] else 'this nearest'} (scale_n, "
            f"scale_d, offset: y {axes[0]}, x {axes[1]}); the U85 takes it")


def _mask_ops(node: Node) -> str:
    return (f"{node.op}: Vela 5.2 runs no comparison (GREATER, GREATER_EQUAL, EQUAL) nor the CAST "
            "of a mask (its NotEqual) on Ethos-U55/U65; Ethos-U85 takes both")


def _transpose_stride(node: Node) -> str:
    """U55/U65 TRANSPOSE_CONV2D strides (1, 1) or (2, 2); (1, 2) on a 1-row input and kernel,
    (2, 1) on a 1-column one (conv_transpose1d's [N, 1, L, C] is the former)."""
    a, (kh, kw) = node.attrs, node.inputs[1].shape[1:3]
    _, h, w, _ = node.inputs[0].shape
    s = (a["stride_h"], a["stride_w"])
    if s in ((1, 1), (2, 2)) or (s == (1, 2) and h == kh == 1) or (s == (2, 1) and w == kw == 1):
        return ""
    return (f"conv_transpose2d: Ethos-U55/U65 TRANSPOSE_CONV2D takes strides (1, 1) and (2, 2) "
            f"((1, 2) / (2, 1) on a one-row / one-column input and kernel), got {s}")


def _matmul16(node: Node) -> str:
    return ("" if node.inputs[0].dtype != "int16" else
            "matmul: Vela 5.2 runs no int16 MATMUL (i16 x i16 -> i48) on Ethos-U55/U65 "
            "('Non-passthrough operation (MatMul)'); it stays on the CPU")


RULES: list[Rule] = [
    Rule("matmul_int16", ("u55", "u65"), ("matmul",), _matmul16,
         "Vela 5.2 on an int16 MATMUL graph: 'Non-passthrough operation (MatMul) could not run "
         "on NPU'"),
    Rule("mask_ops", ("u55", "u65"), ("compare", "where"), _mask_ops,
         "Vela 5.2 on graphs of compare / where: 'Non-passthrough operation (GreaterEqual) could "
         "not run on NPU' (and Equal, NotEqual for CAST)"),
    Rule("channels", ("u55", "u65", "u85"), tuple(op for op in MAC_OPS if op != "matmul"),
         _channels, "CONV2D: Tensor axis C in range 1..65536"),
    Rule("matmul_channels", ("u55", "u65"), ("matmul",), _channels,  # N 65536 taken, 66000 not
         "U55/U65 MATMUL: its TRANSPOSE of N > 65536 columns is a non-passthrough operation"),
    Rule("avg_pool_padded_kernel", ("u55", "u65"), ("avg_pool2d",), _padded_avg_pool,
         "U55/U65 AVG_POOL2D: IF padding is used: 1 <= kernel_x <= 8 and 1 <= kernel_y <= 8"),
    Rule("resize", ("u55", "u65"), ("resize",), _resize,
         "U55/U65 RESIZE (checked on Vela 5.2): nearest, scale (2k)/2 with offset 1 - k, k in "
         "2, 4, 8, on both axes"),
    Rule("gather", ("u55", "u65"), ("gather",), _gather,
         "U55/U65: GATHER is not in the supported operators (Non-passthrough operation)"),
    Rule("transpose_conv_stride", ("u55", "u65"), ("conv_transpose2d",), _transpose_stride,
         "U55/U65 TRANSPOSE_CONV2D: stride combinations (1,1), (2,2); (1,2) only if IFM height "
         "and kernel height are 1; (2,1) only if IFM width and kernel width are 1"),
]


def npu_check(node: Node, npu: str) -> str:
    """'' when no rule of `npu`'s family refuses `node`, else the first refusal's reason."""
    fam = family(npu)
    for rule in RULES:
        if fam in rule.families and node.op in rule.ops:
            why = rule.check(node)
            if why:
                return why
    return ""
