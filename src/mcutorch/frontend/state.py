"""Stateful models: buffers written in forward become persistent tensors.

A model that keeps state in registered buffers and updates them in forward
(`self.hist.copy_(torch.cat([self.hist[:, :, 1:], x], 2))`, `self.acc.add_(x)`, slice
assignment `self.hist[:, :, :-1] = ...`) is what torch.export records as
`graph_signature.buffers_to_mutate`. `functional` exports it as a stateless function instead:
each mutated buffer becomes an extra input (its value before the call, after the model's own
inputs) and its new value an extra output (after the model's own outputs), so quantization,
lifting and the passes see an ordinary graph. `STATE_KEY` in the GraphModule's meta lists the
pairs and the initial values; the compiler turns each pair into one persistent tensor
(compiler.make_persistent): the read is the persistent tensor, the write a `copy` into it as
the program's last op. Nothing in the graph is ever folded into a constant: the buffer reaches
the graph as an input.

The quantizer gives the read and the written value one set of qparams (a SharedQuantizationSpec
between the buffer's input edge and the new value), so the copy is a byte copy.

Calibration runs the batches in order and carries the state from batch to batch, starting from
the initial values (`calibrate_stateful`).
"""
from __future__ import annotations

import torch
from torch.fx import GraphModule

from mcutorch.errors import ExportError

A = torch.ops.aten
STATE_KEY = "mcutorch_state"  # [{"name", "input", "output", "init"}], see the module docstring


class _Functional(torch.nn.Module):
    """`model` with its buffers `names` passed in and their new values returned."""

    def __init__(self, model: torch.nn.Module, names: list[str], n_inputs: int):
        super().__init__()
        self.model, self.names, self.n_inputs = model, names, n_inputs

    def forward(self, *args):
        inputs, states = args[:self.n_inputs], args[self.n_inputs:]
        owners = [self.model.get_submodule(n.rpartition(".")[0]) for n in self.names]
        attrs = [n.rpartition(".")[2] for n in self.names]
        saved = [m._buffers[a] for m, a in zip(owners, attrs)]
        for m, a, s in zip(owners, attrs, states):  # in-place writes and reassignment both
            m._buffers[a] = s.clone()                # land in the module's buffer slot
        try:
            out = self.model(*inputs)
            new = [m._buffers[a] for m, a in zip(owners, attrs)]
        finally:
            for m, a, t in zip(owners, attrs, saved):
                m._buffers[a] = t
        outs = out if isinstance(out, tuple) else (out,)
        return (*outs, *new)


def functional(model: torch.nn.Module, args: tuple, names: list[str]) -> tuple:
    """(ExportedProgram of the stateless function, its example inputs, the state records) for
    a model that writes the buffers `names` in forward (see the module docstring)."""
    buffers = dict(model.named_buffers())
    init = [buffers[n].detach().clone() for n in names]
    with torch.no_grad():
        n_out = len(_as_tuple(model(*args)))
    for n, t in zip(names, init):  # the call above advanced the state: back to the start
        buffers[n].copy_(t)
    wrapper = _Functional(model, names, len(args)).eval()
    full = (*args, *(t.clone() for t in init))
    try:
        with torch.no_grad():
            fep = torch.export.export(wrapper, full, strict=False)
    except Exception as exc:  # torch raises many types; all mean "cannot capture"
        raise ExportError(f"torch.export could not capture the stateful model as a function of "
                          f"its state ({type(exc).__name__}): {exc}") from exc
    records = [{"name": n, "input": len(args) + k, "output": n_out + k, "init": t}
               for k, (n, t) in enumerate(zip(names, init))]
    return fep, full, records


def _as_tuple(out) -> tuple:
    return out if isinstance(out, tuple) else (out,)


def mutated(gm: GraphModule, ep) -> list[str]:
    """Names of the buffers the captured graph writes (graph signature + in-place writes)."""
    from mcutorch.frontend.fold import _root, _written

    names = list(ep.graph_signature.buffers_to_mutate.values())
    buffers = dict(gm.named_buffers())
    for node in gm.graph.nodes:
        if node.op == "call_function":
            for arg in _written(node):
                root = _root(arg)
                if getattr(root, "op", "") == "get_attr" and root.target in buffers:
                    names.append(root.target)
    return list(dict.fromkeys(names))


def tidy(gm: GraphModule) -> None:
    """The writes of the state as values, in graph order: copy_(state, v) makes v the state's
    value, copy_(state[slice], v) the concat of the state's slices around v, op_(state, ...) the
    out-of-place op; later reads (and the returned new value) take the current value."""
    from mcutorch.frontend.fold import _written

    state = {n: n for n in gm.graph.nodes if n.op == "call_function"
             and n.target == A.clone.default and n.args[0].op == "placeholder"}
    current: dict = {}  # root -> node holding the state's value now
    for node in list(gm.graph.nodes):
        for root, cur in current.items():
            if root in node.all_input_nodes:
                node.replace_input_with(root, cur)
        if node.op != "call_function":
            continue
        written = _written(node)
        if not written:
            continue
        dst = written[0]
        root = state.get(dst) or state.get(getattr(dst, "args", (None,))[0])
        if root is None:
            continue
        g = gm.graph
        if node.target in (A.copy_.default, A.copy.default):
            src = node.args[1]
            if dst is root or state.get(dst) is root:
                new = src
            else:  # a slice of the state
                with g.inserting_before(node):
                    new = g.call_function(A.slice_scatter.default,
                                          (current.get(root, root), src, *dst.args[1:]))
                new.meta["val"] = root.meta["val"]
                new = _slice_scatter(gm, new)
        elif dst is not root and state.get(dst) is not root:
            from mcutorch.errors import UnsupportedOpError
            from mcutorch.frontend.capture import source_of

            raise UnsupportedOpError(
                f"{source_of(node)}: a state written through a view by an in-place "
                f"{node.target} (mcutorch takes copy_ / slice assignment into a view, and "
                "in-place ops on the whole buffer)")
        else:
            name = node.target._schema.name.split("::")[1].rstrip("_")
            fn = getattr(getattr(torch.ops.aten, name), node.target._overloadname)
            with g.inserting_before(node):
                new = g.call_function(fn, node.args, node.kwargs)
            new.meta.update(node.meta)
        if new.meta.get("val") is not None and new.meta["val"].shape != root.meta["val"].shape:
            raise ExportError(f"{node.name}: a state written with a broadcast copy_")
        node.replace_all_uses_with(new)
        g.erase_node(node)
        current[root] = new
        for n in current:  # values derived from this one are its state too
            state.setdefault(n, root)
        state[new] = root
    reads = {root.args[0] for root in set(state.values())}
    gm.graph.eliminate_dead_code()
    gm.recompile()
    for placeholder in reads:
        if not placeholder.users:
            from mcutorch.errors import UnsupportedOpError

            raise UnsupportedOpError(
                f"a buffer ({placeholder.name}) is overwritten in forward before it is read: "
                "its value never reaches the next call, so it is no state; use a plain tensor")


def _slice_scatter(gm: GraphModule, node):
    """Replace a slice_scatter node by its concat; returns the node that replaces it."""
    base, src = node.args[:2]
    dim, start, end, step = (list(node.args[2:]) + [0, None, None, 1][len(node.args) - 2:])[:4]
    shape = base.meta["val"].shape
    dim = dim % len(shape)
    size = shape[dim]
    start = 0 if start is None else (start + size if start < 0 else min(start, size))
    end = size if end is None else (end + size if end < 0 else min(end, size))
    if step != 1:
        raise ExportError(f"{node.name}: a state written through a strided slice")
    g = gm.graph
    with g.inserting_before(node):
        parts = []
        if start > 0:
            parts.append(g.call_function(A.slice.Tensor, (base, dim, 0, start)))
            parts[-1].meta["val"] = base.meta["val"].narrow(dim, 0, start)
        parts.append(src)
        if end < size:
            parts.append(g.call_function(A.slice.Tensor, (base, dim, end, size)))
            parts[-1].meta["val"] = base.meta["val"].narrow(dim, end, size - end)
        new = g.call_function(A.cat.default, (parts, dim)) if len(parts) > 1 else src
        if new is not src:
            new.meta.update(val=node.meta["val"], stack_trace=node.meta.get("stack_trace"),
                            nn_module_stack=node.meta.get("nn_module_stack"))
    node.replace_all_uses_with(new)
    g.erase_node(node)
    return new


def mark(gm: GraphModule, records: list[dict]) -> None:
    """Tag the state's placeholders and the output node (node meta survives PT2E's prepare and
    convert): placeholder meta[STATE_KEY] = k, output meta[STATE_KEY] = {output index: k}."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    out = next(n for n in gm.graph.nodes if n.op == "output")
    for k, r in enumerate(records):
        placeholders[r["input"]].meta[STATE_KEY] = k
    out.meta[STATE_KEY] = {r["output"]: k for k, r in enumerate(records)}


def calibrate(prepared, batches, records, run) -> None:
    """Run calibration batches in order through a prepared stateful module, carrying the
    state (`run(batch, index)` calls the module on one batch with the state appended)."""
    state = [r["init"].clone() for r in records]
    n = len(records)
    for i, batch in enumerate(batches):
        outs = _as_tuple(run((*batch, *state), i))
        state = [o.detach() for o in outs[len(outs) - n:]]


def _observer_keys(prepared) -> dict[str, list]:
    """Observer modules of a prepared module by what they observe: "input" for a model input
    (not a state), else the module path of the layer whose output it is (nn_module_stack,
    without the "model." of a stateful model's wrapper)."""
    out: dict[str, list] = {}
    for node in prepared.graph.nodes:
        if node.op != "call_module" or "activation_post_process" not in str(node.target):
            continue
        src = node.args[0]
        if src.op == "placeholder":
            key = "" if STATE_KEY in src.meta else "input"
        else:
            stack = list((src.meta.get("nn_module_stack") or {}).values())
            key = stack[-1][0] if stack and stack[-1][0] else ""
            key = key.removeprefix("model.")  # a stateful model runs inside _Functional
        if key:
            out.setdefault(key, []).append(getattr(prepared, str(node.target)))
    return out


def transfer_qparams(source, target) -> list[str]:
    """Give the observers of prepared module `target` the calibrated ranges of `source`'s, layer
    by layer (the same module paths): a streaming model then quantizes exactly as the windowed
    model it was cut from. Returns the layer keys transferred."""
    src, dst = _observer_keys(source), _observer_keys(target)
    done = []
    for key, observers in dst.items():
        if key not in src or not hasattr(src[key][0], "min_val"):
            continue
        lo, hi = src[key][0].min_val, src[key][0].max_val
        for obs in observers:
            obs.min_val, obs.max_val = lo.clone(), hi.clone()
        done.append(key)
    return done
