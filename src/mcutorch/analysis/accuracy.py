"""Per-layer error of a program against the float model it was compiled from.

Each op's int8 output (the Python reference runtime, run on the program file) is dequantized
and compared with the float model's value at the same point, for one inference:

- the model is quantized again with its calibration data (`mcutorch.quantize`) and lifted
  (`compiler.build_graph`), which maps each program tensor name to the quantize node it came
  from; that node's input is the float value it quantizes (for a conv with a fused ReLU: the
  ReLU's output), named as in the float model's own torch.export graph;
- the float graph (`frontend.capture`, BatchNorm folded, float throughout) runs on the same
  input, every node's value kept, and is brought to the program's layout (NHWC);
- the program must be the one this model and calibration give: every named tensor's scale and
  zero point must agree, else it is a UsageError (a program compiled from another model, other
  weights or other calibration data would be compared with the wrong float values).

Ops the compiler added (a rescale between two qparams, a delegate's copies) have no float
counterpart and get no figure. Errors are float32: rmse, max |error|, l2r = ||ours - float|| /
||float|| (STM32Cube.AI's relative L2 error), SQNR = 20·log10(||float|| / ||ours - float||) dB
(none where they agree exactly), and rmse in LSBs of the op's output scale.
"""
from __future__ import annotations

import numpy as np
import torch

from mcutorch.errors import UsageError
from mcutorch.program.model import Program
from mcutorch.quant import dequantize
from mcutorch.ref.interpreter import Interpreter


class _Recording(Interpreter):
    """The reference runtime, keeping a copy of every op's outputs (tensor index -> array)."""

    def __init__(self, program: Program):
        super().__init__(program)
        self.values: dict[int, np.ndarray] = {}

    def _run(self, steps) -> None:
        for step in steps:
            if isinstance(step, list):
                self._run(step)
                continue
            super()._run([step])
            for t in self.program.ops[step[0]].outputs:
                self.values[t] = self.views[t].copy()


def _float_values(model, example, inputs) -> dict[str, np.ndarray]:
    """Every node value of the float model's captured graph on `inputs`, by node name."""
    from mcutorch.compare import node_values
    from mcutorch.frontend.capture import capture

    return node_values(capture(model, example), inputs)


def _check_same(p: Program, ir: dict) -> None:
    """UsageError unless every named program tensor has the qparams the model gives it."""
    for i, t in enumerate(p.tensors):
        if t.storage != "arena" or p.tensor_name(i) not in ir:
            continue
        mine = ir[p.tensor_name(i)]
        scale = float(np.float32(mine.scale)) if np.isscalar(mine.scale) else None
        if scale is not None and (scale != t.scale or int(mine.zero_point) != t.zero_point):
            raise UsageError(f"the program was not compiled from this model and calibration: "
                             f"tensor {p.tensor_name(i)} has qparams ({t.scale:.6g}, "
                             f"{t.zero_point}) in the program but ({scale:.6g}, "
                             f"{int(mine.zero_point)}) from the model; analyze the program the "
                             "model file compiles to")


def _metrics(ours: np.ndarray, theirs: np.ndarray, scale: float) -> dict:
    diff = ours.astype(np.float64) - theirs.astype(np.float64)
    rmse = float(np.sqrt(np.mean(diff ** 2)))
    norm = float(np.linalg.norm(theirs.astype(np.float64)))
    noise = float(np.linalg.norm(diff))
    return {"rmse": rmse, "max_abs": float(np.abs(diff).max(initial=0.0)),
            "l2r": noise / norm if norm else None,
            "sqnr_db": float(20 * np.log10(norm / noise)) if norm and noise else None,
            "rmse_lsb": rmse / scale if scale else None,
            "max_lsb": float(np.abs(diff).max(initial=0.0)) / scale if scale else None}


def layer_errors(program: Program, model, example_inputs, calibration, inputs) -> dict:
    """{op index: error figures or None} and what was compared, for one inference on `inputs`
    (float, the model's layout, one compiled batch)."""
    from mcutorch.api import CompiledModel
    from mcutorch.compare import _ours_layout
    from mcutorch.compiler import build_graph
    from mcutorch.frontend import quantize
    from mcutorch.frontend.capture import as_tuple

    p = program
    if not (p.metadata or {}).get("tensor_names"):
        raise UsageError("the program is stripped (no tensor names): per-layer error needs the "
                         "program mcutorch compile wrote, not its stripped copy")
    example = as_tuple(example_inputs)
    inputs = tuple(torch.as_tensor(np.asarray(x, np.float32)) for x in inputs)
    qmodel = quantize(model, example, calibration=calibration)
    graph = build_graph(qmodel)
    ir = {t.name: t for t in graph.tensors()}
    _check_same(p, ir)
    qnodes, flat = graph.meta["qnodes"], graph.meta.get("nhwc_flattened", {})
    fx = {n.name: n for n in qmodel.graph.nodes}
    floats = _float_values(model, example, inputs)
    run = _Recording(p)
    run.invoke(CompiledModel(p).quantize_inputs(list(inputs)))
    errors: dict[int, dict | None] = {}
    for i, op in enumerate(p.ops):
        errors[i] = None
        t = op.outputs[0] if op.outputs else None
        name = p.tensor_name(t) if t is not None else ""
        q = fx.get(qnodes.get(name, ""))
        source = q.args[0].name if q is not None and hasattr(q.args[0], "name") else None
        if source not in floats or t not in run.values or name not in ir:
            continue
        info = p.tensors[t]
        theirs = _ours_layout(floats[source], ir[name], flat.get(name))
        ours = dequantize(run.values[t], info.scale, info.zero_point).reshape(theirs.shape)
        errors[i] = {**_metrics(ours, theirs, info.scale), "float_node": source}
    return errors
