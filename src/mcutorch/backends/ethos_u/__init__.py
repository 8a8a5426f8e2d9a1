"""Ethos-U backend: NPU subgraphs compiled by Vela, bound into the memory plan, with CPU versions.

    from mcutorch.backends import ethos_u
    part = ethos_u.partition(graph, "ethos-u55-128")        # per node: NPU or CPU, and why
    cfg = ethos_u.vela_config("ethos-u55-128")              # Vela's system config / memory mode
    res = ethos_u.compile_tosa(tosa_graph.flatbuffer, cfg)   # command stream, weights, offsets
    d = ethos_u.delegate_graph(graph, "ethos-u55-128")      # what mcutorch.compile uses

`mcutorch.compile(..., target="cortex-m55+ethos-u55-128")` runs all of it; docs/ethos_u.md says
what is proven here and what rests on Vela's and the Ethos-U's TOSA conformance. Needs the `npu`
extra (tosa-tools, ethos-u-vela).
"""
from mcutorch.backends.ethos_u.constraints import RULES, family, npu_check
from mcutorch.backends.ethos_u.delegate import (Delegate, Delegation, delegate_graph,
                                                placement_table, storage_root)
from mcutorch.backends.ethos_u.partition import (Partition, Placement, contracted_order,
                                                 npu_support, partition)
from mcutorch.backends.ethos_u.vela import (VelaConfig, VelaError, VelaResult, VelaTensor,
                                            compile_tosa, read_raw, vela_config)

__all__ = ["RULES", "Delegate", "Delegation", "Partition", "Placement", "VelaConfig",
           "VelaError", "VelaResult", "VelaTensor", "compile_tosa", "contracted_order",
           "delegate_graph", "family", "npu_check", "npu_support", "partition",
           "placement_table", "read_raw", "storage_root", "vela_config"]
