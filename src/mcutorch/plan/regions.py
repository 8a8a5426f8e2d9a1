"""Memory regions from a user's description (`--memory DTCM:512K,SRAM:4M`)."""
from __future__ import annotations

import re

from mcutorch.errors import TargetError
from mcutorch.plan.planner import Region

SIZE_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "KIB": 1024, "M": 1 << 20, "MB": 1 << 20,
              "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}
MAX_NAME = 8  # REGION.name in the program format: 8 ASCII bytes
MAX_SIZE = (1 << 32) - 1  # REGION.size and .capacity are u32
_ITEM = re.compile(r"(?P<name>[^:]*):\s*(?P<num>\d+)\s*(?P<unit>[A-Za-z]*)(?P<npu>\+npu)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _size_text(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} B"


def parse_memory(spec: str) -> list[Region]:
    """`"DTCM:512K,SRAM:4M"` -> regions in speed order (first = fastest).

    Each item is NAME:SIZE[+npu]: NAME a letter or _ then letters, digits or _, at most 8 of
    them (what the program format's REGION record holds), each name once; SIZE a number with
    an optional unit B, K, M or G (powers of 1024), at most 4 GiB - 1 (the format stores 32-bit
    sizes). TargetError names the item and what is wrong with it.

    Example:
        >>> [r.size for r in parse_memory("DTCM:512K,SRAM:4M")]
        [524288, 4194304]
    """
    regions: list[Region] = []
    for rank, item in enumerate(filter(None, (s.strip() for s in spec.split(",")))):
        m = _ITEM.fullmatch(item)
        if not m or m.group("unit").upper() not in SIZE_UNITS:
            raise TargetError(f"bad memory region {item!r}: expected NAME:SIZE such as "
                              "DTCM:512K or SRAM:4M (units B, K, M, G; append +npu if an NPU "
                              "reaches it)")
        name = m.group("name").strip()
        if not _NAME.fullmatch(name):
            raise TargetError(f"bad memory region name {name!r} in {item!r}: a name is a letter "
                              "or _ followed by letters, digits or _")
        if len(name) > MAX_NAME:
            raise TargetError(f"memory region name {name!r} has {len(name)} characters; the "
                              f"program format holds at most {MAX_NAME}: shorten it")
        if any(r.name == name for r in regions):
            raise TargetError(f"memory region {name} appears twice in {spec!r}: give each "
                              "region once (list them fastest first)")
        size = int(m.group("num")) * SIZE_UNITS[m.group("unit").upper()]
        if size > MAX_SIZE:
            raise TargetError(f"memory region {item!r} is {_size_text(size)}; a region can be "
                              f"at most 4 GiB - 1 ({MAX_SIZE:,} B): the program format stores "
                              "32-bit sizes and addresses")
        regions.append(Region(name, size, rank, npu=bool(m.group("npu"))))
    if not regions:
        raise TargetError("empty memory description: expected NAME:SIZE items such as "
                          "DTCM:512K,SRAM:4M")
    return regions
