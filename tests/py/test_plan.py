"""The memory planner (mcutorch.plan): invariants on random graphs, spilling, errors, plan quality.

Every invariant is checked against the documented semantics, recomputed here (alias roots and
offsets, lifetimes extended over views, legal in-place pairs, a brute-force lower bound), never
against the planner's own internals.
"""
from __future__ import annotations

import dataclasses
import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcutorch.errors import PlanError
from mcutorch.plan import Buffer, Plan, Region, lower_bound, plan

NAMES = ("DTCM", "SRAM", "DDR")
BASES = {"DTCM": 0x2000_0000, "SRAM": 0x2020_0000, "DDR": 0x6000_0000}


# ----------------------------------------------------------------------------- reference semantics

def roots_of(buffers: list[Buffer]) -> dict[int, tuple[int, int]]:
    """Buffer id -> (root id, byte offset inside the root), following alias chains."""
    byid = {b.id: b for b in buffers}
    out = {}
    for b in buffers:
        off, cur = 0, b
        while cur.alias_of is not None:
            off += cur.alias_offset
            cur = byid[cur.alias_of]
        out[b.id] = (cur.id, off)
    return out


def spans_of(buffers: list[Buffer]) -> dict[int, tuple[int, int]]:
    """Root id -> [first, last] covering the root and every view of it."""
    out: dict[int, tuple[int, int]] = {}
    roots = roots_of(buffers)
    for b in buffers:
        rid = roots[b.id][0]
        first, last = out.get(rid, (b.first, b.last))
        out[rid] = (min(first, b.first), max(last, b.last))
    return out


def shareable(buffers: list[Buffer], inplace) -> set[frozenset[int]]:
    """Root pairs the spec lets share an offset: listed, input dies where the output is born, no
    bigger."""
    roots, spans = roots_of(buffers), spans_of(buffers)
    size = {b.id: b.size for b in buffers}
    out = set()
    for i, o in inplace:
        ri, ro = roots[i][0], roots[o][0]
        if ri != ro and spans[ri][1] == spans[ro][0] and size[ro] <= size[ri]:
            out.add(frozenset((ri, ro)))
    return out


def brute_bound(buffers: list[Buffer], num_ops: int) -> int:
    """Most bytes of root buffers live at one op (inputs live at op 0, outputs through the last)."""
    spans = spans_of(buffers)
    size = {b.id: b.size for b in buffers if b.alias_of is None}
    return max(sum(s for r, s in size.items() if max(spans[r][0], 0) <= i <= max(spans[r][1], 0))
               for i in range(max(num_ops, 1)))


def check(p: Plan, buffers: list[Buffer], num_ops: int, regions, alignment: int,
          inplace=()) -> None:
    """Assert every documented property of a plan."""
    specs = {r.name: r for r in regions} if regions else {"arena": Region("arena", None, 0)}
    roots, spans = roots_of(buffers), spans_of(buffers)
    assert set(p.placement) == {b.id for b in buffers}
    assert set(p.regions) == set(specs)
    for name, used in p.regions.items():
        assert used >= 0 and used % alignment == 0
        assert specs[name].size is None or used <= specs[name].size
    for b in buffers:
        region, off = p.placement[b.id]
        rid, delta = roots[b.id]
        assert p.placement[rid] == (region, off - delta), "view not at root offset + alias_offset"
        assert b.alias_of is not None or off % alignment == 0
        assert 0 <= off and off + b.size <= p.regions[region]
        assert specs[region].npu or not b.npu
        assert b.region in (None, region)
    share = shareable(buffers, inplace)
    owners = [b for b in buffers if b.alias_of is None and b.size]
    for n, a in enumerate(owners):
        for c in owners[n + 1:]:
            (ra, xa), (rc, xc) = p.placement[a.id], p.placement[c.id]
            live = spans[a.id][0] <= spans[c.id][1] and spans[c.id][0] <= spans[a.id][1]
            if ra != rc or not live or (xa == xc and frozenset((a.id, c.id)) in share):
                continue
            assert xa + a.size <= xc or xc + c.size <= xa, f"{a} and {c} overlap at {xa}, {xc}"
    assert p.lower_bound == lower_bound(buffers, num_ops, inplace) <= brute_bound(buffers, num_ops)
    assert sum(p.regions.values()) >= p.lower_bound
    if not inplace:
        assert p.lower_bound == brute_bound(buffers, num_ops)


# ----------------------------------------------------------------------------- strategies

@st.composite
def graphs(draw, pins=True, npu=True):
    """(buffers, num_ops, inplace) with random lifetimes, zero sizes, views of views, pins, npu."""
    num_ops = draw(st.integers(0, 10))
    buffers: list[Buffer] = []
    for i in range(draw(st.integers(0, 14))):
        first = draw(st.integers(-1, num_ops - 1)) if num_ops else -1
        last = draw(st.integers(first, num_ops))
        size = draw(st.sampled_from([0, 1, 15, 16, 17, 100, 256]) | st.integers(0, 1500))
        alias, offset = None, 0
        if buffers and draw(st.integers(0, 3)) == 0:
            parent = draw(st.sampled_from(buffers))
            offset = draw(st.integers(0, parent.size))
            size = draw(st.integers(0, parent.size - offset))
            alias = parent.id
        pin = draw(st.sampled_from([None, None, None, *NAMES])) if pins else None
        buffers.append(Buffer(10 * i + 3, size, first, last, alias, offset,
                              npu and draw(st.integers(0, 3)) == 0, pin, f"t{i}"))
    ids = [b.id for b in buffers]
    # Any pairs, plus pairs that look legal (an output born where its input dies, no bigger).
    likely = [(a.id, b.id) for a in buffers for b in buffers
              if a.id != b.id and a.last == b.first and b.size <= a.size]
    inplace = (draw(st.lists(st.tuples(st.sampled_from(ids), st.sampled_from(ids)), max_size=2))
               if ids else [])
    inplace += draw(st.lists(st.sampled_from(likely), max_size=6)) if likely else []
    return buffers, num_ops, inplace


@st.composite
def layouts(draw):
    """One to three regions with random sizes (None = unbounded), ranks and NPU reach."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
    return [Region(n, draw(st.none() | st.integers(0, 3000)), draw(st.integers(0, 3)),
                   draw(st.booleans()), BASES[n]) for n in names]


def chain(sizes: list[int], skips: list[tuple[int, int]]) -> tuple[list[Buffer], int]:
    """Op i reads buffer i and writes buffer i + 1; (k, i) adds a skip read of buffer k by op i."""
    num_ops = len(sizes) - 1
    last = {k: k for k in range(len(sizes))}
    for k, i in skips:
        last[k] = max(last[k], i)
    last[num_ops] = num_ops
    return [Buffer(k, s, k - 1, last[k], name=f"t{k}") for k, s in enumerate(sizes)], num_ops


@st.composite
def residual_nets(draw):
    """ResNet / MobileNetV2-like chains: blocks of 1-3 layers (expansion x1/x4/x6), residual
    adds."""
    h = draw(st.sampled_from([8, 16, 32, 48, 64, 96, 128]))
    c = draw(st.sampled_from([8, 16, 24, 32]))
    sizes, skips = [h * h * 3, h * h * c], []
    for _ in range(draw(st.integers(1, 40))):
        block_in = len(sizes) - 1
        stride = 2 if h > 4 and draw(st.integers(0, 4)) == 0 else 1
        h, cin, c = h // stride, c, c * stride
        layers, t = draw(st.integers(1, 3)), draw(st.sampled_from([1, 4, 6]))
        sizes += [h * h * cin * t] * (layers - 1) + [h * h * c]
        if stride == 1 and draw(st.booleans()):
            skips.append((block_in, len(sizes) - 1))
            sizes.append(h * h * c)
    sizes += [c, draw(st.sampled_from([10, 100, 1000]))]
    return chain(sizes, skips)


def mobilenet_v2(res: int, alpha: float) -> tuple[list[Buffer], int]:
    """The activation buffers of MobileNetV2 (expand, depthwise, project, residual add)."""
    ch = lambda c: max(8, int(c * alpha + 4) // 8 * 8)  # noqa: E731
    h, c = res // 2, ch(32)
    sizes, skips = [res * res * 3, h * h * c], []
    for t, cout, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                          (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]:
        for j in range(n):
            block_in, stride, co = len(sizes) - 1, s if j == 0 else 1, ch(cout)
            sizes += [h * h * c * t] * (t != 1)
            h //= stride
            sizes += [h * h * c * t, h * h * co]
            if stride == 1 and c == co:
                skips.append((block_in, len(sizes) - 1))
                sizes.append(h * h * co)
            c = co
    return chain(sizes + [h * h * 1280, 1280, 1000], skips)


def resnet(res: int, width: int) -> tuple[list[Buffer], int]:
    """ResNet-18-style basic blocks; a downsampling block's shortcut conv reads the block input."""
    h, c = res, width
    sizes, skips = [res * res * 3, h * h * c], []
    for stage in range(4):
        for blk in range(2):
            block_in, stride, co = len(sizes) - 1, 2 if stage and not blk else 1, width << stage
            h //= stride
            sizes += [h * h * co] * 2
            # a 1x1 shortcut conv reads the block input; the add reads conv2's output
            if stride == 2:
                skips.append((block_in, len(sizes) - 1))
                sizes.append(h * h * co)
                block_in = len(sizes) - 2
            skips.append((block_in, len(sizes) - 1))
            sizes.append(h * h * co)
            c = co
    return chain(sizes + [c, 10], skips)


# ----------------------------------------------------------------------------- properties

@settings(max_examples=150, deadline=None)
@given(graphs(), st.none() | layouts(), st.sampled_from([1, 4, 16, 32]))
def test_random_graphs_plan_or_report(graph, regions, alignment):
    buffers, num_ops, inplace = graph
    try:
        p = plan(buffers, num_ops, regions, alignment, inplace)
    except PlanError as e:
        for r in regions or [Region("arena", None, 0)]:
            assert r.name in str(e) and f"{r.base:#010x}" in str(e)
        return
    check(p, buffers, num_ops, regions, alignment, inplace)


@settings(max_examples=100, deadline=None)
@given(graphs(pins=False), layouts(), st.sampled_from([4, 16]))
def test_spills_but_never_fails_with_unbounded_npu_last_region(graph, regions, alignment):
    buffers, num_ops, inplace = graph
    regions = regions + [Region("slow", None, 9, npu=True, base=0x8000_0000)]
    p = plan(buffers, num_ops, regions, alignment, inplace)
    check(p, buffers, num_ops, regions, alignment, inplace)


@settings(max_examples=100, deadline=None)
@given(graphs(pins=False, npu=False), st.integers(0, 2000))
def test_fast_region_filled_then_spilled(graph, fast_size):
    buffers, num_ops, _ = graph
    inplace = ()  # an in-place chain may be bigger than any of its buffers
    regions = [Region("SRAM", None, 1, base=BASES["SRAM"]),
               Region("DTCM", fast_size, 0, base=BASES["DTCM"])]
    p = plan(buffers, num_ops, regions, 16, inplace)
    check(p, buffers, num_ops, regions, 16, inplace)
    assert p.regions["DTCM"] <= fast_size
    if any(b.alias_of is None and 0 < b.size <= fast_size // 16 * 16 for b in buffers):
        assert p.regions["DTCM"] > 0, "the fast region was left empty"


@settings(max_examples=50, deadline=None)
@given(graphs(), st.none() | layouts(), st.randoms(use_true_random=False))
def test_deterministic_and_independent_of_buffer_order(graph, regions, rng):
    buffers, num_ops, inplace = graph
    shuffled = buffers[:]
    rng.shuffle(shuffled)
    try:
        first = plan(buffers, num_ops, regions, inplace=inplace)
    except PlanError as e:
        with pytest.raises(PlanError) as again:
            plan(buffers, num_ops, regions, inplace=inplace)
        assert str(again.value) == str(e)
        return
    for bufs in (buffers, shuffled):
        p = plan(bufs, num_ops, regions, inplace=inplace)
        assert ((p.regions, p.placement, p.lower_bound)
                == (first.regions, first.placement, first.lower_bound))


@settings(max_examples=60, deadline=None)
@given(residual_nets())
def test_residual_chains_within_5_percent_of_lower_bound(net):
    buffers, num_ops = net
    p = plan(buffers, num_ops)
    check(p, buffers, num_ops, None, 16)
    assert p.regions["arena"] <= 1.05 * p.lower_bound


@pytest.mark.parametrize("net", [mobilenet_v2(96, 0.35), mobilenet_v2(128, 0.5),
                                 mobilenet_v2(224, 1.0), resnet(32, 8), resnet(64, 16)],
                         ids=["mbv2-96-0.35", "mbv2-128-0.5", "mbv2-224-1.0", "resnet-32",
                              "resnet-64"])
def test_real_networks_within_5_percent_of_lower_bound(net):
    buffers, num_ops = net
    p = plan(buffers, num_ops)
    check(p, buffers, num_ops, None, 16)
    assert p.regions["arena"] <= 1.05 * p.lower_bound


def test_400_buffers_plan_fast():
    rng = random.Random(0)
    sizes = [rng.choice([4, 8, 16, 32]) ** 2 * rng.choice([8, 16, 48, 96]) for _ in range(201)]
    skips = []
    for i in range(2, 200, 3):
        skips.append((i - 2, i))
    buffers, num_ops = chain(sizes, skips)
    weights = [Buffer(1000 + i, 512, i, i, name=f"w{i}") for i in range(199)]  # per-op scratch
    best = min(_timed(lambda: plan(buffers + weights, num_ops)) for _ in range(3))
    assert best < 0.1


def _timed(fn) -> float:
    """Seconds one call of fn takes."""
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


# ----------------------------------------------------------------------------- examples and edges

def test_docstring_example():
    buffers = [Buffer(0, 64, 0, 1, name="a"), Buffer(1, 32, 1, 2, name="b"),
               Buffer(2, 64, 2, 3, name="c"), Buffer(3, 32, 3, 4, name="d")]
    p = plan(buffers, 5)
    assert p.regions == {"arena": 96} and p.lower_bound == 96
    assert p.placement == {0: ("arena", 0), 1: ("arena", 64), 2: ("arena", 0), 3: ("arena", 64)}


def test_empty_graph():
    p = plan([], 0)
    assert (p.regions, p.placement, p.lower_bound) == ({"arena": 0}, {}, 0)
    assert lower_bound([], 7) == 0
    regions = [Region("DTCM", 0, 0), Region("SRAM", 100, 1)]
    assert plan([], 3, regions).regions == {"DTCM": 0, "SRAM": 0}


def test_zero_size_buffers_take_no_space():
    buffers = [Buffer(0, 0, -1, 2), Buffer(1, 40, 0, 2), Buffer(2, 0, 1, 3), Buffer(3, 0, 2, 3)]
    p = plan(buffers, 3, [Region("DTCM", 48, 0)])
    check(p, buffers, 3, [Region("DTCM", 48, 0)], 16)
    assert p.regions == {"DTCM": 48} and p.lower_bound == 40


def test_one_op():
    buffers = [Buffer(0, 100, -1, 0), Buffer(1, 30, 0, 1)]
    p = plan(buffers, 1)
    check(p, buffers, 1, None, 16)
    assert p.regions == {"arena": 112 + 32} and p.lower_bound == 130


def test_graph_input_that_is_an_output_with_no_ops():
    p = plan([Buffer(0, 10, -1, 0), Buffer(1, 20, -1, 0)], 0, alignment=1)
    assert p.regions == {"arena": 30} and p.lower_bound == 30


def test_views_extend_the_root_and_sit_inside_it():
    buffers = [Buffer(0, 256, 0, 1, name="conv"),
               Buffer(1, 128, 1, 2, alias_of=0, alias_offset=64, name="reshape"),
               Buffer(2, 64, 2, 4, alias_of=1, alias_offset=32, name="slice"),
               Buffer(3, 256, 3, 4, name="late")]
    p = plan(buffers, 5)
    check(p, buffers, 5, None, 16)
    root = p.placement[0][1]
    assert p.placement[1] == ("arena", root + 64) and p.placement[2] == ("arena", root + 96)
    assert p.regions["arena"] == 512 and p.lower_bound == 512  # conv is held live to op 4 by slice


def owned_spans(buffers: list[Buffer]) -> dict[int, tuple[int, int, int]]:
    """Own-lifetime semantics: owner id (the nearest own-lifetime view or root up the chain) ->
    (first, last, byte offset in the root) covering it and its plain views."""
    byid, roots = {b.id: b for b in buffers}, roots_of(buffers)
    out: dict[int, tuple[int, int, int]] = {}
    for b in buffers:
        o = b
        while o.alias_of is not None and not o.own_lifetime:
            o = byid[o.alias_of]
        first, last, off = out.get(o.id, (b.first, b.last, roots[o.id][1]))
        out[o.id] = (min(first, b.first), max(last, b.last), off)
    return out


@settings(max_examples=150, deadline=None)
@given(graphs(pins=False, npu=False), st.sampled_from([4, 16]), st.randoms(use_true_random=False))
def test_own_lifetime_views_free_the_rest_of_their_root(graph, alignment, rng):
    """With some views marked own_lifetime, bytes of two alias trees never meet while live."""
    buffers, num_ops, _ = graph
    for b in buffers:
        b.own_lifetime = b.alias_of is not None and rng.random() < 0.7
    p = plan(buffers, num_ops, None, alignment)
    byid, roots, owned = {b.id: b for b in buffers}, roots_of(buffers), owned_spans(buffers)
    assert p.lower_bound <= brute_bound(buffers, num_ops) and p.regions["arena"] >= p.lower_bound
    items = [(o, *v) for o, v in owned.items() if byid[o].size]
    for n, (a, fa, la, _) in enumerate(items):
        for c, fc, lc, _ in items[n + 1:]:
            live = max(fa, 0) <= max(lc, 0) and max(fc, 0) <= max(la, 0)
            if roots[a][0] == roots[c][0] or not live:
                continue
            xa, xc = p.placement[a][1], p.placement[c][1]
            assert xa + byid[a].size <= xc or xc + byid[c].size <= xa, f"{a}, {c} overlap"


def test_own_lifetime_views_let_the_scratch_be_reused():
    """A delegate's scratch (op 1) holding its input (ops 0-1) and output (ops 1-3): a tensor of
    its CPU version (op 2) fits in the scratch bytes the output does not use."""
    buffers = [Buffer(0, 256, 1, 1, name="scratch"),
               Buffer(1, 64, 0, 1, alias_of=0, name="in", own_lifetime=True),
               Buffer(2, 64, 1, 3, alias_of=0, alias_offset=192, name="out", own_lifetime=True),
               Buffer(3, 128, 2, 2, name="cpu")]
    p = plan(buffers, 4)
    assert p.regions["arena"] == 256 and p.lower_bound == 256
    assert p.placement[3][1] + 128 <= p.placement[2][1]


def test_inplace_pairs_share_when_legal():
    buffers = [Buffer(0, 100, -1, 1), Buffer(1, 80, 1, 2), Buffer(2, 80, 2, 3), Buffer(3, 16, 0, 3)]
    inplace = [(0, 1), (1, 2)]
    p = plan(buffers, 3, inplace=inplace)
    check(p, buffers, 3, None, 16, inplace)
    assert p.placement[0] == p.placement[1] == p.placement[2]
    assert p.regions["arena"] == 112 + 16 and p.lower_bound == 116
    assert plan(buffers, 3).regions["arena"] > p.regions["arena"]


@pytest.mark.parametrize("pair, buffers", [
    ((0, 1), [Buffer(0, 64, 0, 1), Buffer(1, 96, 1, 2)]),   # output bigger than input
    ((0, 1), [Buffer(0, 64, 0, 2), Buffer(1, 32, 1, 3)]),   # input still read after the op
    # a view keeps it live
    ((0, 2), [Buffer(0, 64, 0, 1), Buffer(1, 16, 1, 3, alias_of=0), Buffer(2, 32, 1, 2)]),
])
def test_illegal_inplace_pairs_are_ignored(pair, buffers):
    p = plan(buffers, 4, inplace=[pair])
    check(p, buffers, 4, None, 16, [pair])
    assert p.placement[pair[0]] != p.placement[pair[1]]


def test_npu_buffers_and_pins():
    regions = [Region("DTCM", 4096, 0, base=BASES["DTCM"]),
               Region("SRAM", 4096, 1, npu=True, base=BASES["SRAM"]),
               Region("DDR", None, 2, npu=True, base=BASES["DDR"])]
    buffers = [Buffer(0, 256, -1, 1, npu=True), Buffer(1, 256, 1, 2),
               Buffer(2, 256, 2, 3, region="DDR"), Buffer(3, 16, 2, 3, alias_of=2),
               Buffer(4, 64, 0, 3, alias_of=None, npu=True)]
    p = plan(buffers, 3, regions)
    check(p, buffers, 3, regions, 16)
    assert p.placement[0][0] == p.placement[4][0] == "SRAM"
    assert p.placement[1][0] == "DTCM" and p.placement[2][0] == p.placement[3][0] == "DDR"


def test_plan_error_carries_the_memory_map():
    regions = [Region("DTCM", 1024, 0, base=0x2000_0000), Region("SRAM", 4096, 1, base=0x2020_0000)]
    buffers = [Buffer(0, 3000, -1, 1, name="input"), Buffer(1, 3000, 1, 2, name="big_conv"),
               Buffer(2, 100, 0, 2, name="small")]
    with pytest.raises(PlanError) as e:
        plan(buffers, 2, regions)
    msg = str(e.value)
    for text in ("DTCM", "SRAM", "0x20000000", "0x20200000", "1024", "4096", "needs", "big_conv",
                 "input"):
        assert text in msg


@pytest.mark.parametrize("buffers, culprit", [
    ([Buffer(0, 16, 0, 1, npu=True, name="npu_scratch")], "npu_scratch"),
    ([Buffer(0, 16, 0, 1, region="ITCM", name="pinned")], "pinned"),
])
def test_plan_error_when_no_region_accepts_a_buffer(buffers, culprit):
    with pytest.raises(PlanError, match=culprit) as e:
        plan(buffers, 1, [Region("DTCM", None, 0, base=0x2000_0000)])
    assert "0x20000000" in str(e.value)


def test_contradictory_pins_on_a_view_raise():
    buffers = [Buffer(0, 64, 0, 1, region="DTCM"), Buffer(1, 64, 1, 2, alias_of=0, region="SRAM")]
    with pytest.raises(PlanError, match="pinned"):
        plan(buffers, 2, [Region("DTCM", None, 0), Region("SRAM", None, 1)])


@pytest.mark.parametrize("buffers, num_ops", [
    ([Buffer(0, 8, 0, 1), Buffer(0, 8, 1, 2)], 3),                    # duplicate id
    ([Buffer(0, -1, 0, 1)], 2),                                       # negative size
    ([Buffer(0, 8, 2, 1)], 3),                                        # last before first
    ([Buffer(0, 8, 0, 4)], 3),                                        # past the graph output
    ([Buffer(0, 8, 0, 1, alias_of=7)], 2),                            # view of nothing
    ([Buffer(0, 8, 0, 1, alias_of=1), Buffer(1, 8, 0, 1, alias_of=0)], 2),  # alias cycle
    ([Buffer(0, 8, 0, 1), Buffer(1, 8, 0, 1, alias_of=0, alias_offset=4)], 2),  # view past the end
])
def test_malformed_graphs_raise_value_error(buffers, num_ops):
    with pytest.raises(ValueError):
        plan(buffers, num_ops)


def test_memory_map_lists_regions_and_buffers():
    regions = [Region("DTCM", 128, 0, base=0x2000_0000),
               Region("SRAM", None, 1, npu=True, base=0x2020_0000)]
    buffers = [Buffer(0, 96, -1, 1, name="x"), Buffer(1, 96, 1, 2, name="y"),
               Buffer(2, 32, 0, 2, name="z"), Buffer(3, 32, 1, 2, alias_of=1, name="y_view")]
    text = plan(buffers, 2, regions).memory_map()
    for word in ("DTCM", "SRAM", "0x20000000", "0x20200000", "unbounded", "x", "y", "z",
                 "view of y", "0..2"):
        assert word in text
    assert dataclasses.replace(plan(buffers, 2), layout=[]).memory_map().startswith("region")
