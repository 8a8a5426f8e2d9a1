"""`mcutorch export-c` writes a project that builds standalone with arm-none-eabi-gcc."""
from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np

import pytest
import torch
from torch import nn

import mcutorch
from mcutorch.cli import main
from mcutorch.device.kernels import KERNELS

pytestmark = pytest.mark.qemu


def test_export_c_builds_standalone(tmp_path, capsys):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(8 * 4 * 4, 5), nn.Softmax(-1)).eval()
    x = torch.randn(1, 3, 8, 8)
    program = mcutorch.compile(mcutorch.quantize(model, (x,), calibration=[x]), (x,),
                               target="cortex-m55", board="mps3-an547")
    mtp = program.save(tmp_path / "my-cnn.mtp")
    out = tmp_path / "out"
    assert main(["export-c", str(mtp), "-o", str(out)]) == 0
    assert "model my_cnn" in capsys.readouterr().out  # the name comes from the program's file
    assert {p.name for p in out.glob("my_cnn_*")} == {
        "my_cnn_program.c", "my_cnn_program.h", "my_cnn_kernels.c", "my_cnn_config.h",
        "my_cnn_io.c", "my_cnn_binding.c"}
    table = (out / "my_cnn_kernels.c").read_text()
    used = set(re.findall(r"\b(mt_\w+_s8)\b", table))
    assert used == {"mt_conv2d_s8", "mt_fully_connected_folded_s8", "mt_max_pool2d_s8",
                    "mt_softmax_s8"}  # only what the model uses
    config = (out / "my_cnn_config.h").read_text()
    assert "MY_CNN_ARENA0_SIZE" in config and "DTCM" in config
    r = subprocess.run(["make", "-C", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    linked = subprocess.run(["arm-none-eabi-nm", str(out / "model.elf")], capture_output=True,
                            text=True, check=True).stdout
    assert set(re.findall(r" T (mt_\w+_s8)$", linked, re.M)) & KERNEL_NAMES == used
    r = subprocess.run(["make", "-C", str(out), "clean", "model.elf",
                        "CPU_FLAGS=-mcpu=cortex-m0plus -mthumb"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


KERNEL_NAMES = {k.function for k in KERNELS.values()}

APP_C = """/* Two exported models in one firmware: each loaded, run and printed on the UART. */
#include <string.h>

#include "board.h"
#include "cnn_config.h"
#include "cnn_program.h"
#include "tiny_config.h"
#include "tiny_program.h"

static void *tiny_state[TINY_STATE_SIZE / 4 + 1]; /* cnn: bound ahead of time (cnn_binding.c) */
static uint8_t tiny_arena[TINY_ARENA0_SIZE] MT_REGION_BSS("data");
static float x[CNN_INPUT0_BYTES], y[CNN_OUTPUT0_BYTES], u[TINY_INPUT0_BYTES], v[TINY_OUTPUT0_BYTES];

static void print_floats(const char *what, const float *f, unsigned n)
{
    char buf[12];
    mt_console_write(what);
    for (unsigned i = 0; i < n; i++) { /* the bits of each float: compared exactly */
        uint32_t bits;
        memcpy(&bits, &f[i], sizeof bits);
        mt_console_write(" ");
        mt_console_write(mt_fmt_hex32(buf, bits));
    }
    mt_console_write("\\n");
}

static int run(mt_model *m, const uint8_t *program, size_t size, const mt_kernel_table *kernels,
               void *state, size_t state_size, void *arena, size_t arena_size)
{
    int s = mt_load(m, program, size, kernels);
    s = s ? s : mt_bind_state(m, state, state_size);
    return s ? s : mt_bind_arena(m, 0, arena, arena_size);
}

int main(void)
{
    static mt_model a, b;
    int s = mt_load(&a, cnn_program, CNN_PROGRAM_SIZE, &cnn_kernels);
    s = s ? s : mt_bind_static(&a, &cnn_binding);
    s = s ? s : run(&b, tiny_program, TINY_PROGRAM_SIZE, &tiny_kernels, tiny_state,
                    sizeof tiny_state, tiny_arena, sizeof tiny_arena);
    for (unsigned i = 0; i < CNN_INPUT0_BYTES; i++) {
        x[i] = (float)((int)(i * 7u % 23u) - 11) / 8.0f; /* the test computes the same */
    }
    for (unsigned i = 0; i < TINY_INPUT0_BYTES; i++) {
        u[i] = (float)((int)(i * 5u % 17u) - 8) / 4.0f;
    }
    if (s == 0) {
        cnn_quantize_input(x, (int8_t *)mt_input(&a, 0)->data);
        tiny_quantize_input(u, (int8_t *)mt_input(&b, 0)->data);
        s = mt_invoke(&a);
        s = s ? s : mt_invoke(&b);
    }
    if (s == 0) {
        cnn_dequantize_output((const int8_t *)mt_output(&a, 0)->data, y);
        tiny_dequantize_output((const int8_t *)mt_output(&b, 0)->data, v);
        print_floats("cnn", y, CNN_OUTPUT0_BYTES);
        print_floats("tiny", v, TINY_OUTPUT0_BYTES);
    }
    return s;
}
"""

APP_CMAKE = """cmake_minimum_required(VERSION 3.16)
project(app C)
add_subdirectory(models/cnn)
add_subdirectory(models/tiny)
separate_arguments(CPU UNIX_COMMAND "${MCUTORCH_CPU_FLAGS}")  # the models' target's flags
set(B %(boards)s)
add_executable(app.elf main.c ${B}/startup.c ${B}/semihost.c ${B}/counter.c ${B}/uart.c)
target_include_directories(app.elf PRIVATE ${B})
target_compile_definitions(app.elf PRIVATE MT_STANDALONE MT_UART_BASE=0x%(uart)xu)
target_compile_options(app.elf PRIVATE ${CPU} -Os)
target_link_options(app.elf PRIVATE ${CPU} -nostartfiles --specs=nano.specs
                    -T%(script)s -Wl,--gc-sections)
target_link_libraries(app.elf PRIVATE cnn tiny)
"""

TOOLCHAIN = """set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
"""


def test_two_exported_models_link_into_one_firmware_and_run(tmp_path):
    """export-c --name: two models side by side with CMake add_subdirectory (the runtime built
    once), their I/O helpers and programs in one board firmware, one bound ahead of time
    (cnn_binding.c), one at run time (state + arena); the float outputs it prints
    are the Python boundary's of the Python reference's, bit for bit."""
    from mcutorch.device import paths
    from mcutorch.device.boards import BOARDS
    from mcutorch.device.qemu import run_uart
    from mcutorch.device.toolchain import linker_script_path

    if shutil.which("cmake") is None:
        pytest.fail("cmake not found: run `make toolchain`")
    torch.manual_seed(0)
    cnn = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                        nn.Linear(4 * 6 * 6, 6)).eval()
    tiny = nn.Sequential(nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 3), nn.Softmax(-1)).eval()
    xs = {"cnn": torch.randn(4, 3, 6, 6), "tiny": torch.randn(4, 16)}
    programs = {}
    (tmp_path / "app" / "models").mkdir(parents=True)
    for name, model in (("cnn", cnn), ("tiny", tiny)):
        x = xs[name]
        q = mcutorch.quantize(model, (x[:1],), calibration=[x[i:i + 1] for i in range(4)])
        programs[name] = mcutorch.compile(q, (x[:1],), target="cortex-m4", board="mps2-an386")
        mtp = programs[name].save(tmp_path / f"{name}.mtp")
        assert main(["export-c", str(mtp), "-o", str(tmp_path / "app" / "models" / name)]) == 0
    app = tmp_path / "app"
    b = BOARDS["mps2-an386"]
    (app / "main.c").write_text(APP_C)
    (app / "CMakeLists.txt").write_text(APP_CMAKE % {
        "boards": paths.BOARDS / "common", "uart": b.uart,
        "script": linker_script_path("mps2-an386")})
    (app / "toolchain.cmake").write_text(TOOLCHAIN)
    build = tmp_path / "build"
    for cmd in (["cmake", "-S", str(app), "-B", str(build),
                 f"-DCMAKE_TOOLCHAIN_FILE={app / 'toolchain.cmake'}"],
                ["cmake", "--build", str(build)]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
    assert len(list(build.rglob("libmcutorch.a"))) == 1  # the runtime library, built once
    r = run_uart(build / "app.elf", "mps2-an386", timeout=30)
    assert r.ok, r.stdout + r.stderr
    x = torch.tensor([((i * 7 % 23) - 11) / 8 for i in range(3 * 6 * 6)]).reshape(1, 3, 6, 6)
    u = torch.tensor([((i * 5 % 17) - 8) / 4 for i in range(16)]).reshape(1, 16)
    for name, inp in (("cnn", x), ("tiny", u)):
        want = programs[name].run(inp).numpy().reshape(-1)
        line = next(ln for ln in r.stdout.splitlines() if ln.startswith(name + " "))
        got = np.array([int(h, 16) for h in line.split()[1:]], np.uint32).view(np.float32)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (name, got, want)


def test_cli_build_and_run_on_board_with_profiles(tmp_path, capsys):
    import numpy as np

    torch.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
    x = torch.randn(1, 1, 6, 6)
    program = mcutorch.compile(mcutorch.quantize(model.eval(), (x,), calibration=[x]), (x,),
                               target="cortex-m33")
    mtp = program.save(tmp_path / "m.mtp")
    assert main(["build", str(mtp), "--board", "mps2-an505", "-o", str(tmp_path / "m.elf")]) == 0
    assert "runtime core" in capsys.readouterr().out
    np.save(tmp_path / "x.npy", x.numpy())
    args = ["run", str(mtp), "--input", str(tmp_path / "x.npy"), "--board", "mps2-an505",
            "--output", str(tmp_path / "y.npy"), "--profile"]
    assert main(args) == 0
    coarse = capsys.readouterr().out
    assert main(args + ["--exact"]) == 0
    exact = capsys.readouterr().out
    assert "SysTick" in coarse and "exact" in exact and "fully_connected" in exact
    assert np.array_equal(np.load(tmp_path / "y.npy"), program.run(x).numpy())
