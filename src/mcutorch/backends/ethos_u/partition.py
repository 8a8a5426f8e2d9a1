"""Partitioner: which IR nodes run on the Ethos-U, grouped into subgraphs Vela compiles whole.

A node may go to the NPU when the TOSA backend lowers it exactly (`tosa_support`) and the chosen
accelerator takes it (`constraints.npu_check`; the U55/U65 are stricter than the U85). NPU nodes
are grouped greedily in graph order: a node joins the group of each NPU producer unless the union
would stop being convex (a path leaving the group and coming back, which would make the
contracted graph cyclic: no order could run the group as one delegate). A `reshape` stays in a
group only while every reader of its output is in the same group: a reshape whose output leaves
becomes a free view on the CPU side, so every delegate output is a tensor some op writes.
Groups of reshapes alone are dropped. Model-boundary quantize/dequantize never reaches the IR:
program I/O is int8 and the float conversion is a host service.

    >>> part = partition(graph, "ethos-u55-128")
    >>> [len(g) for g in part.groups], [r.reason for r in part.rows if not r.npu]
    ([11], ['softmax: TOSA 1.0 has no softmax, ...'])
"""
from __future__ import annotations

from dataclasses import dataclass, field

from mcutorch.backends.tosa import tosa_support
from mcutorch.ir import Graph, Node

from mcutorch.backends.ethos_u.constraints import npu_check

VIEW_REASON = "reshape: a free view of its input on the CPU side (no op)"


def npu_support(node: Node, npu: str) -> tuple[bool, str]:
    """(True, '') when `node` lowers to TOSA exactly and `npu` accepts it, else (False, why).

        >>> npu_support(softmax_node, "ethos-u85-256")
        (False, 'softmax: TOSA 1.0 has no softmax, ...')
    """
    ok, why = tosa_support(node)
    if not ok:
        return False, why
    why = npu_check(node, npu)
    return not why, why


@dataclass
class Placement:
    """One node's place: NPU (in group `group`) or CPU, and why."""

    node: Node
    npu: bool
    reason: str = ""
    group: int | None = None


@dataclass
class Partition:
    """NPU groups (each in graph order, groups ordered by their first node) and one row per
    graph node, in graph order."""

    npu: str
    groups: list[list[Node]]
    rows: list[Placement] = field(default_factory=list)


class _Dag:
    """Node adjacency of a graph by activation tensors (reshape nodes included)."""

    def __init__(self, graph: Graph):
        self.nodes = list(graph.nodes)
        self.pos = {id(n): i for i, n in enumerate(self.nodes)}
        made = {id(t): i for i, n in enumerate(self.nodes) for t in n.outputs
                if t.init is None or t.ring}  # a ring window is read after its ring_write
        readers: dict[int, set[int]] = {}  # a persistent tensor's write follows its reads
        for i, n in enumerate(self.nodes):
            for t in n.inputs:
                if t.init is not None and not t.ring:
                    readers.setdefault(id(t), set()).add(i)
        self.pred = [sorted({made[id(t)] for t in n.inputs if id(t) in made}
                            | {r for t in n.outputs for r in readers.get(id(t), ()) if r != i})
                     for i, n in enumerate(self.nodes)]
        self.succ: list[list[int]] = [[] for _ in self.nodes]
        for i, ps in enumerate(self.pred):
            for p in ps:
                self.succ[p].append(i)

    def convex(self, members: set[int]) -> bool:
        """No path from the set through an outside node back into it."""
        stack = [s for m in members for s in self.succ[m] if s not in members]
        seen = set(stack)
        while stack:
            for s in self.succ[stack.pop()]:
                if s in members:
                    return False
                if s not in seen:
                    seen.add(s)
                    stack.append(s)
        return True


def _groups(dag: _Dag, on_npu: list[bool]) -> list[list[int]]:
    """Greedy convex merging along producer -> consumer edges, in graph order."""
    group_of: dict[int, set[int]] = {}
    for i in range(len(dag.nodes)):
        if not on_npu[i]:
            continue
        group_of[i] = {i}
        for p in dag.pred[i]:
            if p not in group_of or group_of[p] is group_of[i]:
                continue
            union = group_of[p] | group_of[i]
            if dag.convex(union):
                for m in union:
                    group_of[m] = union
    unique = {id(g): sorted(g) for g in group_of.values()}
    return sorted(unique.values())


def _view_leaks(graph: Graph, dag: _Dag, groups: list[list[int]]) -> dict[int, str]:
    """Reshapes whose output is read outside their group (or is a graph output): id -> reason."""
    outputs = {id(t) for t in graph.outputs}
    readers: dict[int, set[int]] = {}
    for i, n in enumerate(dag.nodes):
        for t in n.inputs:
            readers.setdefault(id(t), set()).add(i)
    leaks = {}
    for g in groups:
        inside = set(g)
        for i in g:
            n = dag.nodes[i]
            y = id(n.outputs[0])
            if n.op == "reshape" and (y in outputs or readers.get(y, set()) - inside):
                leaks[id(n)] = VIEW_REASON
    return leaks


STATE_REASON = "reads or writes the model's state (persistent tensors stay on the CPU)"


def partition(graph: Graph, npu: str, refused: dict[int, str] | None = None) -> Partition:
    """Place every node of `graph` for Ethos-U configuration `npu` ("ethos-u55-128", ...).

    `refused` maps id(node) -> reason for nodes that must stay on the CPU whatever their support
    (the delegate builder adds the ops Vela refused).
    """
    dag = _Dag(graph)
    refused = dict(refused or {})
    for n in dag.nodes:  # a stateful model's state stays int8 on the CPU (passes/persistent.py)
        if any(t.init is not None for t in (*n.inputs, *n.outputs)):
            refused.setdefault(id(n), STATE_REASON)
    support = [npu_support(n, npu) for n in dag.nodes]
    while True:
        on_npu = [ok and id(n) not in refused for n, (ok, _) in zip(dag.nodes, support)]
        groups = _groups(dag, on_npu)
        leaks = _view_leaks(graph, dag, groups)
        if not leaks:
            break
        refused.update(leaks)
    groups = [g for g in groups if any(dag.nodes[i].op != "reshape" for i in g)]
    rows = [Placement(n, False, refused.get(id(n)) or why or VIEW_REASON)
            for n, (_, why) in zip(dag.nodes, support)]
    for k, g in enumerate(groups):
        for i in g:
            rows[i].npu, rows[i].reason, rows[i].group = True, "", k
    return Partition(npu, [[dag.nodes[i] for i in g] for g in groups], rows)


def contracted_order(graph: Graph, groups: list[list[Node]]) -> list[Node]:
    """Graph nodes in an order where each group's nodes are consecutive: a topological order of
    the graph with every group contracted to one unit, as close to the original as possible.

        >>> graph.nodes = contracted_order(graph, part.groups)
    """
    dag = _Dag(graph)
    unit = list(range(len(dag.nodes)))
    members: dict[int, list[int]] = {i: [i] for i in unit}
    for g in groups:
        idx = sorted(dag.pos[id(n)] for n in g)
        for i in idx:
            unit[i] = idx[0]
            members.pop(i, None)
        members[idx[0]] = idx
    deps = {u: {unit[p] for m in ms for p in dag.pred[m]} - {u} for u, ms in members.items()}
    users: dict[int, list[int]] = {u: [] for u in members}
    for u, ds in deps.items():
        for d in ds:
            users[d].append(u)
    return [dag.nodes[i] for u in _kahn(deps, users) for i in members[u]]


def _kahn(deps: dict[int, set[int]], users: dict[int, list[int]]) -> list[int]:
    """Topological order of units, smallest ready unit first (keeps the original order)."""
    import heapq

    waiting = {u: len(ds) for u, ds in deps.items()}
    ready = [u for u, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        u = heapq.heappop(ready)
        order.append(u)
        for v in users[u]:
            waiting[v] -= 1
            if waiting[v] == 0:
                heapq.heappush(ready, v)
    if len(order) != len(deps):
        raise AssertionError("contracted graph has a cycle: a group is not convex")
    return order
