"""`mcutorch validate`, the dataset file convention, and what the CLI shows while it works."""
from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import mcutorch
from mcutorch.analysis.dataset import load_dataset
from mcutorch.analysis.validate import validate
from mcutorch.cli import main
from mcutorch.errors import FileError

ROOT = Path(__file__).resolve().parents[2]
CLASSES = 4
MODEL_FILE = f'''
import torch
from torch import nn

def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 6, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(6, {CLASSES})).eval()

def example_inputs():
    return (torch.zeros(1, 1, 6, 6),)
'''


def _float_model(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("vm", tmp_path / "m.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.model()


@pytest.fixture
def files(tmp_path):
    """m.py, data.npz (24 samples; labels: the float model's class, 4 of them changed)."""
    (tmp_path / "m.py").write_text(MODEL_FILE)
    x = np.random.default_rng(3).standard_normal((24, 1, 6, 6)).astype(np.float32)
    with torch.no_grad():
        y = _float_model(tmp_path)(torch.from_numpy(x)).argmax(1).numpy()
    y[:4] = (y[:4] + 1) % CLASSES
    np.savez(tmp_path / "data.npz", x=x, y=y)
    return tmp_path


def test_validate_model_file_compares_float_fake_quant_and_program(files, capsys):
    assert main(["validate", str(files / "m.py"), "--data", str(files / "data.npz"),
                 "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["samples"] == 24 and r["classifier"] and r["runs_on"] == "host"
    assert list(r["executors"]) == ["float", "fake_quant", "program"]
    x, y = np.load(files / "data.npz")["x"], np.load(files / "data.npz")["y"]
    with torch.no_grad():
        float_pred = _float_model(files)(torch.from_numpy(x)).argmax(1).numpy()
    assert r["executors"]["float"]["top1"] == pytest.approx((float_pred == y).mean())
    assert r["executors"]["float"]["top1"] == pytest.approx(20 / 24)
    conf = np.array(r["executors"]["program"]["confusion"])
    assert conf.shape == (CLASSES, CLASSES) and conf.sum() == 24
    assert np.trace(conf) / 24 == pytest.approx(r["executors"]["program"]["top1"])
    vs = r["executors"]["program"]["vs_float"]
    assert 0.9 < vs["cosine"] <= 1.0 and 0 < vs["mean_abs_error"] <= vs["max_abs_error"]
    per_class = r["executors"]["program"]["per_class"]
    assert sum(c["samples"] for c in per_class) == 24
    worst = r["worst"]
    assert len(worst) == 5 and worst[0]["margin"] <= worst[-1]["margin"]
    assert {w["sample"] for w in worst if w["margin"] < 0} <= set(range(24))


def test_validate_program_alone_and_with_its_float_model(files, capsys):
    mtp = files / "m.mtp"
    assert main(["compile", str(files / "m.py"), "--calibration", str(files / "data.npz"),
                 "-o", str(mtp)]) == 0
    capsys.readouterr()
    program = mcutorch.load(mtp)
    data = np.load(files / "data.npz")
    pred = program.run(torch.from_numpy(data["x"])).numpy().argmax(1)
    r = validate(mtp, files / "data.npz")
    assert list(r["executors"]) == ["program"]
    assert r["executors"]["program"]["top1"] == pytest.approx((pred == data["y"]).mean())
    assert main(["validate", str(mtp), "--data", str(files / "data.npz"), "--model",
                 str(files / "m.py")]) == 0
    text = capsys.readouterr().out
    assert "24 samples" in text and "confusion matrix" in text
    lines = text.splitlines()
    head = next(line.split("  ") for line in lines if line.startswith("executor"))
    assert [h.strip() for h in head if h.strip()] == ["executor", "top-1", "vs", "mean |err|",
                                                      "max |err|", "cosine", "top-1 agreement"]
    row = next(line.split() for line in lines if line.startswith("program "))
    report = validate(mtp, files / "data.npz", model=_float_model(files))["executors"]["program"]
    assert row == ["program", f"{report['top1']:.4f}", "float",
                   f"{report['vs_float']['mean_abs_error']:.6g}",
                   f"{report['vs_float']['max_abs_error']:.6g}",
                   f"{report['vs_float']['cosine']:.6f}",
                   f"{report['vs_float']['top1_agreement']:.4f}"]
    matrix = lines[lines.index(next(line for line in lines if line.startswith("label"))) + 2:]
    for c, counts in enumerate(report["confusion"]):  # label, predicted counts, samples, acc.
        assert matrix[c].split()[:len(counts) + 2] == [str(c), *map(str, counts),
                                                       str(sum(counts))]


def test_validate_on_a_board_runs_the_dataset_in_one_qemu_run(files):
    program = mcutorch.compile(mcutorch.quantize(_float_model(files), (torch.zeros(1, 1, 6, 6),)),
                               (torch.zeros(1, 1, 6, 6),), target="cortex-m55")
    host = validate(program, files / "data.npz")
    board = validate(program, files / "data.npz", board="mps3-an547")
    assert len(program.last_run.per_inference) == 24  # one QEMU run, 24 inferences
    assert board["runs_on"] == "mps3-an547"
    assert board["executors"] == host["executors"]  # bit-exact: the same report


def test_regression_reports_errors_against_the_float_model(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 3), torch.nn.Tanh()).eval()
    x = np.random.default_rng(0).standard_normal((10, 8)).astype(np.float32)
    np.savez(tmp_path / "d.npz", x=x)
    q = mcutorch.quantize(model, (torch.zeros(1, 8),), calibration=[torch.from_numpy(x)])
    r = validate(mcutorch.compile(q, (torch.zeros(1, 8),)), tmp_path / "d.npz", model=model,
                 qmodel=q)
    assert not r["classifier"] and set(r["executors"]) == {"float", "fake_quant", "program"}
    assert r["executors"]["program"]["vs_float"]["max_abs_error"] < 0.1
    assert r["worst"][0]["mean_abs_error"] >= r["worst"][-1]["mean_abs_error"]


@pytest.mark.parametrize("arrays, words", [
    ({"x": np.zeros((3, 2)), "label": np.zeros(3)}, ["unknown key(s) label", "x0, x1"]),
    ({"x": np.zeros((3, 2)), "x0": np.zeros((3, 2))}, ["both x and x0"]),
    ({"x0": np.zeros((3, 2)), "x2": np.zeros((3, 2))}, ["x0, x2", "without gaps"]),
    ({"y": np.zeros(3)}, ["has no inputs"]),
    ({"x": np.zeros((3, 2)), "y": np.zeros(2)}, ["different numbers of samples (x: 3, y: 2)"]),
    ({"x": np.zeros((0, 2))}, ["x is float64[0, 2]", "non-empty"]),
])
def test_dataset_convention_errors(tmp_path, arrays, words):
    np.savez(tmp_path / "d.npz", **arrays)
    with pytest.raises(FileError) as e:
        load_dataset(tmp_path / "d.npz")
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_dataset_several_inputs_in_order(tmp_path):
    np.savez(tmp_path / "d.npz", x1=np.ones((2, 3)), x0=np.zeros((2, 5)), y=np.arange(2))
    d = load_dataset(tmp_path / "d.npz")
    assert [a.shape for a in d.inputs] == [(2, 5), (2, 3)] and list(d.labels) == [0, 1]
    assert load_dataset(tmp_path / "d.npz", labels=False).labels is None


def test_validate_user_mistakes_are_one_line(files, capsys):
    np.savez(files / "nolabels.npz", x=np.zeros((3, 1, 6, 6), np.float32))
    np.savez(files / "badshape.npz", x=np.zeros((3, 1, 5, 5), np.float32), y=np.zeros(3, int))
    np.savez(files / "classes.npz", x=np.zeros((3, 1, 6, 6), np.float32), y=np.array([0, 1, 9]))
    mtp = files / "m.mtp"
    assert main(["compile", str(files / "m.py"), "-o", str(mtp)]) == 0
    cases = [
        (["validate", str(mtp), "--data", str(files / "nolabels.npz")], "nothing to validate"),
        (["validate", str(mtp), "--data", str(files / "badshape.npz")], "expected float"),
        (["validate", str(mtp), "--data", str(files / "classes.npz")], "classes 0..9"),
        (["validate", str(mtp), "--data", str(files / "missing.npz")], "does not exist"),
        (["validate", str(mtp), "--data", str(files / "data.npz"), "--target", "cortex-m4"],
         "a program is already compiled"),
        (["validate", str(mtp), "--data", str(files / "data.npz"), "--board", "nope"],
         "nope"),
    ]
    for argv, words in cases:
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("mcutorch: error:") and len(err.strip().splitlines()) == 1, err
        assert words in err and "Traceback" not in err, (words, err)


def _cli(args, cwd, tty: bool) -> str:
    """stderr of `mcutorch ARGS` run in a subprocess, with a pseudo-terminal as stderr when
    `tty` (what a user's shell gives it)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "100"}
    cmd = [sys.executable, "-m", "mcutorch.cli", *args]
    if not tty:
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True).stderr
    leader, follower = pty.openpty()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=follower)
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
    proc.wait()
    os.close(leader)
    return b"".join(chunks).decode(errors="replace")


def test_progress_shows_on_a_terminal_only(files):
    args = ["compile", "m.py", "--calibration", "data.npz", "-o", "p.mtp"]
    on_tty = _cli(args, files, tty=True)
    assert "exporting and quantizing m.py" in on_tty and "compiling 4 ops" in on_tty, on_tty
    assert "calibrating" in on_tty and "/24" in on_tty and "0/?" not in on_tty, on_tty
    piped = _cli(args, files, tty=False)
    assert "calibrating" not in piped and "exporting" not in piped, piped
    quiet = _cli(["--quiet", *args], files, tty=True)
    assert "calibrating" not in quiet and "exporting" not in quiet, quiet


def test_version_and_help_texts(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("mcutorch ")
    for cmd, words in (("run", ["C runtime", "Python reference"]),
                       ("compile", ["the program file to write"]),
                       ("build", ["the firmware ELF to write", "mps3-an547"]),
                       ("export-c", ["the folder to write"]),
                       ("validate", ["dataset .npz", "MODEL_OR_PROGRAM"])):
        with pytest.raises(SystemExit):
            main([cmd, "--help"])
        out = " ".join(capsys.readouterr().out.split())
        for w in words:
            assert w in out, (cmd, w, out)
