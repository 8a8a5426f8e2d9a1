"""TOSA 1.0 backend: lower mcutorch IR to a TOSA INT flatbuffer and prove it bit-exact.

    from mcutorch.backends import tosa
    ok, why = tosa.tosa_support(node)            # can this node be lowered exactly?
    tg = tosa.lower_graph(graph, nodes)          # TosaGraph: flatbuffer, inputs, outputs, notes
    tosa.verify(graph, nodes, [x])               # TOSA reference model == mcutorch.ref, or raise
    tosa.verify_program_graph(graph)             # every lowerable run, random + real inputs
    tosa.emit_tosa(graph, "out/")                # .tosa files for Vela

Needs the `npu` extra (tosa-tools). docs/numerics.md ("TOSA lowering") gives each op's sequence
and why it is exact; `tosa_support` refuses what TOSA cannot reproduce.
"""
from mcutorch.backends.tosa.lower import TosaGraph, emit_tosa, lower_graph
from mcutorch.backends.tosa.support import tosa_runs, tosa_support
from mcutorch.backends.tosa.verify import TosaMismatchError, run_tosa, verify, verify_program_graph

__all__ = ["TosaGraph", "TosaMismatchError", "emit_tosa", "lower_graph", "run_tosa", "tosa_runs",
           "tosa_support", "verify", "verify_program_graph"]
