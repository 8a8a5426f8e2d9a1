"""Standalone firmware (`mcutorch build --standalone`): deployable, no debugger, no host files.

The firmware is the export-c files of the model (`export_c.model_files`: the program as a
16-byte aligned const array, its kernel table, config and I/O helpers) + the runtime and the
model's kernels + a generated ``main.c`` + ``boards/common`` built with ``-DMT_STANDALONE``
(console on the board's UART0, no semihosting call anywhere). Where things go:

- the program array: the section of the board's program region (the convention of the
  semihosting runner, `crt.firmware_defines`): ``.mt_data.<R>`` of the board's slowest region
  when it has several (DDR on mps3-an547), else ``.rodata`` in the code flash;
- arena k: a static array of ``NAME_binding.c`` (the ahead-of-time binding: views and kernel
  args as const tables, no state buffer; `mcutorch.device.binding`) in the board region of the
  program's region k (``.mt_bss.<R>``), or in ``.bss`` (the rank-0 RAM) when the board has no
  region of that name;
- inputs: ``NAME_input(k, data, size)``, a weak function whose default copies the C arrays of
  ``NAME_inputs.c`` (the ``--input`` values, else every input at its zero point: the real 0);
  an application defines its own ``NAME_input`` (a sensor, a file system) in a source it adds.

It prints on the UART, then halts (``mt_exit <status>``, boards/common/uart.h)::

    mt_status 0 ok
    mt_output 0 10
    -128 -3 27 ...          (the int8 values of output k, 16 a line)
    mt_exit 0

`run` runs it under QEMU and `parse_outputs` reads the outputs back.

    >>> elf = build(program, "mps2-an386", [x_int8], out="model.elf")  # doctest: +SKIP
    >>> outputs = run(program, elf, "mps2-an386")                      # doctest: +SKIP
"""
from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

from mcutorch.device.boards import get_board
from mcutorch.device.crt import core_sources, include_dirs
from mcutorch.device.export_c import check_name, load_and_bind, model_files, used_kernels
from mcutorch.device.kernels import sources_for
from mcutorch.device.qemu import run_uart
from mcutorch.device.toolchain import build_elf
from mcutorch.errors import InputError, RunError
from mcutorch.program import schema as S
from mcutorch.program.model import Program
from mcutorch.ui.progress import status

MAIN_C = """/* main.c - standalone firmware of model %(name)s on %(board)s (build --standalone).
 * The program is a const array (%(name)s_program.c), the inputs come from %(name)s_input(), the
 * outputs go to the board's UART ("mt_output <k> <bytes>", then the int8 values). */
#include <string.h>

#include "board.h"
#include "%(name)s_config.h"
#include "%(name)s_program.h"

/* %(name)s_inputs.c: every input of each invoke (frame f's input k at [f * inputs + k]), the
 * invokes to run and the reset period (0: never; k: mt_reset before every k-th invoke). */
extern const int8_t *const %(name)s_inputs[];
extern const uint32_t %(name)s_frames, %(name)s_reset_every;
static uint32_t frame; /* the invoke being prepared */

/* Input k of the inference (size bytes, the program's int8 NHWC). An application that reads a
 * sensor defines its own %(name)s_input; this default copies the frame's %(name)s_inputs. */
__attribute__((weak)) void %(name)s_input(uint32_t k, int8_t *data, size_t size)
{
    memcpy(data, %(name)s_inputs[frame * %(up)s_INPUT_COUNT + k], size);
}

static void print_int(int32_t v, const char *after)
{
    char buf[24];
    mt_console_write(mt_fmt_i32(buf, v));
    mt_console_write(after);
}

static void print_output(uint32_t k, const mt_tensor *y)
{
    const int8_t *v = (const int8_t *)y->data;
    mt_console_write("mt_output ");
    print_int((int32_t)k, " ");
    print_int((int32_t)y->rec->size, "\\n");
    for (size_t i = 0; i < y->rec->size; i++) {
        print_int(v[i], (i %% 16u == 15u || i + 1u == y->rec->size) ? "\\n" : " ");
    }
}

int main(void)
{
%(load)s    for (frame = 0; frame < %(name)s_frames; frame++) { /* a status and the outputs each */
        uint32_t every = %(name)s_reset_every;
        if (s == MT_STATUS_OK && every != 0 && frame != 0 && frame %% every == 0) {
            s = mt_reset(&m);
        }
        for (uint32_t k = 0; s == MT_STATUS_OK && k < mt_input_count(&m); k++) {
            mt_tensor *x = mt_input(&m, k);
            %(name)s_input(k, (int8_t *)x->data, x->rec->size);
        }
        if (s == MT_STATUS_OK) {
            s = mt_invoke(&m);
        }
        mt_console_write("mt_status ");
        print_int((int32_t)s, " ");
        mt_console_write(mt_status_name((int)s));
        mt_console_write("\\n");
        for (uint32_t k = 0; s == MT_STATUS_OK && k < mt_output_count(&m); k++) {
            print_output(k, mt_output(&m, k));
        }
        if (s != MT_STATUS_OK) {
            break;
        }
    }
    return (int)s;
}
"""


def arena_sections(name: str, program: Program, board) -> dict[str, str]:
    """-D values placing arena k of NAME_binding.c in the board region of the program's region k
    (``.mt_bss.<R>``); an arena whose region the board lacks stays in .bss (rank-0 RAM)."""
    names = {r.name for r in get_board(board).regions}
    return {f"{name.upper()}_ARENA{k}_SECTION": f'".mt_bss.{r.name}"'
            for k, r in enumerate(program.regions) if r.name in names}


def inputs_source(name: str, program: Program, inputs: Sequence[np.ndarray] | None,
                  frames: Sequence[Sequence[np.ndarray]] | None = None,
                  reset_every: int = 0) -> str:
    """NAME_inputs.c: one const int8 array per program input of each invoke (`frames`: a set
    per invoke; else one invoke of `inputs`, or of every input at its zero point), the number
    of invokes and the reset period."""
    ports = program.ports("inputs")
    if inputs is not None and frames is not None:
        raise InputError("give inputs (one invoke) or frames (one set per invoke), not both")
    sets = [inputs] if frames is None else list(frames)
    if not sets:
        raise InputError("frames: give at least one set of inputs")
    lines = [f"/* {name}_inputs.c - the inputs the standalone firmware runs on. */",
             "#include <stdint.h>", ""]
    refs = []
    for f, given in enumerate(sets):
        if given is not None and len(given) != len(ports):
            raise InputError(f"the program takes {len(ports)} inputs, got {len(given)}"
                             + (f" in frame {f}" if frames is not None else ""))
        for k, port in enumerate(ports):
            want = np.dtype(S.DTYPE_NUMPY[port.dtype])
            if given is None:
                x = np.full(port.shape, port.zero_point, want)
            else:
                x = np.asarray(given[k])
                if x.shape != port.shape or x.dtype != want:
                    raise InputError(f"{port.label}: expected {port.dtype} {list(port.shape)} "
                                     "(the program's int8 layout), got "
                                     f"{x.dtype}{list(x.shape)}")
            flat = [str(int(v)) for v in x.reshape(-1)]
            rows = [", ".join(flat[i:i + 16]) for i in range(0, len(flat), 16)]
            lines += [f"static const int8_t input{f}_{k}[{len(flat)}] = {{",
                      *(f"    {r}," for r in rows), "};"]
            refs.append(f"input{f}_{k}")
    if reset_every < 0:
        raise InputError(f"reset_every must be >= 0, got {reset_every}")
    table = f"const int8_t *const {name}_inputs[] = {{{', '.join(refs) or '0'}}};"
    return "\n".join(lines + [table, f"const uint32_t {name}_frames = {len(sets)}u;",
                              f"const uint32_t {name}_reset_every = {int(reset_every)}u;", ""])


def program_section(board) -> str | None:
    """The section of the program array on `board`: its slowest region's, when it has several."""
    b = get_board(board)
    return f".mt_data.{b.regions[-1].name}" if len(b.regions) > 1 else None


def build(program: Program, board: str, inputs: Sequence[np.ndarray] | None = None,
          out: str | Path = "model.elf", name: str = "model",
          sources: Sequence[str | Path] = (),
          frames: Sequence[Sequence[np.ndarray]] | None = None, reset_every: int = 0,
          opt: str = "-Os") -> Path:
    """Link standalone firmware of `program` for `board` into `out`; returns the ELF path.

    `inputs`: the program's int8 NHWC inputs the firmware runs on (default: zero points);
    `sources`: more C files to link, e.g. one defining ``NAME_input`` (`name`: the prefix of the
    model's files and symbols, as with export-c). `frames`: instead of `inputs`, one input set
    per invoke, run in order (a streaming model's frames; its state is kept across them), with
    mt_reset before every `reset_every`-th; the firmware prints a status and the outputs after
    each (`parse_frames`). `opt`: the gcc optimisation of the whole firmware. The target is the
    program's own (TargetError when the board cannot
    run it)."""
    name = check_name(name)
    target = program.target.as_target()
    work = Path(tempfile.mkdtemp(prefix="standalone-"))
    try:
        files = model_files(name, program)
        files[f"{name}_inputs.c"] = inputs_source(name, program, inputs, frames, reset_every)
        files["main.c"] = MAIN_C % {"name": name, "up": name.upper(), "board": board,
                                    "load": load_and_bind(name)}
        for file, text in files.items():
            (work / file).write_text(text)
        defines: dict[str, object] = {"MT_STANDALONE": None,
                                      **arena_sections(name, program, board)}
        section = program_section(board)
        if section:
            defines[f"{name.upper()}_PROGRAM_SECTION"] = f'"{section}"'
        own = [work / f for f in files if f.endswith(".c")]
        srcs = [*core_sources(), *sources_for(used_kernels(program)), *own, *map(Path, sources)]
        with status(f"building standalone firmware for {board} ({len(srcs)} C files, "
                    "arm-none-eabi-gcc)"):
            return build_elf(srcs, [*include_dirs(), work], board, target, out,
                             defines=defines, opt=opt,
                             extra_flags=[f"-ffile-prefix-map={work}=model"])
    finally:
        shutil.rmtree(work, ignore_errors=True)


_OUTPUT_RE = re.compile(r"^mt_output (\d+) (\d+)\r?$", re.M)


def parse_outputs(program: Program, console: str) -> list[np.ndarray]:
    """The outputs a standalone firmware printed, as int8 arrays of the program's shapes."""
    outs = []
    heads = list(_OUTPUT_RE.finditer(console))
    for k, idx in enumerate(program.outputs):
        t = program.tensors[idx]
        head = next((h for h in heads if int(h.group(1)) == k), None)
        if head is None or int(head.group(2)) != t.numel:
            raise RunError(f"the firmware printed no output {k} of {t.numel} values:\n{console}")
        values = console[head.end():].split()[:t.numel]
        outs.append(np.array([int(v) for v in values], np.int8).reshape(t.shape))
    return outs


def parse_frames(program: Program, console: str) -> list[list[np.ndarray]]:
    """The outputs of every invoke of a `frames` firmware: one list per ``mt_status 0`` line."""
    parts = re.split(r"^mt_status ", console, flags=re.M)[1:]
    if not parts or any(not p.startswith("0 ") for p in parts):
        raise RunError(f"the firmware reported a failed invoke:\n{console}")
    return [parse_outputs(program, p) for p in parts]


def run(program: Program, elf: str | Path, board: str, timeout: float = 60.0) -> list[np.ndarray]:
    """Run standalone firmware under QEMU (console: the UART) and return its outputs; RunError
    when it does not end with ``mt_exit 0``."""
    with status(f"running standalone firmware on {board} (QEMU, UART console)"):
        r = run_uart(elf, board, timeout=timeout, target=program.target.as_target())
    if not r.ok:
        raise RunError(f"standalone firmware on {board}: "
                       f"{'timed out' if r.timed_out else r.fault or f'exit {r.exit_code}'}\n"
                       f"{r.stdout}{r.stderr}")
    return parse_outputs(program, r.stdout)


__all__ = ["build", "run", "parse_outputs", "parse_frames", "inputs_source", "program_section",
           "arena_sections"]
