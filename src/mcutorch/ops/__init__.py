"""THE op registry: every op mcutorch knows, each one's facts in one entry, as data.

An entry (`OpDef`) says what a program stores for the op (opcode, operands, int32 attributes in
stored order, operand layouts, kernel variants), where it comes from (the aten overloads it is
lifted from, each with its quantization rule), how its output qparams relate to its inputs, whether
a following clamp fuses into it, which of its operands may share bytes, how many MACs it does,
its C kernel sources, and whether it lowers to TOSA. Entries live in one file per kernel family
(`conv.py`, `elementwise.py`, `pool.py`, `softmax.py`, `movement.py`, `graph.py`,
`reduce.py`, `recurrent.py`), mirroring
`runtime/kernels/<family>/`.

Every stage reads these facts from here, and keeps its own code for an op in one table keyed by
op name (tests/py/test_registry.py fails when an entry lacks one a stage needs):

    frontend/quantizer.py   annotation, from each Source's `quant` rule
    frontend/builders/      BUILDERS[op]: aten node -> IR node (one module per family)
    passes/requant.py       RULES[op]: scales -> int32 attributes and constant tables
    ref/<family>.py         the reference kernel, a function named like the op (the definition)
    backends/tosa/rules.py  RULES[op]: exactness check + TOSA 1.0 sequence (when `tosa` is "")
    runtime/kernels/        the C kernel; mt_kernels.h and mt_kernels_all.c are generated

This package imports neither torch nor the TOSA serializer. Opcodes are append-only: a new op
takes the next free opcode, and programs store opcodes, so an existing opcode never changes. The
recipe for adding an op is docs/adding_an_op.md.

Conventions shared by every op (the numerics contract, docs/numerics.md):
  - activations are int8 NHWC (2-D [N, C] for fully connected), per-tensor (scale, zero point);
  - weights are int8 symmetric per output channel, bias int32 with scale s_in * s_w[c];
  - `mult`/`shift` operands are int32 per-channel requantization tables (see quant.py);
  - `act_min`/`act_max` are the int8 output clamp (fused ReLU/ReLU6/clamp, or -128..127).
"""
from __future__ import annotations


from mcutorch.ops.defs import (ALIAS_KINDS, DEFAULT_VARIANT, QPARAM_RULES, QUANT_RULES, VARIADIC,
                               OpDef, Source)
from mcutorch.ops import conv, elementwise, graph, movement, pool, recurrent, reduce, softmax

REGISTRY: tuple[OpDef, ...] = tuple(sorted(
    (*conv.OPS, *elementwise.OPS, *pool.OPS, *softmax.OPS, *movement.OPS, *graph.OPS,
     *reduce.OPS, *recurrent.OPS),
    key=lambda d: (d.opcode is None, d.opcode if d.opcode is not None else 0, d.name)))
ALL: dict[str, OpDef] = {d.name: d for d in REGISTRY}  # every op, IR-only ones included
OPS: tuple[OpDef, ...] = tuple(d for d in REGISTRY if d.opcode is not None)  # program ops
BY_NAME = {op.name: op for op in OPS}
BY_OPCODE = {op.opcode: op for op in OPS}
IR_ONLY = tuple(d.name for d in REGISTRY if d.opcode is None)
assert len(ALL) == len(REGISTRY), "op names must be unique"
assert len(BY_OPCODE) == len(OPS), "opcodes must be unique"
# Opcodes are assigned from 0 up, densely (tests/py/test_registry.py); MT_OP_COUNT = OPCODE_END.
OPCODE_END = max(BY_OPCODE) + 1
MAX_ATTRS = max(len(op.attrs) for op in OPS)
SOURCES: dict[str, tuple[OpDef, Source]] = {}  # "aten.conv2d.default" -> (op, source)
for _d in REGISTRY:
    for _s in _d.sources:
        assert _s.aten not in SOURCES, f"{_s.aten} is lifted by two ops"
        SOURCES[_s.aten] = (_d, _s)


def get(name: str) -> OpDef:
    """The OpDef of a program op `name`; KeyError names the known ops."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r}; known: {', '.join(BY_NAME)}") from None


def with_fact(fact: str) -> frozenset[str]:
    """Names of the ops (IR-only included) whose boolean-ish fact is set, e.g. "fusable"."""
    return frozenset(d.name for d in REGISTRY if getattr(d, fact))


def macs(op: str, inputs: list[tuple], outputs: list[tuple], attrs: dict) -> int:
    """Multiply-accumulates of one op from operand shapes (for inspect and bench)."""
    d = ALL.get(op)
    if d is None or d.macs is None:
        return 0
    return int(d.macs([tuple(s) for s in inputs], [tuple(s) for s in outputs], attrs))


__all__ = ["ALIAS_KINDS", "ALL", "BY_NAME", "BY_OPCODE", "DEFAULT_VARIANT", "IR_ONLY",
           "MAX_ATTRS", "OPCODE_END", "OPS", "QPARAM_RULES", "QUANT_RULES", "REGISTRY", "SOURCES",
           "VARIADIC", "OpDef", "Source", "get", "macs", "with_fact"]
