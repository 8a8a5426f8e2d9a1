"""The program file: one binary per compiled model, read by the Python reference and the C runtime.

    from mcutorch.program import Program, load
    blob = program.to_bytes()            # deterministic; ProgramError if the program is invalid
    program = Program.from_bytes(blob)   # validates everything; ProgramError(reason, detail)
    w = program.const_array(3)           # numpy view of a constant, no copy

The layout is described once, in schema.py, which also generates runtime/include/mt_program.h
(`python -m mcutorch.program --c-header > runtime/include/mt_program.h`).
"""
from mcutorch.program.model import (Area, Binding, ConstantPool, DelegateInfo, OpInfo, Port,
                                    Program, RegionInfo, TargetInfo, TensorInfo)
from mcutorch.program.schema import ERRORS, VERSION_MAJOR, VERSION_MINOR

__all__ = ["Area", "Binding", "ConstantPool", "DelegateInfo", "OpInfo", "Port", "Program",
           "RegionInfo", "TargetInfo", "TensorInfo", "ERRORS", "VERSION_MAJOR", "VERSION_MINOR",
           "load", "save"]


def load(path, verify_crc: bool = True) -> Program:
    """Read and validate a program file."""
    return Program.load(path, verify_crc=verify_crc)


def save(program: Program, path) -> None:
    """Write `program` to `path`."""
    program.save(path)
