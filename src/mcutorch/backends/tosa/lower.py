"""IR graph (or a connected subset of its nodes) -> TOSA 1.0 INT flatbuffer, NHWC, int8 (and int16)
activations.

`lower_graph` finds the subset's boundary, declares its inputs, applies each node's rule
(rules.py) and marks its outputs; `emit_tosa` writes every lowerable run of a graph for Vela.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mcutorch.errors import UnsupportedOpError
from mcutorch.ir import Graph, Node, Tensor

from mcutorch.backends.tosa.builder import Builder
from mcutorch.backends.tosa.rules import RULES
from mcutorch.backends.tosa.support import tosa_runs, tosa_support


@dataclass
class TosaGraph:
    """A lowered graph: flatbuffer bytes, its IR inputs/outputs in order, and per-op notes."""

    flatbuffer: bytes
    inputs: list[Tensor]
    outputs: list[Tensor]
    nodes: list[Node]
    notes: list[str] = field(default_factory=list)

    def run(self, arrays) -> list[np.ndarray]:
        """Run on the TOSA reference model (inputs in `self.inputs` order)."""
        from mcutorch.backends.tosa.verify import run_tosa

        return run_tosa(self, arrays)

    def save(self, path) -> Path:
        path = Path(path)
        path.write_bytes(self.flatbuffer)
        return path


def boundary(graph: Graph, nodes: list[Node]) -> tuple[list[Tensor], list[Tensor]]:
    """Inputs (read, not produced, not constant; first-use order) and outputs (produced and read
    outside `nodes` or graph outputs; graph outputs first, in the graph's order) of a node set."""
    inside = {id(n) for n in nodes}
    produced = {id(t): t for n in nodes for t in n.outputs}
    inputs: dict[int, Tensor] = {}
    for n in nodes:
        for t in n.inputs:
            if not t.is_const and id(t) not in produced:
                inputs.setdefault(id(t), t)
    read_outside = {id(t) for n in graph.nodes if id(n) not in inside for t in n.inputs}
    outputs = [t for t in graph.outputs if id(t) in produced]
    outputs += [t for t in produced.values()
                if id(t) in read_outside and all(t is not o for o in outputs)]
    return list(inputs.values()), outputs


def lower_graph(graph: Graph, nodes: list[Node] | None = None, *,
                extra_outputs: bool = False) -> TosaGraph:
    """Lower `graph` (or a connected subset `nodes` of it) to a TOSA 1.0 flatbuffer.

    The subset's inputs are the activations it reads but does not produce; its outputs are the
    ones graph outputs or nodes outside the subset read (see `boundary`).

    `extra_outputs=True` also exposes every tensor the nodes produce (for locating a mismatch).
    Raises UnsupportedOpError naming the first node `tosa_support` refuses.

    Example:
        >>> tg = lower_graph(graph)
        >>> tg.save("model.tosa"); outs = tg.run([x_int8])
    """
    nodes = _in_graph_order(graph, nodes)
    for node in nodes:
        ok, why = tosa_support(node)
        if not ok:
            raise UnsupportedOpError(f"cannot lower {node} to TOSA: {why}")
    inputs, outputs = boundary(graph, nodes)
    if extra_outputs:
        outputs += [t for n in nodes for t in n.outputs if all(t is not o for o in outputs)]
    b = Builder()
    names = {id(t): b.input(t.name, t.shape, "int16" if t.dtype == "int16" else "int8")
             for t in inputs}
    notes = [_lower_node(b, node, names) for node in nodes]
    for t in outputs:
        b.output(names[id(t)])
    return TosaGraph(b.serialize(), inputs, outputs, nodes, notes)


def _in_graph_order(graph: Graph, nodes) -> list[Node]:
    if nodes is None:
        return list(graph.nodes)
    order = {id(n): i for i, n in enumerate(graph.nodes)}
    stray = [n for n in nodes if id(n) not in order]
    if stray or not nodes:
        raise UnsupportedOpError(f"lower_graph: {stray or 'no nodes'} not in the graph")
    return sorted(nodes, key=lambda n: order[id(n)])


def _lower_node(b: Builder, node: Node, names: dict) -> str:
    """Emit one node; returns its note ('op out: TOSA ops; remarks')."""
    start, remarks = len(b.emitted), []
    ins = [names[id(t)] for t in node.inputs if not t.is_const]
    y = node.outputs[0]
    names[id(y)] = RULES[node.op][1](b, node, ins, y.name, remarks)
    seq = " -> ".join(b.emitted[start:])
    return f"{node.op} {y.name}: {seq}" + (f" ({'; '.join(remarks)})" if remarks else "")


def emit_tosa(graph: Graph, folder) -> list[Path]:
    """Write each lowerable run of `graph` as `<folder>/tosa_<k>.tosa` (Vela reads .tosa only).

    Also writes `<folder>/tosa_<k>.txt` with the run's inputs, outputs and per-op notes.
    Returns the .tosa paths, in graph order.

    Example:
        >>> emit_tosa(graph, "out/")   # mcutorch compile --emit-tosa out/
        [PosixPath('out/tosa_0.tosa')]
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, run in enumerate(tosa_runs(graph)):
        tg = lower_graph(graph, run)
        paths.append(tg.save(folder / f"tosa_{k}.tosa"))
        lines = [f"inputs:  {tg.inputs}", f"outputs: {tg.outputs}", *tg.notes]
        (folder / f"tosa_{k}.txt").write_text("\n".join(lines) + "\n")
    return paths
