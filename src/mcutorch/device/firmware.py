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

from mcutorch.device.kernels import kernel_table_c, sources_for
from mcutorch.device import paths
from mcutorch.device.crt import core_sources, firmware_defines, include_dirs, runner_sources
from mcutorch.device.export_c import used_kernels
from mcutorch.device.qemu import run_elf
from mcutorch.device.toolchain import build_elf
from mcutorch.errors import McutorchError
from mcutorch.program.model import Program

CACHE = paths.build_dir("firmware")


@dataclass
class BoardRun:
    """Outputs and instruction counts of one inference on an emulated board."""

    outputs: list[np.ndarray]
    instructions: int
    per_op: dict[int, int] = field(default_factory=dict)  # op index -> instructions (--profile)


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
    key = hashlib.sha256(repr((board, target.name, sorted(defines.items()), opt, table_c,
                               [p.read_bytes() for p in sources + include_files()])).encode())
    folder = CACHE / key.hexdigest()[:16]
    if out is None and (folder / "model.elf").exists():  # built, so build_elf accepted the pair
        return folder / "model.elf"
    work = Path(tempfile.mkdtemp(prefix="build-", dir=CACHE.mkdir(parents=True, exist_ok=True)
                                 or CACHE))
    table = work / "mt_kernels_model.c"
    table.write_text(table_c)
    # the table's temporary folder must not reach the debug info: same inputs, same ELF bytes
    elf = build_elf(sources + [table], include_dirs(), board, target, out or work / "model.elf",
                    defines=defines, opt=opt, extra_flags=[f"-ffile-prefix-map={work}=model"])
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


def runner_files(program: Program, inputs: list[np.ndarray]) -> tuple[dict[str, bytes], list[str]]:
    """The host files a runner firmware reads (program + int8 inputs) and its arguments."""
    files = {"model.mtp": program.to_bytes()}
    for i, x in enumerate(inputs):
        t = program.tensors[program.inputs[i]]
        x = np.ascontiguousarray(x, np.dtype(t.dtype))
        if x.shape != tuple(t.shape):
            raise McutorchError(f"input {i} must be {t.dtype}{list(t.shape)}, got {list(x.shape)}")
        files[f"in{i}.bin"] = x.tobytes()
    return files, ["model.mtp", *[f"in{i}.bin" for i in range(len(inputs))]]


def read_outputs(program: Program, folder: Path) -> list[np.ndarray]:
    """The runner's out<k>.bin files as int8 arrays of the program's output shapes."""
    outputs = []
    for k, idx in enumerate(program.outputs):
        t = program.tensors[idx]
        data = (Path(folder) / f"out{k}.bin").read_bytes()
        outputs.append(np.frombuffer(data, np.dtype(t.dtype)).reshape(t.shape).copy())
    return outputs


def run(program: Program, inputs: list[np.ndarray], board: str, profile: bool = False,
        elf: Path | None = None) -> BoardRun:
    """One inference of `program` on int8 NHWC `inputs` in QEMU's model of `board`.

    Without `elf`, builds (or reuses) the program's firmware, which checks the board; a given
    `elf` is checked against the program's target by `run_elf`."""
    target = None if elf is None else program.target.as_target()
    elf = elf or build(program, board, profile=profile)
    files, args = runner_files(program, inputs)
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in files.items():
            (Path(tmp) / name).write_bytes(data)
        result = run_elf(elf, board, args, cwd=tmp, target=target)
        if not result.ok:
            raise McutorchError(f"firmware run on {board} failed: {result.fault or ''}"
                                f"{result.stdout[-400:]}")
        outputs = read_outputs(program, Path(tmp))
    per_op = {int(label[2:]): n for label, n in (result.counts or {}).items()
              if label.startswith("op")}
    return BoardRun(outputs, int(result.instructions or 0), per_op)


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
