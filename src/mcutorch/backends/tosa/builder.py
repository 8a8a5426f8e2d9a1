"""A thin layer over `tosa_serializer` for building TOSA 1.0 graphs from mcutorch IR.

It hides the serializer's calling conventions (TOSA 1.0 target version, named tensors in the one
basic block, zero points and shapes as constant inputs, CLAMP bounds as bytes) and records which
TOSA ops each IR node became, for the notes of a lowered graph. Tensors are referred to by name.
"""
from __future__ import annotations

import re

import numpy as np
import tosa_serializer as ts

DTYPES = {"int8": (ts.DType.INT8, np.int8), "int16": (ts.DType.INT16, np.int16),
          "int32": (ts.DType.INT32, np.int32), "bool": (ts.DType.BOOL, np.bool_),
          "int48": (ts.DType.INT48, np.int64)}  # the int16 x int8 MAC accumulator and its bias
TOSA_VERSION = dict(targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False)


def attr(kind: str, *args) -> ts.TosaSerializerAttribute:
    """A serializer attribute, e.g. attr("Conv2d", pad, stride, ...)."""
    result = ts.TosaSerializerAttribute()
    getattr(result, f"{kind}Attribute")(*args)
    return result


class Builder:
    """Accumulates one TOSA 1.0 graph; `serialize()` gives the flatbuffer bytes."""

    def __init__(self):
        self.ser = ts.TosaSerializer("", **TOSA_VERSION)
        self.block = self.ser.currRegion.currBasicBlock
        self.tensors: dict[str, ts.TosaSerializerTensor] = {}
        self.shapes: dict[str, tuple[tuple[int, ...], str]] = {}
        self.emitted: list[str] = []  # TOSA op names, in order (for notes)

    # --- tensors -------------------------------------------------------------------------------
    def _unique(self, base: str) -> str:
        name = re.sub(r"[^A-Za-z0-9_.]", "_", base) or "t"
        candidate, i = name, 1
        while candidate in self.shapes:
            candidate, i = f"{name}_{i}", i + 1
        return candidate

    def input(self, base: str, shape, dtype: str = "int8") -> str:
        name = self._unique(base)
        tensor = ts.TosaSerializerTensor(name, list(shape), DTYPES[dtype][0])
        self.ser.addInputTensor(tensor)
        self.tensors[name], self.shapes[name] = tensor, (tuple(shape), dtype)
        return name

    def tensor(self, shape, dtype: str = "int8", base: str = "t") -> str:
        name = self._unique(base)
        self.tensors[name] = self.block.addTensor(name, list(shape), DTYPES[dtype][0])
        self.shapes[name] = (tuple(shape), dtype)
        return name

    def const(self, values, dtype: str, base: str = "c") -> str:
        """A constant tensor of `dtype` holding `values` (shape kept; scalars become [1])."""
        data = np.asarray(values, DTYPES[dtype][1])
        if data.ndim == 0:
            data = data.reshape(1)
        name = self._unique(base)
        self.ser.addConst(list(data.shape), DTYPES[dtype][0], data, name=name)
        self.shapes[name] = (data.shape, dtype)
        return name

    def shape_const(self, values) -> str:
        """A TOSA 1.0 shape operand (RESHAPE/SLICE/PAD arguments)."""
        name = self._unique("shape")
        vals = np.asarray(list(values), np.int64)
        self.ser.addConst([len(vals)], ts.DType.SHAPE, vals, name=name)
        self.shapes[name] = ((len(vals),), "shape")
        return name

    def shape(self, name: str) -> tuple[int, ...]:
        return self.shapes[name][0]

    def dtype(self, name: str) -> str:
        return self.shapes[name][1]

    def output(self, name: str) -> None:
        self.ser.addOutputTensor(self.tensors[name])

    # --- operators -----------------------------------------------------------------------------
    def op(self, opname: str, inputs, shape, dtype: str, attributes,
           out: str | None = None) -> str:
        """Append TOSA op `opname` (e.g. "CONV2D"); returns its output tensor's name."""
        y = self.tensor(shape, dtype, out or opname.lower())
        self.ser.addOperator(getattr(ts.Op, opname), list(inputs), [y], attributes)
        self.emitted.append(opname)
        return y

    def rescale(self, x: str, mult, shift, in_zp: int, out_zp: int, out_dtype: str,
                out: str | None = None) -> str:
        """RESCALE with SINGLE_ROUND; per channel when `mult` has more than 1 entry. scale32
        (apply_scale_32, int32 multipliers) but for an int48 input: apply_scale_16, int16
        multipliers (the int16 MAC ops' 16-bit multipliers, docs/numerics.md section 6)."""
        mult = np.atleast_1d(np.asarray(mult, np.int64))
        shift = np.atleast_1d(np.asarray(shift, np.int64))
        in_dtype = self.shapes[x][1]
        scale32 = in_dtype != "int48"
        args = [x, self.const(mult, "int32" if scale32 else "int16", "multiplier"),
                self.const(shift, "int8", "shift"), self.const(in_zp, in_dtype, "input_zp"),
                self.const(out_zp, out_dtype, "output_zp")]
        at = attr("Rescale", scale32, ts.RoundingMode.SINGLE_ROUND, mult.size > 1, False, False)
        return self.op("RESCALE", args, self.shape(x), out_dtype, at, out)

    def clamp(self, x: str, lo: int, hi: int, out: str | None = None) -> str:
        dtype = DTYPES[self.shapes[x][1]][0]
        as_bytes = [ts.TosaSerializer.convertDataToUint8Vec(dtype, [v]) for v in (lo, hi)]
        at = attr("Clamp", *as_bytes, ts.NanPropagationMode.PROPAGATE)
        return self.op("CLAMP", [x], self.shape(x), self.shapes[x][1], at, out)

    def reshape(self, x: str, shape, out: str | None = None) -> str:
        args = [x, self.shape_const(shape)]
        return self.op("RESHAPE", args, shape, self.shapes[x][1], attr("Reshape"), out)

    def slice(self, x: str, start, size, out: str | None = None) -> str:
        args = [x, self.shape_const(start), self.shape_const(size)]
        return self.op("SLICE", args, size, self.shapes[x][1], attr("Slice"), out)

    def pad(self, x: str, before, after, value: int, out: str | None = None) -> str:
        """PAD with a constant; before/after per dim of x."""
        pairs = [v for b, a in zip(before, after) for v in (b, a)]
        shape = [d + b + a for d, b, a in zip(self.shape(x), before, after)]
        args = [x, self.shape_const(pairs), self.const(value, self.shapes[x][1], "pad_const")]
        return self.op("PAD", args, shape, self.shapes[x][1], attr("Pad"), out)

    def concat(self, xs, axis: int, out: str | None = None) -> str:
        shape = list(self.shape(xs[0]))
        shape[axis] = sum(self.shape(x)[axis] for x in xs)
        return self.op("CONCAT", xs, shape, self.shapes[xs[0]][1], attr("Concat", axis), out)

    def serialize(self) -> bytes:
        return bytes(self.ser.serialize())

