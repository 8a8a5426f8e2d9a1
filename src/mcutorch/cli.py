"""The `mcutorch` command.

    mcutorch compile model.py --target cortex-m55 -o model.mtp
    mcutorch compile model.py --target cortex-m55+ethos-u55-128 --board mps3-an547 -o npu.mtp
    mcutorch run model.mtp --input x.npy --output y.npy [--board mps3-an547 [--profile [--exact]]]
    mcutorch inspect model.mtp [--json]
    mcutorch build model.mtp --board mps3-an547 -o model.elf
    mcutorch export-c model.mtp --target cortex-m55 -o out/
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mcutorch.errors import McutorchError


def _load_model_file(path: Path):
    """Import a user's model file; it defines model(), example_inputs() and maybe calibration()."""
    if not path.exists():
        raise McutorchError(f"model file {path} does not exist")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent.resolve()))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    for fn in ("model", "example_inputs"):
        if not callable(getattr(module, fn, None)):
            raise McutorchError(f"{path} must define {fn}() (and optionally calibration())")
    return module


def _calibration_from_npz(path: str):
    import torch

    with np.load(path) as data:
        arrays = [data[k] for k in sorted(data.files)]
    rows = [a.shape[0] if a.ndim else 0 for a in arrays]
    if not arrays or len(set(rows)) != 1 or rows[0] == 0:
        raise McutorchError(f"{path}: expected one array per model input, each with one row per "
                            f"calibration sample; found {len(arrays)} arrays"
                            + (f" with {', '.join(map(str, rows))} rows" if arrays else ""))
    n = rows[0]
    return [tuple(torch.from_numpy(a[i:i + 1]).float() for a in arrays) for i in range(n)]


def cmd_compile(args) -> int:
    import mcutorch

    t0 = time.perf_counter()
    module = _load_model_file(Path(args.model))
    model, example = module.model(), module.example_inputs()
    if args.calibration:
        calibration = _calibration_from_npz(args.calibration)
    elif callable(getattr(module, "calibration", None)):
        calibration = module.calibration()
    else:
        calibration = None
        print("warning: no calibration data; calibrating on the example inputs only "
              "(define calibration() or pass --calibration data.npz)", file=sys.stderr)
    qmodel = mcutorch.quantize(model, example, calibration=calibration, progress=args.progress)
    options = {k: v for k, v in (("system_config", args.system_config),
                                 ("memory_mode", args.memory_mode)) if v}
    program = mcutorch.compile(qmodel, example, target=args.target, board=args.board,
                               memory=args.memory, name=Path(args.model).stem,
                               progress=args.progress, verify=args.verify,
                               emit_tosa=args.emit_tosa, npu_fallback=args.npu_fallback,
                               npu_options=options or None)
    out = program.save(args.output)
    s = program.summary()
    ram = ", ".join(f"{k} {v:,} B" for k, v in s["regions"].items()) or "0 B"
    print(f"{out}: {s['ops']} ops, {s['program_bytes']:,} B program, RAM {ram} "
          f"(lower bound {s['lower_bound']:,} B), {time.perf_counter() - t0:.2f} s")
    _print_offload(program.program)
    return 0


def _print_offload(p) -> None:
    """One line on the Ethos-U part of a program (nothing for CPU-only targets)."""
    npu = (p.metadata or {}).get("ethos_u")
    if not npu:
        return
    rows = p.metadata.get("placement", [])
    on_npu = sum(r["on"] == "NPU" and r["op"] != "reshape" for r in rows)
    on_cpu = sorted({r["op"] for r in rows if r["on"] == "CPU" and r["op"] != "reshape"})
    ms = sum(d["estimate"].get("inference_time", 0.0) for d in npu["delegates"]) * 1e3
    print(f"{p.target.npu}: {len(npu['delegates'])} delegate(s), {on_npu} ops on the NPU "
          f"(Vela estimate {ms:.3f} ms), on the CPU: {', '.join(on_cpu) or 'nothing'}; "
          "`mcutorch inspect` shows why")


def cmd_run(args) -> int:
    import mcutorch

    program = mcutorch.load(args.program)
    inputs = [np.load(p) for p in args.input]
    if args.exact and not (args.board and args.profile):
        raise McutorchError("--exact refines --profile on a --board run")
    if args.board:
        q = inputs if args.int8 else program.quantize_inputs(inputs)
        if args.exact:
            from mcutorch.device.exact import profile_exact

            prof = profile_exact(program.program, q, args.board)
            outputs, run = prof.outputs, _Counts(prof.total, prof.per_op, "exact (QEMU plugin)")
        else:
            outputs = program.run_on_board(q, args.board, profile=args.profile)
            run = _Counts(program.last_run.instructions, program.last_run.per_op,
                          "SysTick under -icount: resolution one tick, 31.25-50 instructions "
                          "depending on the board")
        if not args.int8:
            outputs = program.dequantize_outputs(outputs)
        _print_counts(program, args.board, run)
    elif args.int8:
        outputs = program.run_int8(inputs)
    else:
        result = program.run(*inputs)
        outputs = [result] if not isinstance(result, tuple) else list(result)
        outputs = [o.numpy() for o in outputs]
    for i, y in enumerate(outputs):
        if args.output:
            path = args.output if len(outputs) == 1 else f"{Path(args.output).with_suffix('')}_{i}.npy"
            np.save(path, y)
            print(f"output {i}: {y.dtype}{list(y.shape)} -> {path}")
        else:
            print(f"output {i}: {y.dtype}{list(y.shape)}\n{y}")
    return 0


@dataclass
class _Counts:
    instructions: int
    per_op: dict
    how: str


def _print_counts(program, board: str, run: _Counts) -> None:
    print(f"{board}: {run.instructions:,} instructions per inference")
    if run.per_op:
        print(f"instructions per op ({run.how}):")
        for i, n in sorted(run.per_op.items()):
            op = program.program.ops[i]
            print(f"  {i:>3} {op.name:<18} {n:>12,}  {program.program.op_source(i)}")


def cmd_build(args) -> int:
    from mcutorch.device import firmware

    import mcutorch

    program = mcutorch.load(args.program).program
    elf = firmware.build(program, args.board, out=Path(args.output), profile=args.profile)
    split = firmware.flash_split(elf, program)
    print(f"{elf}: runtime core {split['runtime_core']:,} B, kernels {split['kernels']:,} B, "
          f"program {split['program']:,} B (flash); run it with mcutorch run --board")
    return 0


def cmd_inspect(args) -> int:
    from mcutorch.program.model import Program  # inspecting never imports torch
    from mcutorch.report import describe, render

    info = describe(Program.load(args.program))
    print(json.dumps(info, indent=1) if args.json else render(info))
    return 0


def cmd_export_c(args) -> int:
    from mcutorch.device.export_c import export_c

    import mcutorch

    out = export_c(mcutorch.load(args.program).program, args.output, target=args.target)
    print(f"{out}: runtime, kernels, program array, model_config.h, main.c, Makefile, "
          "CMakeLists.txt (build: make -C " + str(out) + ")")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="mcutorch", description="PyTorch models on Arm MCUs")
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compile", help="quantize and compile a model file to a program")
    c.add_argument("model", help="a .py file defining model(), example_inputs(), calibration()")
    c.add_argument("--target", default="cortex-m55", help="e.g. cortex-m55, cortex-m33+nodsp")
    c.add_argument("--board", help="memory map of a named board, e.g. mps3-an547")
    c.add_argument("--memory", help="memory regions, fastest first, e.g. DTCM:512K,SRAM:4M")
    c.add_argument("--calibration", help=".npz of calibration inputs (overrides calibration())")
    c.add_argument("-o", "--output", default="model.mtp")
    c.add_argument("--progress", action="store_true", help="show calibration/compile progress")
    c.add_argument("--verify", action=argparse.BooleanOptionalAction, default=True,
                   help="prove each Ethos-U subgraph's TOSA graph bit-exact against the Python "
                        "reference on the TOSA reference model (default: on)")
    c.add_argument("--emit-tosa", metavar="DIR",
                   help="write the TOSA flatbuffers (what Vela compiles) to DIR")
    c.add_argument("--no-npu-fallback", dest="npu_fallback", action="store_false",
                   help="leave out the CPU versions of Ethos-U delegates")
    c.add_argument("--system-config", help="Vela system config (default per NPU family, e.g. "
                   "Ethos_U55_High_End_Embedded)")
    c.add_argument("--memory-mode", help="Vela memory mode (e.g. Shared_Sram)")
    c.set_defaults(fn=cmd_compile)
    r = sub.add_parser("run", help="run a program on the host reference runtime")
    r.add_argument("program")
    r.add_argument("--input", action="append", required=True, help=".npy input (repeatable)")
    r.add_argument("--output", help=".npy file for the output")
    r.add_argument("--int8", action="store_true", help="inputs/outputs are the program's int8 NHWC")
    r.add_argument("--board", help="run with the C runtime on an emulated board (QEMU)")
    r.add_argument("--profile", action="store_true", help="instructions per op (with --board)")
    r.add_argument("--exact", action="store_true",
                   help="exact per-op counts with mcutorch's QEMU plugin (with --profile)")
    r.set_defaults(fn=cmd_run)
    b = sub.add_parser("build", help="link board firmware (runtime + the model's kernels)")
    b.add_argument("program")
    b.add_argument("--board", required=True, help="mps2-an385, mps2-an386, mps2-an500, "
                   "mps2-an505 or mps3-an547")
    b.add_argument("--profile", action="store_true", help="per-op instruction counts")
    b.add_argument("-o", "--output", default="model.elf")
    b.set_defaults(fn=cmd_build)
    i = sub.add_parser("inspect", help="ops, shapes, qparams, MACs, memory plan")
    i.add_argument("program")
    i.add_argument("--json", action="store_true")
    i.set_defaults(fn=cmd_inspect)
    e = sub.add_parser("export-c", help="write a standalone C project (runtime + model)")
    e.add_argument("program")
    e.add_argument("--target", help="CPU flags for the Makefile (default: the program's CPU)")
    e.add_argument("-o", "--output", default="out")
    e.set_defaults(fn=cmd_export_c)
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except McutorchError as exc:
        print(f"mcutorch: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
