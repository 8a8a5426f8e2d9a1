"""Memory regions from a user's description (`--memory DTCM:512K,SRAM:4M`)."""
from __future__ import annotations

import re

from mcutorch.errors import TargetError
from mcutorch.plan.planner import Region

SIZE_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "KIB": 1024, "M": 1 << 20, "MB": 1 << 20,
              "MIB": 1 << 20}




def parse_memory(spec: str) -> list[Region]:
    """`"DTCM:512K,SRAM:4M"` -> regions in speed order (first = fastest).

    Example:
        >>> [r.size for r in parse_memory("DTCM:512K,SRAM:4M")]
        [524288, 4194304]
    """
    regions = []
    for rank, item in enumerate(filter(None, (s.strip() for s in spec.split(",")))):
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]{0,7}):(\d+)\s*([A-Za-z]*)(\+npu)?", item)
        if not m or m.group(3).upper() not in SIZE_UNITS:
            raise TargetError(f"bad memory region {item!r}: expected NAME:SIZE such as "
                              "DTCM:512K or SRAM:4M (append +npu if an NPU reaches it)")
        size = int(m.group(2)) * SIZE_UNITS[m.group(3).upper()]
        regions.append(Region(m.group(1), size, rank, npu=bool(m.group(4))))
    if not regions:
        raise TargetError("empty memory description")
    return regions
