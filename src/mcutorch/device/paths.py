"""Where mcutorch's C sources live, and where builds are cached.

In a checkout the sources sit at the repository root (``runtime/``, ``boards/``,
``tools/qemu_plugin/``); an installed wheel carries the same trees as package data in
``mcutorch/device/csrc/``. `SOURCES` is whichever exists (``MCUTORCH_SOURCES`` overrides).
Builds (host runners, firmware, the QEMU plugin) are cached under ``build/`` in a checkout and
under ``$XDG_CACHE_HOME/mcutorch`` (default ``~/.cache/mcutorch``) for an installed package;
``MCUTORCH_CACHE`` overrides both. Nothing is ever written next to the packaged sources
(site-packages may be read-only, and is shared by every user of the environment).

    >>> (RUNTIME / "include" / "mcutorch.h").is_file()
    True
"""
from __future__ import annotations

import os
from pathlib import Path

_PACKAGED = Path(__file__).resolve().parent / "csrc"
_CHECKOUT = Path(__file__).resolve().parents[3]


def _sources() -> Path:
    env = os.environ.get("MCUTORCH_SOURCES")
    if env:
        return Path(env)
    if (_PACKAGED / "runtime").is_dir():  # an installed wheel (setup.py copies the trees)
        return _PACKAGED
    if (_CHECKOUT / "runtime").is_dir():  # a checkout (also an editable install)
        return _CHECKOUT
    return _PACKAGED  # neither: an install without its package data; errors name csrc/


def _cache() -> Path:
    env = os.environ.get("MCUTORCH_CACHE")
    if env:
        return Path(env)
    if SOURCES == _CHECKOUT:
        return _CHECKOUT / "build"
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mcutorch"


SOURCES = _sources()
RUNTIME = SOURCES / "runtime"  # C99 runtime: include/, src/, port/, harness/, kernels/
KERNELS = RUNTIME / "kernels"
INCLUDE_DIRS = (RUNTIME / "include", KERNELS)  # what every kernel build needs
BOARDS = Path(os.environ.get("MCUTORCH_BOARDS_DIR") or SOURCES / "boards")  # start-up, link.ld
QEMU_PLUGIN = SOURCES / "tools" / "qemu_plugin"  # mt_exact.c, the exact-count TCG plugin
CACHE = _cache()


def build_dir(kind: str) -> Path:
    """The cache folder for one kind of build ("host", "firmware", "qemu_plugin")."""
    return CACHE / kind
