"""mcutorch IR: integer ops on int8/int32 tensors with quantization parameters.

A Graph is a topologically ordered list of Nodes. Each Node is an op of the op registry
(mcutorch.ops), including the IR-only `reshape`, which the program stores as a free alias (no op
record).
Tensors carry their logical shape in their current `layout` ("NCHW" straight from torch, "NHWC"
after passes.layout), their quantization (scale: float, or per-channel array for weights) and, for
constants, their data.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mcutorch import ops
from mcutorch.errors import McutorchError

IR_ONLY = ops.IR_ONLY  # ("reshape",): free views, no op record
DTYPES = ("int8", "int32", "uint8", "int16", "int64")


@dataclass(eq=False)
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str = "int8"
    scale: Any = 1.0  # float, or np.ndarray per channel (weights, bias)
    zero_point: int = 0
    data: np.ndarray | None = None  # constants only
    layout: str | None = None  # "NCHW"/"NHWC" for 4-D activations
    init: np.ndarray | None = None  # persistent tensors (state): the initial value
    ring: bool = False  # a ring window (passes/ring.py): init is its block (program schema)

    @property
    def is_const(self) -> bool:
        return self.data is not None

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize

    def __repr__(self) -> str:
        q = f" s={self.scale:.4g} zp={self.zero_point}" if np.isscalar(self.scale) else ""
        return f"{self.name}:{self.dtype}{list(self.shape)}{q}"


def same_qparams(a: Tensor, b: Tensor) -> bool:
    """Whether two tensors share scale and zero point (their int8 values mean the same)."""
    return a.scale == b.scale and a.zero_point == b.zero_point


def compose_act(first: tuple[int, int], then: tuple[int, int]) -> tuple[int, int]:
    """The int8 clamp equal to clamping to `first`, then to `then` (disjoint ranges included:
    clamp to (0, 5) then (9, 20) is the constant 9)."""
    lo, hi = then
    return (min(max(first[0], lo), hi), min(max(first[1], lo), hi))


@dataclass(eq=False)
class Node:
    op: str
    inputs: list[Tensor]
    outputs: list[Tensor]
    attrs: dict[str, Any] = field(default_factory=dict)
    source: str = ""  # "file:line (aten.op)" for error messages and inspect
    variant: str = ops.DEFAULT_VARIANT  # kernel variant (mcutorch.ops), chosen by the backend
    scratch: int = 0  # bytes of planned scratch the kernel needs

    def __repr__(self) -> str:
        return f"{self.op}({', '.join(t.name for t in self.inputs)}) -> {self.outputs}"


@dataclass(eq=False)
class Graph:
    nodes: list[Node]
    inputs: list[Tensor]
    outputs: list[Tensor]
    meta: dict = field(default_factory=dict)  # model boundary: float dtypes/layouts of I/O

    def producers(self) -> dict[Tensor, Node]:
        return {t: n for n in self.nodes for t in n.outputs}

    def consumers(self) -> dict[Tensor, list[Node]]:
        users: dict[Tensor, list[Node]] = {}
        for n in self.nodes:
            for t in n.inputs:
                users.setdefault(t, []).append(n)
        return users

    def tensors(self) -> list[Tensor]:
        """Every tensor once, in first-seen order (inputs, then node order)."""
        seen: dict[int, Tensor] = {}
        for t in [*self.inputs, *(t for n in self.nodes for t in (*n.inputs, *n.outputs))]:
            seen.setdefault(id(t), t)
        return list(seen.values())

    def replace_uses(self, old: Tensor, new: Tensor) -> None:
        for n in self.nodes:
            n.inputs = [new if t is old else t for t in n.inputs]
        self.outputs = [new if t is old else t for t in self.outputs]


class VerifyError(McutorchError):
    """The IR broke an invariant between passes (a compiler bug, reported with the pass name)."""


def verify(graph: Graph, final: bool = False, stage: str = "") -> Graph:
    """Check graph invariants; with final=True also that every op is complete per mcutorch.ops."""
    where = f" after {stage}" if stage else ""
    defined = {id(t) for t in graph.inputs}
    written = set()  # a persistent tensor holds a value from the start; written once (its copy)
    for node in graph.nodes:
        for t in node.inputs:
            if not (t.is_const or id(t) in defined or t.init is not None):
                raise VerifyError(f"{node} reads {t.name} before it is written{where}")
        for t in node.outputs:
            if t.init is not None and id(t) not in written:
                written.add(id(t))
                continue
            if id(t) in defined or t.is_const:
                raise VerifyError(f"{t.name} written twice{where}")
            defined.add(id(t))
        if node.op not in IR_ONLY and node.op not in ops.BY_NAME:
            raise VerifyError(f"unknown op {node.op}{where}")
        if final:
            _verify_final(node, where)
    for t in graph.outputs:
        if id(t) not in defined:
            raise VerifyError(f"graph output {t.name} is never written{where}")
    return graph


def _verify_final(node: Node, where: str) -> None:
    if node.op == "reshape":
        if node.inputs[0].nbytes != node.outputs[0].nbytes:
            raise VerifyError(f"{node} changes the byte size{where}")
        return
    opdef = ops.get(node.op)
    missing = [a for a in opdef.attrs if a not in node.attrs]
    if missing:
        raise VerifyError(f"{node} lacks attributes {missing}{where}")
    if ops.VARIADIC not in opdef.inputs and len(node.inputs) != len(opdef.inputs):
        raise VerifyError(f"{node} has {len(node.inputs)} operands, {opdef.name} takes "
                          f"{len(opdef.inputs)}{where}")
    for t in node.outputs:
        if t.dtype not in DTYPES or (t.layout not in (None, "NHWC")):
            raise VerifyError(f"{node}: output {t} is not int8 NHWC{where}")
