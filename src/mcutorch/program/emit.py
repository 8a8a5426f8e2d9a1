"""Emit: a lowered, planned IR graph -> program.Program (the file every executor reads)."""
from __future__ import annotations

import numpy as np

from mcutorch.ir import Graph
from mcutorch.plan import Plan, Region
from mcutorch.program.model import (Area, Binding, ConstantPool, DelegateInfo, OpInfo,
                                    PersistentInfo, Program, RegionInfo, TargetInfo, TensorInfo)
from mcutorch.targets import Target


def _regions(regions: list[Region], result: Plan) -> list[RegionInfo]:
    return [RegionInfo(r.name, result.regions.get(r.name, 0), 16, r.rank, r.npu,
                       r.base if r.base else None, r.size or 0) for r in regions]


def _split_source(source: str) -> dict:
    loc, _, op = source.rpartition(" (")
    return {"loc": loc, "op": op.rstrip(")")} if op else {"loc": "", "op": source}


def _used(graph: Graph, steps) -> set[int]:
    """ids of the tensors the program refers to (a delegate without CPU version drops its inner
    tensors and weights)."""
    return {id(t) for t in (*graph.inputs, *graph.outputs)} | {
        id(t) for n in steps for t in (*n.inputs, *n.outputs)}


def _area(result: Plan, index: dict, key, size: int, region_index: dict) -> Area | None:
    if key not in index:
        return None
    region, offset = result.placement[index[key]]
    return Area(region_index[region], offset, size)


def _delegates(npu, steps, index: dict, result: Plan, region_index: dict, pool: ConstantPool,
               tid: dict) -> list[DelegateInfo]:
    """One record per delegate: Vela's blobs in CONST, its scratch areas as planned, bindings
    at Vela's offsets, and its CPU version (the ops right after the delegate op)."""
    at = {id(n): i for i, n in enumerate(steps)}
    out = []
    for d in npu.delegates:
        v = d.vela
        out.append(DelegateInfo(
            npu.npu, (pool.add(v.command_stream), len(v.command_stream)),
            (pool.add(v.weights), len(v.weights)),
            _area(result, index, ("npu_scratch", d.index), v.scratch_size, region_index),
            _area(result, index, ("npu_fast_scratch", d.index), v.fast_scratch_size,
                  region_index),
            [Binding(tid[id(t)], p.offset, p.shape, p.elem_size)
             for t, p in zip(d.inputs, v.inputs)],
            [Binding(tid[id(t)], p.offset, p.shape, p.elem_size)
             for t, p in zip(d.outputs, v.outputs)],
            (at[id(d.op)] + 1, len(d.cpu_nodes)) if npu.fallback else None))
    return out


def _npu_metadata(npu) -> dict:
    """Vela's configuration and estimates per delegate (inspect, bench)."""
    return {"config": npu.config.as_dict(), "fallback": npu.fallback, "verified": npu.verified,
            "fallback_cost": {"ram": npu.fallback_ram, "flash": npu.fallback_flash()},
            "delegates": [{
                "index": d.index, "ops": sum(n.op != "reshape" for n in d.nodes), "macs": d.macs,
                "estimate": d.vela.estimate,
                "scratch": d.vela.scratch_size, "fast_scratch": d.vela.fast_scratch_size,
                "command_bytes": len(d.vela.command_stream), "weight_bytes": len(d.vela.weights),
                "copies_in": d.copies_in,
                "cpu_version_copies": sum(n.op == "copy" for n in d.cpu_nodes)}
                for d in npu.delegates]}


def build_program(graph: Graph, steps, index: dict, result: Plan, regions: list[Region],
                  target: Target, board: str, name: str, npu=None) -> Program:
    """Lay out tensors (constants in the pool, activations where the plan put them) and ops;
    `npu` (an ethos_u.Delegation) adds the delegate records."""
    region_index = {r.name: i for i, r in enumerate(regions)}
    pool = ConstantPool()
    tensors, names, tid = [], [], {}
    persistent, persist_end = [], 0
    used = _used(graph, steps) if npu is not None else None
    for t in graph.tensors():
        if used is not None and id(t) not in used:
            continue
        scale = float(t.scale) if np.isscalar(t.scale) else 0.0
        if t.is_const:
            offset = pool.add(np.ascontiguousarray(t.data, np.dtype(t.dtype)))
            info = TensorInfo.const(t.dtype, t.shape, offset, scale, t.zero_point)
        elif t.init is not None:  # the state: packed, 16-aligned, in the persistent buffer
            init = pool.add(t.init if t.ring else np.ascontiguousarray(t.init, np.dtype(t.dtype)))
            info = TensorInfo.persistent(t.dtype, t.shape, persist_end, scale, t.zero_point,
                                         ring=t.ring)
            persistent.append(PersistentInfo(len(tensors), init))
            persist_end += -(-info.extent // 16) * 16
        else:
            region, offset = result.placement[index[id(t)]]
            info = TensorInfo.arena(t.dtype, t.shape, region_index[region], offset, scale,
                                    t.zero_point)
        tid[id(t)] = len(tensors)
        tensors.append(info)
        names.append(t.name)
    sources, op_infos = [], []
    for i, node in enumerate(steps):
        scratch = None
        if ("scratch", i) in index:
            region, offset = result.placement[index[("scratch", i)]]
            scratch = Area(region_index[region], offset, node.scratch)
        if node.source:
            sources.append(_split_source(node.source))
        op_infos.append(OpInfo(node.op, [tid[id(t)] for t in node.inputs],
                               [tid[id(t)] for t in node.outputs], dict(node.attrs),
                               node.variant, scratch, len(sources) - 1 if node.source else None))
    metadata = {
        "model": name,
        "tensor_names": names,
        "sources": sources,
        "options": {"target": target.name, "board": board},
        "io": {kind: [{**entry, "nchw_as_nhwc": t.layout == "NHWC"}
                      for entry, t in zip(graph.meta.get(kind, []), tensors_of)]
               for kind, tensors_of in (("inputs", graph.inputs), ("outputs", graph.outputs))},
        "plan": {"lower_bound": result.lower_bound},
    }
    if graph.meta.get("persistent"):
        metadata["persistent"] = graph.meta["persistent"]
    delegates = []
    if npu is not None:
        delegates = _delegates(npu, steps, index, result, region_index, pool, tid)
        metadata["options"]["npu_fallback"] = npu.fallback
        metadata["placement"] = npu.placement
        metadata["ethos_u"] = _npu_metadata(npu)
    return Program(
        TargetInfo.of(target, rounding="single"),
        _regions(regions, result), tensors, op_infos,
        [tid[id(t)] for t in graph.inputs], [tid[id(t)] for t in graph.outputs],
        pool.to_bytes(), delegates=delegates, metadata=metadata, persistent=persistent,
        timings={"vela_seconds": sum(d.vela.seconds for d in npu.delegates)} if npu else {})
