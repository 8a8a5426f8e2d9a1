"""Ahead-of-time memory planner: give every intermediate buffer a region and a byte offset.

Four buffers of a chain, 16-byte alignment, one arena (offset up, ops to the right)::

    offset
      96 +       +---------------+---------------+
         |       |       b       |       d       |      a  64 B  ops 0-1
      64 +-------+-------+-------+-------+-------+      b  32 B  ops 1-2
         |       a       |       c       |              c  64 B  ops 2-3
       0 +---------------+---------------+-------> op   d  32 B  ops 3-4
             0       1       2       3       4

    Largest first, each at the lowest offset free while it is live: a at 0, c at 0
    (a is dead by op 2), b and d at 64. Arena 96 B = the lower bound (ops 1-3 hold 96 B).

Algorithm (TensorFlow Lite Micro's GreedyMemoryPlanner, then a short search):

- Aliases (free views such as reshape) fold into their root buffer: the root's lifetime
  grows to cover every view, and a view lands at root offset + alias_offset. An
  own-lifetime view (a delegate's I/O inside Vela's scratch) keeps its bytes live only over
  its own lifetime: a block is a set of (ops, byte range) segments, and two blocks may not
  place segments live at a common op on common bytes.
- Legal in-place pairs (the input dies at the op that writes the output, which is no
  bigger) chain into one block at one offset; a legal overlap pair (i, o, delta) chains o
  delta bytes (aligned up) below i: o over i's bytes as the op's kernel allows (alias kind
  "overlap"). Any other two blocks live at a common op (lifetimes [first, last], inclusive)
  must not overlap in memory, nor two members of one chain live together. Overlap pairs are
  chained only at the ops holding the most live bytes (added while that peak falls: elsewhere
  a pair only moves its chain further down), and that plan is kept only when it needs fewer
  bytes than the plan without them, so overlap never costs a byte.
- First fit, TFLM's pass: largest block first, each at the lowest aligned offset clear of
  the placed blocks it is live with.
- If that ends above the target (the lower bound, or the region size if smaller), squeaky
  wheel from four start orders (size; start op; size x lifetime; lifetime; ties by buffer
  id): a block sits on the floor (offset 0) if free there, else hangs from the target if
  free there, else takes the lowest free offset; blocks ending above the target move to
  the front of the order and the pass runs again (8 rounds per order). The first pass
  within the target ends the search; otherwise the best pass wins.
- Regions, fastest (lowest rank) first: a block that would end past the region's size is
  left out and tries the next region that accepts it (npu reach, pin); blocks with no later
  option go first. A pass is scored by bytes left out, then top. Anything no region can
  hold raises PlanError carrying the memory map.

Cost: a sweep by start op finds the E pairs of blocks live together in O(B log B + E); a
pass is O(B + sum of k log k) for k placed live neighbours per block; at most 33 passes,
fewer when passes x (B + E) would pass 100k. Chains of 400 buffers plan in ~10 ms.
The lower bound is the most bytes live during a single op, or the largest block when more.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mcutorch.errors import PlanError


@dataclass(frozen=True)
class Region:
    """A memory region of the target; the planner fills lower ranks first."""

    name: str
    size: int | None
    rank: int
    npu: bool = False
    base: int = 0


@dataclass
class Buffer:
    """A tensor's bytes, live from op `first` (-1: graph input) to op `last` (num_ops: output).

    A view (`alias_of`) extends its root's lifetime, unless it has `own_lifetime`: then only its
    own bytes are live over its own lifetime (with the lifetimes of its plain views), and other
    buffers may use the rest of the root's bytes meanwhile (a delegate's I/O in Vela's scratch).
    """

    id: int
    size: int
    first: int
    last: int
    alias_of: int | None = None
    alias_offset: int = 0
    npu: bool = False
    region: str | None = None
    name: str = ""
    own_lifetime: bool = False  # a view whose bytes are live only in its own lifetime


@dataclass
class Plan:
    """Where every buffer lives: region usage, (region, offset) per buffer id, and the lower bound.

    `buffers` and `layout` (the regions, fastest first) are kept for memory_map().
    """

    regions: dict[str, int]
    placement: dict[int, tuple[str, int]]
    lower_bound: int
    buffers: list[Buffer] = field(default_factory=list, repr=False)
    layout: list[Region] = field(default_factory=list, repr=False)

    def memory_map(self, limit: int | None = None) -> str:
        """A table of regions (base, size, used) and their buffers; `limit` keeps the biggest
        few."""
        specs = {r.name: r for r in self.layout}
        lines = [f"{'region':<8} {'base':>10} {'size':>10} {'used':>10}  buffers",
                 *(_region_row(specs.get(name), name, used, self._count(name))
                   for name, used in self.regions.items()),
                 f"total {sum(self.regions.values())} B, lower bound {self.lower_bound} B"]
        for name in self.regions:
            lines += _buffer_rows(self, name, limit)
        return "\n".join(lines)

    def _count(self, region: str) -> int:
        """Number of buffers placed in `region`."""
        return sum(where == region for where, _ in self.placement.values())


def plan(buffers: list[Buffer], num_ops: int, regions: list[Region] | None = None,
         alignment: int = 16, inplace: list[tuple[int, int]] = (),
         overlap: list[tuple[int, int, int]] = ()) -> Plan:
    """Place every buffer; raise PlanError (with the memory map) if the regions cannot hold them.
    `overlap` (i, o, delta): o may start delta bytes below i; the plan uses those at the peak ops
    only when that needs fewer bytes than the plan without them."""
    if alignment <= 0:
        raise ValueError(f"alignment must be positive, got {alignment}")
    layout = _layout(regions)
    sets = [list(inplace)]
    if overlap:
        sets.append(sets[0] + _useful(buffers, num_ops, sets[0], list(overlap), alignment))
    plans = [_plan(buffers, num_ops, layout, alignment, pairs) for pairs in sets]
    fits = [p for p in plans if isinstance(p, Plan)]
    if not fits:
        raise plans[0]
    return min(fits, key=lambda p: sum(p.regions.values()))  # ties: the plan without overlap


def _plan(buffers: list[Buffer], num_ops: int, layout: list[Region], alignment: int,
          inplace: list) -> Plan | PlanError:
    """The plan of one set of pairs, or the PlanError saying why it does not fit."""
    roots, blocks = _model(buffers, num_ops, inplace, alignment)
    options = [[r for r, reg in enumerate(layout) if _accepts(reg, b)] for b in blocks]
    nbrs = _interference(blocks)
    fill = _fill(blocks, options, nbrs, layout, alignment, relax=False)
    if fill.unplaced:
        fill = _fill(blocks, options, nbrs, layout, alignment, relax=True)
        return PlanError(_failure(_assemble(buffers, layout, roots, blocks, fill), blocks, fill))
    return _assemble(buffers, layout, roots, blocks, fill)


def _useful(buffers: list[Buffer], num_ops: int, inplace: list, overlap: list,
            alignment: int) -> list:
    """The overlap pairs worth chaining: those of the ops holding the most live bytes, added
    while that peak falls (a pair elsewhere only moves its chain's bytes further down)."""
    first = {b.id: b.first for b in buffers}
    chosen, best = [], None
    while True:
        live = _live(_model(buffers, num_ops, inplace + chosen, alignment)[1])
        top = max(live, default=0)
        if best is not None and top >= best[0]:
            return best[1]
        best = top, chosen
        new = [t for t in overlap if t not in chosen and 0 <= first.get(t[1], -1) < len(live)
               and live[first[t[1]]] == top]
        if not new:
            return chosen
        chosen = chosen + new


def lower_bound(buffers: list[Buffer], num_ops: int, inplace: list[tuple[int, int]] = ()) -> int:
    """Most bytes live during any one op (alias roots counted once, legal in-place pairs shared)."""
    return _bound(_model(buffers, num_ops, list(inplace))[1])


_WORK = 100_000  # neighbour visits one region's search may spend (bounds time on dense graphs)
_ROUNDS = 8  # squeaky-wheel rounds per start order


@dataclass
class _Root:
    """A buffer that owns memory, with the lifetime and constraints of all its views folded in."""

    size: int
    first: int
    last: int
    npu: bool = False
    pins: set[str] = field(default_factory=set)
    segs: dict[int, list[int]] = field(default_factory=dict)  # owner -> first, last, lo, hi


@dataclass
class _Block:
    """Root buffers sharing one offset (a single root, or an in-place chain) and their
    constraints; `segs` are (first op, last op, first byte, end byte) of each buffer in it."""

    members: list[int]
    segs: list[tuple[int, int, int, int]]
    npu: bool
    pins: frozenset[str]
    rel: dict[int, int] = field(default_factory=dict)  # member -> its offset in the block
    size: int = field(init=False)
    first: int = field(init=False)
    last: int = field(init=False)

    def __post_init__(self):
        self.size = max(hi for *_, hi in self.segs)
        self.first, self.last = min(s[0] for s in self.segs), max(s[1] for s in self.segs)


@dataclass
class _Fill:
    """A placement: (region index, offset) per block, bytes used per region, blocks left over."""

    where: dict[int, tuple[int, int]]
    used: list[int]
    unplaced: list[int]


def _align(n: int, a: int) -> int:
    """Round n up to a multiple of a."""
    return -(-n // a) * a


def _layout(regions: list[Region] | None) -> list[Region]:
    """Regions sorted fastest first; None means one unbounded arena."""
    if regions is None:
        return [Region("arena", None, 0)]
    if not regions:
        raise ValueError("no memory regions given")
    names = [r.name for r in regions]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate region names: {names}")
    return sorted(regions, key=lambda r: r.rank)


def _accepts(region: Region, block: _Block) -> bool:
    """Whether the block may live in this region (npu reach, pin)."""
    return (region.npu or not block.npu) and block.pins <= {region.name}


def _check(buffers: list[Buffer], num_ops: int) -> dict[int, Buffer]:
    """Index buffers by id, rejecting duplicate ids, negative sizes and impossible lifetimes."""
    if num_ops < 0:
        raise ValueError(f"num_ops must be >= 0, got {num_ops}")
    byid = {}
    for b in buffers:
        if b.id in byid:
            raise ValueError(f"duplicate buffer id {b.id}")
        if b.size < 0 or b.alias_offset < 0:
            raise ValueError(f"buffer {b.id}: negative size or alias offset")
        if not -1 <= b.first <= b.last <= num_ops or b.first >= max(num_ops, 0):
            raise ValueError(f"buffer {b.id}: lifetime [{b.first}, {b.last}] outside -1..{num_ops}")
        byid[b.id] = b
    return byid


def _resolve(byid: dict[int, Buffer]) -> dict[int, tuple[int, int]]:
    """Map every buffer id to (root id, byte offset inside the root), checking alias chains."""
    out: dict[int, tuple[int, int]] = {}
    for b in byid.values():
        chain, seen, cur = [], set(), b
        while cur.alias_of is not None and cur.id not in out:
            if cur.id in seen or cur.alias_of not in byid:
                raise ValueError(f"buffer {cur.id}: alias of unknown buffer or alias cycle")
            parent = byid[cur.alias_of]
            if cur.alias_offset + cur.size > parent.size:
                raise ValueError(f"buffer {cur.id}: view runs past the end of buffer {parent.id}")
            seen.add(cur.id)
            chain.append(cur)
            cur = parent
        root, off = out.setdefault(cur.id, (cur.id, 0))
        for c in reversed(chain):
            off += c.alias_offset
            out[c.id] = (root, off)
    return out


def _span(first: int, last: int, num_ops: int) -> tuple[int, int]:
    """Clamp a lifetime to ops 0..num_ops-1 (inputs live at op 0, outputs through the last op)."""
    lo = max(first, 0)
    return lo, max(min(last, num_ops - 1), lo)


def _model(buffers: list[Buffer], num_ops: int, inplace,
           alignment: int = 16) -> tuple[dict, list[_Block]]:
    """Validate the graph; return the alias map and the blocks to place (aliases folded, in-place
    chained)."""
    byid = _check(buffers, num_ops)
    roots = _resolve(byid)
    info: dict[int, _Root] = {}
    for b in buffers:
        rid = roots[b.id][0]
        r = info.setdefault(rid, _Root(byid[rid].size, b.first, b.last))
        r.first, r.last = min(r.first, b.first), max(r.last, b.last)
        r.npu |= b.npu
        r.pins |= {b.region} - {None}
        owner = b
        while owner.alias_of is not None and not owner.own_lifetime:
            owner = byid[owner.alias_of]
        off = roots[owner.id][1]
        seg = r.segs.setdefault(owner.id, [b.first, b.last, off, off + owner.size])
        seg[0], seg[1] = min(seg[0], b.first), max(seg[1], b.last)
    return roots, _chain(info, roots, inplace, num_ops, alignment)


def _chain(info: dict[int, _Root], roots: dict, inplace, num_ops: int,
           alignment: int) -> list[_Block]:
    """Merge legal pairs into chains, each root at a fixed offset (`rel`) from its chain's: an
    in-place pair (i, o) on i's bytes, an overlap pair (i, o, delta) delta bytes (rounded up to
    the alignment) below them; ignore pairs that are not legal."""
    group = {rid: [rid] for rid in info}
    rel = dict.fromkeys(info, 0)
    for i, o, *delta in inplace:
        if i not in roots or o not in roots:
            raise ValueError(f"in-place pair ({i}, {o}) names an unknown buffer")
        ri, ro = roots[i][0], roots[o][0]
        gi, go = group[ri], group[ro]
        at = rel[ri] + roots[i][1] - roots[o][1] - _align(delta[0], alignment) if delta else rel[ri]
        if gi is not go and gi[-1] == ri and go[0] == ro and _legal(info, rel, gi, go, at - rel[ro],
                                                                    bool(delta), num_ops):
            shift, merged = at - rel[ro], gi + go
            for m in merged:
                group[m] = merged
                rel[m] += shift if m in go else 0
    chains = {id(g): g for g in group.values()}.values()
    return sorted((_block(g, info, rel, num_ops) for g in chains), key=lambda b: b.members[0])


def _legal(info: dict[int, _Root], rel: dict, gi: list[int], go: list[int], shift: int,
           overlap: bool, num_ops: int) -> bool:
    """Whether chain go, moved by `shift`, may start over the tail of chain gi (lifetimes meet,
    sizes and pins allow; no other two members live together share a byte)."""
    tail, head = info[gi[-1]], info[go[0]]
    pins = {p for m in gi + go for p in info[m].pins}
    spans = {m: _span(info[m].first, info[m].last, num_ops) for m in gi + go}
    clash = any(spans[x][0] <= spans[y][1] and spans[y][0] <= spans[x][1]
                and rel[x] < rel[y] + shift + info[y].size
                and rel[y] + shift < rel[x] + info[x].size
                for x in gi for y in go if (x, y) != (gi[-1], go[0]))
    fits = overlap or head.size <= tail.size
    return tail.last == head.first and fits and len(pins) <= 1 and not clash


def _block(members: list[int], info: dict[int, _Root], rel: dict, num_ops: int) -> _Block:
    """Build a block from a chain of root ids: each root's bytes (at its offset in the chain),
    and each own-lifetime view's, over its lifetime."""
    base = min(rel[m] for m in members)
    segs = [(*_span(first, last, num_ops), lo + rel[m] - base, hi + rel[m] - base)
            for m in members for first, last, lo, hi in info[m].segs.values()]
    pins = frozenset(p for m in members for p in info[m].pins)
    return _Block(members, segs, any(info[m].npu for m in members), pins,
                  {m: rel[m] - base for m in members})


def _live(blocks: list[_Block]) -> list[int]:
    """Live bytes at each op; bytes of one block live at once (views, an in-place or overlap
    pair at the op where it hands over) count once."""
    live = [0] * (max((b.last for b in blocks), default=0) + 2)
    for b in blocks:
        cuts = sorted({s[0] for s in b.segs} | {s[1] + 1 for s in b.segs})
        for a, z in zip(cuts, cuts[1:]):
            n = _union([(lo, hi) for first, last, lo, hi in b.segs if first <= a <= last])
            live[a] += n
            live[z] -= n
    run, out = 0, []
    for d in live:
        run += d
        out.append(run)
    return out


def _bound(blocks: list[_Block]) -> int:
    """Peak over ops of live bytes, or the largest block (its bytes are contiguous: an overlap
    chain reaches down by the sum of its deltas) when that is more."""
    return max(0, *_live(blocks), *(b.size for b in blocks))


def _union(ranges: list[tuple[int, int]]) -> int:
    """Bytes covered by a set of [lo, hi) ranges."""
    total, end = 0, None
    for lo, hi in sorted(ranges):
        if end is None or lo > end:
            total, end = total + hi - lo, hi
        elif hi > end:
            total, end = total + hi - end, hi
    return total


def _clash(p: _Block, q: _Block) -> list[tuple[int, int]]:
    """The offsets of p relative to q, as [lo, hi) ranges, at which bytes of p and q live at a
    common op would meet (one range per pair of such segments)."""
    return sorted({(ql - ph + 1, qh - pl) for fp, lp, pl, ph in p.segs
                   for fq, lq, ql, qh in q.segs if ph > pl and qh > ql and fp <= lq and fq <= lp})


def _interference(blocks: list[_Block]) -> list[list[tuple[int, int, int]]]:
    """Per block, (other, lo, hi) for every block it must not overlap in memory: its offset must
    not lie in [other's offset + lo, other's offset + hi)."""
    nbrs: list[list[tuple[int, int, int]]] = [[] for _ in blocks]
    order = sorted(range(len(blocks)), key=lambda k: blocks[k].first)
    for n, a in enumerate(order):
        for b in order[n + 1:]:
            if blocks[b].first > blocks[a].last:
                break
            for lo, hi in _clash(blocks[a], blocks[b]):
                nbrs[a].append((b, lo, hi))
                nbrs[b].append((a, 1 - hi, 1 - lo))
    return nbrs


def _orders(blocks: list[_Block], ks: list[int]) -> list[list[int]]:
    """Start orders over block indices ks (size; start; size x lifetime; lifetime), ties by
    buffer id."""
    keys = [
        lambda b: (-b.size, b.first),
        lambda b: (b.first, -b.size),
        lambda b: (-b.size * (b.last - b.first + 1), -b.size),
        lambda b: (b.first - b.last, -b.size),
    ]
    return [sorted(ks, key=lambda k: (*key(blocks[k]), blocks[k].members[0])) for key in keys]


def _offset(nbrs: list[tuple[int, int, int]], pos: dict[int, int], size: int, alignment: int,
            ceiling: int | None) -> int:
    """Lowest aligned offset clear of the placed neighbours; unless that is 0, hang from a free
    ceiling."""
    spans = sorted([(at + lo, at + hi) for j, lo, hi in nbrs
                    if (at := pos.get(j)) is not None])
    x = 0
    for lo, hi in spans:
        if lo > x:
            break
        if hi > x:
            x = -(-hi // alignment) * alignment
    if x and ceiling is not None:
        top = (ceiling - size) // alignment * alignment
        if top > x and not any(lo <= top < hi for lo, hi in spans):
            return top
    return x


def _fill(blocks: list[_Block], options: list[list[int]], nbrs: list, layout: list[Region],
          alignment: int, relax: bool) -> _Fill:
    """Pack regions fastest first; what a region cannot hold moves on to the next that accepts
    it."""
    where: dict[int, tuple[int, int]] = {}
    used = []
    pending = list(range(len(blocks)))
    for r, region in enumerate(layout):
        here = [k for k in pending if r in options[k]]
        must = {k for k in here if options[k][-1] == r}
        cap = None if region.size is None else region.size // alignment * alignment
        pos, end = _pack(here, must, blocks, nbrs, cap, alignment, relax)
        where.update((k, (r, x)) for k, x in pos.items())
        used.append(_align(end, alignment))
        pending = [k for k in pending if k not in pos]
    return _Fill(where, used, pending)


def _pack(here: list[int], must: set[int], blocks: list[_Block], nbrs: list, cap: int | None,
          alignment: int, relax: bool) -> tuple[dict[int, int], int]:
    """Best packing of one region: TFLM's greedy pass, then squeaky-wheel floor/ceiling passes."""
    target = _align(_bound([blocks[k] for k in here]), alignment)
    target = target if cap is None else min(target, cap)
    budget = max(2, _WORK // (1 + sum(len(nbrs[k]) + 1 for k in here)))
    orders = _orders(blocks, here)
    best = None
    for order, hang in [(orders[0], False)] + [(o, True) for o in orders]:
        for _ in range(_ROUNDS if hang else 1):
            order = [k for k in order if k in must] + [k for k in order if k not in must]
            pos, over, end = _decode(order, blocks, nbrs, cap, target, hang, alignment,
                                     must if relax else set())
            lost = [k for k in here if k not in pos]
            score = (sum(blocks[k].size for k in lost if k in must),
                     sum(blocks[k].size for k in lost), end)
            if best is None or score < best[0]:
                best = score, pos
            budget -= 1
            if not over or budget <= 0:
                return best[1], best[0][2]
            late = set(over)
            order = over + [k for k in order if k not in late]
    return best[1], best[0][2]


def _decode(order: list[int], blocks: list[_Block], nbrs: list, cap: int | None, target: int,
            hang: bool, alignment: int, force: set[int]) -> tuple[dict[int, int], list[int], int]:
    """Place blocks in order (past cap only if forced); return offsets, blocks ending past target,
    top."""
    pos: dict[int, int] = {}
    over = []
    end = 0
    for k in order:
        x = _offset(nbrs[k], pos, blocks[k].size, alignment, target if hang else None)
        top = x + blocks[k].size
        if top > target:
            over.append(k)
        if cap is None or top <= cap or k in force:
            pos[k] = x
            end = max(end, top)
    return pos, over, end


def _assemble(buffers: list[Buffer], layout: list[Region], roots: dict, blocks: list[_Block],
              fill: _Fill) -> Plan:
    """Turn block offsets into a Plan (aliases at root offset + their offset)."""
    at = {m: (fill.where[k][0], fill.where[k][1] + b.rel.get(m, 0))
          for k, b in enumerate(blocks) if k in fill.where for m in b.members}
    placement = {}
    for b in buffers:
        rid, off = roots[b.id]
        if rid in at:
            r, x = at[rid]
            placement[b.id] = (layout[r].name, x + off)
    regions = {reg.name: u for reg, u in zip(layout, fill.used)}
    return Plan(regions, placement, _bound(blocks), list(buffers), list(layout))


def _failure(diag: Plan, blocks: list[_Block], fill: _Fill) -> str:
    """PlanError text: what overflows or fits nowhere, then the map of a plan that lets regions
    overflow."""
    byid = {b.id: b for b in diag.buffers}
    why = [f"{reg.name} needs {used} B but has {reg.size} B"
           for reg, used in zip(diag.layout, fill.used) if reg.size is not None and used > reg.size]
    for k in fill.unplaced:
        b = blocks[k]
        need = ", ".join(["npu"] * b.npu
                         + [f"pinned to {' and '.join(sorted(b.pins))}"] * bool(b.pins))
        why.append(f"{_label(byid[b.members[0]])} ({b.size} B{', ' + need if need else ''}) "
                   "fits no region")
    return "memory plan does not fit: " + "; ".join(why) + "\n" + diag.memory_map(limit=5)


def _label(b: Buffer) -> str:
    """A buffer's display name."""
    return b.name or f"#{b.id}"


def _region_row(spec: Region | None, name: str, used: int, count: int) -> str:
    """One summary line of the memory map."""
    base = f"{spec.base:#010x}" if spec else "?"
    size = "unbounded" if spec is None or spec.size is None else str(spec.size)
    overflows = spec and spec.size is not None and used > spec.size
    over = f"  OVER by {used - spec.size} B" if overflows else ""
    return f"{name:<8} {base:>10} {size:>10} {used:>10}  {count}{over}"


def _buffer_rows(p: Plan, region: str, limit: int | None) -> list[str]:
    """The buffers of one region by offset, or only the `limit` biggest."""
    rows = [b for b in p.buffers if p.placement.get(b.id, ("",))[0] == region]
    if not rows:
        return []
    if limit is not None:
        rows = sorted(rows, key=lambda b: (-b.size, b.id))[:limit]
    rows.sort(key=lambda b: (p.placement[b.id][1], b.id))
    names = {b.id: _label(b) for b in p.buffers}
    head = f"\n{region}{' (biggest ' + str(limit) + ')' if limit is not None else ''}:"
    return [head, f"  {'offset':>10} {'size':>9}  {'ops':<9} buffer",
            *(f"  {p.placement[b.id][1]:#010x} {b.size:>9}  {f'{b.first}..{b.last}':<9} "
              f"{_label(b)}"
              + (f" (view of {names[b.alias_of]})" if b.alias_of is not None else "")
              for b in rows)]
