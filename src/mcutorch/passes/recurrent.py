"""Recurrent layers as one op per layer and direction (after passes/requant.py).

capture unrolls nn.LSTM / nn.GRU / nn.RNN (frontend/builders/recurrent.py): per time step a
state product s = fc(h), a time slice of the input projection x[:, t], gate slices, tables, adds
and muls (nn.RNN: h = lut(add(x[:, t], s)) for tanh, h = add(x[:, t], s) for relu, whose ReLU
is the add's clamp). This pass finds those steps on the IR, chains them through their state (h,
and c for an LSTM), and replaces every run of at least two consecutive steps that share every
constant (bytes) and attribute by one `lstm` / `gru` / `rnn_tanh` / `rnn_relu` op
(ops/recurrent.py, ref/recurrent.py: the same ops composed, so the integers are the unrolled
program's). Steps whose qparams differ (the first step from a zero state, or the second, whose c
came from it) stay unrolled before the op. The
op writes the run's h into one [B, steps, H] sequence, which replaces the steps' views in the
layer's stack (a concat on the time axis), and its last h (and c) as the tensors the steps
made. With a16w8 the state and gates stay int16. Anything else (a step's tensor used outside
the pattern) keeps the unrolled ops, which are exact too.
"""
from __future__ import annotations

import numpy as np

from mcutorch.ir import Graph, Node, Tensor
from mcutorch.ops.recurrent import FC
from mcutorch.ref import fold_bias
from mcutorch.ref.movement import slice_attrs

INT32 = (-(1 << 31), (1 << 31) - 1)


class _Match:
    """Lookups over the graph while matching steps."""

    def __init__(self, graph: Graph):
        self.graph, self.made, self.users = graph, graph.producers(), graph.consumers()

    def only(self, t: Tensor, op: str, pos: int | None = None) -> Node | None:
        """The single consumer of t if it is an `op` (reading t as input `pos` when given)."""
        us = self.users.get(t, [])
        ok = len(us) == 1 and us[0].op == op and (pos is None or us[0].inputs[pos] is t)
        return us[0] if ok and t not in self.graph.outputs else None

    def slices(self, t: Tensor, hidden: int, count: int) -> list[Node] | None:
        """t's consumers as its `count` gate slices [B, k*H : (k+1)*H], in gate order."""
        us = self.users.get(t, [])
        b = t.shape[0]
        want = [slice_attrs((0, k * hidden), (1, 1), (b, hidden)) for k in range(count)]
        found = [next((u for u in us if u.op == "strided_slice" and u.attrs == w), None)
                 for w in want]
        return found if len(us) == count and None not in found and len(t.shape) == 2 else None

    def time(self, xt: Tensor):
        """(x, t, [slice, view]) when xt is the view of x[:, t] of a [B, T, G] projection x."""
        view = self.made.get(xt)
        cut = self.made.get(view.inputs[0]) if view is not None and view.op == "reshape" else None
        if cut is None or cut.op != "strided_slice" or self.only(cut.outputs[0], "reshape") is None:
            return None
        x = cut.inputs[0]
        if len(x.shape) != 3 or xt.shape != (x.shape[0], x.shape[2]):
            return None
        t = cut.attrs["start4"]
        ok = cut.attrs == slice_attrs((0, t, 0), (1, 1, 1), (x.shape[0], 1, x.shape[2]))
        return (x, t, [cut, view]) if ok else None


def _roles(nodes: dict[str, Node]) -> dict:
    """The fused op's attributes: fc's, then each role's op attributes under its prefix."""
    fc = nodes.pop("fc")
    attrs = dict(zip(FC, (fc.attrs[k] for k in ("in_zp", "out_zp", "act_min", "act_max"))))
    for role, node in nodes.items():
        attrs.update({f"{role}_{k}": v for k, v in node.attrs.items()})
    return attrs


def _lstm(m: _Match, fc: Node):
    h, s = fc.inputs[0], fc.outputs[0]
    a_add = m.only(s, "add", 1)
    tm = a_add and m.time(a_add.inputs[0])
    cuts = tm and m.slices(a_add.outputs[0], h.shape[-1], 4)
    luts = [m.only(c.outputs[0], "lut", 0) for c in cuts or ()]
    if not cuts or None in luts:
        return None
    i, f, g, o = (n.outputs[0] for n in luts)
    fm, im, hm = m.only(f, "mul", 0), m.only(i, "mul", 0), m.only(o, "mul", 0)
    if fm is None or im is None or hm is None or m.only(g, "mul", 1) is not im:
        return None
    c_add = m.only(fm.outputs[0], "add", 0)
    if c_add is None or m.only(im.outputs[0], "add", 1) is not c_add:
        return None
    c_out = c_add.outputs[0]
    tanh = hm.inputs[1]
    lc = m.made.get(tanh)
    if lc is None or lc.op != "lut" or lc.inputs[0] is not c_out or m.only(tanh, "mul", 1) is None:
        return None
    roles = {"fc": fc, "x": a_add, "fm": fm, "im": im, "c": c_add, "hm": hm}
    nodes = [*tm[2], fc, a_add, *cuts, *luts, fm, im, c_add, lc, hm]
    tables = [n.inputs[1] for n in (*luts, lc)]
    return dict(kind="lstm", x=tm[0], t=tm[1], nodes=nodes, source=fc.source,
                attrs=_roles(roles), h_in=h, c_in=fm.inputs[1],
                outs=[hm.outputs[0], c_out], consts=[*fc.inputs[1:], *tables])


def _gru(m: _Match, fc: Node):
    h, s = fc.inputs[0], fc.outputs[0]
    hidden = h.shape[-1]
    ss = m.slices(s, hidden, 3)
    if ss is None:
        return None
    r_add, z_add, b_add = (m.only(c.outputs[0], "add", p) for c, p in zip(ss, (1, 1, 0)))
    if None in (r_add, z_add, b_add):
        return None
    cut = m.made.get(r_add.inputs[0])
    xs = cut and cut.op == "strided_slice" and m.slices(cut.inputs[0], hidden, 3)
    tm = xs and m.time(cut.inputs[0])
    if not tm or [c.outputs[0] for c in xs[:2]] != [r_add.inputs[0], z_add.inputs[0]]:
        return None
    lr, lz = m.only(r_add.outputs[0], "lut", 0), m.only(z_add.outputs[0], "lut", 0)
    rn = lr and m.only(lr.outputs[0], "mul", 0)
    n_add = rn and m.only(rn.outputs[0], "add", 1)
    ln = n_add and m.only(n_add.outputs[0], "lut", 0)
    if not ln or rn.inputs[1] is not b_add.outputs[0] or n_add.inputs[0] is not xs[2].outputs[0]:
        return None
    n = ln.outputs[0]
    d, h_add = (sorted(m.users.get(n, []), key=lambda u: u.op != "sub") + [None, None])[:2]
    zd = lz and m.only(lz.outputs[0], "mul", 0)
    if (len(m.users.get(n, [])) != 2 or d.op != "sub" or d.inputs != [h, n] or zd is None
            or zd.inputs[1] is not d.outputs[0] or m.only(d.outputs[0], "mul", 1) is not zd
            or h_add.op != "add" or h_add.inputs != [n, zd.outputs[0]]
            or m.only(zd.outputs[0], "add", 1) is not h_add or not b_add.inputs[1].is_const):
        return None
    roles = {"fc": fc, "r": r_add, "z": z_add, "b": b_add, "rn": rn, "n": n_add, "d": d,
             "zd": zd, "h": h_add}
    nodes = [*tm[2], *xs, fc, *ss, r_add, lr, z_add, lz, b_add, rn, n_add, ln, d, zd, h_add]
    tables = [b_add.inputs[1], lr.inputs[1], lz.inputs[1], ln.inputs[1]]
    return dict(kind="gru", x=tm[0], t=tm[1], nodes=nodes, source=fc.source,
                attrs=_roles(roles), h_in=h, c_in=None,
                outs=[h_add.outputs[0]], consts=[*fc.inputs[1:], *tables])


def _rnn(m: _Match, fc: Node):
    """nn.RNN's step: a = add(x[:, t], fc(h)); h = lut(a) (tanh) or a itself (relu)."""
    h, s = fc.inputs[0], fc.outputs[0]
    a_add = m.only(s, "add", 1)
    tm = a_add and m.time(a_add.inputs[0])
    if not tm or a_add.outputs[0].shape != h.shape:
        return None
    tanh = m.only(a_add.outputs[0], "lut", 0)
    last = tanh or a_add
    return dict(kind="rnn_tanh" if tanh else "rnn_relu", x=tm[0], t=tm[1],
                nodes=[*tm[2], fc, *(n for n in (a_add, tanh) if n)], source=fc.source,
                attrs=_roles({"fc": fc, "x": a_add}), h_in=h, c_in=None, outs=[last.outputs[0]],
                consts=[*fc.inputs[1:], *([tanh.inputs[1]] if tanh else [])])


def _closed(m: _Match, step: dict) -> bool:
    """No tensor of the step but its state outputs is read outside it."""
    inside = {id(n) for n in step["nodes"]}
    return all(all(id(u) in inside for u in m.users.get(t, [])) and t not in m.graph.outputs
               for n in step["nodes"] for t in n.outputs if all(t is not o for o in step["outs"]))


def _signature(step: dict) -> tuple:
    consts = tuple((t.dtype, t.shape, t.data.tobytes()) for t in step["consts"])
    return (step["kind"], id(step["x"]), step["h_in"].dtype, tuple(step["attrs"].items()), consts)


def _runs(m: _Match, steps: list[dict]) -> list[list[dict]]:
    """Maximal runs of >= 2 chained steps with one signature and consecutive times."""
    after = {id(s["h_in"]): s for s in steps}
    heads = [s for s in steps if all(s["h_in"] is not p["outs"][0] for p in steps)]
    runs = []
    for step in heads:
        chain = [step]
        while (nxt := after.get(id(chain[-1]["outs"][0]))) is not None and (
                nxt["c_in"] is None or nxt["c_in"] is chain[-1]["outs"][1]):
            chain.append(nxt)
        run = [chain[0]]
        for prev, s in zip(chain, chain[1:]):
            same = _signature(s) == _signature(prev) and abs(s["t"] - prev["t"]) == 1 and (
                len(run) < 2 or s["t"] - prev["t"] == run[1]["t"] - run[0]["t"])
            if not same:
                runs.append(run)
                run = []
            run.append(s)
        runs.append(run)
    return [r for r in runs if len(r) >= 2]


def _time_view(m: _Match, view: Node) -> bool:
    """view is h as [B, 1, H], read only by a concat on the time axis of a [B, T, H] stack."""
    h, v = view.inputs[0], view.outputs[0]
    cat = m.only(v, "concat")
    return (cat is not None and v.shape == (h.shape[0], 1, h.shape[1])
            and len(cat.outputs[0].shape) == 3 and cat.attrs["axis"] == 2)


def _stack(m: _Match, run: list[dict]):
    """(concat, first input, views) of the run's h in the layer's stack; (None, 0, []) when the
    sequence is not read; None when a state is read in any other way."""
    views, rest = [], {id(n) for s in run for n in s["nodes"]}
    for j, s in enumerate(run):
        h, last = s["outs"][0], j == len(run) - 1
        mine = [u for u in m.users.get(h, []) if u.op == "reshape" and _time_view(m, u)]
        views += mine
        others = [u for u in m.users.get(h, []) if u not in mine and id(u) not in rest]
        c_out = s["outs"][1:]
        if len(mine) > 1 or not last and (others or h in m.graph.outputs or any(
                id(u) not in rest or t in m.graph.outputs for t in c_out
                for u in m.users.get(t, []))):
            return None
    if not views:
        return None, 0, []
    cat = m.users[views[0].outputs[0]][0]
    order = sorted(range(len(run)), key=lambda j: run[j]["t"])
    if len(views) != len(run) or any(m.users[v.outputs[0]][0] is not cat for v in views):
        return None
    at = next(k for k, t in enumerate(cat.inputs) if t is views[order[0]].outputs[0])
    ok = [t for t in cat.inputs[at:at + len(run)]] == [views[j].outputs[0] for j in order]
    return (cat, at, views) if ok else None


def _fold(step: dict, attrs: dict) -> Tensor:
    """The state product's bias with in_zp folded in (attrs' in_zp set to 0) when it fits int32
    (backends/cortex_m._fold: exact, and the kernel skips the weight sums every step)."""
    weight, bias = step["consts"][:2]
    if step["h_in"].dtype != "int8" or not attrs["in_zp"]:
        return bias
    folded = fold_bias(weight.data, bias.data, attrs["in_zp"])
    if folded.min(initial=0) < INT32[0] or folded.max(initial=0) > INT32[1]:
        return bias
    attrs["in_zp"] = 0
    return Tensor(f"{bias.name}_folded", bias.shape, "int32", bias.scale, 0,
                  folded.astype(np.int32))


def _fuse(graph: Graph, run: list[dict], stack) -> None:
    first, last = run[0], run[-1]
    h = last["outs"][0]
    times = [s["t"] for s in run]
    y = Tensor(f"{h.name}_sequence", (h.shape[0], len(run), h.shape[1]), h.dtype, h.scale,
               h.zero_point)
    attrs = {"steps": len(run), "start": times[0], "reverse": int(times[1] < times[0]),
             **first["attrs"]}
    bias = _fold(first, attrs)
    state = [first["h_in"]] + ([first["c_in"]] if first["c_in"] is not None else [])
    w, _, mult, shift, *tables = first["consts"]
    node = Node(first["kind"], [first["x"], w, bias, mult, shift, *state, *tables],
                [y, *last["outs"]], attrs, source=first["source"])
    gone = {id(n) for s in run for n in s["nodes"]} | {id(v) for v in stack[2]}
    at = min(graph.nodes.index(n) for n in last["nodes"] if set(n.outputs) & set(last["outs"]))
    graph.nodes.insert(at, node)
    graph.nodes = [n for n in graph.nodes if id(n) not in gone]
    cat, k, views = stack
    if cat is not None:
        cat.inputs[k:k + len(run)] = [y]


def run(graph: Graph) -> Graph:
    m = _Match(graph)
    steps = [s for fc in graph.nodes if fc.op == "fully_connected"
             and all(t.is_const for t in fc.inputs[1:])
             for s in [_lstm(m, fc) or _gru(m, fc) or _rnn(m, fc)]
             if s is not None and _closed(m, s)]
    for r in _runs(m, steps):
        stack = _stack(m, r)
        if stack is not None:
            _fuse(graph, r, stack)
            m = _Match(graph)
    return graph
