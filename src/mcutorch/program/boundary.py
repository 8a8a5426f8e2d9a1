"""Checking the inputs of a run against the program, before anything is converted or run.

Every entry point (`CompiledModel.run`, `run_int8`, `run_on_board`, `quantize_inputs`, and
`mcutorch run` with or without `--int8` / `--board`) goes through here, so a wrong input is one
`InputError` naming the input and what was expected, never a reshape of the wrong bytes:

* float I/O (`float_inputs`): a torch.Tensor or numpy array per model input, float16, float32 or
  float64 (cast to float32; integer, bool, complex, string and object arrays are refused), of the
  model's rank and shape in the model's layout (NCHW for images), with a batch that is a
  multiple of the compiled batch (the run loops over it), all finite (NaN or Inf would quantize
  to an arbitrary int8 value);
* int8 I/O (`int8_inputs`): exactly the program's dtype and NHWC shape, one inference.
"""
from __future__ import annotations

import numpy as np

from mcutorch.errors import InputError
from mcutorch.program import schema as S
from mcutorch.program.model import Port, Program

FLOAT_DTYPES = (np.float16, np.float32, np.float64)
TO_NHWC, TO_NCHW = (0, 2, 3, 1), (0, 3, 1, 2)


def _layout_text(port: Port, float_side: bool) -> str:
    if not float_side:
        return " (NHWC, the program's layout)" if len(port.shape) == 4 else ""
    if port.layout == "NCHW":
        return " (NCHW, the model's layout)"
    if port.layout == "NHWC":
        return " (NHWC, the program's layout)"
    return ""


def _expected(port: Port, float_side: bool) -> str:
    shape = list(port.model_shape if float_side else port.shape)
    if port.is_ids:
        return f"{port.label}: expected int32 token ids in [0, {port.ids_below}) of shape {shape}"
    kind = "float" if float_side else port.dtype
    return f"{port.label}: expected {kind} {shape}{_layout_text(port, float_side)}"


def _a(word: str) -> str:
    return f"{'an' if word[:1] in 'aeio' else 'a'} {word}"


def _kind_of(x) -> str:
    """'a list of 2 items', 'a dict', 'a float', ... for a value that is not an array."""
    if isinstance(x, (list, tuple)):
        return f"a {type(x).__name__} of {len(x)} items"
    if isinstance(x, np.ndarray) or type(x).__module__.startswith("torch"):
        kind = "numpy array" if isinstance(x, np.ndarray) else "torch.Tensor"
        return f"a {kind} of shape {list(getattr(x, 'shape', []))}"
    return _a(type(x).__name__)


def _as_array(x, port: Port, float_side: bool):
    """(numpy array, dtype name as the user knows it) of a tensor or array, else InputError."""
    if type(x).__module__.startswith("torch") and hasattr(x, "detach"):
        import torch

        t = x.detach().cpu()
        if float_side and t.dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            return t.float().numpy(), str(t.dtype).replace("torch.", "")
        if t.dtype == torch.bfloat16 or t.is_complex() or t.dtype == torch.bool:
            return None, str(t.dtype).replace("torch.", "")
        return t.numpy(), str(t.dtype).replace("torch.", "")
    if isinstance(x, np.ndarray):
        return x, x.dtype.name if x.dtype.kind not in "US" else f"string ({x.dtype.str})"
    hint = ""
    if isinstance(x, (list, tuple)):
        hint = ("; pass the inputs as separate arguments, run(x, y), or make an array with "
                "np.asarray(...)") if float_side else "; each input must be one array"
    elif isinstance(x, dict):
        hint = "; pass the inputs positionally, in the model's order"
    raise InputError(f"{_expected(port, float_side)}, got {_kind_of(x)} instead of a "
                     f"{'torch.Tensor or ' if float_side else ''}numpy array{hint}")


def _shape_hint(got: tuple, want: tuple, from_layout: str) -> str:
    """A likely cause of a shape mismatch: the other image layout, or a missing batch axis."""
    if len(got) == 4 and len(want) == 4 and got != want:
        if from_layout == "NCHW" and got[1:] == tuple(want[i] for i in (2, 3, 1)):
            return "; an NHWC array? transpose it with x.transpose(0, 3, 1, 2)"
        if from_layout == "NHWC" and got[1:] == tuple(want[i] for i in (3, 1, 2)):
            return "; an NCHW array? transpose it with x.transpose(0, 2, 3, 1)"
    if len(got) + 1 == len(want) and got == tuple(want[1:]):
        return "; missing the batch axis? use x[None]"
    return ""


def check_count(program: Program, inputs, what: str) -> None:
    ports = program.ports("inputs")
    if isinstance(inputs, dict) or not isinstance(inputs, (list, tuple)):
        raise InputError(f"{what} takes a list of {len(ports)} arrays "
                         f"({', '.join(p.name for p in ports)}), got {_kind_of(inputs)}")
    if len(inputs) != len(ports):
        hint = ""
        if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)):
            hint = "; pass the inputs as separate arguments: run(*inputs)"
        raise InputError(f"{what}: the model takes {len(ports)} input"
                         f"{'s' if len(ports) != 1 else ''} "
                         f"({', '.join(p.name for p in ports)}), got {len(inputs)}{hint}")


def float_inputs(program: Program, inputs, what: str = "run()") -> tuple[list[np.ndarray], int]:
    """Float inputs in the model's layout -> (float32 arrays, number of inferences): each
    input's batch must be the same multiple of the compiled batch. InputError otherwise."""
    check_count(program, inputs, what)
    arrays, counts = [], []
    for port, x in zip(program.ports("inputs"), inputs):
        a, dtype = _as_array(x, port, not port.is_ids)
        if port.is_ids:
            a = token_ids(port, a, dtype)
        elif a is None or a.dtype.type not in FLOAT_DTYPES:
            hint = ""
            if a is not None and a.dtype.kind in "iu":
                hint = (": cast it with x.astype(np.float32), or give the program's own int8 "
                        "values to run_int8() / `mcutorch run --int8`")
            raise InputError(f"{_expected(port, True)}, got {_a(dtype)} array; float I/O takes "
                             f"float16, float32 or float64 arrays{hint}")
        want, got = port.model_shape, tuple(a.shape)
        if len(got) != len(want) or got[1:] != want[1:]:
            rank = f" (rank {len(got)}, expected rank {len(want)})" if len(got) != len(want) \
                else ""
            raise InputError(f"{_expected(port, True)}, got {list(got)}{rank}"
                             f"{_shape_hint(got, want, port.layout)}")
        batch = want[0] if want else 1
        if want and (got[0] == 0 or got[0] % batch):
            raise InputError(f"{_expected(port, True)}, got {list(got)}: a batch of {got[0]} "
                             f"is not a positive multiple of the compiled batch {batch}")
        if port.is_ids:
            arrays.append(a)
            counts.append(got[0] // batch if want else 1)
            continue
        with np.errstate(over="ignore"):  # float64 beyond float32: inf, reported below
            f32 = np.asarray(a, np.float32)
        bad = ~np.isfinite(f32)
        if bad.any():
            n_nan, n_inf = int(np.isnan(a).sum()), int(np.isinf(a).sum())
            n_big = int(bad.sum()) - n_nan - n_inf
            parts = [f"{n} {name}" for n, name in ((n_nan, "NaN"), (n_inf, "Inf"),
                                                    (n_big, "beyond float32's range")) if n]
            first = [int(i) for i in np.argwhere(bad)[0]]
            raise InputError(f"{port.label} holds {' and '.join(parts)} values (the first at "
                             f"index {first}): the int8 program has no value for them; clean "
                             "the input (e.g. np.nan_to_num) before running")
        a = f32
        arrays.append(a)
        counts.append(got[0] // batch if want else 1)
    if len(set(counts)) > 1:
        ports = program.ports("inputs")
        raise InputError("the inputs have different batches: "
                         + ", ".join(f"{p.label} {len(a)}" for p, a in zip(ports, arrays))
                         + "; every input needs the same batch")
    return arrays, counts[0] if counts else 1


def token_ids(port: Port, a, dtype: str) -> np.ndarray:
    """An integer array (torch int64/int32/..., numpy ints) of ids in [0, port.ids_below) as
    int32; InputError naming the input otherwise (floats, bools, an id out of range)."""
    if a is None or a.dtype.kind not in "iu":
        raise InputError(f"{_expected(port, True)}, got {_a(dtype)} array; token ids are "
                         "integers (torch.long / int32 tensors or numpy integer arrays)")
    bad = np.flatnonzero((a < 0) | (a >= port.ids_below)) if a.size else ()
    if len(bad):
        at = [int(i) for i in np.unravel_index(bad[0], a.shape)]
        raise InputError(f"{_expected(port, True)}, got {int(a[tuple(at)])} at index {at} "
                         f"({len(bad)} ids outside the range)")
    return a.astype(np.int32)


def int8_inputs(program: Program, inputs, what: str = "run_int8()") -> list[np.ndarray]:
    """The program's own int8 inputs (dtype and NHWC shape exactly, one inference), as
    arrays; InputError otherwise."""
    check_count(program, inputs, what)
    out = []
    for port, x in zip(program.ports("inputs"), inputs):
        a, dtype = _as_array(x, port, False)
        want_dtype = np.dtype(S.DTYPE_NUMPY[port.dtype])
        if a is None or a.dtype != want_dtype:
            hint = ""
            if a is not None and a.dtype.kind == "f":
                hint = ("; these are the program's quantized values: quantize floats with "
                        "quantize_inputs(), or use run() / `mcutorch run` without --int8 for "
                        "float I/O")
            raise InputError(f"{_expected(port, False)}, got {_a(dtype)} array{hint}")
        got = tuple(a.shape)
        if got != port.shape:
            hint = _shape_hint(got, port.shape, "NHWC")
            if not hint and len(got) == len(port.shape) and got[1:] == port.shape[1:]:
                hint = ("; int8 I/O is one inference: run a batch through run() / "
                        "`mcutorch run` without --int8")
            raise InputError(f"{_expected(port, False)}, got {list(got)}{hint}")
        out.append(np.ascontiguousarray(a))
    return out


def split_batch(arrays: list[np.ndarray], program: Program, count: int) -> list[list[np.ndarray]]:
    """Float inputs of `count` inferences -> one list of inputs per inference."""
    ports = program.ports("inputs")
    steps = [p.model_shape[0] if p.model_shape else 1 for p in ports]
    return [[a[k * s:(k + 1) * s] for a, s in zip(arrays, steps)] for k in range(count)]


__all__ = ["float_inputs", "int8_inputs", "split_batch", "check_count", "token_ids"]
