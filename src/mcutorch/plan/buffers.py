"""The compiler's side of planning: run order, one planner buffer per tensor, aliasing.

`steps_of` orders the ops (a delegate, then its CPU version); `buffers_of` makes a `Buffer` per
activation tensor (reshape outputs alias their source) and per scratch need; `bind_delegates`
places tensors inside Vela's scratch; `inplace_pairs` lists the (input, output) pairs the op
registry lets share bytes and `overlap_pairs` the (input, output, least delta) pairs.
"""
from __future__ import annotations

from mcutorch import ops
from mcutorch.errors import McutorchError
from mcutorch.ir import Graph
from mcutorch.plan.planner import Buffer

INPLACE_OPS = frozenset(d.name for d in ops.REGISTRY if "inplace" in d.alias)
RESIDUAL_OPS = frozenset(d.name for d in ops.REGISTRY if "residual" in d.alias)
OVERLAP_OPS = frozenset(d.name for d in ops.REGISTRY if "overlap" in d.alias)


def steps_of(graph: Graph, npu) -> list:
    """Ops in run order. A delegate is its `delegate` node followed by its CPU version (which
    runs in its place when no NPU driver is linked); reshapes are views, not steps."""
    if npu is None:
        return [n for n in graph.nodes if n.op != "reshape"]
    owner = {id(n): d for d in npu.delegates for n in (*d.nodes, *d.cpu_nodes)}
    steps, seen = [], set()
    for node in graph.nodes:
        d = owner.get(id(node))
        if d is None:
            if node.op != "reshape":
                steps.append(node)
        elif d.index not in seen:
            seen.add(d.index)
            steps += [d.op, *(d.cpu_nodes if npu.fallback else ())]
    return steps


def buffers_of(graph: Graph, steps) -> tuple[list[Buffer], dict]:
    """One planner buffer per activation tensor some step writes (reshape outputs alias their
    source), plus one scratch buffer per op that needs it (key ("scratch", step))."""
    step_of = {id(n): i for i, n in enumerate(steps)}
    written: dict = {}
    for i, node in enumerate(steps):
        for t in node.outputs:
            written.setdefault(id(t), i)
    index: dict = {}
    buffers: list[Buffer] = []

    def add(key, size: int, first: int, name: str, alias_of=None) -> None:
        index[key] = len(buffers)
        buffers.append(Buffer(len(buffers), size, first, first, alias_of, name=name))

    for t in graph.inputs:
        add(id(t), t.nbytes, -1, t.name)
    for node in graph.nodes:
        if node.op == "reshape":
            if id(node.inputs[0]) in index:
                src = buffers[index[id(node.inputs[0])]]
                add(id(node.outputs[0]), node.outputs[0].nbytes, src.first,
                    node.outputs[0].name, alias_of=src.id)
            continue
        for t in node.outputs:
            if id(t) in written and id(t) not in index and t.init is None:
                add(id(t), t.nbytes, written[id(t)], t.name)
        if node.scratch and id(node) in step_of:
            add(("scratch", step_of[id(node)]), node.scratch, step_of[id(node)],
                f"scratch of {node.outputs[0].name}")
    for i, node in enumerate(steps):
        for t in node.inputs:
            if not t.is_const and t.init is None:  # persistent tensors: not in the arenas
                b = buffers[index[id(t)]]
                b.last = max(b.last, i)
    for t in graph.outputs:
        buffers[index[id(t)]].last = len(steps)
    return buffers, index


def root_of(buffers: list[Buffer], b: Buffer) -> Buffer:
    while b.alias_of is not None:
        b = buffers[b.alias_of]
    return b


def bind_delegates(buffers: list[Buffer], index: dict, steps, npu) -> set[int]:
    """Vela's scratch (and fast scratch) as NPU-reachable buffers, live at the delegate op
    only; each bound tensor's bytes alias the scratch at Vela's offset, live for the tensor's
    own lifetime. So the delegate's CPU version (the steps after the delegate op, run instead
    of the NPU) may put its own tensors anywhere in the scratch but on the bound tensors still
    live: the two never run together. Returns the scratch buffer ids."""
    step_of = {id(n): i for i, n in enumerate(steps)}
    scratch = set()
    for d in npu.delegates:
        s = step_of[id(d.op)]
        sid = index[("npu_scratch", d.index)] = len(buffers)
        buffers.append(Buffer(sid, d.vela.scratch_size, s, s, npu=True,
                              name=f"delegate {d.index} scratch"))
        scratch.add(sid)
        if d.vela.fast_scratch_size:
            fid = index[("npu_fast_scratch", d.index)] = len(buffers)
            buffers.append(Buffer(fid, d.vela.fast_scratch_size, s, s, npu=True,
                                  name=f"delegate {d.index} fast scratch"))
        for t, placed in d.bindings:
            root = root_of(buffers, buffers[index[id(t)]])
            if root.id in scratch:
                raise McutorchError(f"{t.name} is bound twice (delegate {d.index})")
            root.alias_of, root.alias_offset, root.own_lifetime = sid, placed.offset, True
        if npu.fallback:  # the CPU version's own tensors and kernel scratch: beside Vela's;
            for i, node in enumerate(d.cpu_nodes, s + 1):  # an output is live once written
                keys = [id(t) for t in node.outputs] + [("scratch", i)]
                for b in [buffers[index[k]] for k in keys if k in index]:
                    if any(b is buffers[index[id(y)]] for y in d.outputs):
                        b.first = min(i, b.last)  # its views keep their own start
                    else:
                        b.npu = True
    return scratch


def inplace_pairs(graph: Graph, steps, index, buffers: list[Buffer], fixed: set[int]):
    """(input, output) buffer pairs of element-wise ops (and of a fused residual: skip, y) that
    may share bytes; never a tensor bound inside a delegate's scratch (`fixed`: scratch buffer
    ids), whose offset Vela chose."""
    pairs = []
    for node in steps:
        if node.op in INPLACE_OPS or node.op in RESIDUAL_OPS:
            y = node.outputs[0]
            for x in node.inputs if node.op in INPLACE_OPS else node.inputs[-1:]:
                if (not x.is_const and x.nbytes == y.nbytes and x not in graph.inputs
                        and x.init is None and y.init is None):
                    pair = (index[id(x)], index[id(y)])
                    others = {root_of(buffers, buffers[index[id(t)]]).id for t in node.inputs
                              if t is not x and not t.is_const}
                    if node.op in RESIDUAL_OPS and root_of(buffers, buffers[pair[0]]).id in others:
                        continue  # skip is also the conv's input: y must not overwrite it
                    if not any(root_of(buffers, buffers[b]).id in fixed for b in pair):
                        pairs.append(pair)
    return pairs


def overlap_pairs(graph: Graph, steps, index, buffers: list[Buffer], fixed: set[int]):
    """(x, y, delta) buffer triples of the ops whose y may start delta bytes below x (alias kind
    "overlap"), where that saves bytes (delta < y's size); never a graph input, state, or a
    tensor in a delegate's scratch."""
    out = []
    for node in steps:
        x, y = node.inputs[0] if node.inputs else None, node.outputs[0]
        if node.op not in OVERLAP_OPS or x.is_const or x in graph.inputs or x.init is not None \
                or y.init is not None:
            continue
        delta = ops.BY_NAME[node.op].overlap(x, y, node.inputs[1], node.attrs)
        pair = (index[id(x)], index[id(y)])
        if delta is not None and delta < y.nbytes and not any(
                root_of(buffers, buffers[b]).id in fixed for b in pair):
            out.append((*pair, delta))
    return out
