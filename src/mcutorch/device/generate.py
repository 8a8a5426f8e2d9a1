"""The C files generated from Python tables, and a check that the checked-in copies are current.

    python -m mcutorch.device.generate           # write them all
    python -m mcutorch.device.generate --check   # exit 1 (naming the stale files) if any differs

    runtime/include/mt_program.h     program/c_header.py: format structs, enums, opcodes, operand
                                     and attribute indices (program/schema.py + mcutorch.ops)
    runtime/kernels/mt_kernels.h     device/kernels.py: every kernel's prototype (mcutorch.ops)
    runtime/kernels/mt_kernels_all.c device/kernels.py: the table of every kernel
    boards/<board>/link.ld           device/toolchain.py: linker scripts (device/boards.py)
    docs/supported_ops.md            device/ops_doc.py: the op table users read (mcutorch.ops)
"""
from __future__ import annotations

import sys
from pathlib import Path

from mcutorch.device import kernels, ops_doc, paths, toolchain
from mcutorch.device.boards import BOARDS


def generated() -> dict[Path, str]:
    """Every generated file: path -> the text it must hold."""
    from mcutorch.program.c_header import generate as program_header

    files = {paths.RUNTIME / "include" / "mt_program.h": program_header(),
             kernels.HEADER: kernels.kernels_header_c(),
             kernels.ALL_TABLE_SOURCE: kernels.all_table_c()}
    for board in BOARDS:
        files[toolchain.linker_script_path(board)] = toolchain.linker_script(board)
    if (paths.SOURCES / "docs").is_dir():  # a checkout (an installed wheel has no docs)
        files[ops_doc.PATH] = ops_doc.generate()
    return files


def stale() -> list[Path]:
    """Generated files whose checked-in text differs from what the tables give now."""
    return [p for p, text in generated().items() if not p.is_file() or p.read_text() != text]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--check"]:
        bad = stale()
        for p in bad:
            print(f"{p}: STALE; regenerate with `python -m mcutorch.device.generate`")
        return 1 if bad else 0
    if args:
        print("usage: python -m mcutorch.device.generate [--check]", file=sys.stderr)
        return 2
    for p, text in generated().items():
        if not p.is_file() or p.read_text() != text:
            p.write_text(text)
            print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
