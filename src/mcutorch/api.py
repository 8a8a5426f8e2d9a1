"""The user-facing program object: save, load, run on the host or an emulated board, inspect."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from mcutorch.errors import InputError
from mcutorch.program.boundary import float_inputs, int8_inputs, split_batch
from mcutorch.program.model import Port, Program
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

    def ports(self, kind: str = "inputs") -> list[Port]:
        """The inputs ("inputs") or outputs ("outputs"): name, float shape and layout of the
        model, int8 shape and dtype of the program (`Program.ports`)."""
        return self.program.ports(kind)

    def quantize_inputs(self, inputs) -> list[np.ndarray]:
        """Float inputs of one inference, in the model's layout -> the program's int8 NHWC
        inputs. InputError (naming the input and what was expected) on a wrong count, type,
        dtype, shape, batch or a NaN/Inf value; `run` takes a batch."""
        arrays, count = float_inputs(self.program, inputs, "quantize_inputs()")
        if count != 1:
            port = self.ports()[0]
            raise InputError(f"{port.label}: quantize_inputs() takes one inference (batch "
                             f"{port.model_shape[0]}), got batch {len(arrays[0])}; run() loops "
                             "over a batch")
        return self._quantize(arrays)

    def _quantize(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        out = []
        for port, x in zip(self.ports(), arrays):
            if port.is_ids:  # int32 token ids: no quantization (format 1.6)
                out.append(np.ascontiguousarray(x, np.int32).reshape(port.shape))
                continue
            if port.nchw_as_nhwc:
                x = x.transpose(0, 2, 3, 1)
            out.append(quantize(np.ascontiguousarray(x).reshape(port.shape), port.scale,
                                port.zero_point, port.dtype))
        return out

    def dequantize_outputs(self, outputs) -> list[np.ndarray]:
        """The program's int8 outputs -> float32 in the model's layout."""
        res = []
        for port, q in zip(self.ports("outputs"), outputs):
            y = dequantize(q, port.scale, port.zero_point).reshape(port.shape)
            if port.nchw_as_nhwc:
                y = y.transpose(0, 3, 1, 2)
            res.append(np.ascontiguousarray(y).reshape(port.model_shape))
        return res

    # --- running ------------------------------------------------------------------------------
    def run_int8(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """One inference on the program's int8 NHWC inputs with the Python reference runtime.
        Each input must have the program's dtype and shape exactly (InputError otherwise)."""
        return self._interpret(int8_inputs(self.program, inputs, "run_int8()"))

    def reset(self) -> None:
        """A stateful program (persistent tensors): back to the initial state. The reference
        runtime keeps the state across `run` / `run_int8` calls until then; a board `run`
        starts from the initial state and keeps it across the inferences of its batch."""
        if self._interpreter is not None:
            self._interpreter.reset()

    def _interpret(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        if self._interpreter is None:
            self._interpreter = Interpreter(self.program)
        return self._interpreter.invoke(inputs)

    def run_on_board(self, inputs: list[np.ndarray], board: str, profile: bool = False):
        """One inference on the program's int8 NHWC inputs in QEMU's model of `board` (C
        runtime); returns the outputs and keeps the instruction counts in `last_run`."""
        return self._on_board([int8_inputs(self.program, inputs, "run_on_board()")], board,
                              profile)[0]

    def _on_board(self, sets: list[list[np.ndarray]], board: str, profile: bool = False):
        """Every input set in ONE QEMU run (the runner loops over them); the output sets."""
        from mcutorch.device import firmware

        self.last_run = firmware.run(self.program, sets, board, profile=profile)
        return self.last_run.outputs

    def run(self, *inputs, board: str | None = None, profile: bool = False):
        """Float inputs (the model's own layout; float16/32/64 arrays or tensors; a batch that
        is any multiple of the compiled batch) -> float32 outputs, computed in int8 by the
        reference runtime, or by the C runtime on an emulated `board` (e.g. "mps3-an547"; a
        batch runs in one QEMU run, `profile` keeps per-op counts in `last_run`). One output:
        a tensor. A wrong input raises InputError naming the input and what was expected."""
        arrays, count = float_inputs(self.program, inputs, "run()")
        scalar = [p.label for p in self.ports("outputs") if not p.model_shape]
        if count > 1 and scalar:
            raise InputError(f"run(): {count} inferences in one batch, but {scalar[0]} is a "
                             "scalar (a mean of every element, batch included) that cannot be "
                             "split by inference: run one compiled batch at a time")
        sets = [self._quantize(b) for b in split_batch(arrays, self.program, count)]
        if board:
            out_sets = self._on_board(sets, board, profile)
        else:
            out_sets = [self._interpret(q) for q in sets]
        results = [self.dequantize_outputs(o) for o in out_sets]
        outs = [torch.from_numpy(np.concatenate([r[k] for r in results]) if count > 1
                                 else results[0][k]) for k in range(len(self.program.outputs))]
        return outs[0] if len(outs) == 1 else tuple(outs)

    # --- reports ------------------------------------------------------------------------------
    def summary(self) -> dict:
        """Sizes for reports: program bytes, constants, arena per region, the C runtime's
        bind-time state on a 32-bit CPU (`mcutorch.device.crt.state_size`), what binding ahead
        of time costs instead (export-c's NAME_binding.c: RAM of the ring views, flash of the
        tables; `mcutorch.device.binding.table_bytes`), plan lower bound."""
        from mcutorch.device.binding import table_bytes
        from mcutorch.device.crt import state_size

        p = self.program
        tables, ring = table_bytes(p)
        return {
            "program_bytes": len(self.to_bytes()),
            "const_bytes": len(p.constants),
            "regions": {r.name: r.size for r in p.regions if r.size},
            "state_bytes": state_size(p, 4),
            "static_binding": {"ram": ring, "flash": tables},
            "lower_bound": (p.metadata or {}).get("plan", {}).get("lower_bound", 0),
            "ops": len(p.ops),
            # inputs of int32 token ids (format 1.6): name -> V, every id in [0, V)
            "token_ids": {q.name: q.ids_below for q in self.ports() if q.is_ids},
            # Ethos-U: the bytes the delegates' CPU versions cost ({} without them)
            "npu_fallback": (p.metadata or {}).get("ethos_u", {}).get("fallback_cost", {}),
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
    return CompiledModel(Program.load(path))  # FileError when missing or a folder
