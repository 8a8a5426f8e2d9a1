"""Agreement with PyTorch, layer by layer: each op fed PyTorch's own int8 input.

PT2E's converted module computes each layer in float between quantize/dequantize pairs; our int8
kernels compute it in integers. Feeding every op the int8 tensor PyTorch produced for its input
isolates each layer's rounding from the errors that accumulate end to end.

`sensitivity` measures the other thing: each quantized layer's output against the float model's
value at the same node (the error accumulated up to that layer), as SQNR and max error, with a
table (`sensitivity_parts`) and a PNG (`plot_sensitivity`).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from mcutorch.compiler import build_graph
from mcutorch.errors import UsageError
from mcutorch.frontend.capture import as_tuple
from mcutorch.ref import KERNELS
from mcutorch.ref import OUT_DTYPE_OPS


class _Recorder(torch.fx.Interpreter):
    """Runs the converted module and keeps the int8 (int16) output of every quantize node (and
    the bool mask of every comparison, as uint8 0/1)."""

    def __init__(self, gm):
        super().__init__(gm)
        self.values: dict[str, np.ndarray] = {}

    def run_node(self, n):
        out = super().run_node(n)
        if (isinstance(out, torch.Tensor) and out.dtype in (torch.int8, torch.int16, torch.bool)
                and n.op == "call_function"):
            self.values[n.name] = out.detach().numpy().astype(np.uint8 if out.dtype == torch.bool
                                                              else out.numpy().dtype)
        elif isinstance(out, torch.Tensor) and n.op == "placeholder" and out.dtype in (
                torch.int64, torch.int32):  # token ids (an embedding's int32 input)
            self.values[n.name] = out.detach().numpy().astype(np.int32)
        return out


def _ours_layout(value: np.ndarray, t, flattened=None) -> np.ndarray:
    """PyTorch's NCHW value of tensor t in our layout (NHWC; NHWC order in folded flattens)."""
    if t.layout == "NHWC":
        value = value.reshape(t.shape[0], -1, *t.shape[1:3]) if value.ndim == 3 else value
        value = value.transpose(0, 2, 3, 1)  # a 1-D op's [N, C, L] as [N, C, 1, L] first
    if flattened is not None:
        value = value.reshape(-1, *flattened).transpose(0, 2, 3, 1)
    return value.reshape(t.shape)


def layer_by_layer(qmodel, example_inputs) -> list[dict]:
    """Per op: share of int8 (int16) outputs equal to / within 1 LSB of PyTorch's fake-quant
    layer.

    Example:
        >>> rows = layer_by_layer(qmodel, (x,))
        >>> min(r["within_1lsb"] for r in rows)
        1.0
    """
    graph = build_graph(qmodel, fuse_recurrent=False)  # each op of an LSTM step (same integers)
    rec = _Recorder(qmodel)
    rec.run(*as_tuple(example_inputs))
    qnodes = dict(graph.meta["qnodes"])
    for t in {t for n in graph.nodes for t in (*n.inputs, *n.outputs)}:  # 1-D ops' [N, C, 1, L]
        if t.name.endswith("_2d") and t.name[:-3] in qnodes and len(t.shape) == 4:
            qnodes.setdefault(t.name, qnodes[t.name[:-3]])  # views (frontend/builders/conv.py)
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
        ours = (OUT_DTYPE_OPS[node.op](*args, y.dtype, **node.attrs) if node.op in OUT_DTYPE_OPS
                else KERNELS[node.op](*args, **node.attrs)).astype(np.int32)
        theirs = _ours_layout(rec.values[qnodes[y.name]], y).astype(np.int32)
        diff = np.abs(ours - theirs)
        rows.append({"op": node.op, "output": y.name, "source": node.source,
                     "elements": int(diff.size), "exact": float((diff == 0).mean()),
                     "within_1lsb": float((diff <= 1).mean()), "max_lsb": int(diff.max())})
    return rows


# --- sensitivity: each quantized layer against the float model ---------------------------------
Q_OPS = (torch.ops.quantized_decomposed.quantize_per_tensor.default,)


def _layer_values(qmodel, batch: tuple) -> dict[str, np.ndarray]:
    """The fake-quant value of every layer output of `qmodel` on `batch`: for each quantize node
    of an op's output or a model input, dequantize(quantize(v)) in float64, keyed by the name of
    the node it quantizes."""
    values: dict[str, np.ndarray] = {}

    class Rec(torch.fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            src = n.args[0] if n.op == "call_function" and n.target in Q_OPS else None
            if isinstance(src, torch.fx.Node) and src.op in ("call_function", "placeholder"):
                scale, zp = float(np.float32(n.args[1])), int(n.args[2])
                values.setdefault(src.name, (out.detach().numpy().astype(np.float64) - zp)
                                  * scale)
            return out

    with torch.no_grad():
        Rec(qmodel).run(*batch)
    return values


def node_values(gm, batch: tuple) -> dict[str, np.ndarray]:
    """Every float node value of a captured float graph on `batch`, by node name."""
    values: dict[str, np.ndarray] = {}

    class Rec(torch.fx.Interpreter):
        def run_node(self, n):
            out = super().run_node(n)
            if isinstance(out, torch.Tensor) and out.is_floating_point():
                values[n.name] = out.detach().numpy()
            return out

    with torch.no_grad():
        Rec(gm).run(*batch)
    return values


def sensitivity(model, qmodel, data=None, example_inputs=None) -> list[dict]:
    """Per quantized layer: its error against the float model, over `data`: the calibration
    batches (an iterable of batches, each a tensor or a tuple of tensors, as mcutorch.quantize
    takes them) or one user batch (a tensor); default the example inputs.

    A layer is a quantize node of the converted module `qmodel` (PT2E, PTQ or a converted QAT
    module; a QAT module is converted first): the output of the aten node it quantizes (for a
    conv with a fused ReLU, the ReLU's), dequantized, is compared with the value of the node of
    the same name in the float model's graph (`frontend.capture`, the graph mcutorch.quantize
    prepares: torch.export's node names survive prepare/convert), for every element of every
    batch. Layers whose name or shape has no float counterpart (a node PT2E added, a QAT conv +
    BatchNorm PT2E renamed) are left out. Figures (float64): SQNR = 10·log10(Σ float² / Σ
    (quantized − float)²) in dB (inf where they agree exactly), max |quantized − float|, that
    in LSBs of the layer's scale, and rmse.

    Example:
        >>> rows = mcutorch.compare.sensitivity(model, qmodel, calibration)
        >>> min(rows, key=lambda r: r["sqnr_db"])["layer"]
        'conv2d_3'
    """
    from mcutorch.frontend.capture import capture
    from mcutorch.frontend.qat import convert, is_qat

    if is_qat(qmodel):
        qmodel = convert(qmodel)
    example = example_inputs if example_inputs is not None else qmodel.meta.get(
        "mcutorch_example_inputs")
    batches = _batches(data if data is not None else None if example is None else [example])
    example = as_tuple(example) if example is not None else batches[0]
    nodes = {n.name: n for n in qmodel.graph.nodes}
    float_graph = capture(model, example)
    acc: dict[str, dict] = {}
    for batch in batches:
        floats = node_values(float_graph, batch)
        for name, q in _layer_values(qmodel, batch).items():
            f = floats.get(name)
            if f is None or f.shape != q.shape:
                continue
            d = q - f.astype(np.float64)
            a = acc.setdefault(name, {"signal": 0.0, "noise": 0.0, "max_abs": 0.0,
                                      "elements": 0})
            a["signal"] += float((f.astype(np.float64) ** 2).sum())
            a["noise"] += float((d ** 2).sum())
            a["max_abs"] = max(a["max_abs"], float(np.abs(d).max(initial=0.0)))
            a["elements"] += d.size
    rows = []
    for name, a in acc.items():
        node = nodes[name]
        q = next(u for u in node.users if u.target in Q_OPS)
        scale = float(np.float32(q.args[1]))
        sqnr = (math.inf if a["noise"] == 0 else -math.inf if a["signal"] == 0 else
                10 * math.log10(a["signal"] / a["noise"]))
        rows.append({"layer": name, "op": _op_of(node), "source": _source(node),
                     "elements": a["elements"], "sqnr_db": sqnr, "max_abs": a["max_abs"],
                     "max_lsb": a["max_abs"] / scale, "rmse": math.sqrt(a["noise"] /
                                                                         a["elements"]),
                     "scale": scale})
    return rows


def _batches(data) -> list[tuple]:
    if data is None:
        raise UsageError("sensitivity needs data: the calibration batches, a user batch or "
                         "example_inputs")
    if isinstance(data, torch.Tensor):
        return [(data,)]
    batches = [as_tuple(b) for b in data]
    if not batches:
        raise UsageError("sensitivity got no batches: pass at least one")
    return batches


def _op_of(node) -> str:
    return "input" if node.op == "placeholder" else str(node.target).split(".")[-2]


def _source(node) -> str:
    from mcutorch.frontend.capture import module_of

    return module_of(node) if node.op == "call_function" else "model input"


def sensitivity_parts(rows: list[dict], worst: int = 3) -> list:
    """The report as printable parts (mcutorch.ui.tables): one row per layer in graph order,
    the `worst` lowest-SQNR layers marked."""
    from mcutorch.ui.tables import add, table

    order = sorted(range(len(rows)), key=lambda i: rows[i]["sqnr_db"])[:worst]
    t = table("#", "layer", "op", "module", "elements", "SQNR dB", "max |err|", "max err LSB",
              "", right=("#", "elements", "SQNR dB", "max |err|", "max err LSB"))
    for i, r in enumerate(rows):
        add(t, i, r["layer"], r["op"], r["source"], r["elements"], f"{r['sqnr_db']:.1f}",
            f"{r['max_abs']:.3g}", f"{r['max_lsb']:.2f}", "worst" if i in order else "")
    return ["error of each quantized layer vs the float model (SQNR = 10 log10(sum float^2 / "
            "sum (quantized - float)^2)):", t]


def plot_sensitivity(rows: list[dict], path, title: str = "") -> None:
    """A PNG of the report: SQNR (dB) and max |error| (LSB) per layer, in graph order."""
    from matplotlib.figure import Figure

    names = [r["layer"] for r in rows]
    fig = Figure(figsize=(9, 0.9 + 0.28 * max(len(rows), 1)), dpi=100)
    left, right = fig.subplots(1, 2, sharey=True)
    y = np.arange(len(rows))
    finite = [r["sqnr_db"] if math.isfinite(r["sqnr_db"]) else 0.0 for r in rows]
    left.barh(y, finite, color="#4477aa")
    left.set_xlabel("SQNR vs float (dB), higher is better")
    left.set_yticks(y, names, fontsize=7)
    left.invert_yaxis()
    right.barh(y, [r["max_lsb"] for r in rows], color="#cc6677")
    right.set_xlabel("max |quantized - float| (LSB of the layer)")
    fig.suptitle(title or "per-layer error vs the float model", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, format="png")
