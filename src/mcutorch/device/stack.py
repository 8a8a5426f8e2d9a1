"""Worst-case stack of the C runtime for one program, from gcc's own call graph.

Every source the firmware links (runtime core, the program's kernels, its kernel table) is
compiled once more with ``-fcallgraph-info=su``: gcc writes each function's static frame size and
its calls. The worst case of an entry point is the costliest call chain below it. The runtime
calls kernels only through the kernel table (indirect calls in ``mt_invoke`` and
``mt_run_op``), so an indirect call stands for every kernel of the program's table. The runtime
has no recursion (a cycle is an error) and no variable-length arrays (a dynamic frame is an
error). Calls into libc (``memcpy``, ``memset``) count 0 bytes and are listed in
`StackReport.uncounted`.

    >>> report = program_stack(mcutorch.load("kws.mtp").program)       # doctest: +SKIP
    >>> report.bytes, report.chain[:2]                                 # doctest: +SKIP
    (1312, ['mt_invoke', 'mt_conv2d_s8'])
"""
from __future__ import annotations

import functools
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from mcutorch.device.crt import core_sources, include_dirs
from mcutorch.device.kernels import INT16, kernel, kernel_table_c, sources_for
from mcutorch.device.toolchain import GCC, find_tool
from mcutorch.errors import ToolchainError
from mcutorch.targets import Target, parse_target

# the calls an application makes
ENTRY_POINTS = ("mt_load", "mt_bind_state", "mt_bind_static", "mt_invoke")
INDIRECT = "__indirect_call"
# Functions a kernel calls through a pointer (the kernels themselves are called so by mt_invoke),
# each with the kernel that sets the pointer: conv2d_add's add stage hands its gathered-window
# conv loop (mt_conv_gathered_add) and its spans to add's same-shape loop. An indirect call made
# below a kernel stands for the callbacks whose setter is in the build (not for the kernel table
# again, nor for a callback already on the chain).
KERNEL_CALLBACKS = {"mt_add_same_s8": "mt_conv2d_add_s8",
                    "mt_conv_gathered_add": "mt_conv2d_add_s8"}
_NODE = re.compile(r'node: \{ title: "([^"]+)" label: "([^"]*)"')
_EDGE = re.compile(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"')
_FRAME = re.compile(r"\\n(\d+) bytes \(([a-z,]+)\)")


@dataclass(frozen=True)
class StackReport:
    """Worst-case stack bytes of the deepest entry point, and the chain that needs them."""

    bytes: int
    chain: list[str]
    per_entry: dict[str, int] = field(default_factory=dict)
    uncounted: list[str] = field(default_factory=list)  # callees without frame information

    def describe(self) -> str:
        return f"{self.bytes:,} B ({' -> '.join(self.chain)})"


def _graph(ci_files: Sequence[Path]) -> tuple[dict[str, tuple[str, int | None]], dict]:
    """Nodes (title -> (function name, static frame bytes or None)) and edges of the call graphs."""
    nodes: dict[str, tuple[str, int | None]] = {}
    edges: dict[str, set[str]] = {}
    for path in ci_files:
        text = path.read_text()
        for title, label in _NODE.findall(text):
            frame = _FRAME.search(label)
            if frame and frame.group(2) != "static":
                raise ToolchainError(f"{label.split(chr(92))[0]}: {frame.group(2)} stack frame; "
                                     "the runtime's stack must be static")
            name = label.split("\\n")[0]
            if frame or title not in nodes:
                nodes[title] = (name, int(frame.group(1)) if frame else None)
        for src, dst in _EDGE.findall(text):
            edges.setdefault(src, set()).add(dst)
    return nodes, edges


def _worst(root: str, nodes, edges, indirect: Sequence[str], uncounted: set[str]):
    """(bytes, chain) of the costliest chain below `root` (memoised depth-first search)."""
    memo: dict[str, tuple[int, list[str]]] = {}
    active: set[str] = set()
    built = {n for n, _ in nodes.values()}
    callbacks = {t for t, (n, _) in nodes.items() if KERNEL_CALLBACKS.get(n) in built}

    def visit(title: str) -> tuple[int, list[str]]:
        if title in memo:
            return memo[title]
        if title in active:
            raise ToolchainError(f"recursion through {nodes.get(title, (title,))[0]}: the "
                                 "runtime's stack has no bound")
        active.add(title)
        name, frame = nodes.get(title, (title, None))
        if frame is None and title != INDIRECT:
            uncounted.add(name)
        callees = edges.get(title, set())
        if title == INDIRECT:
            callees = set(indirect)
        elif INDIRECT in callees and INDIRECT in active:  # a kernel's own indirect call
            callees = (callees - {INDIRECT}) | (callbacks - active)
        best = max((visit(c) for c in callees), default=(0, []), key=lambda r: r[0])
        active.discard(title)
        memo[title] = ((frame or 0) + best[0], [name, *best[1]] if title != INDIRECT else best[1])
        return memo[title]

    return visit(root)


def stack_usage(sources: Sequence[Path], target: str | Target, includes: Sequence[Path],
                defines: Mapping[str, object] | None = None, opt: str = "-Os",
                entry_points: Sequence[str] = ENTRY_POINTS,
                indirect: Sequence[str] = ()) -> StackReport:
    """Worst-case stack of `entry_points` for these sources built for `target` at `opt`;
    `indirect`: the functions an indirect call may reach (the kernels of the table)."""
    t = parse_target(target)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [find_tool(GCC), *t.gcc_flags, "-std=c99", opt, "-c", "-fcallgraph-info=su",
               *(f"-I{d}" for d in includes),
               *(f"-D{k}" if v is None else f"-D{k}={v}" for k, v in (defines or {}).items())]
        for i, src in enumerate(sources):  # one object per source: same basenames may repeat
            proc = subprocess.run([*cmd, str(src), "-o", f"{tmp}/{i}.o"], capture_output=True,
                                  text=True)
            if proc.returncode != 0:
                raise ToolchainError(f"stack analysis: compiling {src} failed:\n{proc.stderr}")
        nodes, edges = _graph(sorted(Path(tmp).glob("*.ci")))
    uncounted: set[str] = set()
    per_entry, worst = {}, (0, [])
    for entry in entry_points:
        if entry not in nodes:
            raise ToolchainError(f"stack analysis: {entry} is not among the sources")
        found = _worst(entry, nodes, edges, indirect, uncounted)
        per_entry[entry] = found[0]
        worst = max(worst, found, key=lambda r: r[0])
    return StackReport(worst[0], worst[1], per_entry, sorted(uncounted))


def program_stack(program, opt: str = "-Os") -> StackReport:
    """Worst-case stack the C runtime needs to load and run `program` on its recorded target."""
    from mcutorch.device.export_c import used_kernels

    return _kernels_stack(program.target.as_target().name, frozenset(used_kernels(program)), opt)


@functools.lru_cache(maxsize=32)
def _kernels_stack(target: str, used: frozenset, opt: str) -> StackReport:
    """`program_stack` of any program of `target` whose ops use these kernels (it depends on
    nothing else), computed once per process."""
    functions = [kernel(op, v).function for op, v in sorted(used)
                 if op != "delegate" and v != INT16]
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp) / "mt_kernels_model.c"
        table.write_text(kernel_table_c(used))
        return stack_usage([*core_sources(), *sources_for(used), table], target,
                           include_dirs(), opt=opt,
                           indirect=functions)
