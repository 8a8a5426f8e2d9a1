"""`pip install` of a built wheel works without the checkout: the C runtime, kernels, board
files and QEMU plugin source travel as package data (setup.py, MANIFEST.in).

The test builds the sdist from the checkout, the wheel from the unpacked sdist (so both carry
the C sources), installs the wheel with ``--no-deps`` into a fresh venv whose heavy
dependencies (torch, numpy, ...) come from this environment's site-packages through a ``.pth``
file, minus any mcutorch (editable finder, dist-info), and runs the CLI from outside the repo:
compile, export-c + make, run on the host and on QEMU's mps3-an547 (bit-exact), --exact.
"""
from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.qemu

ROOT = Path(__file__).resolve().parents[2]
TREES = ("runtime", "boards", "tools/qemu_plugin")
BUILD_OUTPUTS = {".o", ".a", ".so", ".elf", ".map", ".bin", ".pyc"}

MODEL_FILE = '''
import torch
from torch import nn

def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(8 * 4 * 4, 5), nn.Softmax(-1)).eval()

def example_inputs():
    return (torch.zeros(1, 1, 8, 8),)

def calibration():
    g = torch.Generator().manual_seed(1)
    return [torch.randn(1, 1, 8, 8, generator=g) for _ in range(8)]
'''


def _run(cmd, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"$ {' '.join(map(str, cmd))}\n{r.stdout}\n{r.stderr}"
    return r


def _repo_sources() -> set[str]:
    """The C source trees' files as the repository has them (git), relative to ROOT."""
    r = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--", *TREES],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail("the wheel test compares the package data with `git ls-files`: run it in a "
                    "git checkout of mcutorch")
    return set(r.stdout.split())


def _build_wheel(tmp: Path) -> Path:
    """sdist from the checkout, then the wheel from the unpacked sdist; returns the wheel."""
    dist = tmp / "dist"
    dist.mkdir()
    r = _run([sys.executable, "-c",
              "import sys; from setuptools import build_meta as b; "
              "print(b.build_sdist(sys.argv[1]))",
              dist], cwd=ROOT)
    sdist = dist / r.stdout.strip().splitlines()[-1]
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.isfile()]
        tar.extractall(tmp / "sdist", filter="data")
    top, _ = members[0].name.split("/", 1)
    shipped = {m.name.split("/", 1)[1] for m in members}
    assert _repo_sources() <= shipped, "MANIFEST.in misses C sources"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
          "-w", dist, tmp / "sdist" / top])
    (wheel,) = dist.glob("mcutorch-*.whl")
    return wheel


def _venv(tmp: Path) -> tuple[Path, Path]:
    """A fresh venv seeing this environment's packages except mcutorch; (python, site-packages)."""
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    py = venv / "bin" / "python"
    purelib = Path(_run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
                        ).stdout.strip())
    # Symlink every top-level entry of our site-packages but mcutorch's own into deps/<i>/;
    # .pth files there are not processed, so no editable finder can sneak the checkout in.
    dirs = []
    ours = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE
                                       else [])]
    for i, sp in enumerate(d for d in dict.fromkeys(ours) if Path(d).is_dir()):
        deps = tmp / "deps" / str(i)
        deps.mkdir(parents=True)
        for entry in Path(sp).iterdir():
            name = entry.name.lower()
            if name.startswith(("mcutorch", "__editable__", "_mcutorch")) or name.endswith(".pth"):
                continue
            (deps / entry.name).symlink_to(entry)
        dirs.append(str(deps))
    (purelib / "zz_project_deps.pth").write_text("\n".join(dirs) + "\n")
    return py, purelib


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def test_installed_wheel_runs_the_cli_outside_the_checkout(tmp_path):
    wheel = _build_wheel(tmp_path)
    py, purelib = _venv(tmp_path)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "MCUTORCH_SOURCES", "MCUTORCH_BOARDS_DIR", "MCUTORCH_CACHE")}
    env.update(PYTHONNOUSERSITE="1", MCUTORCH_CACHE=str(tmp_path / "cache"),
               XDG_CACHE_HOME=str(tmp_path / "xdg"))
    _run([py, "-m", "pip", "install", "--no-deps", "--no-index", "-q", wheel], env=env,
         cwd=tmp_path)

    # The wheel's C sources: exactly the repository's, and no build outputs.
    pkg = purelib / "mcutorch"
    csrc = _files(pkg / "device" / "csrc")
    assert csrc == _repo_sources()
    assert not {Path(f).suffix for f in csrc} & BUILD_OUTPUTS
    installed = _files(pkg)

    # paths.py resolves to the packaged copy; the cache to MCUTORCH_CACHE, else XDG_CACHE_HOME.
    probe = ("import importlib, json, os, mcutorch, mcutorch.device.paths as p\n"
             "a = dict(file=mcutorch.__file__, sources=str(p.SOURCES), boards=str(p.BOARDS),\n"
             "         plugin=str(p.QEMU_PLUGIN), cache=str(p.CACHE))\n"
             "del os.environ['MCUTORCH_CACHE']; importlib.reload(p); a['default'] = str(p.CACHE)\n"
             "print(json.dumps(a))")
    where = json.loads(_run([py, "-c", probe], env=env, cwd=tmp_path).stdout)
    assert Path(where["file"]).is_relative_to(tmp_path / "venv")
    assert Path(where["sources"]) == pkg / "device" / "csrc"
    assert Path(where["boards"]) == pkg / "device" / "csrc" / "boards"
    assert Path(where["plugin"]) == pkg / "device" / "csrc" / "tools" / "qemu_plugin"
    assert Path(where["cache"]) == tmp_path / "cache"
    assert Path(where["default"]) == tmp_path / "xdg" / "mcutorch"

    # The CLI, from a folder outside the checkout.
    mcutorch = [py.parent / "mcutorch"]
    work = tmp_path / "work"
    work.mkdir()
    (work / "tiny.py").write_text(MODEL_FILE)
    x = np.random.default_rng(0).standard_normal((1, 1, 8, 8)).astype(np.float32)
    np.save(work / "x.npy", x)

    def cli(*args):
        return _run([*mcutorch, *args], env=env, cwd=work).stdout

    cli("compile", "tiny.py", "--target", "cortex-m55", "--board", "mps3-an547", "-o", "tiny.mtp")
    cli("export-c", "tiny.mtp", "-o", "out")
    _run(["make", "-C", work / "out"], env=env)
    assert (work / "out" / "model.elf").stat().st_size > 0
    cli("run", "tiny.mtp", "--input", "x.npy", "--output", "host.npy")
    cli("run", "tiny.mtp", "--input", "x.npy", "--output", "board.npy", "--board", "mps3-an547")
    host, board = np.load(work / "host.npy"), np.load(work / "board.npy")
    assert host.shape == (1, 5) and np.array_equal(host, board)
    exact = cli("run", "tiny.mtp", "--input", "x.npy", "--board", "mps3-an547", "--profile",
                "--exact")
    assert "exact (QEMU plugin)" in exact and "fully_connected" in exact

    # Builds went to MCUTORCH_CACHE, nothing was written into site-packages or ~/.cache.
    assert any((tmp_path / "cache" / "firmware").iterdir())
    assert list((tmp_path / "cache" / "qemu_plugin").glob("mt_exact-*.so"))
    assert _files(pkg) == installed
    assert not (tmp_path / "xdg").exists()
