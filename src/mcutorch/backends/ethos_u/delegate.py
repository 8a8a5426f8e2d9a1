"""Turn a lowered graph into Ethos-U delegates: partition, TOSA, Vela, and the I/O binding rules.

`delegate_graph` is the compiler's entry point. For every NPU group of the partition it lowers
the group to TOSA (`mcutorch.backends.tosa.lower_graph`), optionally proves the TOSA graph equal
to the Python reference (`verify`), and compiles it with Vela. An op Vela refuses goes to the CPU
with Vela's reason and the partition is redone, so a refusal never stops the compile.

Then it prepares the graph for the memory plan, where each delegate input/output tensor will live
*at Vela's offset inside Vela's scratch area* (the producer of an input writes there, consumers
of an output read there; no copies at the boundary). Two cases need a `copy` op:

  * copy in: an input whose bytes must not move into the scratch area: bytes that are already
    bound to another delegate, or that something reads after the delegate or the program returns
    (Vela reuses its scratch during the delegate). A `copy` right before the delegate writes the
    input into the scratch area; everything else keeps reading the original.
  * CPU version: the delegate's ops also run on the CPU when no NPU driver is linked, and Vela
    may place an output over an input it has finished with. When the CPU version would write such
    an output before its last read of that input, the op writes a temporary and a `copy` at the
    end of the CPU version moves it into place.

The returned `Delegate`s carry the IR `delegate` node the program stores, the CPU version's nodes,
Vela's result and the TOSA graph; `placement_table` is what `mcutorch inspect` shows.

    >>> d = delegate_graph(graph, "ethos-u55-128")
    >>> [(x.index, len(x.cpu_nodes), x.vela.scratch_size) for x in d.delegates]
    [(0, 11, 22192)]
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mcutorch.backends import tosa
from mcutorch.backends.tosa.verify import random_array
from mcutorch.ir import Graph, Node, Tensor

from mcutorch.backends.ethos_u.partition import Partition, contracted_order, partition
from mcutorch.backends.ethos_u.vela import (VelaConfig, VelaError, VelaResult, as_config,
                                            compile_tosa)


@dataclass
class Delegate:
    """One NPU subgraph: its IR nodes, TOSA graph, Vela output, bound tensors and CPU version."""

    index: int
    nodes: list[Node]  # the lowered nodes, in graph order (reshapes included)
    tosa: tosa.TosaGraph
    vela: VelaResult
    inputs: list[Tensor]  # bound tensors, in Vela's input order
    outputs: list[Tensor]
    cpu_nodes: list[Node] = field(default_factory=list)  # CPU version, in run order
    op: Node | None = None  # the IR `delegate` node
    copies_in: int = 0
    macs: int = 0

    @property
    def bindings(self):
        """(tensor, VelaTensor) pairs: inputs, then outputs."""
        return list(zip(self.inputs + self.outputs, self.vela.inputs + self.vela.outputs))


@dataclass
class Delegation:
    """Everything the compiler needs from the Ethos-U backend."""

    npu: str
    config: VelaConfig
    delegates: list[Delegate]
    placement: list[dict]
    fallback: bool
    verified: bool
    fallback_ram: int = 0  # plan bytes the CPU versions add (the compiler fills it in)

    def fallback_flash(self) -> int:
        """Constant bytes only the CPU versions read (their weights; Vela encodes its own);
        equal constants count once, as the program's constant pool stores them."""
        consts = {np.asarray(t.data).tobytes(): t.nbytes for d in self.delegates
                  for n in d.cpu_nodes for t in n.inputs if t.is_const} if self.fallback else {}
        return sum(consts.values())


def delegate_graph(graph: Graph, npu: str, *, fallback: bool = True, verify: bool = False,
                   emit_tosa=None, options=None, seed: int = 0) -> Delegation:
    """Partition `graph` for `npu`, compile each NPU subgraph with Vela, and rewrite the graph so
    the memory plan can bind every delegate's I/O inside Vela's scratch (see the module doc).

    `options`: None, a VelaConfig, or {"system_config": ..., "memory_mode": ..., "extra": [...]}.
    `verify`: run each TOSA graph on the TOSA reference model against mcutorch's reference
    (TosaMismatchError unless bit-exact). `emit_tosa`: folder for `delegate_<k>.tosa` (what
    Vela compiled) with a `.txt` of its I/O and per-op notes.

    Example:
        >>> d = delegate_graph(graph, "ethos-u85-256", fallback=False)
    """
    config = as_config(npu, options)
    part, compiled = _compile_groups(graph, npu, config)
    lowered = [compiled[_key(g)][0] for g in part.groups]
    if verify:
        _verify(graph, part.groups, lowered, seed)
    if emit_tosa is not None:
        _emit(Path(emit_tosa), lowered)
    graph.nodes = contracted_order(graph, part.groups)
    delegates = [_delegate(k, g, *compiled[_key(g)]) for k, g in enumerate(part.groups)]
    _bind_inputs(graph, delegates)
    table = placement_table(graph, part, delegates)
    for d in delegates:
        if fallback:
            _cpu_version(graph, d)
        d.op = Node("delegate", list(d.inputs), list(d.outputs), {"index": d.index},
                    source=f"{npu} (delegate {d.index})")
    return Delegation(npu, config, delegates, table, fallback, verify)


# --- Vela, with refusals moved to the CPU -------------------------------------------------------

def _key(nodes: list[Node]) -> frozenset:
    return frozenset(id(n) for n in nodes)


def _compile_groups(graph: Graph, npu: str, config: VelaConfig) -> tuple[Partition, dict]:
    """Partition, then compile every group; ops Vela refuses leave the NPU until none does."""
    refused: dict[int, str] = {}
    compiled: dict[frozenset, tuple] = {}
    while True:
        part = partition(graph, npu, refused)
        more: dict[int, str] = {}
        for group in part.groups:
            if _key(group) in compiled:
                continue
            try:
                compiled[_key(group)] = _compile(graph, group, config)
            except VelaError as e:
                more.update(_culprits(graph, group, config, e))
        if not more:
            return part, compiled
        refused.update(more)


def _compile(graph: Graph, nodes: list[Node], config: VelaConfig):
    tg = tosa.lower_graph(graph, nodes)
    return tg, compile_tosa(tg.flatbuffer, config)


def _culprits(graph: Graph, group: list[Node], config: VelaConfig, err: VelaError) -> dict:
    """The ops of a refused group that Vela refuses on their own (id -> reason); when none does,
    the group's last op, so the group shrinks until Vela takes it."""
    found = {}
    for node in group:
        if node.op == "reshape":
            continue
        try:
            _compile(graph, [node], config)
        except VelaError as e:
            found[id(node)] = f"{node.op}: Vela refused it for {config.accelerator}: {e.reason}"
    if found:
        return found
    last = [n for n in group if n.op != "reshape"][-1]
    return {id(last): f"{last.op}: Vela refused the subgraph ending here for "
                      f"{config.accelerator} ({err.reason}); the subgraph was cut before it"}


def _verify(graph: Graph, groups: list[list[Node]], lowered: list[tosa.TosaGraph],
            seed: int) -> None:
    """Each TOSA graph bit-exact against mcutorch.ref on two seeded random int8 input sets."""
    rng = np.random.default_rng(seed)
    for group, tg in zip(groups, lowered):
        for _ in range(2):
            tosa.verify(graph, group, [random_array(t, rng) for t in tg.inputs])


def _emit(folder: Path, graphs: list[tosa.TosaGraph]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for k, tg in enumerate(graphs):
        tg.save(folder / f"delegate_{k}.tosa")
        lines = [f"inputs:  {tg.inputs}", f"outputs: {tg.outputs}", *tg.notes]
        (folder / f"delegate_{k}.txt").write_text("\n".join(lines) + "\n")


def _delegate(k: int, nodes: list[Node], tg: tosa.TosaGraph, result: VelaResult) -> Delegate:
    """A Delegate whose TOSA I/O and Vela's I/O agree in count, bytes and element size."""
    from mcutorch.ops import macs

    for kind, tensors, placed in (("input", tg.inputs, result.inputs),
                                  ("output", tg.outputs, result.outputs)):
        if len(tensors) != len(placed):
            raise VelaError(f"delegate {k}: {len(placed)} {kind}s from Vela, TOSA graph has "
                            f"{len(tensors)}")
        for t, v in zip(tensors, placed):
            if v.nbytes != t.nbytes or v.elem_size != np.dtype(t.dtype).itemsize:
                raise VelaError(f"delegate {k}: {kind} {t.name} {t.dtype}{list(t.shape)} but "
                                f"Vela gives {list(v.shape)} x {v.elem_size} B")
            if v.region != result.scratch_region:
                raise VelaError(f"delegate {k}: {kind} {t.name} in Vela region {v.region}, "
                                f"not in the scratch area (region {result.scratch_region})")
    work = sum(macs(n.op, [t.shape for t in n.inputs], [t.shape for t in n.outputs], n.attrs)
               for n in nodes)
    return Delegate(k, list(nodes), tg, result, list(tg.inputs), list(tg.outputs), macs=work)


# --- binding rules ------------------------------------------------------------------------------

def _producers(graph: Graph) -> dict[int, Node]:
    return {id(t): n for n in graph.nodes for t in n.outputs}


def storage_root(graph: Graph, t: Tensor) -> Tensor:
    """The tensor whose bytes `t` views: follow reshape producers (reshapes are free views)."""
    made = _producers(graph)
    while id(t) in made and made[id(t)].op == "reshape":
        t = made[id(t)].inputs[0]
    return t


def _views(graph: Graph, root: Tensor, skip: set[int]) -> set[int]:
    """ids of `root` and every reshape view of it made by nodes not in `skip`."""
    ids = {id(root)}
    for n in graph.nodes:
        if n.op == "reshape" and id(n) not in skip and id(n.inputs[0]) in ids:
            ids.add(id(n.outputs[0]))
    return ids


def _read_after(graph: Graph, ids: set[int], block: list[Node]) -> bool:
    """Whether a graph output, or an op after `block`, reads any of `ids`."""
    if any(id(t) in ids for t in graph.outputs):
        return True
    end = max(graph.nodes.index(n) for n in block)
    return any(n.op != "reshape" and any(id(t) in ids for t in n.inputs)
               for n in graph.nodes[end + 1:])


def _bind_inputs(graph: Graph, delegates: list[Delegate]) -> None:
    """Give each delegate input whose bytes cannot live in Vela's scratch a copy-in op."""
    # every delegate's outputs first: a delegate may read (through views) what one numbered
    # after it writes, whose bytes are in that one's scratch
    bound = {id(storage_root(graph, t)) for d in delegates for t in d.outputs}
    for d in delegates:
        inside = {id(n) for n in d.nodes}
        for i, t in enumerate(d.inputs):
            root = storage_root(graph, t)
            if id(root) in bound or _read_after(graph, _views(graph, root, inside), d.nodes):
                d.inputs[i] = _copy_in(graph, d, t, i)
                d.copies_in += 1
            else:
                bound.add(id(root))


def _like(t: Tensor, name: str) -> Tensor:
    return Tensor(name, t.shape, t.dtype, t.scale, t.zero_point, layout=t.layout)


def _rewire(nodes: list[Node], old: Tensor, new: Tensor) -> None:
    for n in nodes:
        n.inputs = [new if x is old else x for x in n.inputs]


def _copy_in(graph: Graph, d: Delegate, t: Tensor, i: int) -> Tensor:
    """A copy of `t` made just before the delegate; the delegate reads the copy."""
    dst = _like(t, f"{t.name}_to_npu{d.index}")
    node = Node("copy", [t], [dst], {}, source=f"delegate {d.index} input {i} (copy)")
    graph.nodes.insert(graph.nodes.index(d.nodes[0]), node)
    _rewire(d.nodes, t, dst)
    return dst


def _cpu_version(graph: Graph, d: Delegate) -> None:
    """The delegate's ops for the CPU, with outputs Vela placed over a still-needed input routed
    through a temporary and a trailing copy."""
    order = [n for n in d.nodes if n.op != "reshape"]
    reads = [_last_read(order, _views(graph, t, set())) for t in d.inputs]
    tail = []
    for j, (y, vy) in enumerate(zip(d.outputs, d.vela.outputs)):
        writer = next(k for k, n in enumerate(order) if any(o is y for o in n.outputs))
        clash = any(_overlap(vy, vx) and writer <= last
                    for vx, last in zip(d.vela.inputs, reads))
        if clash:
            tail.append(_detour(graph, d, order[writer], y, j))
    d.cpu_nodes = order + tail
    at = max(graph.nodes.index(n) for n in d.nodes) + 1
    graph.nodes[at:at] = tail


def _last_read(order: list[Node], ids: set[int]) -> int:
    hits = [k for k, n in enumerate(order) if any(id(t) in ids for t in n.inputs)]
    return max(hits, default=-1)


def _overlap(a, b) -> bool:
    return a.offset < b.offset + b.nbytes and b.offset < a.offset + a.nbytes


def _detour(graph: Graph, d: Delegate, writer: Node, y: Tensor, j: int) -> Node:
    """`writer` writes a temporary; a copy at the end of the CPU version writes output `y`."""
    tmp = _like(y, f"{y.name}_cpu{d.index}")
    writer.outputs = [tmp if o is y else o for o in writer.outputs]
    _rewire(d.nodes, y, tmp)
    return Node("copy", [tmp], [y], {}, source=f"delegate {d.index} output {j} (CPU version)")


# --- the placement table ------------------------------------------------------------------------

def _note(tg: tosa.TosaGraph, node: Node) -> str:
    """The TOSA ops a node became ('CONV2D -> RESCALE -> CLAMP (...)')."""
    for n, note in zip(tg.nodes, tg.notes):
        if n is node:
            return note.split(": ", 1)[-1]
    return ""


def placement_table(graph: Graph, part: Partition, delegates: list[Delegate]) -> list[dict]:
    """One JSON row per graph node (graph order) plus the host-side I/O conversion rows:
    op, output tensor, source, where it runs ("NPU", "CPU" or "host"), delegate index, why."""
    rows = [{"op": "quantize", "output": t.name, "source": "", "on": "host", "delegate": None,
             "why": "float -> int8 at the model boundary: program inputs are int8 already"}
            for t in graph.inputs]
    by_node = {id(r.node): r for r in part.rows}
    for node in graph.nodes:
        r = by_node.get(id(node))
        if r is None:  # a copy-in
            on, group, why = "CPU", None, ("moves a delegate input into Vela's scratch: its "
                                           "bytes are bound elsewhere or read after the delegate")
        else:
            on, group = ("NPU", r.group) if r.npu else ("CPU", None)
            why = _note(delegates[r.group].tosa, node) if r.npu else r.reason
        rows.append({"op": node.op, "output": node.outputs[0].name, "source": node.source,
                     "on": on, "delegate": group, "why": why})
    rows += [{"op": "dequantize", "output": t.name, "source": "", "on": "host", "delegate": None,
              "why": "int8 -> float at the model boundary: program outputs are int8"}
             for t in graph.outputs]
    return rows
