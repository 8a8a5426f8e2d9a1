"""Alias kind `overlap` (format 1.8): an int8 depthwise conv's or 1x1 conv's output over its own
input, starting the op's least delta below it (docs/numerics.md, "Overlap").

Table-driven: every geometry runs as one op of a many-op program whose output sits EXACTLY the
least delta below its input (the tightest program both readers accept), and the outputs equal
the Python reference on the host C runtime (ASan + UBSan) and on the emulated boards (M0+, M3,
M4, M33, M55: scalar, DSP and MVE paths), each arena exactly the program's size; one byte less
is refused by both readers, as are overlaps the kernels' loops allow none of. The least delta
is checked against a simulation of the kernels' pixel order; compiled models with overlap on
equal overlap off bit for bit (reference, host C, boards), and no MLPerf model needs more RAM
with it.
"""
from __future__ import annotations

import copy
import math
import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import mcutorch
from mcutorch import ops
from mcutorch.api import CompiledModel
from mcutorch.device.crt import run_host
from mcutorch.device.paths import RUNTIME
from mcutorch.errors import McutorchError, ProgramError
from mcutorch.models import build, example_input
from mcutorch.ops import conv as conv_ops
from mcutorch.plan import Buffer, plan
from mcutorch.program import ConstantPool, OpInfo, Program, RegionInfo, TensorInfo, validate

from test_program import _target_info, unchecked_bytes

BOARDS = [("mps2-an385", "cortex-m0plus"), ("mps2-an385", "cortex-m3"),
          ("mps2-an386", "cortex-m4"), ("mps2-an505", "cortex-m33"),
          ("mps3-an547", "cortex-m55")]
# M55 (MVE: blocks of 3 and 4 pixels, the overlapping last block) in the fast set, the others
# (about a minute each: 14 firmware builds) with `make test-all`
FAST_BOARDS = [pytest.param(*b, marks=() if b[1] == "cortex-m55" else pytest.mark.slow)
               for b in BOARDS]

# depthwise: name, (N, H, W, C), depth multiplier, (KH, KW), (stride h, w), (dilation h, w),
# pads (top, left, bottom, right)
DEPTHWISE = [
    ("3x3_s1_c8", (1, 9, 7, 8), 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    ("3x3_s1_c16", (1, 6, 6, 16), 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    ("3x3_s1_c20", (1, 5, 8, 20), 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),  # 16 + 4
    ("3x3_s1_c3", (1, 7, 5, 3), 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),  # below 4
    ("3x3_s1_c1", (1, 6, 6, 1), 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    ("3x3_s1_c37", (1, 4, 5, 37), 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),  # 32 + 5
    ("3x3_valid", (1, 8, 8, 12), 1, (3, 3), (1, 1), (1, 1), (0, 0, 0, 0)),
    ("3x3_s2_same", (1, 10, 10, 24), 1, (3, 3), (2, 2), (1, 1), (0, 0, 1, 1)),  # TF 'same'
    ("3x3_s2_p1", (1, 9, 11, 8), 1, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),
    ("5x5_s1_p2", (1, 7, 9, 12), 1, (5, 5), (1, 1), (1, 1), (2, 2, 2, 2)),
    ("3x3_dil2", (1, 9, 9, 8), 1, (3, 3), (1, 1), (2, 2), (2, 2, 2, 2)),
    ("3x3_s12_asym", (1, 8, 9, 16), 1, (3, 3), (1, 2), (1, 1), (2, 0, 0, 1)),
    ("m2_c3", (1, 6, 6, 3), 2, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),  # Cout 6 > Cin
    ("m3_c4_s2", (1, 8, 8, 4), 3, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),
    ("k5x1_time", (1, 20, 1, 16), 1, (5, 1), (1, 1), (1, 1), (4, 0, 0, 0)),  # causal 1-D
    ("batch2", (2, 5, 5, 8), 1, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    ("big_pad", (1, 4, 4, 8), 1, (3, 3), (1, 1), (1, 1), (3, 3, 3, 3)),  # windows in padding
]
# 1x1 conv: name, (N, H, W, Cin), Cout
CONV1X1 = [
    ("8x8_c8_8", (1, 8, 8, 8), 8),
    ("c16_8", (1, 6, 6, 16), 8),  # MVE: Cin <= 16, four pixels in registers
    ("c24_32", (1, 5, 6, 24), 32),  # MVE: three pixels x two channels, Cout > Cin
    ("c20_13", (1, 4, 4, 20), 13),  # odd Cout
    ("c3_64", (1, 6, 6, 3), 64),  # the largest Cout, expansion
    ("5x5_c32_16", (1, 5, 5, 32), 16),  # 25 pixels: MVE's last block overlaps
    ("1x2_c8_8", (1, 1, 2, 8), 8),  # two pixels: the general path on MVE
    ("c300_8", (1, 3, 3, 300), 8),  # Cin > 256: the general path on DSP and C
    ("batch2_c16_24", (2, 4, 4, 16), 24),
    ("c17_1", (1, 7, 3, 17), 1),  # Cout 1
]
# variants of the output stage: (in_zp, out_zp, act_min, act_max, shift range)
STAGES = {"fast": (-3, 5, -128, 127, (33, 39)), "any": (7, -2, -100, 90, (26, 31))}


def _attrs(stride, dilation, pads, **extra) -> dict:
    return {"stride_h": stride[0], "stride_w": stride[1], "dilation_h": dilation[0],
            "dilation_w": dilation[1], "pad_top": pads[0], "pad_left": pads[1],
            "pad_bottom": pads[2], "pad_right": pads[3], **extra}


def _out_dim(size, k, s, d, p0, p1) -> int:
    return (size + p0 + p1 - d * (k - 1) - 1) // s + 1


def _case(kind: str, name: str, stage: str):
    """(op name, x shape, y shape, weight, attrs) of one table row, random int8 weights."""
    in_zp, out_zp, lo, hi, _ = STAGES[stage]
    out = {"in_zp": in_zp, "out_zp": out_zp, "act_min": lo, "act_max": hi}
    rng = np.random.default_rng(abs(hash((kind, name, stage))) % 2**32)
    if kind == "depthwise":
        _, x, m, (kh, kw), s, d, p = next(c for c in DEPTHWISE if c[0] == name)
        ho = _out_dim(x[1], kh, s[0], d[0], p[0], p[2])
        wo = _out_dim(x[2], kw, s[1], d[1], p[1], p[3])
        w = rng.integers(-127, 128, (kh, kw, x[3] * m), dtype=np.int8)
        return ("depthwise_conv2d", x, (x[0], ho, wo, x[3] * m), w,
                _attrs(s, d, p, depth_multiplier=m, **out))
    _, x, cout = next(c for c in CONV1X1 if c[0] == name)
    w = rng.integers(-127, 128, (cout, 1, 1, x[3]), dtype=np.int8)
    return ("conv2d", x, (*x[:3], cout), w, _attrs((1, 1), (1, 1), (0,) * 4, groups=1, **out))


CASES = [("depthwise", c[0], s) for c in DEPTHWISE for s in STAGES] + \
        [("conv1x1", c[0], s) for c in CONV1X1 for s in STAGES]


def _least(op: str, x, y, w, attrs) -> int:
    return ops.BY_NAME[op].overlap(TensorInfo.arena("int8", x, 0, 0),
                                   TensorInfo.arena("int8", y, 0, 0),
                                   TensorInfo.const("int8", w.shape, 0), attrs)


def overlap_program(cases, target: str, slack: int = 0, room: int = 0) -> Program:
    """One op per case, each y `slack` bytes less than the least delta below its x (x 16-aligned,
    y exactly there, so y may be unaligned); every x a program input, every y an output; `room`
    spare bytes at the end of the region."""
    pool, tensors, op_list, ins, outs, at = ConstantPool(), [], [], [], [], 0
    for kind, name, stage in cases:
        op, x, y, w, attrs = _case(kind, name, stage)
        rng = np.random.default_rng(len(op_list))
        cout, shifts, delta = y[3], STAGES[stage][4], _least(op, x, y, w, attrs) - slack
        x_at = -(-(at + max(delta, 0)) // 16) * 16
        consts = [w, rng.integers(-5000, 5000, cout, dtype=np.int32),
                  rng.integers(1 << 29, 1 << 30, cout, dtype=np.int32),
                  rng.integers(shifts[0], shifts[1] + 1, cout, dtype=np.int32)]
        k = len(tensors)
        tensors += [TensorInfo.arena("int8", x, 0, x_at, 0.5, attrs["in_zp"]),
                    *(pool.tensor(c) for c in consts),
                    TensorInfo.arena("int8", y, 0, x_at - delta, 0.25, attrs["out_zp"])]
        op_list.append(OpInfo(op, tuple(range(k, k + 5)), (k + 5,), attrs))
        ins.append(k)
        outs.append(k + 5)
        at = -(-max(x_at + math.prod(x), x_at - delta + math.prod(y)) // 16) * 16
    return Program(_target_info(target), [RegionInfo("ram", at + room)], tensors, op_list, ins,
                   outs, pool.to_bytes())


def _inputs(p: Program) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [rng.integers(-128, 128, p.tensors[i].shape, dtype=np.int8) for i in p.inputs]


def _separate(p: Program) -> Program:
    """The same ops with every y moved past every x (no overlap at all)."""
    q = copy.deepcopy(p)
    end = q.regions[0].size
    for k in q.outputs:
        q.tensors[k].offset = end
        end += -(-q.tensors[k].nbytes // 16) * 16
    q.regions[0].size = end
    return q


# ----------------------------------------------------------------------------------------------
# the least delta against the kernels' pixel order


def _reads(x, y, kh, kw, s, d, p):
    """Per output pixel (raster order) of a depthwise conv: the x bytes its in-bounds taps read."""
    n, h, wd, c = x
    for b in range(n):
        for oy in range(y[1]):
            for ox in range(y[2]):
                px = [(b * h + iy) * wd + ix
                      for iy in (oy * s[0] - p[0] + i * d[0] for i in range(kh)) if 0 <= iy < h
                      for ix in (ox * s[1] - p[1] + j * d[1] for j in range(kw)) if 0 <= ix < wd]
                yield {q * c + ch for q in px for ch in range(c)}


def _safe(reads: list[set], cout: int, delta: int) -> bool:
    """No byte of y's pixel t (delta below x) meets an x byte that a pixel >= t still reads."""
    later: set = set()
    for t in range(len(reads) - 1, -1, -1):
        later |= reads[t]
        if any(t * cout + b - delta in later for b in range(cout)):
            return False
    return True


@pytest.mark.parametrize("name", [c[0] for c in DEPTHWISE])
def test_depthwise_least_delta_is_safe_for_the_pixel_order(name):
    op, x, y, w, attrs = _case("depthwise", name, "fast")
    a = attrs
    least = _least(op, x, y, w, attrs)
    reads = list(_reads(x, y, *w.shape[:2], (a["stride_h"], a["stride_w"]),
                        (a["dilation_h"], a["dilation_w"]), (a["pad_top"], a["pad_left"])))
    for delta in (least, least + 1, least + 7, least + math.prod(y)):  # every larger one too
        assert _safe(reads, y[3], delta), delta
    if name.startswith("3x3_s1") and a["pad_top"] == 1:  # rows above + one pixel: (W + 2) * C
        assert least == (x[2] + 2) * x[3]


@pytest.mark.parametrize("name", [c[0] for c in CONV1X1])
def test_conv1x1_least_delta_is_safe_for_blocks_of_pixels(name):
    """Blocks of 1, 2, 3 and 4 pixels (any offset, the MVE last block re-reading the ones before
    it): a block's writes wait for none of its reads, so y up to its last pixel must end before
    x's first pixel of the block."""
    op, x, y, w, attrs = _case("conv1x1", name, "fast")
    least, npx, c, cout = _least(op, x, y, w, attrs), math.prod(x[:3]), x[3], y[3]
    for g in (1, 2, 3, 4):
        for q in range(npx):
            assert min(q + g, npx) * cout - least <= q * c


def test_overlap_constants_match_the_c_loader():
    text = (RUNTIME / "src" / "mt_validate.c").read_text()
    pixels = int(re.search(r"#define MT_OVERLAP_PIXELS +(\d+)", text).group(1))
    cout_max = int(re.search(r"#define MT_OVERLAP_COUT_MAX +(\d+)", text).group(1))
    mac = (RUNTIME / "kernels" / "mt_kernel_mac.h").read_text()
    assert (pixels, cout_max) == (conv_ops.OVERLAP_PIXELS, conv_ops.OVERLAP_COUT_MAX)
    assert int(re.search(r"#define MT_MAC_CHUNK +(\d+)", mac).group(1)) == cout_max


# ----------------------------------------------------------------------------------------------
# the tightest programs run bit-exact; one byte tighter is refused


GROUPS = [CASES[k:k + 16] for k in range(0, len(CASES), 16)]  # mt_run: at most 16 inputs
BOARD_GROUPS = [CASES[k:k + 4] for k in range(0, len(CASES), 4)]  # out0..out3.bin


def _bit_exact(cases, p: Program, got) -> None:
    want = CompiledModel(_separate(p)).run_int8(_inputs(p))
    bad = [c for c, a, b in zip(cases, got, want) if not np.array_equal(a, b)]
    assert not bad


def test_tightest_overlap_programs_are_bit_exact_on_the_host():
    apart = []
    for cases in GROUPS:
        p = overlap_program(cases, "cortex-m55")
        validate.validate(p)
        apart += [c[1] for c, op in zip(cases, p.ops) if not validate._meet(
            validate._bytes_of(p, op.inputs[0]), validate._bytes_of(p, op.outputs[0]))]
        _bit_exact(cases, p, CompiledModel(p).run_int8(_inputs(p)))  # the reference
        _bit_exact(cases, p, run_host(p, _inputs(p)))  # ASan + UBSan, the arena as large
    assert set(apart) == {"1x2_c8_8"}  # two pixels: the least delta is y's size


@pytest.mark.qemu
@pytest.mark.parametrize("board,target", FAST_BOARDS)
def test_tightest_overlap_programs_are_bit_exact_on_boards(board, target):
    for cases in BOARD_GROUPS:
        p = overlap_program(cases, target)
        _bit_exact(cases, p, CompiledModel(p).run_on_board(_inputs(p), board))


def _refused_by_both(p: Program, match: str) -> None:
    with pytest.raises(ProgramError, match=match) as e:
        validate.validate(p)
    assert e.value.reason == "bad_op"
    with pytest.raises(McutorchError, match="bad_op"):
        run_host(unchecked_bytes(p), _inputs(p))


@pytest.mark.parametrize("case", CASES[::3], ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_one_byte_tighter_is_refused_by_both_readers(case):
    p = overlap_program([case], "cortex-m55", slack=1)
    if validate._meet(validate._bytes_of(p, p.ops[0].inputs[0]),
                      validate._bytes_of(p, p.ops[0].outputs[0])):
        _refused_by_both(p, "the kernel needs at least")


def _moved(p: Program, y_at: int) -> Program:
    q = copy.deepcopy(p)
    q.tensors[q.ops[0].outputs[0]].offset = y_at
    return q


HOSTILE = {  # one op, y placed over x where its kernel's loops allow no overlap
    "conv3x3": lambda: _hostile_conv((3, 3), (1, 1), (1, 1, 1, 1), 8),
    "conv1x1_stride2": lambda: _hostile_conv((1, 1), (2, 2), (0, 0, 0, 0), 8),
    "conv1x1_padded": lambda: _hostile_conv((1, 1), (1, 1), (1, 1, 1, 1), 8),
    "conv1x1_cout65": lambda: _hostile_conv((1, 1), (1, 1), (0, 0, 0, 0), 65),
    "conv1x1_groups2": lambda: _hostile_conv((1, 1), (1, 1), (0, 0, 0, 0), 8, groups=2),
}


def _hostile_conv(k, s, pads, cout, groups=1) -> Program:
    x = (1, 8, 8, 8)
    ho, wo = (_out_dim(x[1], k[0], s[0], 1, pads[0], pads[2]),
              _out_dim(x[2], k[1], s[1], 1, pads[1], pads[3]))
    pool = ConstantPool()
    w = np.ones((cout, *k, x[3] // groups), np.int8)
    consts = [w, np.zeros(cout, np.int32), np.full(cout, 1 << 30, np.int32),
              np.full(cout, 36, np.int32)]
    attrs = _attrs(s, (1, 1), pads, groups=groups, in_zp=0, out_zp=0, act_min=-128, act_max=127)
    y = (1, ho, wo, cout)
    tensors = [TensorInfo.arena("int8", x, 0, 4096, 0.5), *(pool.tensor(c) for c in consts),
               TensorInfo.arena("int8", y, 0, 4096 - 64, 0.5)]  # 64 below x: plenty for 1x1
    return Program(_target_info("cortex-m55"), [RegionInfo("ram", 16384)], tensors,
                   [OpInfo("conv2d", tuple(range(5)), (5,), attrs)], [0], [5], pool.to_bytes())


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_overlap_where_the_loops_allow_none_is_refused(name):
    p = HOSTILE[name]()
    validate.validate(_moved(p, 8192))  # the same op apart from x loads
    _refused_by_both(p, "allow no overlap")


def test_output_above_its_input_or_on_a_pool_is_refused():
    p = overlap_program([("depthwise", "3x3_s1_c8", "fast")], "cortex-m55", room=1024)
    x, y = (p.tensors[p.ops[0].inputs[0]], p.tensors[p.ops[0].outputs[0]])
    validate.validate(_moved(p, y.offset - 1 if y.offset else x.offset + x.nbytes))  # further
    _refused_by_both(_moved(p, x.offset + 16), "the kernel needs at least")  # y above x
    _refused_by_both(_moved(p, x.offset), "the kernel needs at least")  # y on x
    pool = _pool_over_input()
    with pytest.raises(ProgramError, match="cannot run in place"):
        validate.validate(pool)
    with pytest.raises(McutorchError, match="bad_op"):
        run_host(unchecked_bytes(pool), [np.zeros((1, 4, 4, 8), np.int8)])


def _pool_over_input() -> Program:
    """max_pool2d (no overlap kind) with y 16 bytes below x, as a depthwise conv could be."""
    attrs = {"kernel_h": 2, "kernel_w": 2, "stride_h": 2, "stride_w": 2, "pad_top": 0,
             "pad_left": 0, "pad_bottom": 0, "pad_right": 0, "act_min": -128, "act_max": 127}
    tensors = [TensorInfo.arena("int8", (1, 4, 4, 8), 0, 64, 0.5),
               TensorInfo.arena("int8", (1, 2, 2, 8), 0, 48, 0.5)]
    return Program(_target_info("cortex-m55"), [RegionInfo("ram", 256)], tensors,
                   [OpInfo("max_pool2d", (0,), (1,), attrs)], [0], [1], b"")


# ----------------------------------------------------------------------------------------------
# the planner: overlap pairs never cost bytes, and only they share live bytes


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 64), st.integers(0, 3), st.booleans()), min_size=1,
                max_size=24), st.data())
def test_planner_overlap_pairs_never_cost_bytes(layers, data):
    """Chains (op k reads buffer k, writes k + 1; some read an older buffer too) with random
    least deltas: the plan with overlap pairs needs at most the bytes of the one without, and
    two buffers live at one op share bytes only as a pair, y at least its delta below x."""
    sizes = [16 * layers[0][0]] + [16 * n for n, _, _ in layers]
    num_ops, last = len(layers), {k: k for k in range(len(sizes))}
    for k, (_, back, _) in enumerate(layers):
        last[max(0, k - back)] = max(last[max(0, k - back)], k)
    last[num_ops] = num_ops
    buffers = [Buffer(k, n, k - 1, last[k]) for k, n in enumerate(sizes)]
    pairs = [(k, k + 1, data.draw(st.integers(0, sizes[k + 1])))
             for k, (_, _, on) in enumerate(layers) if on]
    with_pairs, without = plan(buffers, num_ops, overlap=pairs), plan(buffers, num_ops)
    assert with_pairs.regions["arena"] <= without.regions["arena"]
    assert with_pairs.regions["arena"] >= with_pairs.lower_bound
    least = {(i, o): d for i, o, d in pairs}
    at = {b.id: with_pairs.placement[b.id][1] for b in buffers}
    for a in buffers:
        for b in buffers[a.id + 1:]:
            live = a.first <= b.last and b.first <= a.last
            if live and at[a.id] < at[b.id] + b.size and at[b.id] < at[a.id] + a.size:
                assert (a.id, b.id) in least and at[a.id] - at[b.id] >= least[a.id, b.id]


# ----------------------------------------------------------------------------------------------
# compiled models: overlap on = overlap off, bit for bit, in less or the same RAM


class Chain(torch.nn.Module):
    """stem conv, then depthwise (the geometry) -> ReLU -> 1x1 -> ReLU, `blocks` times."""

    def __init__(self, c, cout, k=3, stride=1, padding=1, dilation=1, blocks=2):
        super().__init__()
        layers = [torch.nn.Conv2d(1, c, 3, padding=1), torch.nn.ReLU()]
        for b in range(blocks):
            cin = c if b == 0 else cout
            layers += [torch.nn.Conv2d(cin, cin, k, stride, padding, dilation, groups=cin),
                       torch.nn.ReLU(), torch.nn.Conv2d(cin, cout, 1), torch.nn.ReLU()]
        self.net = torch.nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


MODELS = {  # name: (Chain arguments, input H, W)
    "dw3_s1_c8": ((8, 8), (12, 10)),
    "dw3_s1_c20_to12": ((20, 12), (9, 9)),
    "dw3_s2_c16_to24": ((16, 24, 3, 2), (12, 12)),
    "dw5_s1_c12": ((12, 12, 5, 1, 2), (10, 10)),
    "dw3_dil2_c8_to16": ((8, 16, 3, 1, 2, 2), (11, 11)),
    "dw3_s1_c3_to40": ((3, 40), (10, 8)),
}


def _compiled(name: str, target="cortex-m55"):
    args, (h, w) = MODELS[name]
    torch.manual_seed(0)
    model = Chain(*args).eval()
    cal = [torch.randn(1, 1, h, w) for _ in range(4)]
    q = mcutorch.quantize(model, (cal[0],), calibration=cal)
    on = mcutorch.compile(q, (cal[0],), target=target)
    off = mcutorch.compile(q, (cal[0],), target=target, overlap=False)
    return on, off, on.quantize_inputs([cal[-1]])


def _overlaps(p: Program) -> int:
    return sum(validate._meet(validate._bytes_of(p, op.inputs[0]),
                              validate._bytes_of(p, op.outputs[0]))
               for op in p.ops if op.name in ("conv2d", "depthwise_conv2d"))


def _ram(m) -> int:
    return sum(r.size for r in m.program.regions)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_models_with_overlap_are_bit_exact_in_less_ram(name):
    on, off, xs = _compiled(name)
    assert _overlaps(on.program) >= 1 and _overlaps(off.program) == 0
    assert _ram(on) < _ram(off)
    want = off.run_int8(xs)
    assert all(np.array_equal(a, b) for a, b in zip(on.run_int8(xs), want))
    assert all(np.array_equal(a, b) for a, b in zip(run_host(on.program, xs), want))


@pytest.mark.qemu
@pytest.mark.parametrize("board,target", [FAST_BOARDS[0], FAST_BOARDS[3], FAST_BOARDS[4]])
def test_models_with_overlap_on_boards_with_the_planned_arena(board, target):
    for name in ("dw3_s2_c16_to24", "dw3_s1_c3_to40"):
        on, off, xs = _compiled(name, target)
        assert _overlaps(on.program) >= 1
        got = on.run_on_board(xs, board)  # mt_run_board.c: arenas exactly the plan's sizes
        assert all(np.array_equal(a, b) for a, b in zip(got, off.run_int8(xs)))


@pytest.mark.parametrize("name", ["ds_cnn_kws", "mobilenet_v1_vww", "ds_cnn_sww", "resnet8",
                                  "fc_autoencoder", "mobilenet_v2"])
def test_mlperf_ram_with_overlap_is_at_most_without(name):
    torch.manual_seed(0)
    model = build(name, **({"width": 0.35, "resolution": 96} if name == "mobilenet_v2"
                           else {})).eval()
    cal = [example_input(model, seed=i) for i in range(2)]
    q = mcutorch.quantize(model, (cal[0],), calibration=cal)
    on = mcutorch.compile(q, (cal[0],), target="cortex-m55", verify=False)
    off = mcutorch.compile(q, (cal[0],), target="cortex-m55", verify=False, overlap=False)
    assert _ram(on) <= _ram(off)
    if name in ("ds_cnn_kws", "mobilenet_v1_vww", "ds_cnn_sww", "mobilenet_v2"):
        assert _ram(on) < _ram(off)  # each has a depthwise or 1x1 conv at its peak
    xs = on.quantize_inputs([cal[1]])
    assert all(np.array_equal(a, b) for a, b in zip(on.run_int8(xs), off.run_int8(xs)))


CHAIN_FILE = '''
import torch
from torch import nn

def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.ReLU(),
                         nn.Conv2d(8, 8, 1), nn.ReLU()).eval()

def example_inputs():
    return (torch.randn(1, 1, 10, 10),)
'''


def test_cli_no_overlap(tmp_path):
    from mcutorch.cli import main

    (tmp_path / "chain.py").write_text(CHAIN_FILE)
    sizes = {}
    for flag in ([], ["--no-overlap"]):
        out = tmp_path / f"chain{len(flag)}.mtp"
        assert main(["compile", str(tmp_path / "chain.py"), "-o", str(out), *flag]) == 0
        p = mcutorch.load(out).program
        sizes[bool(flag)] = (_overlaps(p), sum(r.size for r in p.regions))
    assert sizes[True][0] == 0 < sizes[False][0] and sizes[False][1] < sizes[True][1]
