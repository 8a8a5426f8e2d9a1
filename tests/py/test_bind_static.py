"""Ahead-of-time binding (mt_bind_static, NAME_binding.c of export-c and build --standalone).

- tests/c/test_bind_static.c on the host (ASan + UBSan): a stateless CNN, an Ethos-U program
  (its delegate's CPU version runs), a one-op ring program,
  compiled streaming modules (ring ops with weights, two readers of one window, reset mid-run)
  and a program with two regions run frame after frame from their const tables, bit for bit
  with the Python reference; every wrong entry of a binding refused (BAD_ARGUMENT, model left
  unbound); the run-time binding afresh gives the same integers;
- the tables' bytes (flash) and the one RAM table (ring views) against `table_bytes`;
- the standalone firmware of a streaming module on the emulated boards (tests/target: the
  stateless one on every board) frame after frame, resets included.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

import mcutorch
from mcutorch.device import crt
from mcutorch.device.binding import Layout, ring_views, table_bytes
from mcutorch.device.export_c import model_files, used_kernels
from mcutorch.device.kernels import sources_for
from mcutorch.program import Program
from mcutorch.ref.interpreter import Interpreter
from test_crt import need
from test_ring import MODELS, _frames, _ring_case

TESTS_C = Path(__file__).resolve().parents[1] / "c"


def _compiled(make, shape):
    torch.manual_seed(0)
    frames = _frames(shape, 9)
    q = mcutorch.quantize(make().eval(), (frames[0],), calibration=frames)
    cm = mcutorch.compile(q, target="cortex-m55")
    return cm.program, [cm.quantize_inputs([f]) for f in frames]


def _cnn_case():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                            torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                            torch.nn.Linear(8 * 4 * 4, 5), torch.nn.Softmax(-1)).eval()
    xs = _frames((1, 3, 8, 8), 3)
    cm = mcutorch.compile(mcutorch.quantize(m, (xs[0],), calibration=xs), (xs[0],),
                          target="cortex-m55", board="mps3-an547")
    return cm.program, [cm.quantize_inputs([x]) for x in xs]


def _npu_case():
    """An Ethos-U program: a delegate (the host has no NPU: its CPU version runs) and CPU ops."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                            torch.nn.Flatten(), torch.nn.Linear(8 * 6 * 6, 4),
                            torch.nn.Softmax(-1)).eval()
    xs = _frames((1, 3, 6, 6), 3)
    cm = mcutorch.compile(mcutorch.quantize(m, (xs[0],), calibration=xs), (xs[0],),
                          target="cortex-m55+ethos-u55-128")
    assert any(op.name == "delegate" for op in cm.program.ops)
    return cm.program, [cm.quantize_inputs([x]) for x in xs]


def _ring_op_case():
    p, _, frames, _ = _ring_case("feat_f6_c3_k7")
    return p, [[f] for f in frames]


def _model(name):
    _, make, shape, _ = next(m for m in MODELS if m[0] == name)
    return lambda: _compiled(make, shape)


CASES = {"cnn_two_regions": _cnn_case, "npu_delegate": _npu_case,
         "ring_write_copy": _ring_op_case,
         "dw_c8_k3": _model("dw_c8_k3"), "conv_k4_f6": _model("conv_k4_f6"),
         "two_readers_k5": _model("two_readers_k5")}


def frames_header(sets, reset_every: int) -> str:
    data = b"".join(np.ascontiguousarray(x).tobytes() for s in sets for x in s)
    rows = [", ".join(f"0x{b:02x}" for b in data[i:i + 16]) for i in range(0, len(data), 16)]
    return (f"#define NET_FRAMES {len(sets)}u\n#define NET_RESET_EVERY {reset_every}u\n"
            f"static const uint8_t net_frame_bytes[{max(len(data), 1)}] = {{\n"
            + "".join(f"  {r},\n" for r in rows) + "};\n")


def build_harness(program: Program, sets, reset_every: int, tmp: Path) -> Path:
    for file, text in model_files("net", program).items():
        (tmp / file).write_text(text)
    (tmp / "net_frames.h").write_text(frames_header(sets, reset_every))
    own = [tmp / f for f in ("net_program.c", "net_binding.c", "net_kernels.c")]
    exe = tmp / "test_bind_static"
    cmd = [need("gcc"), *crt.HOST_FLAGS, *crt.SANITIZE_FLAGS, "-pedantic",
           *(f"-I{d}" for d in crt.include_dirs()), f"-I{tmp}",
           *map(str, crt.core_sources()), *map(str, sources_for(used_kernels(program))),
           *map(str, own), str(TESTS_C / "test_bind_static.c"), "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]
    return exe


def reference(program: Program, sets, reset_every: int) -> list[list[np.ndarray]]:
    it = Interpreter(program)
    out = []
    for j, s in enumerate(sets):
        if reset_every and j and j % reset_every == 0:
            it.reset()
        out.append(it.invoke(list(s)))
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_static_binding_on_the_host(name, tmp_path):
    program, sets = CASES[name]()
    reset_every = 4 if program.persistent else 0
    exe = build_harness(program, sets, reset_every, tmp_path)
    r = subprocess.run([str(exe)], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.rstrip().splitlines()[-1].startswith("ok"), \
        r.stdout[-3000:] + r.stderr[-3000:]
    want = reference(program, sets, reset_every)
    for tag in ("out", "dyn", "again"):
        for f, outs in enumerate(want):
            for k, y in enumerate(outs):
                line = f"{tag} {f} {k} " + np.ascontiguousarray(y).tobytes().hex()
                assert line in r.stdout, (tag, f, k)
    assert any(not np.all(o[0] == o[0].flat[0]) for o in want)  # the outputs say something


def test_tables_are_what_the_state_would_hold(tmp_path):
    """`table_bytes` against a real Cortex-M build of NAME_binding.c: the const views + args
    tables are its flash (the run-time binding's state less its arena pointers), the ring views
    table its only RAM beyond the arenas and the persistent buffer (8 B per operand of each ring
    op, the records' OP_FLAG_RING)."""
    gcc, nm = need("arm-none-eabi-gcc"), need("arm-none-eabi-nm")
    for name in ("cnn_two_regions", "dw_c8_k3"):
        program, _ = CASES[name]()
        out = tmp_path / name
        out.mkdir()
        for file, text in model_files("net", program).items():
            (out / file).write_text(text)
        obj = out / "net_binding.o"
        subprocess.run([gcc, "-mcpu=cortex-m55", "-mthumb", "-std=c99", "-Os", "-c",
                        *(f"-I{d}" for d in crt.include_dirs()), f"-I{out}",
                        str(out / "net_binding.c"), "-o", str(obj)], check=True)
        sizes = {sym: int(size, 16) for _, size, _, sym in (
            line.split() for line in subprocess.run([nm, "-S", str(obj)], capture_output=True,
                                                    text=True, check=True).stdout.splitlines()
            if len(line.split()) == 4)}
        flash, ram = table_bytes(program)
        assert flash == sizes["net_views"] + sizes["net_args"]
        assert flash == crt.state_size(program) - 4 * len(program.regions)
        assert ram == sizes.get("net_ring_views", 0)
        lay = Layout.of(program.stripped().to_bytes())
        assert ram == 8 * ring_views(lay) and (ram > 0) == bool(program.persistent)


def test_the_dispatch_kind_is_the_runtime_s():
    """binding.py writes mt_op_args.dispatch as the runtime builds it: its sentinel is
    mt_kernel.h's MT_DISPATCH_OTHER (mt_bind_static refuses any other value)."""
    import re

    from mcutorch.device import binding
    from mcutorch.device.paths import RUNTIME

    header = (RUNTIME / "include" / "mt_kernel.h").read_text()
    value = re.search(r"#define MT_DISPATCH_OTHER (0x[0-9A-Fa-f]+)u", header).group(1)
    assert int(value, 16) == binding.DISPATCH_OTHER
