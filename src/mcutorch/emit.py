"""Emit: a lowered, planned IR graph -> program.Program (the file every executor reads)."""
from __future__ import annotations

import numpy as np

from .ir import Graph
from .plan import Plan, Region
from .program.model import (Area, ConstantPool, OpInfo, Program, RegionInfo, TargetInfo,
                            TensorInfo)
from .targets import Target


def _regions(regions: list[Region], result: Plan) -> list[RegionInfo]:
    return [RegionInfo(r.name, result.regions.get(r.name, 0), 16, r.rank, r.npu,
                       r.base if r.base else None, r.size or 0) for r in regions]


def _split_source(source: str) -> dict:
    loc, _, op = source.partition(" (")
    return {"loc": loc, "op": op.rstrip(")")} if op else {"loc": "", "op": source}


def build_program(graph: Graph, steps, index: dict, result: Plan, regions: list[Region],
                  target: Target, board: str, name: str) -> Program:
    """Lay out tensors (constants in the pool, activations where the plan put them) and ops."""
    region_index = {r.name: i for i, r in enumerate(regions)}
    pool = ConstantPool()
    tensors, names, tid = [], [], {}
    for t in graph.tensors():
        scale = float(t.scale) if np.isscalar(t.scale) else 0.0
        if t.is_const:
            offset = pool.add(np.ascontiguousarray(t.data, np.dtype(t.dtype)))
            info = TensorInfo.const(t.dtype, t.shape, offset, scale, t.zero_point)
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
    return Program(
        TargetInfo(target.cpu, target.isa, target.npu or "none", "single"),
        _regions(regions, result), tensors, op_infos,
        [tid[id(t)] for t in graph.inputs], [tid[id(t)] for t in graph.outputs],
        pool.to_bytes(), metadata=metadata)
