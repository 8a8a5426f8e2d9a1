"""The program file: one binary per compiled model, read by the Python reference and the C runtime.

    from mcutorch.program import Program, load
    blob = program.to_bytes()            # deterministic; ProgramError if the program is invalid
    program = Program.from_bytes(blob)   # validates everything; ProgramError(reason, detail)
    w = program.const_array(3)           # numpy view of a constant, no copy

The layout is described once, in schema.py (which also generates runtime/include/mt_program.h:
`python -m mcutorch.program.schema --c-header`). Names are imported lazily so that running
schema.py as a module does not import it twice.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    **dict.fromkeys(("Area", "Binding", "ConstantPool", "DelegateInfo", "OpInfo", "Program",
                     "RegionInfo", "TargetInfo", "TensorInfo"), "model"),
    **dict.fromkeys(("ERRORS", "VERSION_MAJOR", "VERSION_MINOR", "check_header_current"),
                    "schema"),
}
__all__ = [*_EXPORTS, "load", "save"]


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'mcutorch.program' has no attribute {name!r}")
    return getattr(importlib.import_module(f"mcutorch.program.{_EXPORTS[name]}"), name)


def load(path, verify_crc: bool = True):
    """Read and validate a program file -> Program."""
    from mcutorch.program.model import Program

    return Program.load(path, verify_crc=verify_crc)


def save(program, path) -> None:
    """Write `program` to `path`."""
    program.save(path)
