"""Bit-exact check of a TOSA lowering: TOSA reference model vs mcutorch's reference kernels.

`verify` runs one lowered node set on both and compares every output; a difference is an error
that names the first differing tensor and op (found by re-running with every intermediate tensor
exposed) and how many elements differ. There is no tolerance. `verify_program_graph` does this for
every lowerable run of a program's graph, on seeded random int8 inputs plus any real inputs.
"""
from __future__ import annotations

import os
import sys
import tempfile
from contextlib import contextmanager

import numpy as np

from mcutorch.errors import McutorchError
from mcutorch.ir import Graph, Node, Tensor
from mcutorch.ref import KERNELS
from mcutorch.ref import OUT_DTYPE_OPS

from mcutorch.backends.tosa.lower import TosaGraph, lower_graph
from mcutorch.backends.tosa.support import tosa_runs


class TosaMismatchError(McutorchError):
    """The TOSA reference model and the mcutorch reference kernels disagree (or TOSA failed)."""


@contextmanager
def _captured_output():
    """Collect what the reference model's C++ prints on fd 1 and 2; yields a reader."""
    with tempfile.TemporaryFile() as tmp:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = [os.dup(1), os.dup(2)]
        os.dup2(tmp.fileno(), 1)
        os.dup2(tmp.fileno(), 2)
        try:
            yield lambda: (tmp.seek(0), tmp.read().decode(errors="replace"))[1]
        finally:
            for fd, old in zip((1, 2), saved):
                os.dup2(old, fd)
                os.close(old)


def run_tosa(tg: TosaGraph, arrays) -> list[np.ndarray]:
    """Outputs of the TOSA reference model; TosaMismatchError unless the graph status is VALID."""
    import tosa_reference_model

    arrays = [np.ascontiguousarray(a, np.int16 if t.dtype == "int16" else np.int8)
              for a, t in zip(arrays, tg.inputs)]
    with _captured_output() as log:
        outputs, status = tosa_reference_model.run(tg.flatbuffer, arrays)
        text = log()
    if status != tosa_reference_model.GraphStatus.TOSA_VALID:
        lines = [ln for ln in text.splitlines() if ln.strip() and "Different TOSA spec" not in ln]
        raise TosaMismatchError(f"TOSA reference model: {status.name} on "
                                f"{_describe(tg.nodes)}:\n  " + "\n  ".join(lines[:6]))
    return [np.asarray(o).reshape(t.shape).astype(t.dtype) for o, t in zip(outputs, tg.outputs)]


def run_reference(nodes: list[Node], feeds: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
    """Run `nodes` with mcutorch.ref.KERNELS; feeds/result map id(tensor) -> array."""
    values = dict(feeds)
    for node in nodes:
        args = [t.data if t.is_const else values[id(t)] for t in node.inputs]
        try:
            if node.op == "reshape":
                out = args[0].reshape(node.outputs[0].shape)
            elif node.op in OUT_DTYPE_OPS:  # rescale: told its output's dtype
                out = OUT_DTYPE_OPS[node.op](*args, node.outputs[0].dtype, **node.attrs)
            else:
                out = KERNELS[node.op](*args, **node.attrs)
        except ValueError as e:
            raise TosaMismatchError(f"input outside the domain of {node}: {e}") from None
        values[id(node.outputs[0])] = out
    return values


def _describe(nodes: list[Node]) -> str:
    ops = [n.op for n in nodes if n.op != "reshape"]
    return f"{len(ops)} ops ({ops[0]} .. {ops[-1]})" if ops else "reshapes"


def _int8(t: Tensor, a) -> np.ndarray:
    """The array of an int8 tensor (or of a uint8 0/1 mask, an int8 tensor in TOSA)."""
    a = np.asarray(a)
    if a.dtype != np.dtype(t.dtype) or a.shape != tuple(t.shape):
        raise McutorchError(f"verify: {t.name} needs an {t.dtype} array of shape {list(t.shape)}, "
                            f"got {a.dtype} {list(a.shape)}")
    return a


def _feeds(tg: TosaGraph, inputs) -> dict[int, np.ndarray]:
    """Arrays for tg.inputs from a sequence (same order) or a {Tensor: array} mapping."""
    if isinstance(inputs, dict):
        by_id = {id(t): a for t, a in inputs.items()}
        missing = [t.name for t in tg.inputs if id(t) not in by_id]
        if missing:
            raise McutorchError(f"verify: no value for subgraph inputs {missing}")
        return {id(t): _int8(t, by_id[id(t)]) for t in tg.inputs}
    inputs = list(inputs)
    if len(inputs) != len(tg.inputs):
        raise McutorchError(f"verify: {len(inputs)} inputs given, the subgraph reads "
                            f"{[t.name for t in tg.inputs]}")
    return {id(t): _int8(t, a) for t, a in zip(tg.inputs, inputs)}


def _first_difference(tensors: list[Tensor], got: list[np.ndarray], want: dict) -> str:
    for t, g in zip(tensors, got):
        w = want[id(t)]
        if g.shape != w.shape:
            return f"{t.name}: shape {g.shape} from TOSA, {w.shape} from the reference"
        diff = np.argwhere(g != w)
        if len(diff):
            i = tuple(int(v) for v in diff[0])
            return (f"{t.name}: {len(diff)} of {w.size} elements differ; first at {list(i)}: "
                    f"TOSA {int(g[i])}, reference {int(w[i])}")
    return ""


def check(tg: TosaGraph, graph: Graph, feeds: dict[int, np.ndarray]) -> None:
    """Compare one lowered graph with the reference on one input set (see `verify`)."""
    want = run_reference(tg.nodes, feeds)
    got = run_tosa(tg, [feeds[id(t)] for t in tg.inputs])
    if not _first_difference(tg.outputs, got, want):
        return
    debug = lower_graph(graph, tg.nodes, extra_outputs=True)
    got = run_tosa(debug, [feeds[id(t)] for t in debug.inputs])
    for n, note in zip(tg.nodes, tg.notes):  # first node (in order) whose output differs
        k = [i for i, t in enumerate(debug.outputs) if t is n.outputs[0]][0]
        what = _first_difference([debug.outputs[k]], [got[k]], want)
        if what:
            raise TosaMismatchError(f"TOSA lowering differs from the reference at {n.op} "
                                    f"({n.source or 'no source'}): {what}\n  lowered as: {note}")
    raise TosaMismatchError("TOSA outputs differ, but no single op's output does (a lowering "
                            "bug at the graph boundary)")


def verify(graph: Graph, nodes: list[Node] | None, inputs) -> None:
    """Lower `nodes` of `graph`, run it on the TOSA reference model and on mcutorch.ref; raise
    TosaMismatchError (a McutorchError) unless every output is bit-identical.

    `inputs`: arrays for the subgraph's inputs (`lower_graph(graph, nodes).inputs` order), or a
    {Tensor: array} mapping.

    Example:
        >>> verify(graph, None, [x_int8])     # whole graph, one input
    """
    tg = lower_graph(graph, nodes)
    check(tg, graph, _feeds(tg, inputs))


def random_array(t: Tensor, rng: np.random.Generator) -> np.ndarray:
    """Random int8 values for tensor t (0/1 for a uint8 mask, [-32767, 32767] for int16)."""
    if t.dtype == "uint8":
        return rng.integers(0, 2, t.shape, dtype=np.uint8)
    if t.dtype == "int16":
        return rng.integers(-32767, 32768, t.shape, dtype=np.int16)
    return rng.integers(-128, 128, t.shape, dtype=np.int8)


def _random_feeds(tg: TosaGraph, rng: np.random.Generator) -> dict[int, np.ndarray]:
    return {id(t): random_array(t, rng) for t in tg.inputs}


def verify_program_graph(graph: Graph, rng_inputs: int = 3, inputs=None,
                         seed: int = 0) -> list[TosaGraph]:
    """Lower every lowerable run of `graph` and check each bit-exact on `rng_inputs` seeded random
    int8 inputs, plus real `inputs` (one array per graph input, or a list of such lists) fed
    through the reference up to the run. Returns the lowered graphs, in order.

    Example:
        >>> lowered = verify_program_graph(graph, rng_inputs=3, inputs=[x_int8])
    """
    real = _real_values(graph, inputs)
    rng = np.random.default_rng(seed)
    lowered = []
    for run in tosa_runs(graph):
        tg = lower_graph(graph, run)
        for _ in range(rng_inputs):
            check(tg, graph, _random_feeds(tg, rng))
        for values in real:
            check(tg, graph, {id(t): values[id(t)] for t in tg.inputs})
        lowered.append(tg)
    return lowered


def _real_values(graph: Graph, inputs) -> list[dict[int, np.ndarray]]:
    """Every tensor's reference value for each real input set."""
    if inputs is None:
        return []
    sets = [inputs] if all(isinstance(a, np.ndarray) for a in inputs) else inputs
    result = []
    for arrays in sets:
        feeds = {id(t): _int8(t, a) for t, a in zip(graph.inputs, arrays)}
        result.append(run_reference(graph.nodes, feeds))
    return result
