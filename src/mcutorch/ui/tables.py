"""The CLI's text tables (analyze, validate, inspect, run --profile), drawn with `rich`.

A report is a list of parts: lines of text and `table(...)`s. `text(parts)` renders them to a
plain string: no colour, no markup, ASCII only (a dashed rule under each header), every table
at its natural width and every line unwrapped, whatever the terminal or $COLUMNS says, so pipes,
logs and tests read the same text. `show(parts)` prints them: on a terminal through a rich
Console (the terminal's width, tables fitted to it, bold headers), else `text(parts)`.
"""
from __future__ import annotations

import io
import sys

WIDE = 10_000  # the plain text's console width: wider than any table, so nothing wraps
# rich's Box spec, 8 rows of 4 (left, horizontal, divider, right): only the header's rule
RULE = "    \n    \n -- \n    \n    \n    \n    \n    \n"


def table(*columns: str, right: tuple[str, ...] = (), wrap: tuple[str, ...] = ()):
    """A table with these column headers; the columns named in `right` are right-aligned, those
    in `wrap` (prose) wrap on a terminal too narrow for the table, the others never do."""
    from rich.box import Box
    from rich.table import Table

    t = Table(box=Box(RULE, ascii=True), show_edge=False, pad_edge=False, padding=(0, 1, 0, 0),
              highlight=False)
    for name in columns:
        t.add_column(name, justify="right" if name in right else "left",
                     no_wrap=name not in wrap, overflow="fold")
    return t


def cell(value) -> str:
    """A cell's text: ints with thousands separators, None as "-"."""
    if value is None:
        return "-"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def add(t, *values) -> None:
    """Append a row (values shown literally: "[0] conv2d" is text, not rich markup)."""
    from rich.text import Text

    t.add_row(*(Text(cell(v)) for v in values))


def _print(console, parts: list) -> None:
    from rich.text import Text

    for part in parts:
        console.print(Text(part) if isinstance(part, str) else part)


def text(parts: list) -> str:
    """The parts as plain text (see the module docstring)."""
    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, width=WIDE, color_system=None, force_terminal=False,
                      force_jupyter=False, no_color=True, highlight=False, markup=False,
                      emoji=False, soft_wrap=True, legacy_windows=False)
    _print(console, parts)
    return "\n".join(line.rstrip() for line in out.getvalue().rstrip("\n").split("\n"))


def show(parts: list) -> None:
    """Print the parts on stdout: rich on a terminal, plain `text(parts)` otherwise."""
    if not sys.stdout.isatty():
        print(text(parts))
        return
    from rich.console import Console

    _print(Console(highlight=False, markup=False, emoji=False), parts)
