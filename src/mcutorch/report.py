"""`mcutorch inspect`: what a program holds — ops with shapes, qparams, MACs, bytes, the plan."""
from __future__ import annotations

from mcutorch.ops import macs
from mcutorch.program.model import Program


def _tensor(p: Program, i: int) -> dict:
    t = p.tensors[i]
    where = ("const" if t.storage == "const" else f"persistent+{t.offset}"
             if t.storage == "persistent" else f"{p.regions[t.region].name}+{t.offset}")
    return {"index": i, "name": p.tensor_name(i), "dtype": t.dtype, "shape": list(t.shape),
            "scale": t.scale, "zero_point": t.zero_point, "bytes": t.nbytes, "at": where}


def _port(p: Program, port) -> dict:
    """A program input/output: its tensor plus the float side the host converts to."""
    return {**_tensor(p, port.tensor), "io_name": port.name, "model_shape": list(port.model_shape),
            "layout": port.layout, "token_ids_below": port.ids_below}


def _area(p: Program, a) -> str:
    return f"{p.regions[a.region].name}+{a.offset} ({a.size:,} B)" if a else "none"


def _delegates(p: Program, meta: dict) -> list[dict]:
    """Each delegate record, with Vela's estimate from the metadata when present."""
    extra = {d["index"]: d for d in (meta.get("ethos_u") or {}).get("delegates", [])}
    out = []
    for k, d in enumerate(p.delegates):
        binds = [{"tensor": p.tensor_name(b.tensor), "offset": b.offset, "shape": list(b.shape),
                  "elem_size": b.elem_size} for b in d.inputs + d.outputs]
        out.append({"index": k, "npu": d.npu, "command_bytes": d.command[1],
                    "weight_bytes": d.weights[1], "scratch": _area(p, d.scratch),
                    "fast_scratch": _area(p, d.fast_scratch), "inputs": binds[:len(d.inputs)],
                    "outputs": binds[len(d.inputs):], "cpu_ops": d.cpu_ops,
                    **{key: extra.get(k, {}).get(key) for key in ("ops", "macs", "estimate")}})
    return out


def describe(p: Program) -> dict:
    """A JSON-ready description of a program."""
    meta = p.metadata or {}
    delegates = _delegates(p, meta)
    owner = {i: d["index"] for d in delegates if d["cpu_ops"]
             for i in range(d["cpu_ops"][0], sum(d["cpu_ops"]))}
    ops = []
    for i, op in enumerate(p.ops):
        shapes_in = [p.tensors[t].shape for t in op.inputs]
        shapes_out = [p.tensors[t].shape for t in op.outputs]
        work = macs(op.name, shapes_in, shapes_out, op.attrs)
        if op.name == "delegate":
            work = delegates[op.attrs["index"]]["macs"] or 0
        ops.append({"index": i, "op": op.name, "variant": op.variant,
                    "inputs": [_tensor(p, t) for t in op.inputs],
                    "outputs": [_tensor(p, t) for t in op.outputs],
                    "attrs": op.attrs, "macs": work,
                    "scratch": op.scratch.size if op.scratch else 0,
                    "source": p.op_source(i), "cpu_version_of": owner.get(i)})
    return {
        "model": meta.get("model", ""),
        "target": {"name": p.target.name, "cpu": p.target.cpu, "isa": p.target.isa,
                   "switches": list(p.target.switches), "npu": p.target.npu,
                   "rounding": p.target.rounding},
        "options": meta.get("options", {}),
        "regions": [{"name": r.name, "bytes": r.size, "capacity": r.capacity, "rank": r.rank,
                     "npu": r.npu, "base": r.base} for r in p.regions],
        "lower_bound": meta.get("plan", {}).get("lower_bound"),
        "const_bytes": len(p.constants),
        "inputs": [_port(p, port) for port in p.ports("inputs")],
        "outputs": [_port(p, port) for port in p.ports("outputs")],
        "stripped": set(meta) <= {"io"},
        "ops": ops,
        "total_macs": sum(o["macs"] for o in ops if o["cpu_version_of"] is None),
        "delegates": delegates,
        "placement": meta.get("placement", []),
        "vela": (meta.get("ethos_u") or {}).get("config"),
        "fallback_cost": (meta.get("ethos_u") or {}).get("fallback_cost"),
    }


def _qp(t: dict) -> str:
    return f"({t['scale']:.4g},{t['zero_point']})" if t["scale"] else ""


def render(info: dict) -> str:
    """Human-readable tables of the description (what `mcutorch inspect` prints in a pipe)."""
    from mcutorch.ui.tables import text

    return text(parts(info))


def parts(info: dict) -> list:
    """The description's lines and rich tables (mcutorch.ui.tables), in print order."""
    from mcutorch.ui.tables import add, table

    t = info["target"]
    ops = table("#", "op", "variant", "input", "output", "qparams", "MACs", "out bytes",
                "at / source", right=("#", "MACs", "out bytes"), wrap=("at / source",))
    for op in info["ops"]:
        x, y = op["inputs"][0] if op["inputs"] else None, op["outputs"][0]
        name = op["op"] if op["cpu_version_of"] is None else f"[{op['cpu_version_of']}] {op['op']}"
        add(ops, op["index"], name, op["variant"], str(x["shape"]) if x else "",
            str(y["shape"]), _qp(y), op["macs"], y["bytes"], f"{y['at']} {op['source']}".strip())
    lines = [f"model {info['model']!r} for {t['name']} "
             f"(isa {t['isa']}, npu {t['npu']}, rounding {t['rounding']})"
             + (" [stripped: no names, sources or plan notes]" if info["stripped"] else ""), ops]
    if info["delegates"]:
        lines.append("[k] op: part of delegate k's CPU version (runs only without an NPU driver)")
    lines.append(f"total MACs {info['total_macs']:,}; constants {info['const_bytes']:,} B")
    lines += _render_npu(info)
    if info["fallback_cost"] and info["delegates"]:
        cost = info["fallback_cost"]
        lines.append(f"CPU fallback: {cost['flash']:,} B of constants, {cost['ram']:,} B of RAM "
                     "beyond the NPU-only plan")
    bound = info["lower_bound"]
    lines.append("memory plan: " + (f"live lower bound {bound:,} B" if bound is not None else
                                    "live lower bound unknown (not in this program's metadata)"))
    plan = table("region", "base", "bytes", "capacity", "rank", "NPU",
                 right=("bytes", "capacity", "rank"))
    for r in info["regions"]:
        add(plan, r["name"], f"0x{r['base']:08x}" if r["base"] is not None else "",
            r["bytes"], r["capacity"] or "", r["rank"], "yes" if r["npu"] else "")
    lines.append(plan)
    for kind in ("inputs", "outputs"):
        for tt in info[kind]:
            if tt.get("token_ids_below") is not None:  # int32 token ids: no conversion (1.6)
                lines.append(f"{kind[:-1]} {tt['io_name']}: int32 token ids in "
                             f"[0, {tt['token_ids_below']}) {tt['shape']} at {tt['at']}")
                continue
            side = f"{tt['io_name']}: float {tt['model_shape']}"
            if tt["layout"] != "none":
                side += f" {tt['layout']}"
            lines.append(f"{kind[:-1]} {side} <-> {tt['dtype']}{tt['shape']} {_qp(tt)} "
                         f"at {tt['at']}")
    return lines


def _render_npu(info: dict) -> list:
    """The Ethos-U part: where each op runs and why, then each delegate record."""
    from mcutorch.ui.tables import add, table

    if not info["placement"] and not info["delegates"]:
        return []
    v = info["vela"] or {}
    lines: list = [f"placement on {info['target']['npu']} (Vela "
                   f"{v.get('system_config', '?')}, {v.get('memory_mode', '?')}):"]
    if info["placement"]:
        placement = table("op", "on", "delegate", "why / TOSA ops", right=("delegate",),
                          wrap=("why / TOSA ops",))
        for r in info["placement"]:
            add(placement, r["op"], r["on"], "" if r["delegate"] is None else r["delegate"],
                r["why"])
        lines.append(placement)
    for d in info["delegates"]:
        est = d["estimate"] or {}
        cpu = f"ops {d['cpu_ops'][0]}..{sum(d['cpu_ops']) - 1}" if d["cpu_ops"] else "none"
        lines.append(f"delegate {d['index']}: {d['ops'] or '?'} ops, {d['macs'] or 0:,} MACs; "
                     f"command {d['command_bytes']:,} B, weights {d['weight_bytes']:,} B; "
                     f"scratch {d['scratch']}, fast scratch {d['fast_scratch']}; CPU version {cpu}")
        if est:
            lines.append(f"  Vela estimate: {est.get('cycles_npu', 0):,.0f} NPU cycles, "
                         f"{1e3 * est.get('inference_time', 0):.3f} ms, SRAM "
                         f"{est.get('sram_memory_used', 0):.1f} KiB")
        for kind in ("inputs", "outputs"):
            for b in d[kind]:
                lines.append(f"  {kind[:-1]:<6} {b['tensor']} at scratch+{b['offset']} "
                             f"{b['shape']} x {b['elem_size']} B")
    return lines
