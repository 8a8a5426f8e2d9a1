"""`mcutorch export-c`: a C project to drop into a user's firmware (docs/firmware.md).

Every file and symbol of the model carries its name NAME (``--name``; by default the program's
file name, made a C identifier), so several models link into one firmware; the runtime and the
kernels are one shared library::

    out/
      mcutorch/           the runtime and every kernel: library target `mcutorch` (CMake, built
                          once however many models are added), include/, src/, kernels/
      NAME_program.c/.h   the program as a 16-byte aligned const array NAME_program (in flash)
      NAME_kernels.c      NAME_kernels: the kernel table of the kernels this model uses (only
                          those are linked: the static library adds the objects it references)
      NAME_config.h       arena bytes per region, state and stack bytes, I/O shapes and qparams
      NAME_io.c           NAME_quantize_input / NAME_dequantize_output (float <-> int8 I/O)
      NAME_binding.c      NAME_binding: the arenas (static arrays, NAME_ARENA<k>_SECTION places
                          them) and the views and kernel args of mt_bind_static as const tables
                          (flash): no state buffer in RAM (device/binding.py)
      main.c              an example: load, mt_bind_static, set input, invoke, read output
      CMakeLists.txt      target NAME (links mcutorch), Makefile + mcutorch.mk (arm-none-eabi-gcc)

The CPU flags (CMake's MCUTORCH_CPU_FLAGS, the Makefile's CPU_FLAGS) are the gcc flags of the
target the program records (CPU and feature switches: a ``cortex-m55+nomve`` program gets
``-mcpu=cortex-m55+nomve``, a ``cortex-m4+nofp`` one ``-mfloat-abi=soft``); the compile decided
them, export-c does not choose again.

Example:
    >>> export_c(mcutorch.load("kws.mtp").program, "out/kws")         # doctest: +SKIP
    >>> export_c(program, "out/", name="kws", target="m55")  # TargetError? # doctest: +SKIP
"""
from __future__ import annotations

import keyword
import math
import re
import shutil
from pathlib import Path

from mcutorch.device.binding import binding_source
from mcutorch.device.crt import core_sources, kernel_sources, state_size
from mcutorch.device.kernels import kernel_table_c
from mcutorch.device.paths import INCLUDE_DIRS, KERNELS, RUNTIME
from mcutorch.errors import TargetError, UsageError
from mcutorch.program.model import Port, Program
from mcutorch.quant import inverse_scale
from mcutorch.targets import Target, parse_target

C_KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto if "
    "inline int long register restrict return short signed sizeof static struct switch typedef "
    "union unsigned void volatile while _Bool _Complex _Imaginary main".split())


def used_kernels(program: Program) -> set[tuple[str, str]]:
    """(op, variant) pairs the program's ops need, and (op, kernels.INT16) for each op that runs
    on int16 activations (its int16 body links too)."""
    from mcutorch.device.kernels import INT16

    used = {(op.name, op.variant) for op in program.ops if op.name != "delegate"}
    return used | {(op.name, INT16) for op in program.ops if op.name != "delegate" and any(
        program.tensors[i].dtype == "int16" for i in (*op.inputs, *op.outputs))}


def default_name(text: str) -> str:
    """A C identifier made from a file or folder name: the default of ``--name``.

    >>> default_name("models/ds-cnn kws.mtp"), default_name("out/2nd"), default_name("int")
    ('ds_cnn_kws', 'm_2nd', 'int_model')
    """
    stem = Path(str(text)).name
    stem = stem[: -len(".mtp")] if stem.endswith(".mtp") else stem
    name = re.sub(r"[^0-9A-Za-z_]+", "_", stem).strip("_").lower() or "model"
    if name[0].isdigit():
        name = "m_" + name
    if name in C_KEYWORDS or keyword.iskeyword(name) or name.startswith("mt_"):
        name += "_model"
    return name


def check_name(name: str) -> str:
    """`name` if it can prefix the model's C symbols and files, else UsageError saying why."""
    if not re.fullmatch(r"[A-Za-z][0-9A-Za-z_]*", name or ""):
        raise UsageError(f"--name {name!r} is not a C identifier: use letters, digits and _, "
                         f"starting with a letter (e.g. --name {default_name(name or 'model')})")
    if name in C_KEYWORDS or name.lower().startswith("mt_") or name == "mcutorch":
        raise UsageError(f"--name {name!r} is reserved (a C keyword, main, mcutorch or the "
                         "runtime's mt_ prefix): choose another, e.g. --name "
                         f"{name.lower()}_model")
    return name


def program_files(name: str, data: bytes) -> tuple[str, str]:
    """NAME_program.c and NAME_program.h: the program as a 16-byte aligned const array, in
    .rodata (flash) unless NAME_PROGRAM_SECTION names a linker section."""
    up = name.upper()
    rows = [", ".join(f"0x{b:02x}" for b in data[i:i + 16]) for i in range(0, len(data), 16)]
    source = (f"/* {name}_program.c - the compiled mcutorch program (read in place). */\n"
              f'#include "{name}_program.h"\n\n'
              f"/* -D{up}_PROGRAM_SECTION='\".mt_data.DDR\"' puts it in that linker section */\n"
              f"#ifdef {up}_PROGRAM_SECTION\n"
              f"__attribute__((section({up}_PROGRAM_SECTION)))\n#endif\n"
              f"const uint8_t {name}_program[{up}_PROGRAM_SIZE] __attribute__((aligned(16))) = {{\n"
              + "".join(f"  {r},\n" for r in rows) + "};\n")
    header = (f"/* {name}_program.h - the compiled mcutorch program. */\n"
              f"#ifndef {up}_PROGRAM_H\n#define {up}_PROGRAM_H\n#include <stdint.h>\n"
              f"#define {up}_PROGRAM_SIZE {len(data)}u\n"
              f"extern const uint8_t {name}_program[{up}_PROGRAM_SIZE];\n#endif\n")
    return source, header


def _port_lines(up: str, kind: str, k: int, port: Port) -> list[str]:
    p = f"{up}_{kind}{k}"
    if port.is_ids:  # int32 token ids (format 1.6): copied in as they are, no helper
        return [f"#define {p}_BYTES {4 * math.prod(port.shape)}u /* int32 token ids "
                f"{list(port.shape)}, each in [0, {p}_IDS_BELOW): copy them into mt_input(&m, "
                f"{k})->data; mt_invoke returns MT_STATUS_BAD_INPUT for any other id */",
                f"#define {p}_IDS_BELOW {port.ids_below}"]
    lines = [f"#define {p}_BYTES {math.prod(port.shape)}u /* {port.dtype} {list(port.shape)}"
             f"{' NHWC' if len(port.shape) == 4 else ''}; float side {list(port.model_shape)}"
             f"{' NCHW' if port.nchw_as_nhwc else ''} */",
             f"#define {p}_SCALE {float(port.scale).hex()}f /* {port.scale!r} */"]
    if kind == "INPUT":
        inv = float(inverse_scale(port.scale)).hex()
        lines.append(f"#define {p}_INV_SCALE {inv}f /* float32(1 / scale) */")
    return lines + [f"#define {p}_ZERO_POINT {port.zero_point}"]


def _io_names(name: str, kind: str, k: int) -> str:
    fn = f"{name}_{'quantize_input' if kind == 'INPUT' else 'dequantize_output'}"
    return fn if k == 0 else f"{fn}{k}"


def config_header(name: str, program: Program) -> str:
    """NAME_config.h: memory and I/O of the compiled model, the I/O helpers' prototypes."""
    from mcutorch.device.stack import program_stack

    up = name.upper()
    stack = program_stack(program)
    lines = [f"/* {name}_config.h - memory and I/O of the compiled model (from the program). */",
             f"#ifndef {up}_CONFIG_H", f"#define {up}_CONFIG_H", "", "#include <stdint.h>",
             '#include "mcutorch.h"', "",
             f"extern const mt_kernel_table {name}_kernels; /* {name}_kernels.c */",
             f"extern const mt_static_binding {name}_binding; /* {name}_binding.c: arenas, "
             "views, kernel args */",
             f"#define {up}_STATE_SIZE {state_size(program)}u /* mt_state_size, 32-bit CPU: "
             f"only when binding at run time (mt_bind_state) instead of {name}_binding */",
             f"#define {up}_PERSISTENT_SIZE {program.persistent_size}u /* mt_persistent_size: "
             "the model's state, kept across invokes (0: stateless) */",
             f"#define {up}_STACK_BYTES {stack.bytes}u /* worst case of mt_load/mt_invoke at -Os:",
             f" * {' -> '.join(stack.chain)} (gcc call graph; an NPU driver adds its own) */",
             f"#define {up}_REGION_COUNT {len(program.regions)}u"]
    for i, r in enumerate(program.regions):
        lines.append(f"#define {up}_ARENA{i}_SIZE {r.size}u /* region {r.name}"
                     f"{f' @0x{r.base:08x}' if r.base is not None else ''} */")
        lines.append(f"#define {up}_ARENA{i}_ALIGN {max(16, r.alignment)}u")
        lines.append(f"#define {up}_ARENA{i}_NAME \"{r.name}\"")
    protos = []
    for kind, ports in (("INPUT", program.ports("inputs")), ("OUTPUT", program.ports("outputs"))):
        lines.append(f"#define {up}_{kind}_COUNT {len(ports)}u")
        for k, port in enumerate(ports):
            lines += _port_lines(up, kind, k, port)
            if port.is_ids:
                continue
            fn = _io_names(name, kind, k)
            protos.append(f"void {fn}(const float *x, int8_t *q);" if kind == "INPUT" else
                          f"void {fn}(const int8_t *q, float *x);")
    return "\n".join(lines + ["", IO_DOC % {"name": name}, *protos, "", "#endif", ""])


IO_DOC = """/* Float <-> int8 at the model boundary ({name}_io.c), exactly as PyTorch's converted
 * model computes it at its quantize_per_tensor / dequantize_per_tensor nodes (numerics.md):
 *   q = clamp(round_half_even(x * INV_SCALE) + ZERO_POINT, -128, 127)   (float32 throughout)
 *   x = (float)(q - ZERO_POINT) * SCALE
 * +-Inf saturates to 127 / -128; NaN (outside the domain) gives the zero point, the real 0.
 * The float side is the model's own layout (NCHW for images: the helper transposes), the int8
 * side the program's (NHWC): %(name)s_quantize_input(x, mt_input(&m, 0)->data) fills input 0;
 * input/output k > 0 has its own helper: %(name)s_quantize_input<k>, ..._dequantize_output<k>.
 */"""
IO_DOC = IO_DOC.replace("{name}", "%(name)s")


def io_source(name: str, program: Program) -> str:
    """NAME_io.c: the boundary conversion of every input and output (see IO_DOC)."""
    up = name.upper()
    parts = [f"/* {name}_io.c - float <-> int8 I/O of the model (see {name}_config.h). */",
             f'#include "{name}_config.h"', "", BOUNDARY_C]
    for kind, ports in (("INPUT", program.ports("inputs")), ("OUTPUT", program.ports("outputs"))):
        for k, port in enumerate(ports):
            if port.is_ids:
                continue
            p, fn = f"{up}_{kind}{k}", _io_names(name, kind, k)
            if port.nchw_as_nhwc:  # float [N, C, H, W] <-> int8 [N, H, W, C]
                n, c, h, w = port.model_shape
                index = f"nhwc_index(i, {c}u, {h * w}u)"
            else:
                index = "i"
            count = f"{p}_BYTES"
            if kind == "INPUT":
                body = f"q[{index}] = quantize(x[i], {p}_INV_SCALE, {p}_ZERO_POINT);"
                sig = f"void {fn}(const float *x, int8_t *q)"
            else:
                body = f"x[i] = dequantize(q[{index}], {p}_SCALE, {p}_ZERO_POINT);"
                sig = f"void {fn}(const int8_t *q, float *x)"
            parts.append(f"{sig}\n{{\n    for (uint32_t i = 0; i < {count}; i++) {{\n"
                         f"        {body}\n    }}\n}}\n")
    return "\n".join(parts)


# The float <-> int8 conversion at the program boundary, in C (docs/numerics.md, "Boundary
# conversion"): bit for bit what mcutorch.quant.quantize/dequantize and PyTorch's converted model
# compute. Round half to even without libm: adding and subtracting 1.5 * 2^23 rounds any
# |v| < 2^22 to an integer in the default rounding mode (IEEE float32 arithmetic, no -ffast-math).
BOUNDARY_C = """static inline int8_t quantize(float x, float inv_scale, int32_t zero_point)
{
    float v = x * inv_scale;
    if (!(v == v)) { /* NaN */
        v = 0.0f;
    }
    v = v > 1024.0f ? 1024.0f : (v < -1024.0f ? -1024.0f : v); /* clamps to int8 below anyway */
    v = (v + 12582912.0f) - 12582912.0f;                         /* round half to even */
    v += (float)zero_point;
    return (int8_t)(v > 127.0f ? 127.0f : (v < -128.0f ? -128.0f : v));
}

static inline float dequantize(int8_t q, float scale, int32_t zero_point)
{
    return (float)((int32_t)q - zero_point) * scale;
}

/* Element i of a float [N, C, H, W] array -> its place in the int8 [N, H, W, C] one. */
static inline uint32_t nhwc_index(uint32_t i, uint32_t c, uint32_t hw)
{
    uint32_t n = i / (c * hw), ch = i / hw % c, p = i % hw;
    return (n * hw + p) * c + ch;
}
"""


# main()'s start in an exported or standalone firmware: load the program and bind it with its
# ahead-of-time binding (NAME_binding.c: arenas, persistent buffer, views and kernel args); s is
# MT_STATUS_OK or why not.
LOAD_AND_BIND = """\
    static mt_model m;
    mt_status s = mt_load(&m, %(name)s_program, %(up)s_PROGRAM_SIZE, &%(name)s_kernels);
    if (s == MT_STATUS_OK) {
        s = mt_bind_static(&m, &%(name)s_binding); /* mt_reset(&m) restarts a stateful model */
    }
"""

FILL_FLOAT = """\
        static const float x[%(up)s_INPUT0_BYTES]; /* your input here (the model's layout) */
        %(name)s_quantize_input(x, (int8_t *)mt_input(&m, 0)->data);
"""
FILL_IDS = """        int32_t *ids = (int32_t *)mt_input(&m, 0)->data; /* int32 token ids */
        ids[0] = 0; /* your ids here, each in [0, %(up)s_INPUT0_IDS_BELOW) */
"""
MAIN_C = """/* main.c - run the exported model %(name)s once (an example to adapt: docs/firmware.md
 * in the mcutorch repository).
 *
 * The arenas are static arrays in %(name)s_binding.c; on a chip with several memory regions
 * put each in its own linker section with -D%(up)s_ARENA<k>_SECTION='".section"' (region
 * names and sizes: %(name)s_config.h). To place them at run time instead, bind a state buffer
 * of %(up)s_STATE_SIZE bytes and each arena (mt_bind_state, mt_bind_arena: mcutorch.h) in place
 * of mt_bind_static. Inputs and outputs are int8
 * NHWC: convert float data with %(name)s_quantize_input / %(name)s_dequantize_output, which
 * compute exactly what PyTorch's converted model does at its quantize / dequantize nodes.
 */
#include "%(name)s_config.h"
#include "%(name)s_program.h"

int main(void)
{
%(load)s    if (s == MT_STATUS_OK) {
%(fill)s        s = mt_invoke(&m);
    }
    if (s == MT_STATUS_OK) {
        static float y[%(up)s_OUTPUT0_BYTES];
        %(name)s_dequantize_output((const int8_t *)mt_output(&m, 0)->data, y);
        (void)y; /* your output here */
    }
    return (int)s;
}
"""

def load_and_bind(name: str) -> str:
    return LOAD_AND_BIND % {"name": name, "up": name.upper()}


MAKEFILE = """# Builds the exported model %(name)s with arm-none-eabi-gcc:  make [CPU_FLAGS="..."]
CC         = arm-none-eabi-gcc
# the gcc flags of the target the program was compiled for: %(target)s
CPU_FLAGS ?= %(cpu_flags)s
include mcutorch.mk
CFLAGS    += -std=c99 -Os -Wall -Wextra -ffunction-sections -fdata-sections $(CPU_FLAGS) \\
             $(MCUTORCH_INCLUDES)
LDFLAGS   += $(CPU_FLAGS) -Wl,--gc-sections --specs=nosys.specs --specs=nano.specs

model.elf: main.c $(%(up)s_SOURCES) $(MCUTORCH_SOURCES)
\t$(CC) $(CFLAGS) $^ $(LDFLAGS) -o $@

clean:
\trm -f model.elf
"""

MK = """# mcutorch.mk - include from your Makefile: the runtime and kernels (MCUTORCH_SOURCES: link
# with -Wl,--gc-sections, and only the kernels a model's table names stay) and model %(name)s's own
# files (%(up)s_SOURCES; another model's mcutorch.mk adds its own, the runtime is listed once).
%(up)s_DIR         := $(dir $(lastword $(MAKEFILE_LIST)))
MCUTORCH_DIR      ?= $(%(up)s_DIR)mcutorch
MCUTORCH_INCLUDES += -I$(MCUTORCH_DIR)/include -I$(MCUTORCH_DIR)/kernels -I$(%(up)s_DIR)
MCUTORCH_SOURCES  ?= %(sources)s
%(up)s_SOURCES     := $(addprefix $(%(up)s_DIR),%(own)s)
"""

LIB_CMAKE = """# The mcutorch C runtime and every int8 kernel: the static library `mcutorch`, built
# once for every model exported beside it (a model's kernel table pulls in its kernels only).
# The kernels' inline MVE assembly needs an optimised build (not -O0), whatever the build type.
set(MCUTORCH_OPT "-Os" CACHE STRING "optimisation flag of the mcutorch runtime and kernels")
add_library(mcutorch STATIC %(sources)s)
target_include_directories(mcutorch PUBLIC include kernels)
target_compile_features(mcutorch PRIVATE c_std_99)
target_compile_options(mcutorch PRIVATE ${MCUTORCH_CPU_FLAGS_LIST} ${MCUTORCH_OPT}
                       -ffunction-sections -fdata-sections)
"""

CMAKE = """# Model %(name)s: add_subdirectory(<this folder>), target_link_libraries(app %(name)s).
# Several models: add_subdirectory each; the runtime library `mcutorch` is built once.
cmake_minimum_required(VERSION 3.16)
project(%(name)s C)
# The CPU flags of the target the program was compiled for (%(target)s); your toolchain file
# must agree (same CPU, switches and float ABI), or set this to match it.
set(MCUTORCH_CPU_FLAGS "%(cpu_flags)s" CACHE STRING "CPU flags of the mcutorch programs")
separate_arguments(MCUTORCH_CPU_FLAGS_LIST UNIX_COMMAND "${MCUTORCH_CPU_FLAGS}")
if(NOT TARGET mcutorch)
  add_subdirectory(mcutorch ${CMAKE_BINARY_DIR}/mcutorch)
  set_property(GLOBAL PROPERTY MCUTORCH_TARGET "%(target)s")
endif()
get_property(mcutorch_target GLOBAL PROPERTY MCUTORCH_TARGET)
if(NOT mcutorch_target STREQUAL "%(target)s")
  message(FATAL_ERROR "model %(name)s was compiled for %(target)s, the mcutorch library is "
          "built for ${mcutorch_target}: compile every model of one firmware for one target")
endif()
# Linker section of the program array (empty: .rodata.%(name)s_program, i.e. flash)
set(%(up)s_PROGRAM_SECTION "" CACHE STRING "linker section of %(name)s_program")
add_library(%(name)s STATIC %(own)s)
target_include_directories(%(name)s PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(%(name)s PUBLIC mcutorch)
target_compile_features(%(name)s PRIVATE c_std_99)
target_compile_options(%(name)s PRIVATE ${MCUTORCH_CPU_FLAGS_LIST})
if(%(up)s_PROGRAM_SECTION)
  target_compile_definitions(%(name)s PRIVATE %(up)s_PROGRAM_SECTION="${%(up)s_PROGRAM_SECTION}")
endif()
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


def model_files(name: str, program: Program) -> dict[str, str]:
    """The model's own files (name -> text): program array, kernel table, config, I/O, its
    ahead-of-time binding."""
    data = program.stripped().to_bytes()
    source, header = program_files(name, data)
    table = kernel_table_c(used_kernels(program), table=f"{name}_kernels",
                           rows=f"{name}_kernel_rows", file=f"{name}_kernels.c")
    return {f"{name}_program.c": source, f"{name}_program.h": header,
            f"{name}_kernels.c": table, f"{name}_config.h": config_header(name, program),
            f"{name}_io.c": io_source(name, program),
            f"{name}_binding.c": binding_source(name, data, [r.size for r in program.regions],
                                                program.persistent_size)}


def _copy_library(lib: Path) -> list[str]:
    """The runtime and every kernel into `lib`; returns the sources relative to `lib`."""
    for sub in ("include", "src", "kernels"):
        (lib / sub).mkdir(parents=True, exist_ok=True)
    for d in (*INCLUDE_DIRS, RUNTIME / "port"):
        for h in d.glob("*.h"):
            shutil.copy2(h, lib / "include" / h.name)
    copied = []
    for src in core_sources():
        shutil.copy2(src, lib / "src" / src.name)
        copied.append(f"src/{src.name}")
    for src in (RUNTIME / "src").glob("*.h"):
        shutil.copy2(src, lib / "src" / src.name)
    for src in kernel_sources():
        shutil.copy2(src, lib / "kernels" / src.name)
        copied.append(f"kernels/{src.name}")
    for h in sorted(KERNELS.rglob("*.h")):  # shared and each family's private headers
        shutil.copy2(h, lib / "kernels" / h.name)
    return copied


def export_c(program: Program, out, target: str | Target | None = None,
             name: str | None = None) -> Path:
    """Write the C project of `program` into `out` (see the module docstring); returns `out`.

    `name` (default: `out`'s folder name made a C identifier, `default_name`) prefixes the
    model's files, symbols and CMake target; UsageError when it is not a usable C identifier.
    The CPU flags are the program's target's (`export_target`); `target`, when given, must be
    compatible with it (same CPU and switches) or TargetError is raised before anything is
    written."""
    tgt = export_target(program, target)
    out = Path(out)
    name = check_name(name if name is not None else default_name(out.resolve().name))
    library = _copy_library(out / "mcutorch")
    own = model_files(name, program)
    for file, text in own.items():
        (out / file).write_text(text)
    own_c = [f for f in own if f.endswith(".c")]
    up = name.upper()
    (out / "main.c").write_text(MAIN_C % {
        "name": name, "up": up, "load": load_and_bind(name),
        "fill": (FILL_IDS if program.ports("inputs")[0].is_ids else FILL_FLOAT) % {
            "name": name, "up": up}})
    mk_lib = [f"$(MCUTORCH_DIR)/{c}" for c in library]  # -Wl,--gc-sections drops the unused
    flags = " ".join(tgt.gcc_flags)
    fields = {"name": name, "up": up, "target": tgt.name, "cpu_flags": flags,
              "own": " ".join(own_c), "sources": " \\\n                     ".join(mk_lib)}
    (out / "mcutorch.mk").write_text(MK % fields)
    (out / "Makefile").write_text(MAKEFILE % fields)
    (out / "CMakeLists.txt").write_text(CMAKE % fields)
    (out / "mcutorch" / "CMakeLists.txt").write_text(LIB_CMAKE % {"sources": " ".join(library)})
    return out
