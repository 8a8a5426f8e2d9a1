"""Ships the C sources in the wheel: everything else is in pyproject.toml.

The C runtime and kernels (``runtime/``), the board start-up code and linker scripts
(``boards/``) and the QEMU plugin source (``tools/qemu_plugin/``) live once, at the repository
root. `build_py` copies them into ``mcutorch/device/csrc/`` of the build, where
`mcutorch.device.paths` looks first; MANIFEST.in lists the same files for the sdist. An
editable install (``pip install -e .``) copies nothing: paths.py finds the checkout.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
TREES = ("runtime", "boards", "tools/qemu_plugin")  # relative to ROOT and to csrc/
# Sources needed at run time (keep MANIFEST.in in step); never build outputs.
PATTERNS = ("*.c", "*.h", "*.ld", "*.ld.in", "Makefile", "README*")
DEST = Path("mcutorch", "device", "csrc")


def csrc_files() -> list[Path]:
    """The C source files to ship, relative to ROOT."""
    files = set()
    for tree in TREES:
        for pattern in PATTERNS:
            files.update(p.relative_to(ROOT) for p in (ROOT / tree).rglob(pattern) if p.is_file())
    return sorted(files)


class BuildPyWithCSources(build_py):
    """`build_py` that also copies TREES into ``<build_lib>/mcutorch/device/csrc/``."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        dest = Path(self.build_lib) / DEST
        shutil.rmtree(dest, ignore_errors=True)  # no stale files from an earlier build
        files = csrc_files()
        if not any(f.name == "mcutorch.h" for f in files):
            raise RuntimeError(f"C runtime sources not found under {ROOT}/runtime")
        for rel in files:
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            self.copy_file(str(ROOT / rel), str(target), preserve_mode=False)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs = super().get_outputs(include_bytecode)
        if getattr(self, "editable_mode", False):
            return outputs
        return outputs + [str(Path(self.build_lib) / DEST / rel) for rel in csrc_files()]


setup(cmdclass={"build_py": BuildPyWithCSources})
