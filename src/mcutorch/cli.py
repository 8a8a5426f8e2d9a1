"""The `mcutorch` command.

    mcutorch compile model.py --target cortex-m55 -o model.mtp
    mcutorch compile model.py --target cortex-m55+ethos-u55-128 --board mps3-an547 -o npu.mtp
    mcutorch run model.mtp --input x.npy --output y.npy [--board mps3-an547 [--profile [--exact]]]
    mcutorch inspect model.mtp [--json]
    mcutorch build model.mtp --board mps3-an547 -o model.elf
    mcutorch build model.mtp --board mps3-an547 --standalone --input x.npy -o fw.elf
    mcutorch export-c model.mtp -o out/ [--name kws]
    mcutorch validate model.py --data test.npz [--board mps3-an547]
    mcutorch validate model.mtp --data test.npz [--model model.py] [--json]
    mcutorch analyze model.mtp [--board mps3-an547 [--clock-mhz 160]] [--json] [--html r.html]
                           [--model model.py [--plot errors.png]]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mcutorch.errors import (FileError, McutorchError, RunError, ToolchainError,
                             UsageError)
from mcutorch.ui.progress import configure, status

EPILOG = """\
exit status: 0 success; 2 mcutorch refused the command before doing the work (a usage error:
options that do not go together, a missing or unreadable file, an input of the wrong shape,
dtype or layout, a model it cannot compile, a program the board cannot run); 1 the work itself
failed (the C runtime or the firmware reported an error, a tool such as gcc or QEMU failed,
or an unexpected error). Errors are one line on stderr; --debug adds the traceback.
"""


DEFAULT_TARGET = "cortex-m55"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mcutorch")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "(source tree, not installed)"


def _boards() -> str:
    from mcutorch.device.boards import BOARDS

    return ", ".join(sorted(BOARDS))


def _source_line(exc: BaseException, path: Path) -> str:
    """' (line N)' of the deepest traceback frame inside `path`, or ''."""
    if isinstance(exc, SyntaxError) and exc.lineno:
        return f" (line {exc.lineno})"
    line, tb, target = None, exc.__traceback__, str(path.resolve())
    while tb is not None:
        if str(Path(tb.tb_frame.f_code.co_filename).resolve()) == target:
            line = tb.tb_lineno
        tb = tb.tb_next
    return f" (line {line})" if line else ""


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _existing_file(path, what: str) -> Path:
    """`path` as a Path, or FileError when it is missing or a folder."""
    path = Path(path)
    if path.is_dir():
        raise FileError(f"{what} {path} is a folder, not a file")
    if not path.exists():
        raise FileError(f"{what} {path} does not exist")
    return path


def _writable(path, what: str, folder: bool = False) -> Path:
    """An output path whose folder exists (checked before any work is done)."""
    path = Path(path)
    if folder:
        if path.exists() and not path.is_dir():
            raise FileError(f"{what} {path} is a file; give a folder to write the project into")
        parent = path.parent
    else:
        if path.is_dir():
            raise FileError(f"{what} {path} is a folder; give a file name, e.g. {path / 'out'}")
        parent = path.parent
    if not parent.is_dir():
        raise FileError(f"cannot write {what} {path}: folder {parent} does not exist "
                        f"(create it first: mkdir -p {parent})")
    return path


def _numpy_file_kind(path: Path) -> str | None:
    """"npy" or "npz" by the file's first bytes (numpy would try to unpickle anything else)."""
    try:
        with open(path, "rb") as f:
            magic = f.read(6)
    except OSError as e:
        raise FileError(f"cannot read {path}: {e.strerror or e}") from None
    return "npy" if magic == b"\x93NUMPY" else "npz" if magic[:2] == b"PK" else None


def _load_npy(path, what: str = "input file") -> np.ndarray:
    """A numeric array from a .npy file, or FileError saying what the file is instead."""
    path = _existing_file(path, what)
    kind = _numpy_file_kind(path)
    if kind == "npz":
        raise FileError(f"{what} {path} is an .npz archive; --input takes one .npy file per "
                        "model input (np.save)")
    if kind != "npy":
        raise FileError(f"{what} {path} is not a .npy file (no .npy header): save the input "
                        "with np.save(path, x)")
    try:
        data = np.load(path, allow_pickle=False)
    except ValueError as e:
        if "allow_pickle" in str(e):
            raise FileError(f"{what} {path} holds Python objects (an object array, which would "
                            "need allow_pickle): save a numeric array, e.g. "
                            "np.save(path, np.asarray(x, np.float32))") from None
        raise FileError(f"{what} {path} is not a .npy array file ({e})") from None
    except (OSError, EOFError) as e:
        raise FileError(f"{what} {path} is not a .npy array file "
                        f"({getattr(e, 'strerror', None) or e})") from None
    if data.dtype.kind not in "biufc":
        raise FileError(f"{what} {path} holds a {data.dtype} array "
                        f"({'strings' if data.dtype.kind in 'US' else 'not numbers'}); save the "
                        "numeric input, e.g. np.save(path, np.asarray(x, np.float32))")
    return data


def _load_model_file(path: Path):
    """Import a user's model file; it defines model(), example_inputs() and maybe calibration()."""
    path = _existing_file(path, "model file")
    if path.suffix != ".py":
        raise FileError(f"model file {path} is not a .py file: mcutorch compile takes a Python "
                        "file defining model() and example_inputs()")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent.resolve()))
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's code: name it, its file and line, in one line
        raise UsageError(f"importing model file {path} raised "
                         f"{_one_line(exc)}{_source_line(exc, path)}") from exc
    finally:
        sys.path.pop(0)
    for fn in ("model", "example_inputs"):
        if not callable(getattr(module, fn, None)):
            raise UsageError(f"{path} must define {fn}() (and optionally calibration())")
    return module


def _model_file(path, calibration_file=None):
    """(model, example inputs, calibration or None) of a model file: the calibration is
    --calibration's dataset if given, else the file's calibration(), else None."""
    path = Path(path)
    calibration = _calibration_from_npz(calibration_file) if calibration_file else None
    module = _load_model_file(path)
    model, example = _call(module, "model", path), _call(module, "example_inputs", path)
    if calibration is None and callable(getattr(module, "calibration", None)):
        calibration = _call(module, "calibration", path)
    return model, example, calibration


def _call(module, fn: str, path: Path):
    """module.fn(), with an exception in the user's code named in one line."""
    try:
        return getattr(module, fn)()
    except Exception as exc:
        raise UsageError(f"{fn}() in {path} raised {_one_line(exc)}"
                         f"{_source_line(exc, path)}") from exc


def _calibration_from_npz(path: str):
    """Calibration batches (one sample each) from a dataset file (mcutorch.analysis.dataset: x or
    x0, x1, ...; labels y are ignored)."""
    import torch

    from mcutorch.analysis.dataset import load_dataset

    data = load_dataset(path, "calibration file", labels=False)
    for k, a in enumerate(data.inputs):
        if a.dtype.kind not in "biuf":
            raise FileError(f"calibration file {path}: input {k} is {a.dtype}; expected numbers")
    return [tuple(torch.from_numpy(np.asarray(x)).float() for x in data.sample(i))
            for i in range(len(data))]


def cmd_compile(args) -> int:
    import mcutorch

    t0 = time.perf_counter()
    output = _writable(args.output, "output")
    from mcutorch.compiler import resolve_regions
    from mcutorch.targets import parse_target

    parse_target(args.target)  # target, board and memory checked before the slow part
    resolve_regions(args.board, args.memory)
    if args.emit_tosa and Path(args.emit_tosa).is_file():
        raise FileError(f"--emit-tosa {args.emit_tosa} is a file; give a folder")
    path = Path(args.model)
    model, example, calibration = _model_file(path, args.calibration)
    if calibration is None:
        print("warning: no calibration data; calibrating on the example inputs only "
              "(define calibration() or pass --calibration data.npz)", file=sys.stderr)
    with status(f"exporting and quantizing {path.name}"):
        qmodel = mcutorch.quantize(model, example, calibration=calibration, progress=True)
    options = {k: v for k, v in (("system_config", args.system_config),
                                 ("memory_mode", args.memory_mode)) if v}
    program = mcutorch.compile(qmodel, example, target=args.target, board=args.board,
                               memory=args.memory, name=Path(args.model).stem,
                               progress=True, verify=args.verify,
                               emit_tosa=args.emit_tosa, npu_fallback=args.npu_fallback,
                               npu_options=options or None, overlap=args.overlap)
    out = program.save(output)
    s = program.summary()
    ram = ", ".join(f"{k} {v:,} B" for k, v in s["regions"].items()) or "0 B"
    print(f"{out}: {s['ops']} ops, {s['program_bytes']:,} B program, RAM {ram} "
          f"(lower bound {s['lower_bound']:,} B) + C runtime state {s['state_bytes']:,} B "
          f"(bound ahead of time by export-c / build --standalone: "
          f"{s['static_binding']['ram']:,} B, tables {s['static_binding']['flash']:,} B in "
          f"flash), {time.perf_counter() - t0:.2f} s")
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
    cost = npu.get("fallback_cost")
    if npu.get("fallback") and cost:
        print(f"CPU fallback (runs when no NPU driver is linked): {cost['flash']:,} B of "
              f"constants, {cost['ram']:,} B of RAM beyond the NPU-only plan "
              "(--no-npu-fallback drops it)")


def cmd_run(args) -> int:
    import mcutorch
    from mcutorch.program.boundary import float_inputs

    if args.profile and not args.board:
        raise UsageError("--profile counts instructions on an emulated board: add --board "
                         "(e.g. --board mps3-an547)")
    if args.exact and not (args.board and args.profile):
        raise UsageError("--exact refines --profile on a --board run: add --board B --profile")
    if args.output:
        _writable(args.output, "--output")
    program = mcutorch.load(args.program)
    ports = program.ports("inputs")
    if len(args.input) != len(ports):
        raise UsageError(f"the model takes {len(ports)} input{'s' * (len(ports) != 1)} "
                         f"({', '.join(p.name for p in ports)}): give --input once per input, "
                         f"in that order (got {len(args.input)})")
    inputs = [_load_npy(p) for p in args.input]
    if args.board:
        from mcutorch.device.boards import require_can_run

        require_can_run(args.board, program.program.target.as_target())  # before any build
        if args.exact:
            from mcutorch.device.exact import profile_exact

            if args.int8:
                q = _int8(program, inputs)
            else:
                _, count = float_inputs(program.program, inputs, "mcutorch run")
                if count != 1:
                    raise UsageError(f"--exact profiles one inference; the input holds "
                                     f"{count}: give a batch-1 input, or drop --exact")
                q = program.quantize_inputs(inputs)
            prof = profile_exact(program.program, q, args.board)
            outputs, run = prof.outputs, _Counts(prof.total, prof.per_op, "exact (QEMU plugin)")
            if not args.int8:
                outputs = program.dequantize_outputs(outputs)
        else:
            if args.int8:
                outputs = program.run_on_board(inputs, args.board, profile=args.profile)
            else:
                outputs = _float_outputs(program.run(*inputs, board=args.board,
                                                     profile=args.profile))
            last = program.last_run
            run = _Counts(last.instructions, last.per_op,
                          "SysTick under -icount: resolution one tick, 31.25-50 instructions "
                          "depending on the board", last.per_inference)
        _print_counts(program, args.board, run)
    elif args.int8:
        outputs = program.run_int8(inputs)
    else:
        outputs = _float_outputs(program.run(*inputs))
    for i, y in enumerate(outputs):
        if args.output:
            stem = Path(args.output).with_suffix("")
            path = args.output if len(outputs) == 1 else f"{stem}_{i}.npy"
            np.save(path, y)
            print(f"output {i}: {y.dtype}{list(y.shape)} -> {path}")
        else:
            print(f"output {i}: {y.dtype}{list(y.shape)}\n{y}")
    return 0


def _int8(program, inputs):
    from mcutorch.program.boundary import int8_inputs

    return int8_inputs(program.program, inputs, "mcutorch run --int8")


def _float_outputs(result) -> list[np.ndarray]:
    outputs = [result] if not isinstance(result, tuple) else list(result)
    return [o.numpy() for o in outputs]


@dataclass
class _Counts:
    instructions: int
    per_op: dict
    how: str
    per_inference: list = field(default_factory=list)


def _print_counts(program, board: str, run: _Counts) -> None:
    if len(run.per_inference) > 1:
        each = ", ".join(f"{n:,}" for n in run.per_inference)
        print(f"{board}: {len(run.per_inference)} inferences in one run, instructions of each: "
              f"{each}" + ("; per op: the last one" if run.per_op else ""))
    else:
        print(f"{board}: {run.instructions:,} instructions per inference")
    if run.per_op:
        from mcutorch.ui.tables import add, show, table

        ops = table("#", "op", "instructions", "source", right=("#", "instructions"),
                    wrap=("source",))
        for i, n in sorted(run.per_op.items()):
            add(ops, i, program.program.ops[i].name, n, program.program.op_source(i))
        show([f"instructions per op ({run.how}):", ops])


def cmd_build(args) -> int:
    from mcutorch.device import firmware
    from mcutorch.device.stack import program_stack

    import mcutorch

    if not args.standalone and (args.input or args.int8 or args.name or args.source
                                or args.frames or args.reset_every):
        raise UsageError("--input, --int8, --name, --source, --frames and --reset-every are for "
                         "standalone firmware: "
                         "add --standalone (the default build reads its inputs from host files "
                         "at run time: mcutorch run --board)")
    if args.standalone and args.profile:
        raise UsageError("--profile counts through semihosting: drop --standalone, or --profile")
    out = _writable(args.output, "output")
    compiled = mcutorch.load(args.program)
    program = compiled.program
    if args.standalone:
        return _build_standalone(args, compiled, out)
    elf = firmware.build(program, args.board, out=out, profile=args.profile)
    split = firmware.flash_split(elf, program)
    stack = program_stack(program)
    print(f"{elf}: runtime core {split['runtime_core']:,} B, kernels {split['kernels']:,} B, "
          f"program {split['program']:,} B (flash); run it with mcutorch run --board")
    print(f"stack: the runtime needs at most {stack.describe()} (-Os, gcc call graph)")
    return 0


def _build_standalone(args, compiled, out: Path) -> int:
    from mcutorch.device import standalone
    from mcutorch.device.boards import require_can_run
    from mcutorch.device.export_c import check_name, default_name
    from mcutorch.device.stack import program_stack
    from mcutorch.device.toolchain import size_of

    program = compiled.program
    name = check_name(args.name or default_name(args.program))
    require_can_run(args.board, program.target.as_target())  # before any build
    inputs = frames = None
    if (args.frames or args.reset_every) and not args.input:
        raise UsageError("--frames and --reset-every run the --input arrays frame by frame: "
                         "give --input too")
    if args.reset_every and not args.frames:
        raise UsageError("--reset-every resets between frames: add --frames")
    if args.reset_every < 0:
        raise UsageError(f"--reset-every must be >= 0, got {args.reset_every}")
    if args.input:
        ports = program.ports("inputs")
        if len(args.input) != len(ports):
            raise UsageError(f"the model takes {len(ports)} input{'s' * (len(ports) != 1)}: "
                             f"give --input once per input, in order (got {len(args.input)})")
        arrays = [_load_npy(p) for p in args.input]
        read = (lambda a: _int8(compiled, a)) if args.int8 else compiled.quantize_inputs
        if args.frames:
            counts = {len(a) if a.ndim else 0 for a in arrays}
            if len(counts) != 1 or 0 in counts:
                raise UsageError("--frames: every --input needs the same number of frames along "
                                 f"its first axis (got {sorted(counts)})")
            frames = [read([a[f] for a in arrays]) for f in range(counts.pop())]
        else:
            inputs = read(arrays)
    elif args.int8:
        raise UsageError("--int8 says how to read --input: give --input too")
    sources = [_existing_file(s, "--source file") for s in args.source or []]
    elf = standalone.build(program, args.board, inputs, out=out, name=name, sources=sources,
                           frames=frames, reset_every=args.reset_every)
    size = size_of(elf)
    section = standalone.program_section(args.board) or ".rodata"
    print(f"{elf}: standalone firmware of {name} for {args.board}: code and constants "
          f"{size['text']:,} B, the program {len(program.stripped().to_bytes()):,} B (section "
          f"{section}), .data + .bss {size['data'] + size['bss']:,} B, arenas "
          f"{sum(r.size for r in program.regions):,} B in their regions; outputs on the UART")
    given = (f"{len(frames)} frames of --input" + (f", mt_reset every {args.reset_every}"
                                                   if args.reset_every else "")
             if frames is not None else "--input" if inputs is not None
             else "zero points (the real value 0)")
    print(f"inputs: {given}, "
          f"unless the firmware defines {name}_input(); stack: the runtime needs at most "
          f"{program_stack(program).describe()}")
    return 0


def _compiled_for_validate(args):
    """(program, float model, fake-quant model) for `validate`: a model file is quantized and
    compiled here (calibrating on calibration(), --calibration or the dataset's inputs)."""
    import mcutorch
    from mcutorch.analysis.dataset import load_dataset

    data = load_dataset(args.data)
    path = Path(args.model_or_program)
    if path.suffix == ".py":
        if args.model:
            raise UsageError("--model gives the float model of a program; MODEL_OR_PROGRAM is "
                             "already a model file (drop --model)")
        model, example, calibration = _model_file(path, args.calibration)
        if calibration is None:
            import torch

            calibration = [tuple(torch.from_numpy(np.asarray(x)).float() for x in
                                 data.sample(i)) for i in range(len(data))]
        with status(f"exporting and quantizing {path.name}"):
            qmodel = mcutorch.quantize(model, example, calibration=calibration, progress=True)
        with status(f"compiling for {args.target}"):
            program = mcutorch.compile(qmodel, example, target=args.target, name=path.stem)
        return program, model, qmodel, data
    if args.target != DEFAULT_TARGET or args.calibration:
        raise UsageError("--target and --calibration compile a model file; a program is "
                         "already compiled (give the model file as MODEL_OR_PROGRAM instead)")
    program = mcutorch.load(_existing_file(path, "program"))
    model = None
    if args.model:
        model = _model_file(args.model)[0]
    return program, model, None, data


def cmd_validate(args) -> int:
    from mcutorch.analysis.validate import parts, validate
    from mcutorch.ui.tables import show

    if args.board:
        from mcutorch.device.boards import get_board

        get_board(args.board)  # an unknown board is refused before the work
    program, model, qmodel, data = _compiled_for_validate(args)
    report = validate(program, data, model=model, qmodel=qmodel, board=args.board,
                      worst=args.worst, progress=True)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        show(parts(report))
    return 0


def cmd_inspect(args) -> int:
    from mcutorch.program.model import Program  # inspecting never imports torch
    from mcutorch.report import describe, parts
    from mcutorch.ui.tables import show

    info = describe(Program.load(args.program))
    if args.json:
        print(json.dumps(info, indent=1))
    else:
        show(parts(info))
    return 0


def cmd_export_c(args) -> int:
    from mcutorch.device.export_c import check_name, default_name, export_c

    import mcutorch

    name = check_name(args.name or default_name(args.program))
    folder = _writable(args.output, "output folder", folder=True)
    out = export_c(mcutorch.load(args.program).program, folder, target=args.target, name=name)
    print(f"{out}: model {name} ({name}_program.c, {name}_kernels.c, {name}_config.h, "
          f"{name}_io.c; CMake target {name}), the mcutorch library (runtime + kernels), an "
          f"example main.c; build: make -C {out}, or add_subdirectory({out}) in CMake")
    return 0


def cmd_analyze(args) -> int:
    from mcutorch.analysis import analyze, check_clock, parts
    from mcutorch.ui.tables import show

    clock = check_clock(args.clock_mhz)  # every option checked before the builds
    if clock is not None and not args.board:
        raise UsageError("--clock-mhz turns exact instruction counts into a time estimate: "
                         "add --board (e.g. --board mps3-an547)")
    if args.input and not (args.board or args.model):
        raise UsageError("--input feeds the counted inference (--board) or the error against "
                         "the float model (--model): add one of them")
    if args.calibration and not args.model:
        raise UsageError("--calibration goes with --model (the calibration the program was "
                         "compiled with)")
    html = _writable(args.html, "--html") if args.html else None
    if args.plot and not args.model:
        raise UsageError("--plot draws each op's error against the float model: add --model "
                         "(the model file the program was compiled from)")
    png = _writable(args.plot, "--plot") if args.plot else None
    if args.board:
        from mcutorch.device.boards import get_board

        get_board(args.board)
    from mcutorch.program.model import Program

    program = Program.load(args.program)
    inputs = [_load_npy(p) for p in args.input] if args.input else None
    model = example = calibration = None
    if args.model:
        model, example, calibration = _model_file(args.model, args.calibration)
    info = analyze(program, board=args.board, clock_mhz=clock, inputs=inputs, model=model,
                   example_inputs=example, calibration=calibration)
    if html is not None:
        from mcutorch.analysis.html import write_html

        write_html(info, html)
    if png is not None:
        from mcutorch.compare import plot_sensitivity

        rows = [{"layer": f"{o['index']} {o['op']}", "sqnr_db": o["error"]["sqnr_db"]
                 if o["error"]["sqnr_db"] is not None else math.inf,
                 "max_lsb": o["error"]["max_lsb"] or 0.0} for o in info["ops"] if o.get("error")]
        plot_sensitivity(rows, png, f"{info['model']}: program vs the float model, per op")
    if args.json:
        print(json.dumps(info, indent=1))
    else:
        show(parts(info) + ([f"HTML report: {html}"] if html is not None else [])
             + ([f"error plot: {png}"] if png is not None else []))
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="mcutorch", description="PyTorch models on Arm MCUs",
                                 epilog=EPILOG,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--debug", action="store_true",
                    help="show the Python traceback of an error (as well as its one line)")
    ap.add_argument("--quiet", action="store_true",
                    help="no progress bars or status lines (shown only on a terminal anyway)")
    ap.add_argument("--version", action="version", version=f"mcutorch {_version()}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the Python traceback of an error")
    common.add_argument("--quiet", action="store_true", default=argparse.SUPPRESS,
                        help="no progress bars or status lines")
    sub = ap.add_subparsers(dest="command", required=True)
    kw = {"parents": [common], "epilog": EPILOG,
          "formatter_class": argparse.RawDescriptionHelpFormatter}

    def command(name: str, text: str, fn):
        parser = sub.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".",
                                **kw)
        parser.set_defaults(fn=fn)
        return parser

    c = command("compile", "quantize and compile a model file to a program", cmd_compile)
    c.add_argument("model", help="a .py file defining model(), example_inputs(), calibration()")
    c.add_argument("--target", default=DEFAULT_TARGET,
                   help="e.g. cortex-m55 (default), cortex-m33+nodsp, cortex-m55+ethos-u55-128")
    c.add_argument("--board", help="memory map of a named board, e.g. mps3-an547")
    c.add_argument("--memory", help="memory regions, fastest first, e.g. DTCM:512K,SRAM:4M")
    c.add_argument("--calibration", help="dataset .npz of calibration inputs: x (or x0, x1, "
                   "...), samples on the first axis; labels y ignored (overrides calibration())")
    c.add_argument("-o", "--output", default="model.mtp",
                   help="the program file to write (default: model.mtp)")
    c.add_argument("--progress", action="store_true",
                   help="show progress even when stderr is not a terminal")
    c.add_argument("--verify", action=argparse.BooleanOptionalAction, default=True,
                   help="prove each Ethos-U subgraph's TOSA graph bit-exact against the Python "
                        "reference on the TOSA reference model (default: on)")
    c.add_argument("--emit-tosa", metavar="DIR",
                   help="write the TOSA flatbuffers (what Vela compiles) to DIR")
    c.add_argument("--no-npu-fallback", dest="npu_fallback", action="store_false",
                   help="leave out the CPU versions of Ethos-U delegates")
    c.add_argument("--no-overlap", dest="overlap", action="store_false",
                   help="plan no depthwise / 1x1 conv output over its own input")
    c.add_argument("--system-config", help="Vela system config (default per NPU family, e.g. "
                   "Ethos_U55_High_End_Embedded)")
    c.add_argument("--memory-mode", help="Vela memory mode (e.g. Shared_Sram)")
    r = command("run", "run a program: on the host with the Python reference runtime, or with "
                "--board with the C runtime on an emulated board (QEMU)", cmd_run)
    r.add_argument("program", help="a .mtp program (mcutorch compile)")
    r.add_argument("--input", action="append", required=True,
                   help=".npy input, one per model input in order (repeatable): float in the "
                        "model's layout (NCHW images); a batch runs inference by inference")
    r.add_argument("-o", "--output",
                   help=".npy file for the output (several outputs: NAME_<k>.npy); without it "
                        "the outputs are printed")
    r.add_argument("--int8", action="store_true",
                   help="inputs/outputs are the program's int8 NHWC (exactly its dtype and shape)")
    r.add_argument("--board", help="run with the C runtime on an emulated board (QEMU)")
    r.add_argument("--profile", action="store_true", help="instructions per op (with --board)")
    r.add_argument("--exact", action="store_true",
                   help="exact per-op counts with mcutorch's QEMU plugin (with --profile)")
    b = command("build", "link board firmware (runtime + the model's kernels)", cmd_build)
    b.add_argument("program", help="a .mtp program (mcutorch compile)")
    b.add_argument("--board", required=True, help=f"one of {_boards()}")
    b.add_argument("--profile", action="store_true", help="per-op instruction counts")
    b.add_argument("-o", "--output", default="model.elf",
                   help="the firmware ELF to write (default: model.elf)")
    b.add_argument("--standalone", action="store_true",
                   help="deployable firmware: the program linked in flash, inputs from C arrays "
                        "(or your NAME_input()), outputs printed on the board's UART, no "
                        "semihosting or host files (docs/firmware.md)")
    b.add_argument("--input", action="append",
                   help="with --standalone: .npy input the firmware runs on, one per model "
                        "input (float, the model's layout; default: zero points)")
    b.add_argument("--int8", action="store_true",
                   help="with --standalone: --input holds the program's int8 NHWC values")
    b.add_argument("--name", help="with --standalone: prefix of the model's C symbols "
                   "(default: the program's file name)")
    b.add_argument("--source", action="append",
                   help="with --standalone: a C file to link in, e.g. one defining NAME_input()")
    b.add_argument("--frames", action="store_true",
                   help="with --standalone and --input: each --input holds one input per invoke "
                        "along a new first axis (a streaming model's frames, run in order, the "
                        "state kept across them)")
    b.add_argument("--reset-every", type=int, default=0, metavar="K",
                   help="with --frames: mt_reset before every K-th invoke (default: never)")
    i = command("inspect", "ops, shapes, qparams, MACs, memory plan", cmd_inspect)
    i.add_argument("program", help="a .mtp program (full or stripped)")
    i.add_argument("--json", action="store_true", help="the same facts as JSON")
    e = command("export-c", "write a standalone C project (runtime + model)", cmd_export_c)
    e.add_argument("program", help="a .mtp program (mcutorch compile)")
    e.add_argument("--target", help="a check: the program's own target (same CPU and switches; "
                   "the Makefile's CPU flags always come from the program)")
    e.add_argument("-o", "--output", default="out",
                   help="the folder to write the C project into (default: out)")
    e.add_argument("--name", help="prefix of the model's files, C symbols and CMake target, a C "
                   "identifier (default: the program's file name, e.g. kws for kws.mtp)")
    v = command("validate", "accuracy of a program on a dataset, against its labels "
                "and the float and fake-quant models", cmd_validate)
    v.add_argument("model_or_program", metavar="MODEL_OR_PROGRAM",
                   help="a model file (.py: quantized and compiled here, then the float, "
                        "fake-quant and program outputs are compared) or a .mtp program")
    v.add_argument("--data", required=True,
                   help="dataset .npz: inputs x (or x0, x1, ...) and optional labels y, "
                        "samples on the first axis (docs/validate.md)")
    v.add_argument("--model", help="with a program: the model file of its float model, to "
                   "compare against")
    v.add_argument("--board", help="run the program with the C runtime on an emulated board "
                   "(the whole dataset in one QEMU run)")
    v.add_argument("--target", default=DEFAULT_TARGET,
                   help="with a model file: the target to compile for (default: cortex-m55)")
    v.add_argument("--calibration", help="with a model file: calibration dataset .npz "
                   "(default: calibration() of the model file, else the dataset's inputs)")
    v.add_argument("--worst", type=int, default=5, help="how many worst samples to list")
    v.add_argument("--json", action="store_true", help="the report as JSON")
    a = command("analyze", "per-layer report: kernels and ISA paths, MACs, bytes, arena "
                "offsets, placement, flash and RAM; with --board exact instructions", cmd_analyze)
    a.add_argument("program", help="a .mtp program (full or stripped)")
    a.add_argument("--board", help="count each op's instructions exactly on this emulated board "
                   "(QEMU plugin) and measure flash on its firmware build")
    a.add_argument("--clock-mhz", metavar="F", help="with --board: instructions / F as a time "
                   "estimate in microseconds (one instruction per cycle; not a measured time)")
    a.add_argument("--input", action="append", help="the .npy input (float, model layout) of "
                   "the counted inference (--board; default: seeded random int8) and of the "
                   "error against the float model (--model; default: its first calibration "
                   "batch)")
    a.add_argument("--model", metavar="FILE.py", help="the model file the program was "
                   "compiled from (model(), example_inputs(), calibration()): adds each op's "
                   "error against the float model")
    a.add_argument("--calibration", help=".npz of the calibration inputs the compile used "
                   "(with --model, when the compile took --calibration)")
    a.add_argument("--json", action="store_true", help="print the report as JSON")
    a.add_argument("--html", metavar="FILE", help="also write a self-contained HTML page with "
                   "the memory timeline and per-layer charts")
    a.add_argument("--plot", metavar="FILE.png", help="with --model: a PNG of each op's error "
                   "against the float model (SQNR in dB, max error in LSBs)")
    return ap


def main(argv=None) -> int:
    """Run the command; returns the exit status (see EPILOG). Errors are one line on stderr."""
    args = build_parser().parse_args(argv)
    configure(quiet=getattr(args, "quiet", False), force=getattr(args, "progress", False))
    try:
        return args.fn(args)
    except KeyboardInterrupt:
        print("mcutorch: interrupted", file=sys.stderr)
        return 130
    except McutorchError as exc:
        code, message, error = 1 if isinstance(exc, (RunError, ToolchainError)) else 2, \
            str(exc), exc
    except Exception as exc:  # noqa: BLE001 - a bug or a library error: one line, not a traceback
        code, message, error = 1, f"unexpected {_one_line(exc)}", exc
        if not args.debug:
            message += " (rerun with --debug for the traceback)"
    if args.debug:
        traceback.print_exception(error)
    print(f"mcutorch: error: {message}", file=sys.stderr)  # details (a memory map) may follow
    return code


if __name__ == "__main__":
    sys.exit(main())
