"""`mcutorch export-c`: a standalone C project for a user's firmware.

    out/
      mcutorch/include/   mcutorch.h, mt_kernel.h, mt_program.h, mt_port.h, kernel headers
      mcutorch/src/       runtime core (loader, validator, interpreter) and default port hooks
      mcutorch/kernels/   only the kernels this model uses + mt_kernels_model.c (its table)
      model_program.c/.h  the program file as a 16-byte aligned const array (lives in flash)
      model_config.h      arena bytes per memory region, state bytes, I/O shapes and qparams
      main.c              an example: load, bind state + arenas, set input, invoke, read output
      Makefile, CMakeLists.txt, mcutorch.mk

The Makefile's CPU_FLAGS are the gcc flags of the target the program records (CPU and feature
switches: a ``cortex-m55+nomve`` program gets ``-mcpu=cortex-m55+nomve``, a ``cortex-m4+nofp``
one ``-mfloat-abi=soft``); the compile decided them, export-c does not choose again.

Example:
    >>> export_c(mcutorch.load("kws.mtp").program, "out/")            # doctest: +SKIP
    >>> export_c(program, "out/", target="m55+nomve")  # a check, or TargetError # doctest: +SKIP
"""
from __future__ import annotations

import shutil
from pathlib import Path

from mcutorch.device.kernels import kernel_table_c, sources_for
from mcutorch.device.crt import core_sources, state_size
from mcutorch.device.paths import INCLUDE_DIRS, RUNTIME
from mcutorch.errors import TargetError
from mcutorch.program.model import Program
from mcutorch.quant import inverse_scale
from mcutorch.targets import Target, parse_target


def used_kernels(program: Program) -> set[tuple[str, str]]:
    """(op, variant) pairs the program's ops need."""
    return {(op.name, op.variant) for op in program.ops if op.name != "delegate"}


def _program_files(data: bytes) -> tuple[str, str]:
    rows = [", ".join(f"0x{b:02x}" for b in data[i:i + 16]) for i in range(0, len(data), 16)]
    source = ("/* model_program.c - the compiled mcutorch program (read in place). */\n"
              '#include "model_program.h"\n\n'
              "const uint8_t model_program[MODEL_PROGRAM_SIZE] __attribute__((aligned(16))) = {\n"
              + "".join(f"  {r},\n" for r in rows) + "};\n")
    header = ("/* model_program.h - the compiled mcutorch program. */\n#ifndef MODEL_PROGRAM_H\n"
              "#define MODEL_PROGRAM_H\n#include <stdint.h>\n"
              f"#define MODEL_PROGRAM_SIZE {len(data)}u\n"
              "extern const uint8_t model_program[MODEL_PROGRAM_SIZE];\n#endif\n")
    return source, header


def _config_header(program: Program) -> str:
    from mcutorch.device.stack import program_stack

    stack = program_stack(program)
    lines = ["/* model_config.h - memory and I/O of the compiled model (from the program). */",
             "#ifndef MODEL_CONFIG_H", "#define MODEL_CONFIG_H", "",
             f"#define MODEL_STATE_SIZE {state_size(program)}u /* mt_state_size, 32-bit CPU */",
             f"#define MODEL_STACK_BYTES {stack.bytes}u /* worst case of mt_load/mt_invoke at -Os:",
             f" * {' -> '.join(stack.chain)} (gcc call graph; an NPU driver adds its own) */",
             f"#define MODEL_REGION_COUNT {len(program.regions)}u"]
    for i, r in enumerate(program.regions):
        lines.append(f"#define MODEL_ARENA{i}_SIZE {r.size}u /* region {r.name}"
                     f"{f' @0x{r.base:08x}' if r.base is not None else ''} */")
        lines.append(f"#define MODEL_ARENA{i}_NAME \"{r.name}\"")
    for kind, idxs in (("INPUT", program.inputs), ("OUTPUT", program.outputs)):
        lines.append(f"#define MODEL_{kind}_COUNT {len(idxs)}u")
        for k, t in enumerate(program.tensors[i] for i in idxs):
            lines.append(f"#define MODEL_{kind}{k}_BYTES {t.nbytes}u /* {t.dtype} "
                         f"{list(t.shape)} NHWC */")
            lines.append(f"#define MODEL_{kind}{k}_SCALE {t.scale!r}f")
            if kind == "INPUT":
                inv = float(inverse_scale(t.scale)).hex()
                lines.append(f"#define MODEL_{kind}{k}_INV_SCALE {inv}f /* float32(1 / scale) */")
            lines.append(f"#define MODEL_{kind}{k}_ZERO_POINT {t.zero_point}")
    return "\n".join(lines + ["", BOUNDARY_C, "#endif", ""])


# The float <-> int8 conversion at the program boundary, in C (docs/numerics.md, "Boundary
# conversion"): bit for bit what mcutorch.quant.quantize/dequantize and PyTorch's converted model
# compute. Round half to even without libm: adding and subtracting 1.5 * 2^23 rounds any
# |v| < 2^22 to an integer in the default rounding mode (IEEE float32 arithmetic, no -ffast-math).
BOUNDARY_C = """/* Float <-> int8 at the model boundary, exactly as PyTorch's quantize_per_tensor
 * and dequantize_per_tensor compute them:
 *   q = clamp(round_half_even(x * INV_SCALE) + ZERO_POINT, -128, 127)   (float32 throughout)
 *   x = (float)(q - ZERO_POINT) * SCALE
 * e.g. in[i] = model_quantize(x[i], MODEL_INPUT0_INV_SCALE, MODEL_INPUT0_ZERO_POINT).
 * NaN is outside the domain (PyTorch's result is undefined); it gives the zero point here. */
#include <stdint.h>

static inline int8_t model_quantize(float x, float inv_scale, int32_t zero_point)
{
    float v = x * inv_scale;
    if (!(v == v)) {
        v = 0.0f;
    }
    v = v > 1024.0f ? 1024.0f : (v < -1024.0f ? -1024.0f : v); /* clamps to int8 below anyway */
    v = (v + 12582912.0f) - 12582912.0f;                         /* round half to even */
    v += (float)zero_point;
    return (int8_t)(v > 127.0f ? 127.0f : (v < -128.0f ? -128.0f : v));
}

static inline float model_dequantize(int8_t q, float scale, int32_t zero_point)
{
    return (float)((int32_t)q - zero_point) * scale;
}
"""


MAIN_C = """/* main.c - run the exported model once (an example to adapt).
 *
 * Arenas are static arrays here; on a chip with several memory regions put each in its own
 * linker section (region names and sizes: model_config.h). Inputs and outputs are int8 NHWC:
 * convert float data with model_quantize / model_dequantize (model_config.h), which compute
 * exactly what PyTorch's converted model does at its quantize / dequantize nodes.
 */
#include <string.h>

#include "mcutorch.h"
#include "mt_kernels.h"
#include "model_config.h"
#include "model_program.h"

static void *state[(MODEL_STATE_SIZE + sizeof(void *) - 1) / sizeof(void *)];
%(arenas)s
static void *const arena_ptr[] = {%(ptrs)s};
static const size_t arena_size[] = {%(sizes)s};

int main(void)
{
    static mt_model m;
    mt_status s = mt_load(&m, model_program, MODEL_PROGRAM_SIZE, &mt_kernels_model);
    if (s == MT_STATUS_OK) {
        s = mt_bind_state(&m, state, sizeof state);
    }
    for (uint32_t r = 0; s == MT_STATUS_OK && r < MODEL_REGION_COUNT; r++) {
        s = mt_bind_arena(&m, r, arena_ptr[r], arena_size[r]);
    }
    if (s == MT_STATUS_OK) {
        mt_tensor *x = mt_input(&m, 0);
        memset(x->data, 0, x->size); /* your input here */
        s = mt_invoke(&m);
    }
    if (s == MT_STATUS_OK) {
        const int8_t *y = (const int8_t *)mt_output(&m, 0)->data;
        (void)y; /* your output here */
    }
    return (int)s;
}
"""

MAKEFILE = """# Builds the exported model with arm-none-eabi-gcc:  make [CPU_FLAGS="..."]
CC         = arm-none-eabi-gcc
# the gcc flags of the target the program was compiled for: %(target)s
CPU_FLAGS ?= %(cpu_flags)s
include mcutorch.mk
CFLAGS    += -std=c99 -Os -Wall -Wextra -ffunction-sections -fdata-sections $(CPU_FLAGS) \\
             $(MCUTORCH_INCLUDES)
LDFLAGS   += $(CPU_FLAGS) -Wl,--gc-sections --specs=nosys.specs --specs=nano.specs

model.elf: main.c model_program.c $(MCUTORCH_SOURCES)
\t$(CC) $(CFLAGS) $^ $(LDFLAGS) -o $@

clean:
\trm -f model.elf
"""

MK = """# mcutorch.mk - include from your Makefile: adds the runtime and this model's kernels.
MCUTORCH_DIR      ?= $(dir $(lastword $(MAKEFILE_LIST)))mcutorch
MCUTORCH_INCLUDES := -I$(MCUTORCH_DIR)/include -I$(MCUTORCH_DIR)/kernels
MCUTORCH_SOURCES  := %(sources)s
"""

CMAKE = """# CMake: add_subdirectory(<this folder>) then target_link_libraries(app mcutorch_model)
cmake_minimum_required(VERSION 3.16)
project(mcutorch_model C)
# The CPU flags of the target the program was compiled for (%(target)s); your toolchain file
# must agree (same CPU, switches and float ABI), or set this to match it.
set(MCUTORCH_CPU_FLAGS "%(cpu_flags)s" CACHE STRING "CPU flags of the mcutorch program")
separate_arguments(MCUTORCH_CPU_FLAGS_LIST UNIX_COMMAND "${MCUTORCH_CPU_FLAGS}")
add_library(mcutorch_model STATIC model_program.c %(sources)s)
target_include_directories(mcutorch_model PUBLIC mcutorch/include mcutorch/kernels .)
target_compile_features(mcutorch_model PRIVATE c_std_99)
target_compile_options(mcutorch_model PRIVATE ${MCUTORCH_CPU_FLAGS_LIST})
"""


def export_target(program: Program, target: str | Target | None = None) -> Target:
    """The target an export of `program` is built for: the one the program records.

    `target` (``--target``) is a check, not a choice: it must be compatible with the program,
    meaning the same CPU and the same feature switches (the two decide the gcc flags and the
    ISA level the compile picked kernels for; short names and any order of the parts are
    fine). Its NPU, if it names one, must be the program's; without one it is accepted for an
    NPU program too (the NPU changes no compiler flag). Anything else, such as ``cortex-m55``
    for a ``cortex-m55+nomve`` program (MVE code for a core without MVE) or ``cortex-m7`` for a
    ``cortex-m4`` program, is refused with TargetError: recompile the model for that target.

    >>> from mcutorch.program.model import TargetInfo
    >>> p = Program(TargetInfo("cortex-m55", "dsp", switches=("nomve",)), [], [], [], [], [])
    >>> export_target(p).name, export_target(p, "m55+nomve").gcc_flags[0]
    ('cortex-m55+nomve', '-mcpu=cortex-m55+nomve')
    >>> export_target(p, "cortex-m55")
    Traceback (most recent call last):
    ...
    mcutorch.errors.TargetError: the program was compiled for cortex-m55+nomve, not cortex-m55: ...
    """
    own = program.target.as_target()
    if target is None:
        return own
    asked = parse_target(target)
    if (asked.cpu, asked.switches) != (own.cpu, own.switches) or asked.npu not in (None, own.npu):
        raise TargetError(
            f"the program was compiled for {own.name}, not {asked.name}: export-c builds a "
            f"program for the target it was compiled for (--target may only repeat its CPU and "
            f"switches); recompile the model with --target {asked.name}, or leave --target out")
    return own


def export_c(program: Program, out, target: str | Target | None = None) -> Path:
    """Write a standalone C project for `program` into `out` (see the module docstring).

    The Makefile's CPU flags are the program's target's (`export_target`); `target`, when
    given, must be compatible with it (same CPU and switches) or TargetError is raised before
    anything is written."""
    tgt = export_target(program, target)
    out = Path(out)
    lib = out / "mcutorch"
    for sub in ("include", "src", "kernels"):
        (lib / sub).mkdir(parents=True, exist_ok=True)
    for d in (*INCLUDE_DIRS, RUNTIME / "port"):
        for h in d.glob("*.h"):
            shutil.copy2(h, lib / "include" / h.name)
    copied = []
    for src in core_sources():
        shutil.copy2(src, lib / "src" / src.name)
        copied.append(f"mcutorch/src/{src.name}")
    for src in (RUNTIME / "src").glob("*.h"):
        shutil.copy2(src, lib / "src" / src.name)
    used = used_kernels(program)
    for src in sources_for(used):
        shutil.copy2(src, lib / "kernels" / src.name)
        copied.append(f"mcutorch/kernels/{src.name}")
    for h in sorted({h for src in sources_for(used) for h in src.parent.glob("*.h")}):
        shutil.copy2(h, lib / "kernels" / h.name)  # a family's private headers (next to its .c)
    (lib / "kernels" / "mt_kernels_model.c").write_text(kernel_table_c(used))
    copied.append("mcutorch/kernels/mt_kernels_model.c")
    source, header = _program_files(program.stripped().to_bytes())
    (out / "model_program.c").write_text(source)
    (out / "model_program.h").write_text(header)
    (out / "model_config.h").write_text(_config_header(program))
    n = len(program.regions)
    arenas = "\n".join(f"static uint8_t arena{i}[MODEL_ARENA{i}_SIZE + 1] "
                       f"__attribute__((aligned(16))); /* {r.name} */"
                       for i, r in enumerate(program.regions))
    (out / "main.c").write_text(MAIN_C % {
        "arenas": arenas, "ptrs": ", ".join(f"arena{i}" for i in range(n)) or "0",
        "sizes": ", ".join(f"MODEL_ARENA{i}_SIZE" for i in range(n)) or "0"})
    mk_sources = " \\\n                     ".join(f"$(MCUTORCH_DIR)/{c[len('mcutorch/'):]}"
                                                   for c in copied)
    (out / "mcutorch.mk").write_text(MK % {"sources": mk_sources})
    flags = " ".join(tgt.gcc_flags)
    (out / "Makefile").write_text(MAKEFILE % {"cpu_flags": flags, "target": tgt.name})
    (out / "CMakeLists.txt").write_text(CMAKE % {"sources": " ".join(copied), "cpu_flags": flags,
                                                 "target": tgt.name})
    return out

