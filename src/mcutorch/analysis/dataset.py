"""The dataset file: one `.npz` (np.savez), used by `mcutorch validate --data` and by
`mcutorch compile --calibration`.

    x            the model's input, samples on the first axis: x[i] is one sample
    x0, x1, ...  instead of x, for a model with several inputs (in the model's input order)
    y            optional labels, one per sample: class indices (int) for a classifier, or
                 target values of any shape

Any other key is refused (a misspelt key must not become a model input or be dropped
silently). Arrays are numeric; every array holds the same number of samples (at least one).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mcutorch.errors import FileError

_INPUT_KEY = re.compile(r"x(\d+)?")
CONVENTION = ("an .npz with the inputs as x (or x0, x1, ... for several inputs) and optional "
              "labels y, samples on the first axis: np.savez(path, x=inputs, y=labels)")


@dataclass
class Dataset:
    inputs: list[np.ndarray]  # one array per model input, samples on axis 0
    labels: np.ndarray | None = None
    path: str = ""

    def __len__(self) -> int:
        return len(self.inputs[0])

    def sample(self, i: int) -> tuple[np.ndarray, ...]:
        """Sample i as a batch of one per input."""
        return tuple(a[i:i + 1] for a in self.inputs)


def _read(path: Path, what: str) -> dict[str, np.ndarray]:
    try:
        with open(path, "rb") as f:
            magic = f.read(6)
    except OSError as e:
        raise FileError(f"cannot read {what} {path}: {e.strerror or e}") from None
    if magic == b"\x93NUMPY":
        raise FileError(f"{what} {path} is a single .npy array; it must be {CONVENTION}")
    if magic[:2] != b"PK":
        raise FileError(f"{what} {path} is not an .npz archive; it must be {CONVENTION}")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except ValueError as e:
        raise FileError(f"{what} {path} holds Python objects ({e}); save numeric arrays "
                        "with np.savez") from None
    except (OSError, EOFError) as e:
        raise FileError(f"{what} {path} is not a readable .npz archive "
                        f"({getattr(e, 'strerror', None) or e})") from None


def _input_keys(keys: list[str], path: Path, what: str) -> list[str]:
    inputs = [k for k in keys if _INPUT_KEY.fullmatch(k)]
    other = sorted(set(keys) - set(inputs) - {"y"})
    if other:
        raise FileError(f"{what} {path} has the unknown key(s) {', '.join(other)}; it must be "
                        f"{CONVENTION}")
    if not inputs:
        raise FileError(f"{what} {path} has no inputs (keys: {', '.join(keys) or 'none'}); it "
                        f"must be {CONVENTION}")
    if "x" in inputs and len(inputs) > 1:
        raise FileError(f"{what} {path} has both x and {', '.join(sorted(inputs)[1:])}: use x "
                        "for one input, or x0, x1, ... for several")
    if inputs == ["x"]:
        return inputs
    numbered = sorted(inputs, key=lambda k: int(k[1:]))
    if numbered != [f"x{i}" for i in range(len(numbered))]:
        raise FileError(f"{what} {path}: the inputs are {', '.join(numbered)}; number them "
                        "x0, x1, ... without gaps, in the model's input order")
    return numbered


def load_dataset(path, what: str = "dataset", labels: bool = True) -> Dataset:
    """The dataset file at `path` (see the module doc). `labels=False` ignores y (calibration
    needs inputs only). FileError names what is wrong and restates the convention."""
    path = Path(path)
    if path.is_dir():
        raise FileError(f"{what} {path} is a folder, not an .npz file")
    if not path.exists():
        raise FileError(f"{what} {path} does not exist")
    arrays = _read(path, what)
    keys = _input_keys(list(arrays), path, what)
    inputs = [arrays[k] for k in keys]
    y = arrays.get("y") if labels else None
    for k, a in [*zip(keys, inputs), *([("y", y)] if y is not None else [])]:
        if a.dtype.kind not in "biuf" or a.ndim == 0 or len(a) == 0:
            raise FileError(f"{what} {path}: {k} is {a.dtype}{list(a.shape)}; expected a "
                            "non-empty numeric array, samples on the first axis")
    counts = {k: len(a) for k, a in zip(keys, inputs)} | ({"y": len(y)} if y is not None else {})
    if len(set(counts.values())) > 1:
        raise FileError(f"{what} {path}: the arrays hold different numbers of samples ("
                        + ", ".join(f"{k}: {n}" for k, n in counts.items())
                        + "); each needs one entry per sample")
    return Dataset(inputs, y, str(path))
