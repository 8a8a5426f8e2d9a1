"""Firmware for emulated boards: build a program's runner ELF and run inferences in QEMU.

The ELF holds the runtime core, only the kernels the program uses (selective build, the
compiler's kernel table) and the runner; the program and its int8 inputs travel as host files
through semihosting, so one firmware serves many inputs. Instruction counts come from SysTick
under `-icount shift=0` (exact to about one tick; device/boards.py gives instructions per tick).
"""
from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mcutorch.device import paths
from mcutorch.device.boards import get_board
from mcutorch.device.crt import (core_sources, firmware_defines, include_dirs, runner_failure,
                                 runner_sources)
from mcutorch.device.export_c import used_kernels
from mcutorch.device.kernels import kernel_table_c, sources_for
from mcutorch.device.qemu import run_elf
from mcutorch.device.toolchain import build_elf
from mcutorch.errors import InputError, RunError
from mcutorch.program import schema as S
from mcutorch.program.model import Program
from mcutorch.ui.progress import status

CACHE = paths.build_dir("firmware")


@dataclass
class BoardRun:
    """Outputs and instruction counts of a run on an emulated board: `outputs` mirrors the
    inputs given to `run` (one inference: a list of arrays; several: one such list each).
    `instructions` and `per_op` are those of the run's last inference, `per_inference` lists
    every inference's total."""

    outputs: list
    instructions: int
    per_op: dict[int, int] = field(default_factory=dict)  # op index -> instructions (--profile)
    per_inference: list[int] = field(default_factory=list)


def build(program: Program, board: str, out: Path | None = None, profile: bool = False,
          opt: str = "-Os") -> Path:
    """Link the runner firmware for `program` on `board` (cached by content); returns the ELF.

    The firmware is built for the target the program records (`program.target.as_target()`:
    CPU, feature switches, so a ``cortex-m4+nofp`` program gets ``-mfloat-abi=soft``), not for
    the board's CPU; `toolchain.build_elf` refuses (TargetError, `boards.can_run`) a board that
    cannot run it. Example:
        >>> elf = build(mcutorch.load("kws.mtp").program, "mps3-an547")
    """
    target = program.target.as_target()
    used = used_kernels(program)
    defines = {**firmware_defines(program, board), "MT_RUN_MODEL_KERNELS": None}
    if profile:
        defines["MT_PROFILE"] = None
    table_c = kernel_table_c(used)
    sources = core_sources() + runner_sources(board=True) + sources_for(used)
    common = sorted((paths.BOARDS / "common").glob("*.[ch]"))  # start-up, semihosting, counter
    key = hashlib.sha256(repr((board, target.name, sorted(defines.items()), opt, table_c,
                               [p.read_bytes() for p in sources + include_files() + common]))
                         .encode())
    folder = CACHE / key.hexdigest()[:16]
    if out is None and (folder / "model.elf").exists():  # built, so build_elf accepted the pair
        return folder / "model.elf"
    work = Path(tempfile.mkdtemp(prefix="build-", dir=CACHE.mkdir(parents=True, exist_ok=True)
                                 or CACHE))
    table = work / "mt_kernels_model.c"
    table.write_text(table_c)
    # the table's temporary folder must not reach the debug info: same inputs, same ELF bytes
    with status(f"building firmware for {board} ({len(sources) + 1} C files, arm-none-eabi-gcc)"):
        elf = build_elf(sources + [table], include_dirs(), board, target,
                        out or work / "model.elf", defines=defines, opt=opt,
                        extra_flags=[f"-ffile-prefix-map={work}=model"])
    if out is not None:
        shutil.rmtree(work, ignore_errors=True)
        return elf
    try:  # publish atomically: a parallel build of the same firmware may have won
        work.rename(folder)
    except OSError:
        shutil.rmtree(work, ignore_errors=True)
    return folder / "model.elf"


def include_files() -> list[Path]:
    """Every header a build may read: the include dirs' and each kernel family's own."""
    family = paths.KERNELS.glob("*/*.h")
    return sorted({*(p for d in include_dirs() for p in d.glob("*.h")), *family})


def _nested(inputs) -> bool:
    """True for a list of input sets, False for one set (a list of arrays)."""
    return bool(inputs) and all(isinstance(x, (list, tuple)) for x in inputs)


def _as_sets(inputs) -> list[list[np.ndarray]]:
    return [list(x) for x in inputs] if _nested(inputs) else [list(inputs)]


def runner_files(program: Program, inputs) -> tuple[dict[str, bytes], list[str]]:
    """The host files a runner firmware reads (program + int8 inputs) and its arguments.

    `inputs`: one inference's int8 NHWC arrays, or a list of such lists: then in<k>.bin holds
    every set's input k back to back and the runner (`-n COUNT`) runs them all in one go."""
    sets = _as_sets(inputs)
    files = {"model.mtp": program.to_bytes()}
    for i, idx in enumerate(program.inputs):
        t = program.tensors[idx]
        want = np.dtype(S.DTYPE_NUMPY[t.dtype])
        data = []
        for xs in sets:
            if len(xs) != len(program.inputs):
                raise InputError(f"the program takes {len(program.inputs)} inputs, got "
                                 f"{len(xs)}")
            x = np.asarray(xs[i])
            if x.shape != tuple(t.shape) or x.dtype != want:
                raise InputError(f"input {i} must be {t.dtype}{list(t.shape)}, got "
                                 f"{x.dtype}{list(x.shape)}")
            data.append(np.ascontiguousarray(x).tobytes())
        files[f"in{i}.bin"] = b"".join(data)
    args = ["model.mtp", *[f"in{i}.bin" for i in range(len(program.inputs))]]
    return files, args + (["-n", str(len(sets))] if len(sets) > 1 else [])


def read_outputs(program: Program, folder: Path) -> list[np.ndarray]:
    """The runner's out<k>.bin files as int8 arrays of the program's output shapes."""
    return read_output_sets(program, folder, 1)[0]


def read_output_sets(program: Program, folder: Path, count: int) -> list[list[np.ndarray]]:
    """The out<k>.bin files of a `-n count` run: one list of outputs per inference."""
    data = [(Path(folder) / f"out{k}.bin").read_bytes() for k in range(len(program.outputs))]
    sets = []
    for j in range(count):
        outs = []
        for k, idx in enumerate(program.outputs):
            t = program.tensors[idx]
            a = np.frombuffer(data[k], np.dtype(S.DTYPE_NUMPY[t.dtype]))
            n = t.numel
            outs.append(a[j * n:(j + 1) * n].reshape(t.shape).copy())
        sets.append(outs)
    return sets


def run(program: Program, inputs, board: str, profile: bool = False,
        elf: Path | None = None, reset_every: int = 0) -> BoardRun:
    """Inferences of `program` on int8 NHWC `inputs` in QEMU's model of `board`: one
    inference's arrays, or a list of such lists, which all run in one QEMU run (the runner
    loops; outputs come back the same way). RunError when the firmware fails.

    Without `elf`, builds (or reuses) the program's firmware, which checks the board; a given
    `elf` is checked against the program's target by `run_elf`. A stateful program keeps its
    state across the inferences; `reset_every` k > 0 resets it before every k-th (mt_reset)."""
    target = None if elf is None else program.target.as_target()
    elf = elf or build(program, board, profile=profile)
    sets = _as_sets(inputs)
    files, args = runner_files(program, sets)
    if reset_every:
        args += ["-r", str(int(reset_every))]
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in files.items():
            (Path(tmp) / name).write_bytes(data)
        with status(f"running {len(sets)} inference(s) on {board} (QEMU)"):
            result = run_elf(elf, board, args, cwd=tmp, target=target,
                             timeout=30.0 * len(sets))
        if not result.ok:
            why = ("timed out (QEMU killed)" if result.timed_out else
                   f"faulted: {result.fault}" if result.fault else
                   runner_failure(result.exit_code, result.stdout, result.stderr))
            raise RunError(f"firmware run on {board} failed: {why}")
        outputs = read_output_sets(program, Path(tmp), len(sets))
    per_op = {int(label[2:]): n for label, n in (result.counts or {}).items()
              if label.startswith("op")}
    ipt = get_board(board).instructions_per_tick
    totals = [round(int(m.group(1)) * ipt)
              for m in re.finditer(r"^mt_ticks (\d+)\s*$", result.stdout, re.M)]
    return BoardRun(outputs if _nested(inputs) else outputs[0], int(result.instructions or 0),
                    per_op, totals)


def flash_split(elf: Path, program: Program) -> dict[str, int]:
    """Flash bytes (text + rodata kept after --gc-sections, from the linker map) of the runtime
    core (loader, validator, interpreter, CRC, hooks), of the kernels, and of the program."""
    used = used_kernels(program)
    groups = {"runtime_core": core_sources(),
              "kernels": sources_for(used) + [Path("mt_kernels_model.c")]}
    by_object: dict[str, list[tuple[str, int]]] = {}
    for section, size, obj in _map_sections(Path(elf).with_suffix(".map")):
        by_object.setdefault(obj, []).append((section, size))
    sizes = {}
    for group, sources in groups.items():
        names = {n for src in sources for n in _defined_names(src)}
        sizes[group] = sum(size for sections in by_object.values()
                           if any(sec.split(".")[2:3] and sec.split(".")[2] in names
                                  for sec, _ in sections)
                           for sec, size in sections if sec.startswith((".text", ".rodata")))
    return {**sizes, "program": len(program.to_bytes())}


def _defined_names(source: Path) -> set[str]:
    """Global mt_* names a C file defines (function definitions start in column 0)."""
    if source.name == "mt_kernels_model.c":
        return {"mt_kernels_model", "mt_model_rows"}
    text = source.read_text()
    return set(re.findall(r"^(?!static)[A-Za-z_][\w\s\*]*?\b(mt_\w+)\s*\(", text, re.M))


def _map_sections(path: Path):
    """(input section, size, object) for every input section the linker kept."""
    text = path.read_text(errors="replace").split("Linker script and memory map", 1)[-1]
    joined = re.sub(r"^ (\.[\w.$]+)\n\s+", r" \1 ", text, flags=re.M)
    pattern = re.compile(r"^ (\.[\w.$]+)\s+0x[0-9a-f]+\s+0x([0-9a-f]+)\s+(\S+)$", re.M)
    for section, size, obj in pattern.findall(joined):
        yield section, int(size, 16), obj
