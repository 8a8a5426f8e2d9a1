"""`mcutorch inspect`: what a program holds — ops with shapes, qparams, MACs, bytes, the plan."""
from __future__ import annotations

from .compiler import macs
from .program.model import Program


def _tensor(p: Program, i: int) -> dict:
    t = p.tensors[i]
    where = ("const" if t.storage == "const"
             else f"{p.regions[t.region].name}+{t.offset}")
    return {"index": i, "name": p.tensor_name(i), "dtype": t.dtype, "shape": list(t.shape),
            "scale": t.scale, "zero_point": t.zero_point, "bytes": t.nbytes, "at": where}


def describe(p: Program) -> dict:
    """A JSON-ready description of a program."""
    ops = []
    for i, op in enumerate(p.ops):
        shapes_in = [p.tensors[t].shape for t in op.inputs]
        shapes_out = [p.tensors[t].shape for t in op.outputs]
        ops.append({"index": i, "op": op.name, "variant": op.variant,
                    "inputs": [_tensor(p, t) for t in op.inputs],
                    "outputs": [_tensor(p, t) for t in op.outputs],
                    "attrs": op.attrs, "macs": macs(op.name, shapes_in, shapes_out, op.attrs),
                    "scratch": op.scratch.size if op.scratch else 0,
                    "source": p.op_source(i)})
    meta = p.metadata or {}
    return {
        "model": meta.get("model", ""),
        "target": {"cpu": p.target.cpu, "isa": p.target.isa, "npu": p.target.npu,
                   "rounding": p.target.rounding},
        "options": meta.get("options", {}),
        "regions": [{"name": r.name, "bytes": r.size, "capacity": r.capacity, "rank": r.rank,
                     "npu": r.npu, "base": r.base} for r in p.regions],
        "lower_bound": meta.get("plan", {}).get("lower_bound"),
        "const_bytes": len(p.constants),
        "inputs": [_tensor(p, i) for i in p.inputs],
        "outputs": [_tensor(p, i) for i in p.outputs],
        "ops": ops,
        "total_macs": sum(o["macs"] for o in ops),
    }


def _qp(t: dict) -> str:
    return f"({t['scale']:.4g},{t['zero_point']})" if t["scale"] else ""


def render(info: dict) -> str:
    """Human-readable tables of the description."""
    t = info["target"]
    lines = [f"model {info['model']!r} for {info['options'].get('target', t['cpu'])} "
             f"(isa {t['isa']}, npu {t['npu']}, rounding {t['rounding']})",
             f"{'#':>3} {'op':<17} {'variant':<7} {'input':<22} {'output':<22} {'qparams':<18} "
             f"{'MACs':>10} {'out bytes':>9}  at / source"]
    for op in info["ops"]:
        x, y = op["inputs"][0] if op["inputs"] else None, op["outputs"][0]
        lines.append(
            f"{op['index']:>3} {op['op']:<17} {op['variant']:<7} "
            f"{str(x['shape']) if x else '':<22} {str(y['shape']):<22} {_qp(y):<18} "
            f"{op['macs']:>10,} {y['bytes']:>9,}  {y['at']} {op['source']}")
    lines.append(f"total MACs {info['total_macs']:,}; constants {info['const_bytes']:,} B")
    lines.append("memory plan:")
    for r in info["regions"]:
        cap = f" of {r['capacity']:,}" if r["capacity"] else ""
        base = f" @0x{r['base']:08x}" if r["base"] is not None else ""
        lines.append(f"  {r['name']:<8}{base} {r['bytes']:>10,} B{cap} (rank {r['rank']}"
                     f"{', NPU' if r['npu'] else ''})")
    lines.append(f"  live lower bound {info['lower_bound']:,} B")
    for kind in ("inputs", "outputs"):
        for tt in info[kind]:
            lines.append(f"{kind[:-1]} {tt['name']}: {tt['dtype']}{tt['shape']} {_qp(tt)} "
                         f"at {tt['at']}")
    return "\n".join(lines)
