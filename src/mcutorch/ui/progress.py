"""Progress on long steps (calibration, export, Vela, firmware builds, QEMU runs), on stderr.

Shown only when stderr is a terminal (never in logs or pipes) unless forced, and never with
`configure(quiet=True)` (the CLI's --quiet). Drawn with `rich`: one live display whose lines are
the steps running now (a step inside another adds a line under it); each line goes away when
its step ends, so what stays on the terminal is mcutorch's own one-line results.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

_settings = {"quiet": False, "force": False}
_live: dict = {"progress": None, "stream": None}


def configure(quiet: bool = False, force: bool = False) -> None:
    """quiet: show nothing; force: show progress even when stderr is not a terminal."""
    _settings.update(quiet=quiet, force=force)


def enabled() -> bool:
    return not _settings["quiet"] and (_settings["force"] or sys.stderr.isatty())


def _start():
    """The live display, on a copy of stderr's file descriptor (a step that sends the process's
    own fds elsewhere, as Vela's console goes to its log, leaves the display on screen)."""
    from rich.console import Console
    from rich.progress import (BarColumn, Progress, ProgressColumn, SpinnerColumn, TextColumn,
                               TimeElapsedColumn)
    from rich.text import Text

    class Count(ProgressColumn):  # "9/24" for a bar; nothing for a status line
        def render(self, task):
            return Text("" if task.total is None else f"{int(task.completed)}/{int(task.total)}",
                        style="progress.download")

    sys.stderr.flush()
    stream = os.fdopen(os.dup(sys.stderr.fileno()), "w")
    console = Console(file=stream, force_terminal=_settings["force"] or None)
    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                        Count(), TimeElapsedColumn(), console=console, transient=True)
    progress.start()
    _live.update(progress=progress, stream=stream)
    return progress


@contextmanager
def _step(description: str, total: int | None):
    """A line of the live display for the block's duration; yields an advance() callable."""
    if not enabled():
        yield lambda: None
        return
    outer = _live["progress"] is None
    progress = _start() if outer else _live["progress"]
    task = progress.add_task(description, total=total)
    try:
        yield lambda: progress.advance(task)
    finally:
        progress.remove_task(task)
        if outer:
            progress.stop()
            _live["stream"].close()
            _live.update(progress=None, stream=None)


def track(items: Iterable, description: str, enabled: bool = True) -> Iterator:
    """Iterate `items` under one progress bar (plain iteration when `enabled` is False)."""
    items = list(items)
    if not enabled:
        yield from items
        return
    with _step(description, len(items)) as advance:
        for item in items:
            yield item
            advance()


@contextmanager
def status(text: str):
    """A spinner line with `text` and the elapsed time while the block runs."""
    with _step(text, None):
        yield
