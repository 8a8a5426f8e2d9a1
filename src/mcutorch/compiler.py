"""compile(): quantized module -> IR -> passes -> kernel choice -> memory plan -> Program."""
from __future__ import annotations

import re
import time

import numpy as np
import torch

from .backends import cortex_m
from .errors import McutorchError, TargetError
from .ir import Graph
from .lift import DQ_OPS, lift
from .passes import run_all
from .plan import Buffer, Region, plan
from .targets import Target, parse_target

INPLACE_OPS = {"clamp", "lut", "rescale", "add", "mul"}  # element-wise: kernels read i before write i
SIZE_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "KIB": 1024, "M": 1 << 20, "MB": 1 << 20,
              "MIB": 1 << 20}


def parse_memory(spec: str) -> list[Region]:
    """`"DTCM:512K,SRAM:4M"` -> regions in speed order (first = fastest).

    Example:
        >>> [r.size for r in parse_memory("DTCM:512K,SRAM:4M")]
        [524288, 4194304]
    """
    regions = []
    for rank, item in enumerate(filter(None, (s.strip() for s in spec.split(",")))):
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]{0,7}):(\d+)\s*([A-Za-z]*)(\+npu)?", item)
        if not m or m.group(3).upper() not in SIZE_UNITS:
            raise TargetError(f"bad memory region {item!r}: expected NAME:SIZE such as "
                              "DTCM:512K or SRAM:4M (append +npu if an NPU reaches it)")
        size = int(m.group(2)) * SIZE_UNITS[m.group(3).upper()]
        regions.append(Region(m.group(1), size, rank, npu=bool(m.group(4))))
    if not regions:
        raise TargetError("empty memory description")
    return regions


def resolve_regions(board: str | None, memory: str | list | None) -> tuple[list[Region], str]:
    """Memory regions from a board name, a --memory spec, or one unbounded arena."""
    if board and memory:
        raise TargetError("give a board or a memory description, not both")
    if board:
        from .boards import get_board

        return list(get_board(board).regions), board
    if memory:
        return (parse_memory(memory) if isinstance(memory, str) else list(memory)), ""
    return [Region("arena", None, 0, npu=True)], ""


def _is_quantized(module) -> bool:
    return isinstance(module, torch.fx.GraphModule) and any(
        n.op == "call_function" and n.target in DQ_OPS for n in module.graph.nodes)


def build_graph(qmodel, example_inputs=None) -> Graph:
    """Lift and lower a quantized module; a float module is quantized on its example inputs."""
    if not _is_quantized(qmodel):
        if example_inputs is None:
            raise McutorchError("compile() needs a module from mcutorch.quantize(), or "
                                "example_inputs to quantize a float module with")
        from .pt2e import quantize

        qmodel = quantize(qmodel, example_inputs)
    return run_all(lift(qmodel))


def compile_graph(graph: Graph, target: Target, regions: list[Region], board: str = "",
                  name: str = "model", *, verify: bool = False, emit_tosa=None,
                  npu_fallback: bool = True, npu_options=None):
    """Kernel choice, Ethos-U delegation (targets with an NPU), memory plan and emission of a
    lowered graph. `verify`, `emit_tosa`, `npu_fallback`, `npu_options`: see `compile`."""
    from .emit import build_program

    cortex_m.select_kernels(graph, target)
    npu = None
    if target.npu:
        from .backends.ethos_u import delegate_graph

        npu = delegate_graph(graph, target.npu, fallback=npu_fallback, verify=verify,
                             emit_tosa=emit_tosa, options=npu_options)
        cortex_m.select_kernels(graph, target)  # the copies the delegates added
    elif emit_tosa is not None:
        from .backends import tosa

        tosa.emit_tosa(graph, emit_tosa)
    steps = _steps(graph, npu)
    buffers, index = _buffers(graph, steps)
    scratch = _bind_delegates(buffers, index, steps, npu) if npu else set()
    inplace = _inplace_pairs(graph, steps, index, buffers, scratch)
    result = plan(buffers, len(steps), regions, alignment=16, inplace=inplace)
    return build_program(graph, steps, index, result, regions, target, board, name, npu)


def _steps(graph: Graph, npu) -> list:
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


def _buffers(graph: Graph, steps) -> tuple[list[Buffer], dict]:
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
            if id(t) in written and id(t) not in index:
                add(id(t), t.nbytes, written[id(t)], t.name)
        if node.scratch and id(node) in step_of:
            add(("scratch", step_of[id(node)]), node.scratch, step_of[id(node)],
                f"scratch of {node.outputs[0].name}")
    for i, node in enumerate(steps):
        for t in node.inputs:
            if not t.is_const:
                b = buffers[index[id(t)]]
                b.last = max(b.last, i)
    for t in graph.outputs:
        buffers[index[id(t)]].last = len(steps)
    return buffers, index


def _root(buffers: list[Buffer], b: Buffer) -> Buffer:
    while b.alias_of is not None:
        b = buffers[b.alias_of]
    return b


def _bind_delegates(buffers: list[Buffer], index: dict, steps, npu) -> set[int]:
    """Vela's scratch (and fast scratch) as NPU-reachable buffers, live through the delegate
    and its CPU version; each bound tensor's bytes alias the scratch at Vela's offset. Returns
    the scratch buffer ids."""
    step_of = {id(n): i for i, n in enumerate(steps)}
    scratch = set()
    for d in npu.delegates:
        s = step_of[id(d.op)]
        end = s + (len(d.cpu_nodes) if npu.fallback else 0)
        sid = index[("npu_scratch", d.index)] = len(buffers)
        buffers.append(Buffer(sid, d.vela.scratch_size, s, end, npu=True,
                              name=f"delegate {d.index} scratch"))
        scratch.add(sid)
        if d.vela.fast_scratch_size:
            fid = index[("npu_fast_scratch", d.index)] = len(buffers)
            buffers.append(Buffer(fid, d.vela.fast_scratch_size, s, s, npu=True,
                                  name=f"delegate {d.index} fast scratch"))
        for t, placed in d.bindings:
            root = _root(buffers, buffers[index[id(t)]])
            if root.id in scratch:
                raise McutorchError(f"{t.name} is bound twice (delegate {d.index})")
            root.alias_of, root.alias_offset = sid, placed.offset
    return scratch


def _inplace_pairs(graph: Graph, steps, index, buffers: list[Buffer], fixed: set[int]):
    """(input, output) buffer pairs of element-wise ops that may share bytes; never a tensor
    bound inside a delegate's scratch (`fixed`: scratch buffer ids), whose offset Vela chose."""
    pairs = []
    for node in steps:
        if node.op in INPLACE_OPS:
            y = node.outputs[0]
            for x in node.inputs:
                if not x.is_const and x.nbytes == y.nbytes and x not in graph.inputs:
                    pair = (index[id(x)], index[id(y)])
                    if not any(_root(buffers, buffers[b]).id in fixed for b in pair):
                        pairs.append(pair)
    return pairs


def compile(qmodel, example_inputs=None, target: str | Target = "cortex-m55",
            board: str | None = None, memory: str | None = None, name: str = "model",
            progress: bool = False, *, verify: bool = True, emit_tosa=None,
            npu_fallback: bool = True, npu_options=None):
    """Compile a quantized module into a program for `target`.

    `board` (e.g. "mps3-an547") or `memory` ("DTCM:512K,SRAM:4M") gives the memory map; with
    neither, one unbounded arena is planned and reported.

    With an Ethos-U in the target ("cortex-m55+ethos-u55-128"), the ops the NPU takes become
    Vela-compiled delegates (docs/ethos_u.md):
      * `verify`: first prove each subgraph's TOSA graph bit-exact against the Python reference
        on the TOSA reference model (TosaMismatchError otherwise);
      * `emit_tosa`: a folder that receives the TOSA files handed to Vela (CPU-only targets:
        every lowerable run of the graph);
      * `npu_fallback=False`: drop the CPU versions of the delegates (smaller program; it then
        runs only where an NPU driver is linked);
      * `npu_options`: {"system_config": ..., "memory_mode": ..., "extra": [vela flags]}.

    Example:
        >>> program = mcutorch.compile(qmodel, (x,), target="cortex-m55")
        >>> program.save("model.mtp")
        >>> npu = mcutorch.compile(qmodel, (x,), target="cortex-m55+ethos-u55-128",
        ...                        board="mps3-an547")
    """
    from .api import CompiledModel
    from .boards import can_run

    t0 = time.perf_counter()
    tgt = parse_target(target)
    if board:
        ok, why = can_run(board, tgt)
        if not ok:
            raise TargetError(why)
    regions, board_name = resolve_regions(board, memory)
    graph = build_graph(qmodel, example_inputs)
    if progress:
        print(f"lowered {len(graph.nodes)} ops in {time.perf_counter() - t0:.2f} s")
    program = compile_graph(graph, tgt, regions, board_name, name, verify=verify,
                            emit_tosa=emit_tosa, npu_fallback=npu_fallback,
                            npu_options=npu_options)
    if progress:
        print(f"planned and emitted in {time.perf_counter() - t0:.2f} s")
    return CompiledModel(program)


def macs(op: str, inputs: list[tuple], outputs: list[tuple], attrs: dict) -> int:
    """Multiply-accumulates of one op from operand shapes (for inspect and bench)."""
    out = int(np.prod(outputs[0])) if outputs else 0
    if op == "conv2d":
        return out * int(np.prod(inputs[1][1:]))
    if op == "depthwise_conv2d":
        return out * inputs[1][0] * inputs[1][1]
    if op == "fully_connected":
        return out * inputs[1][1]
    return 0

