"""The `mcutorch` command and the demo, as a user runs them."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from mcutorch.cli import main

MODEL_FILE = '''
import torch
from torch import nn

def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(4, 3)).eval()

def example_inputs():
    return (torch.zeros(1, 1, 6, 6),)

def calibration():
    g = torch.Generator().manual_seed(1)
    return [torch.randn(1, 1, 6, 6, generator=g) for _ in range(4)]
'''


def test_compile_run_inspect(tmp_path, capsys):
    src = tmp_path / "tiny.py"
    src.write_text(MODEL_FILE)
    mtp = tmp_path / "tiny.mtp"
    assert main(["compile", str(src), "--target", "cortex-m4", "-o", str(mtp)]) == 0
    assert "ops" in capsys.readouterr().out
    x = np.random.default_rng(0).standard_normal((1, 1, 6, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(mtp), "--input", str(tmp_path / "x.npy"),
                 "--output", str(tmp_path / "y.npy")]) == 0
    y = np.load(tmp_path / "y.npy")
    assert y.shape == (1, 3)
    import mcutorch

    assert np.array_equal(y, mcutorch.load(mtp).run(torch.from_numpy(x)).numpy())
    capsys.readouterr()
    assert main(["inspect", str(mtp), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert [op["op"] for op in info["ops"]] == ["conv2d", "avg_pool2d", "fully_connected"]
    assert info["total_macs"] == 6 * 6 * 4 * 9 + 4 * 3 and info["target"]["isa"] == "dsp"
    assert main(["inspect", str(mtp)]) == 0
    assert "memory plan" in capsys.readouterr().out


def test_calibration_npz_overrides(tmp_path, capsys):
    src = tmp_path / "tiny.py"
    src.write_text(MODEL_FILE)
    np.savez(tmp_path / "cal.npz", x=np.ones((3, 1, 6, 6), np.float32))
    mtp = tmp_path / "a.mtp"
    assert main(["compile", str(src), "--calibration", str(tmp_path / "cal.npz"),
                 "-o", str(mtp)]) == 0


def test_errors_are_one_line_not_tracebacks(tmp_path, capsys):
    assert main(["compile", str(tmp_path / "missing.py")]) == 2
    assert "does not exist" in capsys.readouterr().err
    bad = tmp_path / "bad.mtp"
    bad.write_bytes(b"MCUT" + bytes(60))
    assert main(["inspect", str(bad)]) == 2
    assert "mcutorch: error:" in capsys.readouterr().err
    assert main(["compile", str(tmp_path / "x.py"), "--target", "cortex-m99"]) == 2


def test_demo_int8_accuracy_within_one_point(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    try:
        import digits_demo
    finally:
        sys.path.pop(0)
    result = digits_demo.main(["--out", str(tmp_path / "digits.mtp")])
    assert result["float_acc"] > 0.9
    assert abs(result["float_acc"] - result["int8_acc"]) <= 0.01


# ----------------------------------------------------------------------------------------------
# every wrong input is one line that names it, exit 2, never a traceback

BOOM_FILE = '''
import torch

def helper():
    raise ValueError("the weights file is missing")

helper()
'''


@pytest.fixture(scope="module")
def cli_files(tmp_path_factory):
    """A compiled tiny program plus good and bad input files."""
    d = tmp_path_factory.mktemp("cli")
    (d / "tiny.py").write_text(MODEL_FILE)
    (d / "boom.py").write_text(BOOM_FILE)
    assert main(["compile", str(d / "tiny.py"), "--target", "cortex-m4", "-o",
                 str(d / "tiny.mtp")]) == 0
    x = np.random.default_rng(0).standard_normal((1, 1, 6, 6)).astype(np.float32)
    np.save(d / "x.npy", x)
    np.save(d / "batch.npy", np.random.default_rng(1).standard_normal((3, 1, 6, 6))
            .astype(np.float32))
    np.save(d / "nhwc.npy", np.zeros((1, 6, 6, 4), np.float32))
    np.save(d / "nhwc1.npy", x.transpose(0, 2, 3, 1).copy())
    np.save(d / "nan.npy", np.full((1, 1, 6, 6), np.nan, np.float32))
    np.save(d / "ints.npy", np.ones((1, 1, 6, 6), np.int64))
    np.save(d / "strings.npy", np.array(["a", "b"]))
    np.save(d / "pickled.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    (d / "garbage.npy").write_bytes(b"not numpy at all " * 8)
    np.savez(d / "empty.npz")
    np.savez(d / "archive.npz", x=x)
    (d / "folder.mtp").mkdir()
    return d


def _case(d: Path) -> list[tuple[list[str], str]]:
    mtp, x = str(d / "tiny.mtp"), str(d / "x.npy")
    run = ["run", mtp, "--input"]
    tiny, boom = str(d / "tiny.py"), str(d / "boom.py")
    return [
        (["run", str(d / "none.mtp"), "--input", x],
         f"program file {d / 'none.mtp'} does not exist"),
        (["run", str(d / "folder.mtp"), "--input", x], "is a folder, not a program file"),
        (["inspect", str(d / "none.mtp")], "does not exist"),
        (["inspect", str(d / "folder.mtp")], "is a folder, not a program file"),
        (["inspect", str(d / "x.npy")], "bad_magic"),
        (run + [str(d / "none.npy")], f"input file {d / 'none.npy'} does not exist"),
        (run + [str(d / "garbage.npy")], "is not a .npy file (no .npy header)"),
        (run + [str(d / "pickled.npy")], "holds Python objects (an object array, which would "
                                         "need allow_pickle)"),
        (run + [str(d / "strings.npy")], "holds a <U1 array (strings)"),
        (run + [str(d / "archive.npz")], "is an .npz archive; --input takes one .npy file"),
        (run + [str(d)], "is a folder, not a file"),
        (run + [str(d / "nhwc1.npy")], "input 0 (input_1): expected float [1, 1, 6, 6] (NCHW, the "
                                       "model's layout), got [1, 6, 6, 1]; an NHWC array? "
                                       "transpose it with x.transpose(0, 3, 1, 2)"),
        (run + [str(d / "nhwc.npy")], "expected float [1, 1, 6, 6] (NCHW, the model's layout), "
                                      "got [1, 6, 6, 4]"),
        (run + [str(d / "ints.npy")], "got an int64 array; float I/O takes float16, float32 or "
                                      "float64 arrays"),
        (run + [str(d / "nan.npy")], "input 0 (input_1) holds 36 NaN values"),
        (run + [x, "--input", x], "the model takes 1 input (input_1): give --input once per input"),
        (run + [x, "--int8"], "expected int8 [1, 6, 6, 1] (NHWC, the program's layout), got a "
                              "float32 array"),
        (run + [x, "--output", str(d / "nowhere" / "y.npy")],
         f"folder {d / 'nowhere'} does not exist"),
        (run + [x, "-o", str(d)], "is a folder; give a file name"),
        (run + [x, "--profile"], "--profile counts instructions on an emulated board: add --board"),
        (run + [x, "--exact"], "--exact refines --profile on a --board run"),
        (run + [x, "--board", "mps9-nope"], "mps9-nope"),
        (["compile", tiny, "-o", str(d / "nowhere" / "m.mtp")], "does not exist (create it first"),
        (["compile", tiny, "--calibration", str(d / "none.npz")],
         f"calibration file {d / 'none.npz'} does not exist"),
        (["compile", tiny, "--calibration", str(d / "empty.npz")],
         "has no inputs (keys: none); it must be an .npz with the inputs as x"),
        (["compile", tiny, "--calibration", str(d / "garbage.npy")], "is not an .npz archive"),
        (["compile", boom], f"importing model file {boom} raised ValueError: the weights file is "
                            "missing (line 5)"),
        (["compile", str(d / "none.py")], "does not exist"),
        (["compile", str(d)], "is a folder, not a file"),
        (["compile", tiny, "--memory", "SRAM:4K,SRAM:8K"], "memory region SRAM appears twice"),
        (["compile", tiny, "--memory", "SRAM:5G"], "is 5 GiB; a region can be at most 4 GiB - 1"),
        (["compile", tiny, "--memory", "ABCDEFGHIJKLMNOP:4K"],
         "'ABCDEFGHIJKLMNOP' has 16 characters; the program format holds at most 8"),
        (["compile", tiny, "--memory", "SRAM:4K", "--board", "mps3-an547"], "not both"),
        (["build", mtp, "--board", "mps3-an547", "-o", str(d / "nowhere" / "m.elf")],
         "does not exist"),
        (["export-c", mtp, "-o", x], "is a file; give a folder"),
        (["export-c", mtp, "-o", str(d / "c"), "--name", "9-lives"], "is not a C identifier"),
        (["export-c", mtp, "-o", str(d / "c"), "--name", "mt_net"], "is reserved"),
        (["build", mtp, "--board", "mps3-an547", "--name", "net"], "add --standalone"),
    ]


def test_every_bad_input_is_one_clear_line(cli_files, capsys):
    bad = []
    for argv, words in _case(cli_files):
        code = main(argv)
        out, err = capsys.readouterr()
        lines = err.strip().splitlines()
        if code != 2 or "Traceback" in out + err or len(lines) != 1 \
                or not lines[0].startswith("mcutorch: error: ") or words not in lines[0]:
            bad.append((argv, code, err))
    assert not bad, bad


def test_debug_adds_the_traceback(cli_files, capsys):
    argv = ["compile", str(cli_files / "boom.py")]
    assert main(["--debug", *argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "the weights file is missing" in err
    assert err.strip().splitlines()[-1].startswith("mcutorch: error: importing model file")
    assert main(["run", str(cli_files / "tiny.mtp"), "--input", str(cli_files / "nhwc.npy"),
                 "--debug"]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_a_batch_runs_inference_by_inference(cli_files, capsys):
    import mcutorch

    y = cli_files / "y.npy"
    assert main(["run", str(cli_files / "tiny.mtp"), "--input", str(cli_files / "batch.npy"),
                 "-o", str(y)]) == 0
    want = mcutorch.load(cli_files / "tiny.mtp").run(torch.from_numpy(np.load(
        cli_files / "batch.npy"))).numpy()
    assert np.load(y).shape == (3, 3) and np.array_equal(np.load(y), want)


def test_the_real_command_line(cli_files):
    """`python -m mcutorch.cli` in a fresh process: exit codes, one line, no traceback."""
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "mcutorch.cli", *args], capture_output=True,
                              text=True, env=env, cwd=cli_files)

    r = cli("run", "tiny.mtp", "--input", "nhwc1.npy")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines() == [
        "mcutorch: error: input 0 (input_1): expected float [1, 1, 6, 6] (NCHW, the model's "
        "layout), got [1, 6, 6, 1]; an NHWC array? transpose it with x.transpose(0, 3, 1, 2)"]
    r = cli("compile", "boom.py")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "boom.py raised ValueError: the weights file is missing (line 5)" in r.stderr
    r = cli("run", "tiny.mtp", "--input", "x.npy", "--profile")
    assert r.returncode == 2 and "add --board" in r.stderr and "Traceback" not in r.stderr
    r = cli("--help")
    assert r.returncode == 0 and "exit status: 0 success; 2" in r.stdout and "--debug" in r.stdout
    r = cli("run", "tiny.mtp", "--input", "x.npy")
    assert r.returncode == 0 and "output 0: float32[1, 3]" in r.stdout


def test_tables_are_plain_text_in_a_pipe_and_rich_on_a_terminal(cli_files):
    """`inspect`'s rich tables: in a pipe the plain text of report.render (ASCII, no colour, the
    same whatever $COLUMNS says: each op one line); on a terminal styled and fitted to it."""
    import os
    import pty
    import subprocess

    from mcutorch.program.model import Program
    from mcutorch.report import describe, render

    cmd = [sys.executable, "-m", "mcutorch.cli", "inspect", "tiny.mtp"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"),
           "TERM": "xterm-256color"}
    want = render(describe(Program.load(cli_files / "tiny.mtp")))
    for columns in ("30", "250"):
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=cli_files,
                           env={**env, "COLUMNS": columns})
        assert r.returncode == 0 and r.stdout == want + "\n", r.stdout
    assert want.isascii() and "\x1b" not in want
    lines = want.splitlines()
    head = lines.index(next(line for line in lines if line.startswith("#")))
    assert set(lines[head + 1]) == {"-"}
    for k, op in enumerate(["conv2d", "avg_pool2d", "fully_connected"]):
        assert lines[head + 2 + k].split()[:2] == [str(k), op]  # one line per op
    leader, follower = pty.openpty()
    proc = subprocess.Popen(cmd, cwd=cli_files, env={**env, "COLUMNS": "100"}, stdout=follower,
                            stderr=subprocess.DEVNULL)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:  # the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait() == 0
    os.close(leader)
    tty = b"".join(chunks).decode()
    assert "\x1b[" in tty and "memory plan" in tty and "fully_connected" in tty
    assert max(len(line) for line in tty.replace("\r", "").splitlines()
               if "\x1b" not in line) <= 100  # fitted to the terminal's 100 columns
