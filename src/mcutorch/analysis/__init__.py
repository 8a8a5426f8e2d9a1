"""Checking a compiled model. This module: `mcutorch analyze`, a per-layer report of a compiled
program, measured from real builds; `analysis.validate`: `mcutorch validate` (accuracy on a
dataset against its labels and the float and fake-quant models); `analysis.dataset`: the
dataset file convention (also `compile --calibration`); `analysis.html`: analyze's HTML page;
`analysis.accuracy`: analyze's per-layer error against the float model.

Per op: the kernel variant and the ISA path its firmware runs (`device.isa_path`: MVE, DSP or
C, from the program's target and the kernel's compile-time branches; "delegate" for an Ethos-U
op), operand shapes, MACs, weight bytes, activation bytes, the arena region and offset of every
activation, where it runs and why it is not on the NPU (the partitioner's reason from the
program's placement table, else the op registry's `tosa` reason). With a board: the exact
instructions of each op (`device.exact.profile_exact`, mcutorch's QEMU plugin) and, for a clock
in MHz, instructions / MHz in microseconds, an estimate at one instruction per cycle, not a
measured time. Totals: flash (runtime core, the kernels the program links, the program) from the
linker map of a real arm-none-eabi-gcc build of the program's firmware, and RAM (the planned
arenas, the runtime state, and the worst-case stack from gcc's call graph, `device.stack`).

    >>> info = mcutorch.analyze("kws.mtp", board="mps3-an547", clock_mhz=160)  # doctest: +SKIP
    >>> info["totals"]["flash"]["total"], info["ops"][0]["isa"]                 # doctest: +SKIP
    (52304, 'MVE')
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from mcutorch import ops as registry
from mcutorch.errors import UsageError
from mcutorch.program.model import Program

INPUT_SEED = 0  # the int8 input of the counted inference when none is given


def _program(program) -> Program:
    if isinstance(program, Program):
        return program
    if hasattr(program, "program"):  # a CompiledModel
        return program.program
    return Program.load(program)


def _where(p: Program, index: int) -> dict:
    t = p.tensors[index]
    out = {"index": index, "name": p.tensor_name(index), "dtype": t.dtype,
           "shape": list(t.shape), "bytes": t.nbytes}
    if t.storage == "const":
        return {**out, "region": None, "offset": None}
    if t.storage == "persistent":  # a stateful model's state: the persistent buffer
        return {**out, "region": "persistent", "offset": t.offset}
    return {**out, "region": p.regions[t.region].name, "offset": t.offset}


def _owners(p: Program) -> dict[int, int]:
    """Op index -> delegate index, for the ops of each delegate's CPU version."""
    return {i: k for k, d in enumerate(p.delegates) if d.cpu_ops
            for i in range(d.cpu_ops[0], sum(d.cpu_ops))}


def _placement(p: Program, index: int, owner: dict[int, int]) -> tuple[str, str]:
    """(where op `index` runs, why it is not on the NPU or '')."""
    op = p.ops[index]
    if op.name == "delegate":
        return "NPU", ""
    if index in owner:  # on the NPU inside its delegate; this copy runs without a driver
        return "NPU", ""
    if p.target.npu == "none":
        return "CPU", f"the target {p.target.name} has no NPU"
    rows = (p.metadata or {}).get("placement") or []
    name = p.tensor_name(op.outputs[0]) if op.outputs else None
    for row in rows:
        if row.get("on") == "CPU" and row.get("output") == name:
            return "CPU", row.get("why", "")
    reason = registry.ALL[op.name].tosa if op.name in registry.ALL else ""
    if reason:
        return "CPU", reason
    if rows:
        return "CPU", ("added by the compiler after partitioning (not in the placement table), "
                       "e.g. a copy out of a delegate's scratch")
    return "CPU", "not in this program's metadata (stripped): the partitioner's reason is lost"


def _op_rows(p: Program, paths: dict) -> list[dict]:
    from mcutorch.report import describe

    described = describe(p)["ops"]  # MACs as inspect counts them (delegates: Vela's)
    owner = _owners(p)
    rows = []
    for i, op in enumerate(p.ops):
        consts = [t for t in op.inputs if p.tensors[t].storage == "const"]
        acts = [t for t in op.inputs if p.tensors[t].storage != "const"]
        weight = sum(p.tensors[t].nbytes for t in consts)
        if op.name == "delegate":
            d = p.delegates[int(op.attrs["index"])]
            weight = d.weights[1] + d.command[1]
            isa = "delegate"
        else:
            isa = paths.get((op.name, op.variant), "C")
        runs_on, why = _placement(p, i, owner)
        scratch = None
        if op.scratch:
            scratch = {"region": p.regions[op.scratch.region].name,
                       "offset": op.scratch.offset, "bytes": op.scratch.size}
        rows.append({
            "index": i, "op": op.name, "variant": op.variant, "isa": isa,
            "inputs": [_where(p, t) for t in acts], "outputs": [_where(p, t) for t in op.outputs],
            "constants": [_where(p, t) for t in consts], "scratch": scratch,
            "macs": described[i]["macs"], "weight_bytes": weight,
            "activation_bytes": sum(p.tensors[t].nbytes for t in (*acts, *op.outputs)),
            "runs_on": runs_on, "why_not_npu": why, "cpu_version_of": owner.get(i),
            "source": p.op_source(i)})
    return rows


def timeline(p: Program) -> list[dict]:
    """Every planned buffer as a bar: region, offset, bytes, and the ops it is live over
    ([first, last] inclusive, op indices in the order `mt_invoke` runs them). One bar per arena
    tensor (kind "tensor"; a view of another tensor's bytes, kind "view", is live while it is
    read, and keeps the tensor whose bytes it shares live), plus op scratch and delegate
    scratch areas (kind "scratch")."""
    n = len(p.ops)
    written: dict[int, int] = {}
    read: dict[int, list[int]] = {}
    by_delegate: dict[int, int] = {}
    for i, op in enumerate(p.ops):
        for t in op.outputs:  # a delegate output its CPU version writes: live from that write
            (by_delegate if op.name == "delegate" else written).setdefault(t, i)
        for t in op.inputs:
            read.setdefault(t, []).append(i)
    for t, i in by_delegate.items():
        written.setdefault(t, i)
    bars = []
    for t, info in enumerate(p.tensors):
        if info.storage != "arena":
            continue
        readers = read.get(t, [])
        first = 0 if t in p.inputs else written.get(t, min(readers, default=0))
        last = n - 1 if t in p.outputs else max(readers, default=first)
        kind = "tensor" if t in written or t in p.inputs else "view"
        bars.append({"kind": kind, "tensor": t, "name": p.tensor_name(t),
                     "region": p.regions[info.region].name, "offset": info.offset,
                     "bytes": info.nbytes, "first": first, "last": max(first, last)})
    _extend_roots(bars)
    for i, op in enumerate(p.ops):
        if op.scratch:
            bars.append({"kind": "scratch", "tensor": None, "name": f"scratch of op {i}",
                         "region": p.regions[op.scratch.region].name,
                         "offset": op.scratch.offset, "bytes": op.scratch.size,
                         "first": i, "last": i})
    delegate_at = {int(op.attrs["index"]): i for i, op in enumerate(p.ops)
                   if op.name == "delegate"}
    for k, d in enumerate(p.delegates):
        s = delegate_at.get(k, 0)  # Vela's scratch is live at the delegate op alone: the CPU
        # version's tensors may lie in its bytes (plan/buffers.py bind_delegates)
        for what, area in (("scratch", d.scratch), ("fast scratch", d.fast_scratch)):
            if area and area.size:
                bars.append({"kind": "scratch", "tensor": None,
                             "name": f"delegate {k} {what}",
                             "region": p.regions[area.region].name, "offset": area.offset,
                             "bytes": area.size, "first": s, "last": s})
    return bars


def _extend_roots(bars: list[dict]) -> None:
    """A view (a reshape's output: no op writes it) lies in the bytes of the tensor written
    last before it is read there: that root stays live while the view is read, and the view
    exists from the root's write on."""
    owned = [b for b in bars if b["kind"] == "tensor"]
    for v in sorted((b for b in bars if b["kind"] == "view"), key=lambda b: b["first"]):
        roots = [b for b in owned if b["region"] == v["region"] and b["first"] <= v["first"]
                 and b["offset"] <= v["offset"]
                 and v["offset"] + v["bytes"] <= b["offset"] + b["bytes"]]
        if roots:
            root = max(roots, key=lambda b: b["first"])
            root["last"] = max(root["last"], v["last"])
            v["first"], v["view_of"] = root["first"], root["tensor"]


def _flash(p: Program, board: str) -> dict:
    """Flash bytes from the linker map of the program's firmware (runner excluded)."""
    from mcutorch.device import firmware
    from mcutorch.device.firmware import _defined_names, _map_sections
    from mcutorch import ops
    from mcutorch.device.kernels import INT16, NO_KERNEL, kernel
    from mcutorch.device.export_c import used_kernels

    elf = firmware.build(p, board)
    split = firmware.flash_split(elf, p)
    objects: dict[str, list[tuple[str, int]]] = {}
    for section, size, obj in _map_sections(Path(elf).with_suffix(".map")):
        objects.setdefault(obj, []).append((section, size))
    per_kernel = {}
    for op, variant in sorted(used_kernels(p)):
        if op in NO_KERNEL:
            continue
        if variant == INT16:  # the op's int16 body: its *_s16.c files
            srcs = {src for v in ops.get(op).variants for src in kernel(op, v).sources
                    if src.stem.endswith("_s16")}
        else:
            srcs = kernel(op, variant).sources
        names = {n for src in srcs for n in _defined_names(src)}
        per_kernel[f"{op}/{variant}"] = sum(
            size for sections in objects.values()
            if any(sec.split(".")[2:3] and sec.split(".")[2] in names for sec, _ in sections)
            for sec, size in sections if sec.startswith((".text", ".rodata")))
    total = split["runtime_core"] + split["kernels"] + split["program"]
    return {**split, "total": total, "per_kernel": per_kernel, "board": board,
            "how": "text + rodata kept by the linker (-Os, --gc-sections) of an "
                   f"arm-none-eabi-gcc build for {p.target.name}, runner excluded"}


def _ram(p: Program) -> dict:
    """RAM with the run-time binding (state buffer: "total") and bound ahead of time (export-c,
    build --standalone: the views and args in flash, "static_tables"; RAM "static_total")."""
    from mcutorch.device.binding import table_bytes
    from mcutorch.device.crt import state_size
    from mcutorch.device.stack import program_stack

    stack = program_stack(p)
    arenas = {r.name: r.size for r in p.regions}
    state = state_size(p, 4)
    tables, ring = table_bytes(p)
    rest = sum(arenas.values()) + stack.bytes + p.persistent_size
    return {"arenas": arenas, "state": state, "stack": stack.bytes,
            "persistent": p.persistent_size,  # a stateful model's state, kept across invokes
            "stack_chain": stack.chain, "stack_uncounted": stack.uncounted,
            "total": rest + state, "static_ring_views": ring, "static_tables": tables,
            "static_total": rest + ring}


def _counted_inputs(p: Program, inputs) -> tuple[list[np.ndarray], str]:
    """The int8 inputs of the counted inference and how they were made."""
    if inputs is not None:
        from mcutorch.api import CompiledModel

        if isinstance(inputs, np.ndarray) or not isinstance(inputs, (list, tuple)):
            inputs = [inputs]
        return CompiledModel(p).quantize_inputs(inputs), "the given input"
    rng = np.random.default_rng(INPUT_SEED)
    arrays = []
    for t in p.inputs:
        info = p.tensors[t]
        arrays.append(rng.integers(-128, 128, info.shape, dtype=np.int8))
    return arrays, f"uniform random int8 inputs (numpy seed {INPUT_SEED})"


def check_clock(clock_mhz) -> float | None:
    """The clock as a positive finite float (MHz), or UsageError."""
    if clock_mhz is None:
        return None
    try:
        value = float(clock_mhz)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"--clock-mhz {clock_mhz!r} is not a clock: give the core clock in MHz "
                         "as a positive number, e.g. --clock-mhz 160")
    return value


def _instructions(p: Program, rows: list[dict], board: str, clock: float | None,
                  inputs, what: str | None = None) -> dict:
    from mcutorch.device.exact import profile_exact

    arrays, given = _counted_inputs(p, inputs)
    what = what or given
    prof = profile_exact(p, arrays, board)
    for row in rows:
        n = prof.per_op.get(row["index"])
        row["instructions"] = n
        row["estimate_us"] = None if n is None or clock is None else n / clock
    total = prof.total
    return {"board": prof.board, "total": total, "ops": sum(prof.per_op.values()),
            "interpreter": prof.interpreter, "input": what,
            "how": "exact, mcutorch's QEMU TCG plugin (instructions, not cycles)",
            "clock_mhz": clock, "estimate_us": None if clock is None else total / clock}


def _accuracy(p: Program, rows: list[dict], model, example_inputs, calibration,
              inputs) -> tuple[dict, list]:
    """Per-layer error against the float `model` (analysis.accuracy); the float data used."""
    from mcutorch.analysis.accuracy import layer_errors
    from mcutorch.frontend.capture import as_tuple

    if example_inputs is None:
        raise UsageError("per-layer error needs the model's example inputs as well as the model")
    batches = list(calibration) if calibration is not None else None
    if inputs is not None:
        data, what = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs], \
            "the given input"
    else:
        data = list(as_tuple(batches[0] if batches else example_inputs))
        what = "the first calibration batch" if batches else "the example inputs"
    data = [np.asarray(x.detach().numpy() if hasattr(x, "detach") else x, np.float32)
            for x in data]
    errors = layer_errors(p, model, example_inputs, batches, data)
    for row in rows:
        row["error"] = errors.get(row["index"])
    return {"input": what, "how": "the program's int8 output of each op (Python reference "
            "runtime), dequantized, against the float model's value it quantizes (float32 "
            "torch.export graph), one inference"}, data


def analyze(program, board: str | None = None, clock_mhz: float | None = None,
            inputs=None, model=None, example_inputs=None, calibration=None) -> dict:
    """A JSON-ready per-layer report of a program (a path, a Program or a CompiledModel).

    `board` (e.g. "mps3-an547") adds exact instructions per op for one inference on `inputs`
    (float arrays in the model's layout; default: seeded random int8 inputs) and builds the
    flash figures for that board; `clock_mhz` adds instructions / MHz (an estimate in µs at
    one instruction per cycle, not a measured time). Flash comes from a real firmware build,
    stack from gcc's call graph: arm-none-eabi-gcc is needed (`make toolchain`).

    `model` (the float nn.Module the program was compiled from, with its `example_inputs` and
    the `calibration` batches the compile used) adds each op's error against the float model
    for one inference on `inputs` (default: the first calibration batch), which then also
    feeds the counted inference (`analysis.accuracy`).

    Example:
        >>> info = mcutorch.analyze("model.mtp", board="mps3-an547", clock_mhz=160)
        >>> [(o["op"], o["isa"], o["instructions"]) for o in info["ops"]][:1]
        [('conv2d', 'MVE', 45123)]
    """
    from mcutorch.device.boards import board_for, require_can_run
    from mcutorch.device.isa_path import isa_paths

    clock = check_clock(clock_mhz)
    if clock is not None and board is None:
        raise UsageError("--clock-mhz turns exact instruction counts into a time estimate: "
                         "add --board (e.g. --board mps3-an547)")
    p = _program(program)
    target = p.target.as_target()
    if board is not None:
        board = require_can_run(board, target).name  # TargetError: unknown or cannot run it
    rows = _op_rows(p, isa_paths(p))
    meta = p.metadata or {}
    info = {
        "model": meta.get("model", ""),
        "target": {"name": p.target.name, "cpu": p.target.cpu, "isa": p.target.isa,
                   "npu": p.target.npu},
        "stripped": set(meta) <= {"io"},
        "ops": rows,
        "timeline": timeline(p),
        "regions": [{"name": r.name, "bytes": r.size, "capacity": r.capacity,
                     "base": r.base} for r in p.regions],
        "totals": {"macs": sum(r["macs"] for r in rows if r["cpu_version_of"] is None),
                   "weight_bytes": len(p.constants),
                   "flash": _flash(p, board or board_for(target)), "ram": _ram(p)},
        "instructions": None,
    }
    info["accuracy"] = None
    if model is not None:
        info["accuracy"], inputs = _accuracy(p, rows, model, example_inputs, calibration,
                                             inputs)
    if board is not None:
        what = info["accuracy"]["input"] if info["accuracy"] else None
        info["instructions"] = _instructions(p, rows, board, clock, inputs, what)
    return info


def _fmt_where(ts: list[dict]) -> str:
    return ", ".join(f"{t['region']}+{t['offset']}" for t in ts)


def _shape(ts: list[dict]) -> str:
    return " ".join(re.sub(r"\s", "", str(t["shape"])) for t in ts)


def render(info: dict) -> str:
    """The report as text tables (what `mcutorch analyze` prints in a pipe)."""
    from mcutorch.ui.tables import text

    return text(parts(info))


def parts(info: dict) -> list:
    """The report's lines and rich tables (mcutorch.ui.tables), in print order."""
    from mcutorch.ui.tables import add, table

    t, ins = info["target"], info["instructions"]
    clock = ins and ins["clock_mhz"]
    heads = ["#", "op", "variant", "ISA", "on", "input", "output", "MACs", "weights B", "act B"]
    if ins:
        heads += ["instructions"] + (["instr/MHz (us)"] if clock else [])
    ops = table(*heads, "arena (in -> out)", right=("#", "MACs", "weights B", "act B",
                                                     "instructions", "instr/MHz (us)"),
                wrap=("arena (in -> out)",))
    for o in info["ops"]:
        name = o["op"] if o["cpu_version_of"] is None else f"[{o['cpu_version_of']}] {o['op']}"
        row = [o["index"], name, o["variant"], o["isa"], o["runs_on"], _shape(o["inputs"]),
               _shape(o["outputs"]), o["macs"], o["weight_bytes"], o["activation_bytes"]]
        if ins:
            n = o.get("instructions")
            row.append(n)
            if clock:
                row.append(None if n is None else f"{o['estimate_us']:.2f}")
        add(ops, *row, f"{_fmt_where(o['inputs'])} -> {_fmt_where(o['outputs'])}")
    out = [f"analyze {info['model']!r} for {t['name']} (ISA {t['isa']}, NPU {t['npu']})"
           + (" [stripped program]" if info["stripped"] else ""), ops]
    if any(o["cpu_version_of"] is not None for o in info["ops"]):
        out.append("[k] op: part of delegate k's CPU version (runs only without an NPU driver)")
    why = [o for o in info["ops"] if o["runs_on"] == "CPU" and o["why_not_npu"]]
    if why:
        reasons = {o["why_not_npu"] for o in why}
        if len(reasons) == 1 and len(why) > 1:
            out.append(f"not on the NPU: every op: {why[0]['why_not_npu']}")
        else:
            out.append("not on the NPU:")
            reasons = table("#", "op", "why", right=("#",), wrap=("why",))
            for o in why:
                add(reasons, o["index"], o["op"], o["why_not_npu"])
            out.append(reasons)
    return out + _render_totals(info) + _render_errors(info)


def _render_errors(info: dict) -> list:
    from mcutorch.ui.tables import add, table

    acc = info.get("accuracy")
    if not acc:
        return []
    errors = table("#", "op", "float node", "l2r", "SQNR dB", "rmse", "max |err|", "rmse LSB",
                   right=("#", "l2r", "SQNR dB", "rmse", "max |err|", "rmse LSB"))
    for o in info["ops"]:
        e = o.get("error")
        if e is None:
            add(errors, o["index"], o["op"], "(none: an op the compiler added)", None, None,
                None, None, None)
            continue
        add(errors, o["index"], o["op"], e["float_node"],
            None if e["l2r"] is None else f"{e['l2r']:.5f}",
            None if e.get("sqnr_db") is None else f"{e['sqnr_db']:.1f}", f"{e['rmse']:.3g}",
            f"{e['max_abs']:.3g}", f"{e['rmse_lsb'] or 0:.3f}")
    return [f"error vs the float model ({acc['input']}; l2r = ||int8 - float|| / ||float||):",
            errors]


def _render_totals(info: dict) -> list:
    from mcutorch.ui.tables import add, table

    tot, ins = info["totals"], info["instructions"]
    f, r = tot["flash"], tot["ram"]
    totals = table("total", "value", "measured", right=("value",), wrap=("measured",))
    add(totals, "MACs", f"{tot['macs']:,}", "")
    add(totals, "constants", f"{tot['weight_bytes']:,} B", "")
    add(totals, "flash", f"{f['total']:,} B", f"{f['how']} ({f['board']} link)")
    add(totals, "  runtime core", f"{f['runtime_core']:,} B", "")
    add(totals, "  kernels", f"{f['kernels']:,} B", "" if f["per_kernel"] else "none")
    for k, v in f["per_kernel"].items():
        add(totals, f"    {k}", f"{v:,} B", "")
    add(totals, "  program", f"{f['program']:,} B", "")
    add(totals, "RAM", f"{r['total']:,} B",
        "arenas + persistent + runtime state + worst-case stack (run-time binding)")
    for k, v in r["arenas"].items():
        add(totals, f"  arena {k}", f"{v:,} B", "")
    if r["persistent"]:
        add(totals, "  persistent", f"{r['persistent']:,} B", "kept across invokes")
    add(totals, "  runtime state", f"{r['state']:,} B", "mt_bind_state's views and kernel args")
    add(totals, "  worst-case stack", f"{r['stack']:,} B",
        f"{' -> '.join(r['stack_chain'])} (gcc call graph, -Os)")
    add(totals, "RAM bound ahead of time", f"{r['static_total']:,} B",
        f"export-c / build --standalone (mt_bind_static): no state; ring views "
        f"{r['static_ring_views']:,} B; the tables, {r['static_tables']:,} B, in flash")
    if ins:
        npu = ("; no NPU driver on the board: delegates ran their CPU version"
               if any(o["op"] == "delegate" for o in info["ops"]) else "")
        add(totals, f"instructions per inference on {ins['board']}", f"{ins['total']:,}",
            f"{ins['how']}; input: {ins['input']}{npu}")
        add(totals, "  ops", f"{ins['ops']:,}", "")
        add(totals, "  interpreter", f"{ins['interpreter']:,}", "")
        if ins["clock_mhz"]:
            add(totals, f"instructions / MHz at {ins['clock_mhz']:g} MHz",
                f"{ins['estimate_us']:,.1f} us",
                "an estimate at one instruction per cycle, not a measured time")
    return [totals]
