"""Standalone firmware (`mcutorch build --standalone`): the program linked in flash, inputs from
C arrays or the application's callback, outputs on the board's UART, no semihosting. Run under
QEMU on every emulated board and compared with the Python reference bit for bit."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
import torch
from torch import nn

import mcutorch
from mcutorch.api import CompiledModel
from mcutorch.cli import main
from mcutorch.compiler import build_graph, compile_graph, resolve_regions
from mcutorch.device import standalone, toolchain
from mcutorch.device.boards import BOARDS
from mcutorch.device.qemu import run_uart
from mcutorch.errors import InputError
from mcutorch.targets import parse_target

pytestmark = pytest.mark.qemu

if shutil.which(toolchain.GCC) is None or shutil.which(toolchain.QEMU) is None:
    pytest.fail(f"needs {toolchain.GCC} and {toolchain.QEMU}: run `make toolchain`", pytrace=False)

# every board with its own core, plus the builds the boards stand in for
BUILDS = [(name, b.cpu) for name, b in BOARDS.items()] + [
    ("mps2-an385", "cortex-m0plus"), ("mps2-an505", "cortex-m23"),
    ("mps3-an547", "cortex-m55+nomve")]


class Net(nn.Module):
    """conv, depthwise, pooling, add, linear and softmax: most kernel families."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        y = nn.functional.max_pool2d(y + self.dw(y), 2)
        return torch.softmax(self.fc(y.flatten(1)), -1)


class History(nn.Module):
    """A streaming block: a (3,1) depthwise conv over the last 3 frames (a ring buffer in the
    program), then a pointwise conv; one [1, 6, 1, 1] frame per call."""

    def __init__(self):
        super().__init__()
        self.register_buffer("hist", torch.zeros(1, 6, 2, 1))
        self.dw = nn.Conv2d(6, 6, (3, 1), groups=6)
        self.pw = nn.Conv2d(6, 4, 1)

    def forward(self, x):
        window = torch.cat([self.hist, x], 2)
        self.hist.copy_(window[:, :, 1:])
        return torch.relu(self.pw(self.dw(window)))


def reference_frames(program, sets, reset_every: int) -> list:
    """The reference's outputs frame after frame from the initial state, reset every k-th."""
    program.reset()
    out = []
    for j, s in enumerate(sets):
        if j and j % reset_every == 0:
            program.reset()
        out.append(program.run_int8(s))
    return out


STREAM_BOARDS = [("mps2-an385", "cortex-m0plus"), ("mps2-an505", "cortex-m33"),
                 ("mps3-an547", "cortex-m55")]


@pytest.mark.parametrize("board, target", STREAM_BOARDS, ids=[b for b, _ in STREAM_BOARDS])
def test_standalone_streaming_frames_with_resets(board, target, tmp_path):
    """A stateful program with a ring op, bound ahead of time (its ring views the one RAM table):
    11 frames, mt_reset before every 4th, each output bit for bit the reference's."""
    g = torch.Generator().manual_seed(3)
    frames = [torch.randn(1, 6, 1, 1, generator=g) for _ in range(11)]
    q = mcutorch.quantize(History().eval(), (frames[0],), calibration=frames)
    program = mcutorch.compile(q, target=target, board=board)
    assert any(op.name == "ring_write" for op in program.program.ops)
    sets = [program.quantize_inputs([f]) for f in frames]
    with pytest.raises(InputError, match="not both"):
        standalone.inputs_source("stream", program.program, sets[0], frames=sets)
    elf = standalone.build(program.program, board, frames=sets, reset_every=4,
                           out=tmp_path / "fw.elf", name="stream")
    r = run_uart(elf, board, timeout=60)
    assert r.ok, r.stdout + r.stderr
    got = standalone.parse_frames(program.program, r.stdout)
    want = reference_frames(program, sets, 4)
    assert len(got) == len(want) == 11
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(got, want))
    assert len({a[0].tobytes() for a in got}) > 3  # the frames give different answers


@pytest.fixture(scope="module")
def qmodel():
    torch.manual_seed(0)
    cal = [torch.randn(1, 3, 8, 8) for _ in range(4)]
    return mcutorch.quantize(Net().eval(), (cal[0],), calibration=cal)


def compiled(qmodel, board: str, target: str) -> CompiledModel:
    regions, board_name = resolve_regions(board, None)
    return CompiledModel(compile_graph(build_graph(qmodel), parse_target(target), regions,
                                       board_name, "net"))


def text_of(elf) -> str:
    return subprocess.run([shutil.which("arm-none-eabi-objdump"), "-d", str(elf)], check=True,
                          capture_output=True, text=True).stdout


@pytest.mark.parametrize("board, target", BUILDS, ids=[f"{b}-{t}" for b, t in BUILDS])
def test_standalone_firmware_is_bit_exact_on_every_board(qmodel, board, target, tmp_path):
    program = compiled(qmodel, board, target)
    x = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(7))
    q = program.quantize_inputs([x])
    elf = standalone.build(program.program, board, q, out=tmp_path / "fw.elf", name="net")
    r = run_uart(elf, board, timeout=60)
    assert r.ok and "mt_status 0 ok" in r.stdout, r.stdout + r.stderr
    got = standalone.parse_outputs(program.program, r.stdout)
    want = program.run_int8(q)
    assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))
    assert not np.all(want[0] == want[0].flat[0])  # the outputs say something
    # no semihosting anywhere (QEMU ran without it: a bkpt would have faulted)
    assert "bkpt" not in text_of(elf)
    # the program: a 16-byte aligned const array in the board's program region (else flash)
    sym = next(s for s in toolchain.size_of(elf)["symbols"] if s.name == "net_program")
    b = BOARDS[board]
    region = (b.regions[-1].base, b.regions[-1].size) if len(b.regions) > 1 else \
        (b.code.base, b.code.size)
    assert sym.address % 16 == 0
    assert region[0] <= sym.address < region[0] + region[1]
    assert sym.size == len(program.program.stripped().to_bytes())


def test_zero_inputs_and_a_fault_are_reported_on_the_uart(qmodel, tmp_path):
    program = compiled(qmodel, "mps2-an386", "cortex-m4")
    elf = standalone.build(program.program, "mps2-an386", None, out=tmp_path / "fw.elf")
    got = standalone.run(program.program, elf, "mps2-an386")
    zero = [np.full(p.shape, p.zero_point, np.int8) for p in program.ports()]
    assert np.array_equal(got[0], program.run_int8(zero)[0])
    bad = tmp_path / "bad.c"  # an input callback that faults: reported, not a hang
    bad.write_text("#include <stddef.h>\n#include <stdint.h>\n"
                   "void model_input(uint32_t k, int8_t *d, size_t n)\n"
                   "{ (void)k; (void)d; (void)n; __builtin_trap(); }\n")
    elf = standalone.build(program.program, "mps2-an386", None, out=tmp_path / "bad.elf",
                           sources=[bad])
    r = run_uart(elf, "mps2-an386", timeout=30)
    assert r.exit_code == 246 and "UsageFault" in r.fault and "model_input" in r.fault, r.stdout


def test_cli_standalone_with_npy_input_and_a_callback(qmodel, tmp_path, capsys):
    program = compiled(qmodel, "mps2-an505", "cortex-m33")
    mtp = program.save(tmp_path / "kws 1.mtp")
    x = np.random.default_rng(3).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    elf = tmp_path / "fw.elf"
    assert main(["build", str(mtp), "--board", "mps2-an505", "--standalone", "--input",
                 str(tmp_path / "x.npy"), "-o", str(elf)]) == 0
    out = capsys.readouterr().out
    assert "standalone firmware of kws_1" in out and "outputs on the UART" in out
    got = standalone.run(program.program, elf, "mps2-an505")
    assert np.array_equal(got[0], program.run_int8(program.quantize_inputs([x]))[0])
    # the application's own input (a sensor, say): a pattern of int8 values
    cb = tmp_path / "sensor.c"
    cb.write_text("#include <stddef.h>\n#include <stdint.h>\n"
                  "void net_input(uint32_t k, int8_t *d, size_t n)\n"
                  "{\n    for (size_t i = 0; i < n; i++) {\n"
                  "        d[i] = (int8_t)(i * 37u + k);\n    }\n}\n")
    assert main(["build", str(mtp), "--board", "mps2-an505", "--standalone", "--name", "net",
                 "--source", str(cb), "-o", str(elf)]) == 0
    n = program.ports()[0].shape
    pattern = (np.arange(np.prod(n)) * 37 % 256).astype(np.uint8).view(np.int8).reshape(n)
    got = standalone.run(program.program, elf, "mps2-an505")
    assert np.array_equal(got[0], program.run_int8([pattern])[0])


@pytest.mark.parametrize("args, message", [
    (["--input", "x.npy"], "add --standalone"),
    (["--standalone", "--profile"], "drop --standalone"),
    (["--standalone", "--int8"], "give --input too"),
    (["--standalone", "--name", "int"], "is reserved"),
    (["--standalone", "--name", "a-b"], "not a C identifier"),
    (["--standalone", "--input", "x.npy", "--input", "x.npy"], "give --input once per input"),
    (["--standalone", "--board", "mps2-an385"], "cannot run"),
    (["--standalone", "--frames"], "give --input too"),
    (["--standalone", "--input", "x.npy", "--reset-every", "2"], "add --frames"),
    (["--standalone", "--input", "x.npy", "--frames", "--reset-every", "-1"], "must be >= 0"),
    (["--reset-every", "3"], "add --standalone"),
])
def test_cli_standalone_usage_errors(qmodel, tmp_path, capsys, args, message):
    program = compiled(qmodel, "mps3-an547", "cortex-m55")
    mtp = program.save(tmp_path / "m.mtp")
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 8, 8), np.float32))
    board = [] if "--board" in args else ["--board", "mps3-an547"]
    args = [str(tmp_path / a) if a.endswith(".npy") else a for a in args]
    assert main(["build", str(mtp), *board, *args, "-o", str(tmp_path / "fw.elf")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_cli_standalone_frames(tmp_path, capsys):
    """`build --standalone --input frames.npy --frames --reset-every 4`: the streaming module's
    11 frames (one array, frames along a new first axis) in one firmware, bit for bit."""
    g = torch.Generator().manual_seed(5)
    frames = torch.randn(11, 1, 6, 1, 1, generator=g)
    q = mcutorch.quantize(History().eval(), (frames[0],), calibration=list(frames))
    program = mcutorch.compile(q, target="cortex-m55", board="mps3-an547")
    mtp = program.save(tmp_path / "stream.mtp")
    np.save(tmp_path / "frames.npy", frames.numpy())
    elf = tmp_path / "fw.elf"
    assert main(["build", str(mtp), "--board", "mps3-an547", "--standalone", "--input",
                 str(tmp_path / "frames.npy"), "--frames", "--reset-every", "4",
                 "-o", str(elf)]) == 0
    assert "inputs: 11 frames of --input, mt_reset every 4" in capsys.readouterr().out
    r = run_uart(elf, "mps3-an547", timeout=60)
    assert r.ok, r.stdout + r.stderr
    got = standalone.parse_frames(program.program, r.stdout)
    want = reference_frames(program, [program.quantize_inputs([f]) for f in frames], 4)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(got, want)) and len(got) == 11


def ram_objects(elf) -> dict[str, int]:
    """name -> bytes of every object the firmware keeps in RAM (.bss, .data, .mt_bss.*)."""
    out = subprocess.run([shutil.which("arm-none-eabi-objdump"), "-t", str(elf)], check=True,
                         capture_output=True, text=True).stdout
    objs = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[-3].startswith((".bss", ".data", ".mt_bss")) and \
                "O" in parts[1:-3]:
            objs[parts[-1]] = int(parts[-2], 16)
    return objs


def test_the_autoencoder_runs_in_its_planned_ram(tmp_path):
    """MLPerf Tiny AD bound ahead of time on the M55: its only RAM is the planned 768-B arena
    (no state buffer: the views and kernel args are const tables), the arena array exactly the
    plan's size, and the outputs bit for bit the reference's."""
    from mcutorch.models import example_input, fc_autoencoder

    torch.manual_seed(0)
    model = fc_autoencoder().eval()
    cal = [example_input(model, seed=i) for i in range(4)]
    program = mcutorch.compile(mcutorch.quantize(model, (cal[0],), calibration=cal), (cal[0],),
                               target="cortex-m55", board="mps3-an547")
    assert [r.size for r in program.program.regions if r.size] == [768]
    q = program.quantize_inputs([cal[1]])
    elf = standalone.build(program.program, "mps3-an547", q, out=tmp_path / "ad.elf", name="ad")
    model_ram = {k: v for k, v in ram_objects(elf).items() if k.startswith("ad_")}
    assert model_ram == {"ad_arena0": 768}, model_ram
    assert not any("state" in k for k in ram_objects(elf)), ram_objects(elf)
    r = run_uart(elf, "mps3-an547", timeout=60)
    assert r.ok and "mt_status 0 ok" in r.stdout, r.stdout + r.stderr
    got = standalone.parse_outputs(program.program, r.stdout)
    assert np.array_equal(got[0], program.run_int8(q)[0])
