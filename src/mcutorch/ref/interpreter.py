"""The Python reference runtime: executes a program file with the numpy reference kernels.

It reads the same bytes the C runtime reads: one byte arena per memory region, tensors as views
at their planned offsets (so a wrong plan corrupts results, as it would on the device), constants
read in place. Ops run in program order; a delegate runs through its CPU version. Before a kernel
runs, the shape it would return (ref.output_shape) is compared with the op's output tensor, so a
hostile program is refused (ExecutionError) before the kernel allocates anything.
"""
from __future__ import annotations

import numpy as np

from mcutorch.errors import ExecutionError, McutorchError
from mcutorch.program import schema as S
from mcutorch.program.model import Program
from mcutorch.ref import OUT_DTYPE_OPS, RESHAPING, kernel_for, output_shape
from mcutorch.ref.movement import ring_position

# Ops whose C kernels take int16 activations (docs/numerics.md section 6; their OpDef.dtypes).
# A program runs an int16 form only where the C runtime does too (both program readers refuse
# the others at load).
C_INT16_OPS: frozenset[str] = frozenset({
    "rescale", "concat", "copy", "pad", "fully_connected", "conv2d", "depthwise_conv2d", "add",
    "sub", "mul", "max_pool2d", "avg_pool2d", "transpose", "strided_slice", "lut", "ring_write",
    "reduce_sum", "lstm", "gru", "rnn_tanh", "rnn_relu", "matmul", "softmax", "norm", "where"})


class Interpreter:
    """Runs one program on int8 tensors.

    Example:
        >>> it = Interpreter(Program.load("model.mtp"))
        >>> (y,) = it.invoke([x_int8_nhwc])
    """

    def __init__(self, program: Program):
        if program.target.rounding != "single":
            raise McutorchError(f"rounding mode {program.target.rounding!r} is reserved; this "
                                "mcutorch executes single-rounding programs only")
        self.program = program
        # each arena up to its last tensor byte: what the program's tensors use, not what its
        # regions declare (the rest is scratch, which the reference kernels do not use)
        used = [0] * len(program.regions)
        for t in program.tensors:
            if t.storage == "arena":
                used[t.region] = max(used[t.region], t.offset + t.nbytes)
        self.arenas = [np.zeros(n, np.uint8) for n in used]
        # persistent tensors (a stateful program's state): kept across invokes until reset()
        self.persistent = np.zeros(program.persistent_size, np.uint8)
        self.reset()
        self.views = [self._view(i) for i in range(len(program.tensors))]
        self.steps = [self._resolve(i) for i in program.main_ops()]

    def _view(self, index: int) -> np.ndarray:
        t = self.program.tensors[index]
        if t.storage == "const":
            return self.program.const_array(index)
        dtype = np.dtype(S.DTYPE_NUMPY[t.dtype])
        buf = self.persistent if t.storage == "persistent" else self.arenas[t.region]
        return np.frombuffer(buf.data, dtype, t.numel, t.offset).reshape(t.shape)

    def reset(self) -> None:
        """Set every persistent tensor to its initial value (the state of a fresh model)."""
        for r in self.program.persistent:
            t = self.program.tensors[r.tensor]
            self.persistent[t.offset:t.offset + t.extent] = self.program.persistent_init(r)

    def _resolve(self, i: int):
        op = self.program.ops[i]
        if op.name == "delegate":
            d = self.program.delegates[op.attrs["index"]]
            if d.cpu_ops is None:
                raise McutorchError(f"op {i} is an {d.npu} delegate without a CPU version; the "
                                    "host cannot run it (compile without --no-npu-fallback)")
            return [self._resolve(j) for j in range(d.cpu_ops[0], d.cpu_ops[0] + d.cpu_ops[1])]
        kernel = kernel_for(op.name, op.variant)
        ins = [self.views[t] for t in op.inputs]
        out = self.views[op.outputs[0]]
        if op.name == "ring_write":  # it updates its window's whole block (position + slots)
            t = self.program.tensors[op.outputs[0]]
            out = self.persistent[t.offset:t.offset + t.extent]
            ins = [ins[0], out]
        if op.name in RESHAPING and ins[0].size == out.size:
            out = out.reshape(ins[0].shape)  # the same bytes, seen in the kernel's shape
        rings = [(k, t) for k, t in enumerate(op.inputs) if self.program.tensors[t].ring]
        outs = [out, *(self.views[t] for t in op.outputs[1:])]  # lstm / gru: y, h (, c)
        return (i, op.name, kernel, ins, op.attrs, outs, rings)

    def _ring_view(self, index: int) -> np.ndarray:
        """A ring window where its position p puts it now: slots p .. p + n - 1 of its block."""
        t = self.program.tensors[index]
        n = t.ring_slots
        p = ring_position(self.persistent[t.offset:t.offset + 4], n)
        return np.frombuffer(self.persistent.data, np.dtype(S.DTYPE_NUMPY[t.dtype]), t.numel,
                             t.offset + S.RING_HEAD + p * (t.nbytes // n)).reshape(t.shape)

    def invoke(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Set the program's int8 inputs (NHWC), run every op, return copies of the outputs."""
        if len(inputs) != len(self.program.inputs):
            raise McutorchError(f"program takes {len(self.program.inputs)} inputs, "
                                f"got {len(inputs)}")
        for idx, x in zip(self.program.inputs, inputs):
            view = self.views[idx]
            x = np.asarray(x)
            if x.shape != view.shape or x.dtype != view.dtype:
                raise McutorchError(f"input {self.program.tensor_name(idx)} must be "
                                    f"{view.dtype}{list(view.shape)}, got {x.dtype}{list(x.shape)}")
            view[...] = x
        self._run(self.steps)
        return [self.views[i].copy() for i in self.program.outputs]

    def _run(self, steps) -> None:
        for step in steps:
            if isinstance(step, list):
                self._run(step)
                continue
            i, name, kernel, ins, attrs, outs, rings = step
            out = outs[0]
            if name not in C_INT16_OPS and any(x.dtype == np.int16 for x in (*ins, out)):
                raise ExecutionError(f"{self._where(i)}: int16 activations (a16w8) are not run "
                                     "yet: the C runtime has no int16 kernel for this op")
            try:
                for k, t in rings:
                    ins[k] = self._ring_view(t)
                shape = output_shape(name, ins, attrs)  # before the kernel allocates anything
                if shape is not None and shape != out.shape:
                    self._mismatch(i, out.dtype, shape, out)
                y = (OUT_DTYPE_OPS[name](*ins, out.dtype.name, **attrs) if name in OUT_DTYPE_OPS
                     else kernel(*ins, **attrs))
            except ValueError as e:
                raise ExecutionError(f"{self._where(i)}: {e}") from None
            for y, out in zip(y if isinstance(y, tuple) else (y,), outs, strict=True):
                if y.shape != out.shape or y.dtype != out.dtype:  # never broadcast into it
                    self._mismatch(i, y.dtype, y.shape, out)
                out[...] = y

    def _mismatch(self, i: int, dtype, shape, out) -> None:
        raise ExecutionError(f"{self._where(i)}: the kernel computes {dtype}{list(shape)} but "
                             f"the program's output is {out.dtype}{list(out.shape)}")

    def _where(self, i: int) -> str:
        source = self.program.op_source(i)
        return f"op {i} ({self.program.ops[i].name}{', ' + source if source else ''})"
