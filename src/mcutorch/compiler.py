"""compile(): quantized module -> IR -> passes -> kernel choice -> memory plan -> Program."""
from __future__ import annotations

import dataclasses

from contextlib import nullcontext

import torch

from mcutorch.backends import cortex_m
from mcutorch.errors import McutorchError, TargetError
from mcutorch.ir import Graph
from mcutorch.frontend.lift import DQ_OPS, lift
from mcutorch.passes import run_all
from mcutorch.plan import Region, plan
from mcutorch.plan.buffers import (bind_delegates, buffers_of, inplace_pairs, overlap_pairs,
                                   steps_of)
from mcutorch.plan.regions import parse_memory
from mcutorch.targets import Target, parse_target
from mcutorch.ui.progress import status

def resolve_regions(board: str | None, memory: str | list | None) -> tuple[list[Region], str]:
    """Memory regions from a board name, a --memory spec, or one unbounded arena."""
    if board and memory:
        raise TargetError("give a board or a memory description, not both")
    if board:
        from mcutorch.device.boards import get_board

        return list(get_board(board).regions), board
    if memory:
        return (parse_memory(memory) if isinstance(memory, str) else list(memory)), ""
    return [Region("arena", None, 0, npu=True)], ""


def _is_quantized(module) -> bool:
    return isinstance(module, torch.fx.GraphModule) and any(
        n.op == "call_function" and n.target in DQ_OPS for n in module.graph.nodes)


def _check_graph_module(module) -> None:
    """A GraphModule that is not a converted PT2E module: say what it is instead."""
    if not isinstance(module, torch.fx.GraphModule):
        return
    observers = [n.target for n in module.graph.nodes
                 if n.op == "call_module" and "activation_post_process" in str(n.target)]
    if observers:
        raise McutorchError("compile() got a prepared PT2E module (it still has observers, e.g. "
                            f"{observers[0]}): calibrate it, then pass convert_pt2e(module)")
    from mcutorch.frontend.lift import RECURRENT, builder_of

    for node in module.graph.nodes:  # an own export's fused aten.lstm: refused by name
        if str(node.target) in RECURRENT:
            builder_of(node)
    raise McutorchError("compile() got a torch.fx.GraphModule without quantize/dequantize nodes "
                        "(the quantizer quantized nothing?): pass the module convert_pt2e "
                        "returned, or the float nn.Module with example_inputs to quantize it")


def build_graph(qmodel, example_inputs=None, ring_buffers: bool = True,
                fuse_recurrent: bool = True) -> Graph:
    """Lift and lower a quantized (or QAT) module; a float module is quantized on its example
    inputs. `ring_buffers=False` keeps streaming histories as concat + slice copies,
    `fuse_recurrent=False` an LSTM / GRU as its unrolled steps."""
    from mcutorch.frontend.qat import convert, is_qat

    if isinstance(qmodel, torch.export.ExportedProgram):  # a converted module, exported again
        qmodel = qmodel.module()
    if is_qat(qmodel):  # trained with quantize(..., qat=True): converted here, on a copy
        qmodel = convert(qmodel)
    if not _is_quantized(qmodel):
        _check_graph_module(qmodel)
        if example_inputs is None:
            raise McutorchError("compile() needs a module from mcutorch.quantize(), or "
                                "example_inputs to quantize a float module with")
        from mcutorch.frontend.quantize import quantize

        qmodel = quantize(qmodel, example_inputs)
    from mcutorch.frontend.state import STATE_KEY

    graph = lift(qmodel)
    graph.meta["state"] = qmodel.meta.get(STATE_KEY, [])  # passes/persistent.py
    skip = ("ring_buffers",) * (not ring_buffers) + ("fuse_recurrent",) * (not fuse_recurrent)
    return run_all(graph, skip=skip)


def compile_graph(graph: Graph, target: Target, regions: list[Region], board: str = "",
                  name: str = "model", *, verify: bool = False, emit_tosa=None,
                  npu_fallback: bool = True, npu_options=None, overlap: bool = True):
    """Kernel choice, Ethos-U delegation (targets with an NPU), memory plan and emission of a
    lowered graph. `verify`, `emit_tosa`, `npu_fallback`, `npu_options`, `overlap`: see
    `compile`."""
    from mcutorch.program.emit import build_program

    cortex_m.select_kernels(graph)
    npu = None
    if target.npu:
        from mcutorch.backends.ethos_u import delegate_graph

        npu = delegate_graph(graph, target.npu, fallback=npu_fallback, verify=verify,
                             emit_tosa=emit_tosa, options=npu_options)
        cortex_m.select_kernels(graph)  # the copies the delegates added
    elif emit_tosa is not None:
        from mcutorch.backends import tosa

        tosa.emit_tosa(graph, emit_tosa)
    steps, index, result = _planned(graph, npu, regions, overlap)
    if npu is not None and npu.fallback:  # what the CPU versions cost: the plan without them
        lean = _planned(graph, dataclasses.replace(npu, fallback=False), regions, overlap)[2]
        npu.fallback_ram = sum(result.regions.values()) - sum(lean.regions.values())
    return build_program(graph, steps, index, result, regions, target, board, name, npu)


def _planned(graph: Graph, npu, regions: list[Region], overlap: bool = True):
    """Run order, buffer index and memory plan of a graph (its delegates bound)."""
    steps = steps_of(graph, npu)
    buffers, index = buffers_of(graph, steps)
    scratch = bind_delegates(buffers, index, steps, npu) if npu else set()
    inplace = inplace_pairs(graph, steps, index, buffers, scratch)
    more = overlap_pairs(graph, steps, index, buffers, scratch) if overlap else []
    return steps, index, plan(buffers, len(steps), regions, alignment=16, inplace=inplace,
                              overlap=more)


def compile(qmodel, example_inputs=None, target: str | Target = "cortex-m55",
            board: str | None = None, memory: str | None = None, name: str = "model",
            progress: bool = False, *, verify: bool = True, emit_tosa=None,
            npu_fallback: bool = True, npu_options=None, ring_buffers: bool = True,
            fuse_recurrent: bool = True, overlap: bool = True):
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

    `ring_buffers=False` turns off the ring rewrite of streaming histories (passes/ring.py): a
    stateful model's history then moves whole through concat + slice every call (measurements).
    `fuse_recurrent=False` keeps an LSTM / GRU as its unrolled steps (passes/recurrent.py; the
    same integers); targets with an Ethos-U keep them too (they lower to TOSA, the op does not).

    `overlap=False` plans no output over its own input (alias kind "overlap": a depthwise or
    1x1 conv's output a few rows below its input, docs/numerics.md "Overlap"); with it on, the
    planner keeps such a plan only when it needs fewer bytes.

    Example:
        >>> program = mcutorch.compile(qmodel, (x,), target="cortex-m55")
        >>> program.save("model.mtp")
        >>> npu = mcutorch.compile(qmodel, (x,), target="cortex-m55+ethos-u55-128",
        ...                        board="mps3-an547")
    """
    from mcutorch.api import CompiledModel
    from mcutorch.device.boards import require_can_run

    tgt = parse_target(target)
    if board:
        require_can_run(board, tgt)
    regions, board_name = resolve_regions(board, memory)
    with status("lowering to mcutorch IR") if progress else nullcontext():
        graph = build_graph(qmodel, example_inputs, ring_buffers,
                            fuse_recurrent and tgt.npu is None)
    with status(f"compiling {len(graph.nodes)} ops for {tgt.name}") if progress else nullcontext():
        program = compile_graph(graph, tgt, regions, board_name, name, verify=verify,
                                emit_tosa=emit_tosa, npu_fallback=npu_fallback,
                                npu_options=npu_options, overlap=overlap)
    return CompiledModel(program)
