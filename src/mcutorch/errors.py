"""One exception family for every user-facing failure in mcutorch."""


class McutorchError(Exception):
    """Base class: every error mcutorch raises on bad input derives from it."""


class ExportError(McutorchError):
    """The model cannot be captured with torch.export (dynamic shapes, control flow, ...)."""


class QuantizeError(McutorchError):
    """PT2E quantization or calibration failed (NaN/Inf in calibration data, ...)."""


class UnsupportedOpError(McutorchError):
    """An op has no int8 lowering; the message names the op and where it came from."""


class PlanError(McutorchError):
    """The memory plan does not fit the target's memory; the message carries the memory map."""


class ProgramError(McutorchError):
    """A program file is malformed. `reason` is one of program.schema.ERRORS."""

    def __init__(self, reason: str, detail: str = ""):
        self.reason = reason
        super().__init__(f"{reason}: {detail}" if detail else reason)


class ExecutionError(McutorchError):
    """A valid program asked a kernel for something outside its domain (docs/numerics.md); the
    message names the op (index, name, source line) and what was wrong. The C runtime returns
    MT_STATUS_BAD_ARGUMENT for the same program (MT_STATUS_BAD_INPUT for an input value outside
    the domain: a token id outside an embedding's table)."""


class TargetError(McutorchError):
    """Unknown target/board name, or a program the chosen board cannot run."""


class ToolchainError(McutorchError):
    """arm-none-eabi-gcc, QEMU or another external tool is missing or failed."""


class InputError(McutorchError, ValueError):
    """Inputs to a run do not match the program: count, type, dtype, rank, shape, batch,
    layout, or NaN/Inf values. The message names the input and what was expected."""


class FileError(McutorchError):
    """A file or folder the user named is missing, is a directory, or is not what it should be
    (a program, a .npy array, an .npz archive, a folder to write into)."""


class UsageError(McutorchError):
    """Options that do not go together (`--profile` without `--board`, ...)."""


class RunError(McutorchError):
    """A run itself failed: the C runtime refused the program or a kernel, the firmware
    faulted or timed out. The message names the status, signal or sanitizer report."""
