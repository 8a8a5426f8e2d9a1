"""The user-facing program object: save, load, run on the host or an emulated board, inspect."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from mcutorch.errors import McutorchError
from mcutorch.program.model import Program
from mcutorch.quant import dequantize, quantize
from mcutorch.ref.interpreter import Interpreter


class CompiledModel:
    """A compiled program plus host-side I/O conversion (float in the model's layout <-> int8 NHWC).

    Example:
        >>> m = mcutorch.load("model.mtp")
        >>> y = m.run(x)                      # float tensor in, float tensor out
        >>> (q,) = m.run_int8([x_int8_nhwc])  # the program's own int8 I/O
    """

    def __init__(self, program: Program):
        self.program = program
        self._interpreter: Interpreter | None = None
        self.last_run = None

    # --- files --------------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        return self.program.to_bytes()

    def save(self, path) -> Path:
        path = Path(path)
        path.write_bytes(self.to_bytes())
        return path

    # --- I/O conversion -----------------------------------------------------------------------
    @property
    def io(self) -> dict:
        return (self.program.metadata or {}).get("io", {})

    def _boundary(self, kind: str, i: int) -> tuple[tuple, bool]:
        """Model-side shape and whether it is NCHW stored as NHWC."""
        idx = (self.program.inputs if kind == "inputs" else self.program.outputs)[i]
        shape = tuple(self.program.tensors[idx].shape)
        entries = self.io.get(kind, [])
        if i >= len(entries):  # metadata stripped: the program's own int8 NHWC I/O
            return shape, False
        return tuple(entries[i]["shape"]), bool(entries[i].get("nchw_as_nhwc"))

    def quantize_inputs(self, inputs) -> list[np.ndarray]:
        """Float inputs in the model's layout -> the program's int8 NHWC inputs."""
        out = []
        for i, x in enumerate(inputs):
            t = self.program.tensors[self.program.inputs[i]]
            x = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
            _, nchw = self._boundary("inputs", i)
            if nchw:
                x = x.transpose(0, 2, 3, 1)
            out.append(quantize(x.reshape(t.shape), t.scale, t.zero_point))
        return out

    def dequantize_outputs(self, outputs) -> list[np.ndarray]:
        """The program's int8 outputs -> float32 in the model's layout."""
        res = []
        for i, q in enumerate(outputs):
            t = self.program.tensors[self.program.outputs[i]]
            model_shape, nchw = self._boundary("outputs", i)
            y = dequantize(q, t.scale, t.zero_point)
            if nchw:
                y = y.transpose(0, 3, 1, 2)
            res.append(y.reshape(model_shape))
        return res

    # --- running ------------------------------------------------------------------------------
    def run_int8(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """One inference on the program's int8 NHWC inputs with the Python reference runtime."""
        if self._interpreter is None:
            self._interpreter = Interpreter(self.program)
        return self._interpreter.invoke(inputs)

    def run_on_board(self, inputs: list[np.ndarray], board: str, profile: bool = False):
        """One inference on the program's int8 NHWC inputs in QEMU's model of `board` (C
        runtime); returns the outputs and keeps the instruction counts in `last_run`."""
        from mcutorch.device import firmware

        self.last_run = firmware.run(self.program, inputs, board, profile=profile)
        return self.last_run.outputs

    def run(self, *inputs, board: str | None = None):
        """Float inputs (the model's own layout and batch, any multiple of the compiled batch)
        -> float outputs, computed in int8 by the reference runtime, or by the C runtime on an
        emulated `board` (e.g. "mps3-an547"). One output: a tensor."""
        batches = self._split(inputs)
        step = (lambda q: self.run_on_board(q, board)) if board else self.run_int8
        results = [self.dequantize_outputs(step(self.quantize_inputs(b))) for b in batches]
        outs = [torch.from_numpy(np.concatenate([r[k] for r in results]))
                for k in range(len(self.program.outputs))]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _split(self, inputs) -> list[tuple]:
        if len(inputs) != len(self.program.inputs):
            raise McutorchError(f"the model takes {len(self.program.inputs)} inputs, "
                                f"got {len(inputs)}")
        shape0, _ = self._boundary("inputs", 0)
        total = len(inputs[0])
        step = shape0[0] if shape0 else 1
        if total % step:
            raise McutorchError(f"batch {total} is not a multiple of the compiled batch {step}")
        return [tuple(x[s:s + step] for x in inputs) for s in range(0, total, step)]

    # --- reports ------------------------------------------------------------------------------
    def summary(self) -> dict:
        """Sizes for reports: program bytes, constants, arena per region, plan lower bound."""
        p = self.program
        return {
            "program_bytes": len(self.to_bytes()),
            "const_bytes": len(p.constants),
            "regions": {r.name: r.size for r in p.regions if r.size},
            "lower_bound": (p.metadata or {}).get("plan", {}).get("lower_bound", 0),
            "ops": len(p.ops),
        }

    def __repr__(self) -> str:
        s = self.summary()
        return (f"<CompiledModel {self.program.target.name} ops={s['ops']} "
                f"bytes={s['program_bytes']} ram={s['regions']}>")


def load(path) -> CompiledModel:
    """Read and validate a program file.

    Example:
        >>> y = mcutorch.load("model.mtp").run(x)
    """
    return CompiledModel(Program.load(path))
