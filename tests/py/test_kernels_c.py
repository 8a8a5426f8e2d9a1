"""C kernels (runtime/kernels) bit-exact against the Python reference (mcutorch.ref.KERNELS).

Cases are generated here: for every op, named edge cases (strides on odd and even sizes,
dilation, asymmetric padding, channel counts 1/3/5/17, groups, depth multipliers, extreme zero
points and scales, in-place element-wise ops, ...) plus seeded random ones, and "bad" cases that
the reference refuses (ValueError) or whose shapes do not fit, where the kernel must return
MT_STATUS_BAD_ARGUMENT. Each case is one file named after it (format: tests/c/kernels/
run_kernel.c); one runner binary runs all of them, on the host (gcc, ASan + UBSan) and, marked
`qemu`, on every emulated board through semihosting. Bigger random sweeps are marked `slow`.
"""
from __future__ import annotations

import hashlib
import itertools
import math
import os
import shutil
import struct
import subprocess
import zlib
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

from mcutorch import ops, quant
from mcutorch.backends import cortex_m
from mcutorch.device import kernels as ck
from mcutorch.ref import elementwise as ref_elementwise
from mcutorch.ref import (concat_attrs, fold_bias, kernel_for, pad_attrs,
                          softmax_exp_table, transpose_attrs)

ROOT = Path(__file__).resolve().parents[2]
RUNNER_DIR = ROOT / "tests" / "c" / "kernels"
MAGIC, VERSION, NONE = 0x434B544D, 1, 0xFFFFFFFF
OK, BAD_ARGUMENT, BAD_INPUT = 0, 64, 70  # mt_status
DTYPE_ID = {np.dtype(np.int8): 0, np.dtype(np.uint8): 1, np.dtype(np.int16): 2,
            np.dtype(np.int32): 3, np.dtype(np.int64): 4}
FAST_RANDOM, SLOW_RANDOM = 8, 60  # random cases per op
ARENA_LIMIT = 200 * 1024  # the board runner's arena is 256 KiB
BOARD_BUILDS = [("mps2-an385", "cortex-m0plus"), ("mps2-an385", "cortex-m3"),
                ("mps2-an386", "cortex-m4"), ("mps2-an500", "cortex-m7"),
                ("mps2-an505", "cortex-m23"), ("mps2-an505", "cortex-m33"),
                ("mps3-an547", "cortex-m55")]
# make test runs the kernel tables on one core per ISA level (Scalar M0+, DSP M33, MVE/Helium
# M55); make test-all on every emulated core
ISA_LEVELS = ("cortex-m0plus", "cortex-m33", "cortex-m55")
BOARD_PARAMS = [pytest.param(b, c, id=f"{b}-{c}", marks=() if c in ISA_LEVELS else pytest.mark.slow)
                for b, c in BOARD_BUILDS]
KWS_OPS = ("conv2d", "depthwise_conv2d", "fully_connected", "avg_pool2d", "softmax")
# bytes of kernel code for KWS, -Os, Cortex-M55; 15,340 (was 14,278): conv2d_add's add stage and
# staged spans live in the conv paths conv2d shares (mt_dot_px_add_s8, c1x1_row_add, ...);
# 15,372 with the int16 (lut, fully_connected dispatch) and token-id checks merged beside it;
# 14,444: conv2d_add's gathered loop is its own function reached through its add stage, so
# plain conv2d links neither it nor mt_dot_px_add_s8; 14,500 with format 1.8 (the int16 softmax
# and fully_connected dispatch in the int8 kernels: +24 B alone, +56 merged); 14,532 measured
# with format 1.9 (+32: the kernel table's rows for opcodes 38 and 39, 4 pointers each);
# 14,688 with two-pointer views (data + the tensor's record in the program: every shape, dtype
# and size read goes through the record pointer, +212 B alone), which cut the bound state from 40
# to 8 B per operand
KWS_TEXT_BUDGET = 14_700
HOST_FLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-O1", "-g",
              "-fsanitize=address,undefined", "-fno-sanitize-recover=all"]


@dataclass
class Case:
    """One kernel call: operands, attributes, and what the kernel must answer."""

    name: str
    op: str
    inputs: tuple
    attrs: dict
    alias: int | None = None  # output placed over this input (in place)
    status: int = OK
    out_shape: tuple | None = None  # the y shape handed to the kernel (default: the reference's)
    ref_raises: bool = True  # for bad cases: the reference refuses them too
    variant: str = "default"  # kernel variant (mcutorch.ops), run by ref.kernel_for and the C table


def rng_for(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


# ----------------------------------------------------------------------------- value helpers

def s8(rng, shape, lo=-128, hi=127):
    return rng.integers(lo, hi + 1, size=shape, dtype=np.int64).astype(np.int8)


def i32(values):
    return np.asarray(values, dtype=np.int64).astype(np.int32)


def pick_zp(rng):
    return int(rng.choice([-128, 127, int(rng.integers(-128, 128)), int(rng.integers(-128, 128))]))


def pick_act(rng, zp):
    """A fused activation range at least 30 wide: none, ReLU, ReLU6-like or a random one."""
    choice = rng.integers(4)
    if choice == 1 and zp <= 90:
        return zp, 127  # fused ReLU
    if choice == 2 and zp <= 90:
        return zp, zp + 30 + int(rng.integers(0, 98 - zp))  # ReLU6-like
    if choice == 3:
        lo = int(rng.integers(-128, 97))
        return lo, int(rng.integers(lo + 30, 128))
    return -128, 127


def odd_pair(rng, real):
    """`real` encoded with a random shift in 2..62 instead of the normalized one, so the
    multiplier ranges from tiny (1) to large (2^31 - 1); rq is the same up to rounding."""
    lo = max(2, math.ceil(-math.log2(real)))
    hi = min(62, math.floor(30.99 - math.log2(real)))
    shift = int(rng.integers(lo, hi + 1)) if lo <= hi else min(62, max(2, lo))
    return max(0, min((1 << 31) - 1, round(real * 2.0**shift))), shift


def wild_pair(rng, max_acc):
    """Any shift in 2..62 with a log-uniform multiplier that keeps rq(max_acc) inside int32."""
    shift = int(rng.integers(2, 63))
    cap = min((1 << 31) - 1, ((1 << 31) - 1 << shift) // (int(max_acc) + 1) - 1)
    if cap < 1 or rng.random() < 0.05:
        return 0, shift
    return int(math.exp(rng.uniform(0, math.log(cap)))), shift


def any_pair(rng, real, max_acc, extreme):
    """Normalized (1 - extreme), odd (extreme * 3/4) or wild (extreme / 4) encoding of ~real."""
    u = rng.random()
    if u >= extreme:
        return quant.quantize_multiplier(real)
    return odd_pair(rng, real) if u < 0.75 * extreme else wild_pair(rng, max_acc)


def channel_scales(rng, n, typical, max_acc, extreme=0.15):
    """Per-channel (mult, shift) int32 vectors around `typical`, some encoded unusually."""
    pairs = [any_pair(rng, typical * rng.uniform(0.5, 2.0), max_acc, extreme) for _ in range(n)]
    return i32([p[0] for p in pairs]), i32([p[1] for p in pairs])


# ----------------------------------------------------------------------------- MAC ops

def mac_case(name, op, x_shape, w_shape, *, stride=(1, 1), dil=(1, 1), pads=(0, 0, 0, 0),
             groups=1, mult=1, zp=None, extreme=0.15, bias_bits=12):
    """A conv2d / depthwise_conv2d / fully_connected case with sensible random operands."""
    rng = rng_for(name)
    in_zp = pick_zp(rng) if zp is None else zp[0]
    out_zp = pick_zp(rng) if zp is None else zp[1]
    x = s8(rng, x_shape)
    w = s8(rng, w_shape, -127, 127)
    if rng.random() < 0.2:
        w.flat[rng.integers(w.size)] = -128  # kernels also accept -128
    cout = w_shape[0] if op != "depthwise_conv2d" else w_shape[-1]
    taps = w.size // cout
    bias = i32(rng.integers(-(1 << bias_bits), 1 << bias_bits, size=cout))
    max_acc = (1 << bias_bits) + taps * 255 * 128
    typical = 50.0 / (math.sqrt(taps) * 74 * 73 + 1)  # std of acc ~ sqrt(taps) std(x) std(w)
    m, s = channel_scales(rng, cout, typical, max_acc, extreme)
    act_min, act_max = pick_act(rng, out_zp)
    attrs = dict(in_zp=in_zp, out_zp=out_zp, act_min=act_min, act_max=act_max)
    if op != "fully_connected":
        attrs.update(stride_h=stride[0], stride_w=stride[1], dilation_h=dil[0],
                     dilation_w=dil[1], pad_top=pads[0], pad_left=pads[1], pad_bottom=pads[2],
                     pad_right=pads[3])
        if op in ("conv2d", "conv_transpose2d"):
            attrs["groups"] = groups
        else:
            attrs["depth_multiplier"] = mult
    return Case(name, op, (x, w, bias, m, s), attrs)


def folded(case):
    """The "folded" twin of a fully_connected case: bias' = bias - in_zp * sum(w) (what the
    compiler stores), in_zp kept (the kernel ignores it). Its reference output must equal the
    default output on the unfolded bias."""
    x, w, bias, m, s = case.inputs
    b = fold_bias(w, bias, case.attrs["in_zp"])
    assert b.min() >= -(1 << 31) and b.max() < (1 << 31)
    twin = replace(case, name=case.name + "_folded", inputs=(x, w, i32(b), m, s),
                   variant="folded")
    if case.status == OK:
        np.testing.assert_array_equal(reference_output(twin), reference_output(case))
    return twin


def with_folded(cases):
    """`cases` plus the folded twin of every fully_connected case."""
    return cases + [folded(c) for c in cases if c.op == "fully_connected"]


CONV_EDGES = [  # name, x NHWC, w OHWI, stride, dilation, pads (t, l, b, r), groups
    ("3x3_same", (1, 8, 8, 3), (8, 3, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1),
    ("stride2_odd", (1, 9, 9, 5), (4, 3, 3, 5), (2, 2), (1, 1), (1, 1, 1, 1), 1),
    ("stride2_even", (1, 8, 8, 5), (4, 3, 3, 5), (2, 2), (1, 1), (0, 0, 1, 1), 1),
    ("stride2_even_w10", (1, 8, 10, 3), (3, 3, 3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 1),
    ("stride3_hw", (1, 10, 11, 2), (3, 2, 4, 2), (3, 2), (1, 1), (0, 1, 2, 0), 1),
    ("dilation2", (1, 9, 9, 3), (5, 3, 3, 3), (1, 1), (2, 2), (2, 2, 2, 2), 1),
    ("dilation_3x1_s12", (1, 11, 7, 2), (3, 3, 2, 2), (1, 2), (3, 1), (0, 1, 2, 0), 1),
    ("asym_pad", (1, 6, 7, 4), (6, 3, 2, 4), (1, 1), (1, 1), (2, 0, 1, 3), 1),
    ("cin1_cout17", (1, 7, 7, 1), (17, 3, 3, 1), (1, 1), (1, 1), (1, 1, 1, 1), 1),
    ("cin17_cout3", (1, 5, 5, 17), (3, 3, 3, 17), (1, 1), (1, 1), (0, 0, 0, 0), 1),
    ("cout1", (1, 6, 5, 3), (1, 3, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1),
    ("1x1_c17", (1, 6, 6, 17), (5, 1, 1, 17), (1, 1), (1, 1), (0, 0, 0, 0), 1),
    ("1x1_stride2", (1, 7, 7, 8), (16, 1, 1, 8), (2, 2), (1, 1), (0, 0, 0, 0), 1),
    ("1x1_padded", (1, 4, 4, 3), (3, 1, 1, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1),
    ("groups2", (1, 6, 6, 6), (4, 3, 3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 2),
    ("groups3_cout9", (1, 5, 5, 6), (9, 3, 3, 2), (1, 1), (1, 1), (1, 1, 1, 1), 3),
    ("groups_eq_cin", (1, 5, 5, 5), (10, 3, 3, 1), (2, 2), (1, 1), (1, 1, 1, 1), 5),
    ("groups_dilated", (1, 8, 8, 4), (4, 2, 2, 2), (1, 1), (2, 3), (1, 2, 0, 1), 2),
    ("kernel_gt_input", (1, 3, 3, 2), (4, 5, 5, 2), (1, 1), (1, 1), (2, 2, 2, 2), 1),
    ("windows_in_padding", (1, 2, 2, 2), (3, 2, 2, 2), (1, 1), (1, 1), (3, 3, 3, 3), 1),
    ("batch2", (2, 5, 4, 3), (4, 3, 3, 3), (1, 2), (1, 1), (1, 0, 1, 1), 1),
    ("wide_row", (1, 3, 20, 4), (2, 1, 7, 4), (1, 3), (1, 1), (0, 3, 0, 3), 1),
    ("kws_conv1", (1, 49, 10, 1), (64, 10, 4, 1), (2, 2), (1, 1), (4, 1, 5, 1), 1),
    ("kws_pointwise", (1, 25, 5, 64), (64, 1, 1, 64), (1, 1), (1, 1), (0, 0, 0, 0), 1),
]

CONVT_EDGES = [  # name, x NHWC, w [Cout, KH, KW, Cin/g], stride, dilation, pads (t, l, b, r), g
    ("k4s2p1", (1, 8, 8, 32), (16, 4, 4, 32), (2, 2), (1, 1), (1, 1, 1, 1), 1),
    ("odd_outpad1", (1, 5, 7, 3), (4, 3, 3, 3), (2, 2), (1, 1), (1, 1, 0, 0), 1),
    ("outpad_max_s3", (1, 4, 5, 2), (3, 3, 3, 2), (3, 3), (1, 1), (0, 0, -2, -2), 1),
    ("stride_gt_kernel", (1, 4, 4, 3), (5, 2, 2, 3), (4, 3), (1, 1), (0, 0, 0, 0), 1),
    ("stride_gt_kernel_pad", (1, 3, 4, 3), (5, 2, 1, 3), (3, 4), (1, 1), (1, 0, -1, -3), 1),
    ("dilation2_s2", (1, 5, 5, 2), (3, 3, 3, 2), (2, 2), (2, 2), (1, 2, 1, -1), 1),
    ("dilation3_s2", (1, 4, 6, 3), (2, 3, 2, 3), (2, 1), (3, 2), (2, 0, 0, 1), 1),
    ("dilation_gt_stride", (1, 4, 4, 2), (3, 2, 3, 2), (1, 2), (3, 5), (0, 1, -2, -4), 1),
    ("groups2", (1, 4, 4, 6), (4, 3, 3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 2),
    ("groups3_cout9", (1, 3, 5, 6), (9, 2, 3, 2), (1, 2), (1, 1), (0, 1, 1, 0), 3),
    ("depthwise", (1, 5, 5, 5), (5, 4, 4, 1), (2, 2), (1, 1), (1, 1, 1, 1), 5),
    ("depthwise_mult2", (1, 4, 3, 4), (8, 3, 3, 1), (2, 2), (1, 1), (1, 1, 0, 0), 4),
    ("batch2", (2, 3, 4, 4), (6, 2, 3, 4), (1, 2), (1, 1), (0, 1, 0, 1), 1),
    ("cout70", (1, 3, 3, 8), (70, 2, 2, 8), (2, 2), (1, 1), (0, 0, 0, 0), 1),
    ("crop_heavy", (1, 6, 6, 2), (3, 3, 3, 2), (1, 1), (1, 1), (2, 3, 3, 2), 1),
    ("stride1", (1, 5, 4, 7), (3, 3, 3, 7), (1, 1), (1, 1), (1, 1, 1, 1), 1),
    ("one_d", (1, 1, 9, 5), (4, 1, 3, 5), (1, 2), (1, 1), (0, 1, 0, 0), 1),
    ("one_d_s4_k8", (1, 1, 6, 12), (8, 1, 8, 12), (1, 4), (1, 1), (0, 2, 0, 2), 1),
    ("pixel_1x1", (1, 1, 1, 3), (2, 3, 3, 3), (2, 2), (1, 1), (0, 0, 0, 0), 1),
    ("kernel1", (1, 3, 3, 9), (5, 1, 1, 9), (2, 2), (1, 1), (0, 0, -1, -1), 1),
    # windows too long to gather (pixel by pixel on re-laid weights, 5 of 6 channels per
    # re-layout) and a phase too big to re-lay (weights read in place)
    ("long_window", (1, 3, 4, 40), (6, 3, 3, 40), (1, 1), (1, 1), (1, 1, 1, 1), 1),
    ("phase_past_relayout", (1, 2, 3, 240), (3, 3, 3, 240), (1, 1), (1, 1), (0, 0, 0, 0), 1),
    ("long_window_groups2", (1, 3, 3, 80), (4, 3, 3, 40), (1, 1), (1, 1), (1, 1, 1, 1), 2),
]


def convt_cases():
    cases = [mac_case(f"convt_{n}", "conv_transpose2d", x, w, stride=s, dil=d, pads=p, groups=g)
             for n, x, w, s, d, p, g in CONVT_EDGES]
    cases += [mac_case(f"convt_simd_c{c}", "conv_transpose2d", (1, 3, 3, c), (6, 3, 3, c),
                       stride=(2, 2), pads=(1, 1, 0, 0)) for c in SIMD_COUNTS]
    cases += [mac_case("convt_zp_min", "conv_transpose2d", (1, 4, 4, 17), (5, 3, 3, 17),
                       stride=(2, 2), pads=(1,) * 4, zp=(-128, 127)),
              mac_case("convt_zp_max", "conv_transpose2d", (1, 4, 4, 5), (5, 3, 3, 5),
                       stride=(2, 2), pads=(1,) * 4, zp=(127, -128)),
              mac_case("convt_scales_extreme", "conv_transpose2d", (1, 3, 3, 5), (17, 2, 2, 5),
                       stride=(2, 2), extreme=1.0),
              mac_case("convt_bias_large", "conv_transpose2d", (1, 3, 3, 3), (5, 3, 3, 3),
                       stride=(2, 2), bias_bits=28)]
    base = mac_case("convt_base", "conv_transpose2d", (1, 4, 4, 4), (6, 3, 3, 2), stride=(2, 2),
                    pads=(1,) * 4, groups=2)
    x, w, b, m, s = base.inputs
    cases += [bad(base, "groups3", groups=3), bad(base, "in_zp128", in_zp=128),
              bad(base, "stride0", stride_h=0), bad(base, "dilation0", dilation_w=0),
              bad(base, "pad_top_negative", pad_top=-1, pad_bottom=3),
              bad(base, "pad_bottom_at_max", pad_bottom=-2, pad_top=4),
              bad(base, "act_empty", act_min=5, act_max=4),
              bad(base, "shift63", inputs=(x, w, b, m, i32([63] * 6))),
              bad(base, "mult_negative", inputs=(x, w, b, i32([-1] * 6), s)),
              bad(base, "bias_short", inputs=(x, w, b[:5], m, s)),
              bad(base, "y_shape", ref_raises=False, out_shape=(1, 7, 6, 6)),
              bad(base, "cropped_away", pad_top=5, pad_bottom=5, out_shape=(1, 7, 7, 6))]
    return cases


DW_EDGES = [  # name, x NHWC, weight, stride, dilation, pads, depth multiplier
    ("3x3_same", (1, 8, 8, 8), (3, 3, 8), (1, 1), (1, 1), (1, 1, 1, 1), 1),
    ("stride2_odd", (1, 9, 9, 5), (3, 3, 5), (2, 2), (1, 1), (1, 1, 1, 1), 1),
    ("stride2_even", (1, 8, 8, 3), (3, 3, 3), (2, 2), (1, 1), (0, 0, 1, 1), 1),
    ("mult2", (1, 6, 6, 3), (3, 3, 6), (1, 1), (1, 1), (1, 1, 1, 1), 2),
    ("mult3_c1", (1, 5, 5, 1), (3, 3, 3), (1, 1), (1, 1), (0, 1, 1, 0), 3),
    ("dilation", (1, 9, 9, 4), (3, 3, 4), (1, 1), (2, 3), (2, 3, 2, 3), 1),
    ("asym_c17", (1, 7, 6, 17), (3, 2, 17), (1, 2), (1, 1), (2, 0, 0, 1), 1),
    ("weight_1hwc", (1, 5, 5, 5), (1, 3, 3, 5), (1, 1), (1, 1), (1, 1, 1, 1), 1),
    ("weight_1hwc_mult2", (2, 4, 5, 3), (1, 2, 3, 6), (2, 1), (1, 2), (0, 2, 1, 1), 2),
    ("windows_in_padding", (1, 2, 2, 3), (2, 2, 3), (1, 1), (1, 1), (3, 3, 3, 3), 1),
    ("kws_dw", (1, 25, 5, 64), (3, 3, 64), (1, 1), (1, 1), (1, 1, 1, 1), 1),
]

FC_EDGES = [("kws", (1, 64), (12, 64)), ("batch3", (3, 17), (5, 17)), ("in1", (2, 1), (3, 1)),
            ("out1", (1, 33), (1, 33)), ("in1000", (1, 1000), (10, 1000)),
            ("in5_out5", (4, 5), (5, 5))]


# Channel counts that hit every vector / tail path of the ISA variants: MVE steps of 16 bytes
# (conv, fc: input channels; depthwise, pools, element-wise: channels or elements, 4 per int32x4),
# DSP words of 4, blocks of 4 output channels, chunks of 64 (MT_MAC_CHUNK).
SIMD_COUNTS = (1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 20, 31, 32, 33)


def simd_cases():
    """Shapes sweeping SIMD_COUNTS through every kernel with an MVE or DSP path."""
    cases = []
    for c in SIMD_COUNTS:
        cout = (c * 7) % 13 + 1
        cases += [mac_case(f"simd_pw_c{c}", "conv2d", (1, 3, 2, c), (cout, 1, 1, c)),
                  mac_case(f"simd_conv3x3_c{c}", "conv2d", (1, 4, 3, c), (cout, 3, 3, c),
                           pads=(1, 1, 1, 1)),
                  mac_case(f"simd_dw_c{c}", "depthwise_conv2d", (1, 4, 3, c), (3, 3, c),
                           pads=(1, 0, 1, 1)),
                  mac_case(f"simd_fc_in{c}", "fully_connected", (2, c), (cout, c)),
                  mac_case(f"simd_fc_out{c}", "fully_connected", (1, 19), (c, 19)),
                  pool_case(f"simd_avgpool_c{c}", "avg_pool2d", (1, 4, 5, c), (3, 2), (1, 2),
                            (1, 0, 1, 1)),
                  add_case(f"simd_add_n{c}", (c,)), mul_case(f"simd_mul_n{c}", (c,)),
                  unary_case(f"simd_rescale_n{c}", "rescale", (c,), extreme=True),
                  softmax_case(f"simd_softmax_n{c}", (2, c))]
    cases += [mac_case("simd_pw_cout70", "conv2d", (1, 2, 2, 9), (70, 1, 1, 9)),  # 2 chunks
              mac_case("simd_fc_out130", "fully_connected", (2, 5), (130, 5)),
              mac_case("simd_conv_ungathered", "conv2d", (1, 4, 4, 120), (5, 3, 3, 120),
                       pads=(1, 1, 0, 1)),  # window > 1024 bytes: rows as runs, borders skipped
              mac_case("simd_conv_1xk_gather", "conv2d", (1, 3, 9, 2), (6, 1, 5, 2),
                       pads=(0, 2, 0, 2)),
              mac_case("simd_dw_c48_s2", "depthwise_conv2d", (1, 5, 5, 48), (3, 3, 48),
                       stride=(2, 2), pads=(1, 1, 1, 1)),
              pool_case("simd_avgpool_global_300", "avg_pool2d", (1, 20, 15, 9), (20, 15)),
              mac_case("simd_conv_zp_min", "conv2d", (1, 5, 5, 17), (6, 3, 3, 17),
                       pads=(1, 1, 1, 1), zp=(-128, 5)),
              mac_case("simd_pw_zp_min", "conv2d", (1, 3, 3, 33), (5, 1, 1, 33), zp=(-128, 0)),
              mac_case("simd_dw_zp_min", "depthwise_conv2d", (1, 4, 4, 21), (3, 3, 21),
                       pads=(1, 1, 1, 1), zp=(-128, 3))]
    return cases


def conv1x1_mve_cases():
    """1x1 convolutions of the MVE fast path (mt_conv_1x1_mve.h): Cin <= 16 (pixels kept in
    registers) and > 16 (pairs of channels), rows of 1..3 pixels (general path below 3,
    repeated last pixel) and not a multiple of the block (overlapping last block), strides,
    Wo 1 (columns), batch, two chunks, chunks whose shifts are all >= 32 (VQDMULH output stage;
    32 itself) or not (31, 20, odd encodings)."""

    def with_shifts(case, shifts):  # shifts replaced per channel, multipliers rescaled
        x, w, bias, m, s = case.inputs
        s2 = np.resize(np.asarray(shifts, np.int64), len(s))
        m2 = np.minimum(np.round(m.astype(np.float64) * 2.0 ** (s2 - s)), (1 << 31) - 1)
        return replace(case, name=case.name + "_shifts", inputs=(x, w, bias, i32(m2), i32(s2)))

    cases = []
    for i, c in enumerate((1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 20, 31, 32, 33, 40, 64)):
        cout = (c * 5) % 11 + 1
        x2 = ((2, 5, 5, c), (1, 9, 14, c), (2, 7, 8, c))[i % 3]  # Wo 3, 7, 4 at stride 2
        cases += [mac_case(f"pw_mve_c{c}", "conv2d", (1, 3, 5, c), (cout, 1, 1, c), extreme=0),
                  mac_case(f"pw_mve_c{c}_s2", "conv2d", x2, (cout + 4, 1, 1, c),
                           stride=(2, 2), extreme=0),
                  mac_case(f"pw_mve_c{c}_odd", "conv2d", (1, 2, 7, c), (cout, 1, 1, c),
                           extreme=1.0)]
    cases += [mac_case("pw_mve_1px", "conv2d", (1, 1, 1, 9), (3, 1, 1, 9), extreme=0),
              mac_case("pw_mve_1px_c40", "conv2d", (1, 1, 1, 40), (5, 1, 1, 40), extreme=0),
              mac_case("pw_mve_2px_s2", "conv2d", (1, 3, 3, 20), (5, 1, 1, 20), stride=(2, 2),
                       extreme=0),
              mac_case("pw_mve_s21", "conv2d", (1, 6, 5, 16), (8, 1, 1, 16), stride=(2, 1),
                       extreme=0),
              mac_case("pw_mve_s13", "conv2d", (2, 4, 10, 24), (6, 1, 1, 24), stride=(1, 3),
                       extreme=0),
              mac_case("pw_mve_zp_min", "conv2d", (1, 5, 5, 13), (7, 1, 1, 13), zp=(-128, 127),
                       extreme=0),
              mac_case("pw_mve_zp_max", "conv2d", (1, 5, 5, 35), (7, 1, 1, 35), zp=(127, -128),
                       extreme=0),
              mac_case("pw_mve_resnet_s2", "conv2d", (1, 8, 8, 16), (32, 1, 1, 16),
                       stride=(2, 2), extreme=0),
              mac_case("pw_mve_cout70_c16", "conv2d", (1, 2, 3, 16), (70, 1, 1, 16), extreme=0),
              mac_case("pw_mve_cout130_c40", "conv2d", (1, 3, 2, 40), (130, 1, 1, 40),
                       extreme=0),
              mac_case("pw_mve_col_s2", "conv2d", (1, 9, 1, 24), (6, 1, 1, 24), stride=(2, 1),
                       extreme=0),  # Wo 1: the pixels of a column form the row
              mac_case("pw_mve_col_s3_b2", "conv2d", (2, 10, 1, 12), (5, 1, 1, 12),
                       stride=(3, 1), extreme=0),
              mac_case("pw_mve_col_w2", "conv2d", (1, 7, 2, 20), (3, 1, 1, 20), stride=(2, 2),
                       extreme=0),
              mac_case("pw_mve_bias_large_c12", "conv2d", (1, 3, 3, 12), (5, 1, 1, 12),
                       extreme=0, bias_bits=28),
              mac_case("pw_mve_bias_large_c40", "conv2d", (1, 3, 3, 40), (5, 1, 1, 40),
                       extreme=0, bias_bits=28)]
    cases += [with_shifts(mac_case("pw_mve_c8_sh32", "conv2d", (1, 3, 6, 8), (6, 1, 1, 8),
                                   extreme=0), [32, 33]),
              with_shifts(mac_case("pw_mve_c48_sh32", "conv2d", (1, 3, 3, 48), (6, 1, 1, 48),
                                   extreme=0), [40, 32, 35]),
              with_shifts(mac_case("pw_mve_c8_sh31", "conv2d", (1, 4, 3, 8), (5, 1, 1, 8),
                                   extreme=0), [36, 37, 31, 40, 36]),
              with_shifts(mac_case("pw_mve_c70_sh20", "conv2d", (1, 2, 3, 24), (70, 1, 1, 24),
                                   extreme=0), [38] * 66 + [20, 38, 38, 38])]
    return cases


def conv1x1_cases():
    """The 1x1 fast path: Cin and Cout 1..17 and beyond (odd pixel and channel counts pair
    with themselves), strides 1 and 2 (rows left below the last window), batches, zero points
    and activation ranges at their limits, extreme scales (shift < 32 and > 32), large biases,
    Cin above the unpack buffer (general path)."""
    cases = []
    for c in range(1, 18):
        s = (1 + c % 2, 1 + (c // 2) % 2)
        cases.append(mac_case(f"pw1x1_c{c}", "conv2d", (1 + c % 2, 3 + c % 4, 1 + c % 5, c),
                              ((c * 5) % 17 + 1, 1, 1, c), stride=s, extreme=0.6))
    for n, x, cout, s, extra in (
            ("s2_rows_left", (2, 6, 5, 9), 7, (2, 2), {}),
            ("s21", (2, 5, 4, 20), 6, (2, 1), {}),
            ("s12", (1, 3, 6, 12), 5, (1, 2), {}),
            ("c31", (1, 3, 3, 31), 9, (1, 1), {}),
            ("c33_zp_min", (1, 3, 3, 33), 17, (1, 1), dict(zp=(-128, 127))),
            ("c64_zp_max", (1, 5, 5, 64), 64, (1, 1), dict(zp=(127, -128))),
            ("c8_scales_extreme", (1, 4, 5, 8), 16, (1, 1), dict(extreme=1.0)),
            ("c16_bias_large", (1, 3, 3, 16), 11, (1, 1), dict(bias_bits=28, extreme=1.0)),
            ("cout1", (1, 3, 3, 24), 1, (1, 1), {}),
            ("px1", (1, 1, 1, 13), 3, (1, 1), {}),
            ("c256", (1, 2, 3, 256), 3, (1, 1), {}),
            ("c257", (1, 2, 3, 257), 3, (1, 1), {})):
        cases.append(mac_case(f"pw1x1_{n}", "conv2d", x, (cout, 1, 1, x[3]), stride=s, **extra))
    for i in range(8):  # activation ranges: pick_act chooses none, ReLU, ReLU6-like, random
        cases.append(mac_case(f"pw1x1_act_{i}", "conv2d", (1, 3, 3, 12), (6, 1, 1, 12)))
    return cases


def depthwise_speed_cases():
    """Depthwise paths by block size and walk: channel counts around the MVE blocks of 16 and 8
    and the DSP/C quads, all shifts > 32 (extreme=0: the MVE one-asm block) or not, one-column
    windows walked along their rows (1-D kernels over time), dilation (DSP steps differ)."""
    cases = [mac_case(f"dws_c{c}", "depthwise_conv2d", (1, 5, 4, c), (3, 3, c),
                      pads=(1, 1, 1, 1), extreme=0)
             for c in (1, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 20, 24, 31, 32, 33, 40)]
    cases += [mac_case(f"dws_{n}", "depthwise_conv2d", x, w, stride=s, dil=d, pads=p, mult=m,
                       zp=zp, extreme=e)
              for n, x, w, s, d, p, m, zp, e in [
                  ("t5_c40", (1, 12, 1, 40), (5, 1, 40), (1, 1), (1, 1), (2, 0, 2, 0), 1, None, 0),
                  ("t10_c16_s2", (1, 20, 1, 16), (10, 1, 16), (2, 1), (1, 1), (4, 0, 5, 0), 1,
                   None, 0),
                  ("t15_c8", (1, 16, 1, 8), (15, 1, 8), (1, 1), (1, 1), (7, 0, 7, 0), 1, None, 0),
                  ("t3_c5_any", (1, 9, 1, 5), (3, 1, 5), (1, 1), (1, 1), (1, 0, 1, 0), 1, None,
                   0.15),
                  ("t4_mult2", (1, 9, 1, 3), (4, 1, 6), (1, 1), (2, 1), (3, 0, 0, 0), 2, None,
                   0.15),
                  ("dil2_c8", (1, 7, 7, 8), (3, 3, 8), (1, 1), (2, 2), (2, 2, 2, 2), 1, None, 0),
                  ("dil2_c4", (1, 7, 6, 4), (3, 3, 4), (1, 1), (1, 2), (1, 2, 1, 2), 1, None, 0),
                  ("s2_c8", (2, 9, 8, 8), (3, 3, 8), (2, 2), (1, 1), (1, 1, 1, 1), 1, None, 0),
                  ("s2_c24_zp", (1, 7, 7, 24), (3, 3, 24), (2, 2), (1, 1), (0, 0, 1, 1), 1,
                   (-128, 127), 0),
                  ("zp_max_c16", (1, 4, 4, 16), (3, 3, 16), (1, 1), (1, 1), (1, 1, 1, 1), 1,
                   (127, -128), 0),
                  ("c24_any_shift", (1, 4, 5, 24), (3, 3, 24), (1, 1), (1, 1), (1, 1, 1, 1), 1,
                   None, 1.0),
                  ("pad_only_c16", (1, 2, 2, 16), (3, 3, 16), (1, 1), (1, 1), (3, 3, 3, 3), 1,
                   None, 0),
                  ("row_1x5_c9", (1, 3, 9, 9), (1, 5, 9), (1, 1), (1, 1), (0, 2, 0, 2), 1, None,
                   0)]]
    return cases


def conv_cases(n_random):
    cases = [mac_case(f"conv2d_{n}", "conv2d", x, w, stride=s, dil=d, pads=p, groups=g)
             for n, x, w, s, d, p, g in CONV_EDGES]
    cases += [mac_case("conv2d_zp_min", "conv2d", (1, 5, 5, 3), (4, 3, 3, 3), pads=(1,) * 4,
                       zp=(-128, 127)),
              mac_case("conv2d_zp_max", "conv2d", (1, 5, 5, 3), (4, 3, 3, 3), pads=(1,) * 4,
                       zp=(127, -128)),
              mac_case("conv2d_scales_extreme", "conv2d", (1, 4, 4, 5), (17, 2, 2, 5),
                       extreme=1.0),
              mac_case("conv2d_bias_large", "conv2d", (1, 4, 4, 3), (5, 3, 3, 3),
                       pads=(1,) * 4, bias_bits=28)]
    cases += [mac_case(f"dw_{n}", "depthwise_conv2d", x, w, stride=s, dil=d, pads=p, mult=m)
              for n, x, w, s, d, p, m in DW_EDGES]
    cases += [mac_case("dw_zp_extreme", "depthwise_conv2d", (1, 4, 4, 5), (3, 3, 5),
                       pads=(1,) * 4, zp=(127, 127)),
              mac_case("dw_scales_extreme", "depthwise_conv2d", (1, 4, 4, 17), (2, 2, 17),
                       extreme=1.0)]
    cases += [mac_case(f"fc_{n}", "fully_connected", x, w) for n, x, w in FC_EDGES]
    cases += [mac_case("fc_scales_extreme", "fully_connected", (2, 9), (17, 9), extreme=1.0),
              mac_case("fc_zp_extreme", "fully_connected", (2, 40), (3, 40), zp=(-128, 127))]
    for i in range(n_random):
        rng = rng_for(f"mac_random_{i}")
        n, n_in, n_out = (int(v) for v in rng.integers(1, (4, 300, 40)))
        cases += [random_conv(f"conv2d_random_{i:03d}", rng),
                  random_dw(f"dw_random_{i:03d}", rng),
                  mac_case(f"fc_random_{i:03d}", "fully_connected", (n, n_in), (n_out, n_in))]
    return cases


def _window(rng, size):
    k, s, d = int(rng.integers(1, 5)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
    p0, p1 = int(rng.integers(0, 4)), int(rng.integers(0, 4))
    if size + p0 + p1 - d * (k - 1) - 1 < 0:
        k, d = 1, 1
    return k, s, d, p0, p1


def random_conv(name, rng):
    h, w = int(rng.integers(1, 12)), int(rng.integers(1, 12))
    g = int(rng.choice([1, 1, 1, 2, 3]))
    cg, cout_g = int(rng.integers(1, 9)), int(rng.integers(1, 6))
    kh, sh, dh, pt, pb = _window(rng, h)
    kw, sw, dw, pl, pr = _window(rng, w)
    return mac_case(name, "conv2d", (int(rng.integers(1, 3)), h, w, cg * g),
                    (cout_g * g, kh, kw, cg), stride=(sh, sw), dil=(dh, dw),
                    pads=(pt, pl, pb, pr), groups=g)


def random_dw(name, rng):
    h, w, c, m = (int(rng.integers(1, 12)), int(rng.integers(1, 12)), int(rng.integers(1, 20)),
                  int(rng.choice([1, 1, 2, 3])))
    kh, sh, dh, pt, pb = _window(rng, h)
    kw, sw, dw, pl, pr = _window(rng, w)
    return mac_case(name, "depthwise_conv2d", (int(rng.integers(1, 3)), h, w, c),
                    (kh, kw, c * m), stride=(sh, sw), dil=(dh, dw), pads=(pt, pl, pb, pr),
                    mult=m)


# ----------------------------------------------------------------------------- element-wise

SHAPES = [(1, 8, 8, 17), (17,), (2, 3, 5), (1, 1, 1, 1), (3, 1000)]


def add_case(name, shape, alias=None, extreme=False):
    rng = rng_for(name)
    a_zp, b_zp, out_zp = pick_zp(rng), pick_zp(rng), pick_zp(rng)
    sa, sb, so = (float(np.exp(rng.uniform(-6, 0))) for _ in range(3))
    big = 2 * max(sa, sb)  # the usual left-shift scheme; extreme: unusual encodings of it
    ext = 1.0 if extreme else 0.0
    a_m, a_s = any_pair(rng, 2**20 * sa / big, 510, ext)  # |a32|, |b32| < 2^30: the sum fits
    b_m, b_s = any_pair(rng, 2**20 * sb / big, 510, ext)
    a32, b32 = (int(quant.rq(255, m, s)) for m, s in ((a_m, a_s), (b_m, b_s)))
    o_m, o_s = any_pair(rng, big / (2**20 * so), 2 * max(a32, b32), ext)
    act_min, act_max = pick_act(rng, out_zp)
    attrs = dict(a_zp=a_zp, a_mult=a_m, a_shift=a_s, b_zp=b_zp, b_mult=b_m, b_shift=b_s,
                 out_zp=out_zp, out_mult=o_m, out_shift=o_s, act_min=act_min, act_max=act_max)
    return Case(name, "add", (s8(rng, shape), s8(rng, shape)), attrs, alias)


def conv_add_case(name, x_shape, w_shape, *, alias=5, add_extreme=False, own_zp=False, **conv):
    """conv2d_add: a conv2d case's operands and output stage, then an add case's attributes with
    a = the conv's int8 output (a_zp = its out_zp, or add's own with own_zp); y over skip (input
    5) unless alias is None. add_extreme: add's scales encoded unusually (its general path)."""
    c = mac_case(name, "conv2d", x_shape, w_shape, **conv)
    y = kernel_for("conv2d")(*c.inputs, **c.attrs)
    a = add_case(name + "/add", y.shape, extreme=add_extreme).attrs
    part = {("conv_" + k[4:] if k.startswith("act_") else k): v for k, v in c.attrs.items()}
    part["conv_zp"] = part.pop("out_zp")
    attrs = {**part, **a, "a_zp": a["a_zp"] if own_zp else c.attrs["out_zp"]}
    skip = s8(rng_for(name + "/skip"), y.shape)
    return Case(name, "conv2d_add", (*c.inputs, skip), attrs, alias)


CONV_ADD_PATHS = [  # name, x, w, conv geometry: every path of conv2d's output stage with the add
    ("1x1_tails", (1, 5, 7, 24), (17, 1, 1, 24), {}),  # 35 pixels, odd Cout: repeated lanes
    ("1x1_len5", (1, 1, 5, 3), (5, 1, 1, 3), {}),  # MVE row of 5: one block + a 1-pixel block
    ("1x1_len3", (2, 3, 1, 9), (4, 1, 1, 9), {}),  # rows of 3 (a block repeating its last)
    ("1x1_short", (1, 1, 2, 4), (3, 1, 1, 4), {}),  # 2 pixels: the general path on MVE
    ("1x1_cout65", (1, 4, 6, 20), (65, 1, 1, 20), {}),  # two channel chunks
    ("1x1_cin300", (1, 3, 5, 300), (6, 1, 1, 300), {}),  # Cin over the DSP/C pair buffer
    ("1x1_pad", (1, 6, 6, 8), (8, 1, 1, 8), {"pads": (1, 1, 1, 1)}),  # the per-pixel path
    ("1x1_s2_odd", (1, 9, 11, 16), (7, 1, 1, 16), {"stride": (2, 2)}),
    ("3x3_s2_pad", (1, 17, 15, 5), (3, 3, 3, 5), {"stride": (2, 2), "pads": (1, 1, 1, 1)}),
    ("3x3_cout1", (1, 5, 3, 4), (1, 3, 3, 4), {"pads": (1, 1, 1, 1)}),
    ("3x3_cout5", (1, 3, 7, 16), (5, 3, 3, 16), {"pads": (1, 1, 1, 1)}),  # 21 pixels
    ("3x3_cout17", (1, 4, 5, 17), (17, 3, 3, 17), {"pads": (0, 1, 2, 1)}),
    ("3x3_cout70", (1, 4, 4, 8), (70, 3, 3, 8), {"pads": (1, 1, 1, 1)}),  # two chunks
    ("3x3_k1170", (1, 6, 6, 130), (20, 3, 3, 130), {"pads": (1, 1, 1, 1)}),  # not gathered
    ("5x1_dil", (1, 9, 6, 6), (6, 5, 1, 6), {"dil": (2, 1), "pads": (4, 0, 4, 0)}),
    # output rows over the runner's 8 KiB scratch: the add in the output stage, not row blocks
    ("1x1_wide_row", (1, 2, 130, 16), (64, 1, 1, 16), {}),
    ("3x1_dil_wide_row", (1, 1, 130, 4), (65, 3, 1, 4), {"dil": (2, 1), "pads": (2, 0, 2, 0)}),
]


def conv_add_path_cases():
    """CONV_ADD_PATHS (gathered windows: staged spans, or the output stage on Armv6-M and with
    two channel chunks; other convs: row blocks, or the output stage) in place over skip, with
    the add's fast and general paths (extreme scales) and the conv's zero point apart from add's
    a_zp; a few not in place."""
    cases = []
    for name, x, w, geo in CONV_ADD_PATHS:
        cases += [conv_add_case(f"conv_add_{name}", x, w, **geo),
                  conv_add_case(f"conv_add_{name}_ext", x, w, add_extreme=True, own_zp=True,
                                extreme=0.6, **geo)]
    cases += [conv_add_case(f"conv_add_{n}_copy", x, w, alias=None, own_zp=True, **geo)
              for n, x, w, geo in CONV_ADD_PATHS[::4]]
    return cases


def conv_add_cases():
    """ResNet-8's shapes, padding, strides, dilation, groups, in place over skip or not, and every
    path of the fused output stage (conv_add_path_cases)."""
    return conv_add_path_cases() + [
            conv_add_case("conv_add_resnet", (1, 8, 8, 16), (16, 3, 3, 16), pads=(1, 1, 1, 1)),
            conv_add_case("conv_add_blocks", (1, 24, 24, 16), (16, 3, 3, 16), pads=(1, 1, 1, 1)),
            conv_add_case("conv_add_blocks_s2", (2, 33, 40, 8), (24, 3, 3, 8), stride=(2, 2),
                          pads=(0, 1, 1, 1)),
            conv_add_case("conv_add_dil", (1, 30, 12, 4), (30, 3, 2, 4), dil=(2, 1),
                          pads=(2, 0, 2, 1), alias=None),
            conv_add_case("conv_add_1x1", (1, 16, 16, 40), (64, 1, 1, 40), alias=None),
            conv_add_case("conv_add_1x1_s2", (1, 32, 32, 16), (32, 1, 1, 16), stride=(2, 2)),
            conv_add_case("conv_add_groups", (1, 9, 7, 6), (9, 3, 3, 2), groups=3,
                          pads=(1, 1, 1, 1)),
            conv_add_case("conv_add_tall_pad", (1, 40, 20, 12), (12, 5, 3, 12),
                          pads=(4, 1, 4, 1)),
            conv_add_case("conv_add_all_pad", (1, 2, 3, 3), (5, 3, 3, 3), pads=(3, 1, 3, 1)),
            conv_add_case("conv_add_batch", (3, 6, 5, 7), (11, 3, 3, 7), pads=(1, 1, 1, 1))]


def mul_case(name, shape, alias=None, extreme=False):
    rng = rng_for(name)
    a_zp, b_zp, out_zp = pick_zp(rng), pick_zp(rng), pick_zp(rng)
    mult, shift = any_pair(rng, float(np.exp(rng.uniform(-12, -2))), 255 * 255,
                           1.0 if extreme else 0.0)
    act_min, act_max = pick_act(rng, out_zp)
    attrs = dict(a_zp=a_zp, b_zp=b_zp, out_zp=out_zp, mult=mult, shift=shift, act_min=act_min,
                 act_max=act_max)
    return Case(name, "mul", (s8(rng, shape), s8(rng, shape)), attrs, alias)


def matmul_case(name, a_shape, b_shape, transpose_b=0, extreme=0.15, zps=None):
    """A matmul of two activations: a [.., M, K], b [.., K, N] ([.., N, K] when transpose_b)."""
    rng = rng_for(name)
    a_zp, b_zp, out_zp = zps if zps is not None else (pick_zp(rng), pick_zp(rng), pick_zp(rng))
    k = a_shape[-1]
    typical = 50.0 / (math.sqrt(max(k, 1)) * 74 * 74 + 1)
    mult, shift = any_pair(rng, typical, k * 255 * 255, extreme)
    act_min, act_max = pick_act(rng, out_zp)
    attrs = dict(transpose_b=transpose_b, a_zp=a_zp, b_zp=b_zp, out_zp=out_zp, mult=mult,
                 shift=shift, act_min=act_min, act_max=act_max)
    return Case(name, "matmul", (s8(rng, a_shape), s8(rng, b_shape)), attrs)


MATMUL_EDGES = [  # name, a, b, transpose_b: K, M, N around the SIMD widths (4, 16) and tails
    ("k1", (3, 1), (1, 5), 0), ("k1_t", (3, 1), (5, 1), 1), ("m1_n1", (1, 7), (7, 1), 0),
    ("k3_n17", (5, 3), (3, 17), 0), ("k4_t", (4, 4), (9, 4), 1), ("k15", (6, 15), (15, 6), 0),
    ("k16_t", (2, 16), (33, 16), 1), ("k17", (3, 17), (17, 4), 0), ("k33_t", (5, 33), (7, 33), 1),
    ("n65", (2, 9), (9, 65), 0), ("n65_t", (2, 9), (65, 9), 1),
    ("qk_t16_d16", (16, 16), (16, 16), 1), ("pv_t16_d16", (16, 16), (16, 16), 0),
    ("qk_t24_d20", (24, 20), (24, 20), 1), ("pv_t24_d20", (24, 24), (24, 20), 0),
    ("batch3", (3, 4, 5), (3, 5, 6), 0), ("batch3_t", (3, 4, 5), (3, 6, 5), 1),
    ("bcast_a", (1, 4, 5), (3, 5, 6), 0), ("bcast_b_t", (3, 4, 5), (1, 6, 5), 1),
    ("bcast_4d", (2, 1, 3, 8), (1, 3, 8, 5), 0), ("bcast_4d_t", (1, 2, 6, 7), (3, 1, 5, 7), 1),
    ("rank6", (1, 2, 1, 2, 3, 4), (2, 1, 2, 1, 4, 3), 0), ("empty_m", (2, 0, 4), (2, 4, 3), 0),
]


def matmul_cases(n_random):
    cases = [matmul_case(f"matmul_{n}", a, b, t) for n, a, b, t in MATMUL_EDGES]
    cases += [matmul_case(f"matmul_zp_{z[0]}_{z[1]}_{t}", (3, 21), (21, 5)[::1 - 2 * t], t,
                          zps=z) for z in ((-128, -128, 127), (127, 127, -128), (-128, 127, 0))
              for t in (0, 1)]
    rng = rng_for("matmul_random")
    for i in range(n_random):
        m, k, n, bt = (int(v) for v in rng.integers((1, 1, 1, 0), (20, 70, 20, 2)))
        batch = tuple(int(v) for v in rng.integers(1, 3, size=int(rng.integers(0, 3))))
        b = (*batch, n, k) if bt else (*batch, k, n)
        cases.append(matmul_case(f"matmul_random_{i}", (*batch, m, k), b, bt))
    base = matmul_case("matmul_base", (2, 3, 6), (2, 6, 4))
    a, b = base.inputs
    cases += [bad(base, "k_mismatch", inputs=(a, b[:, :5])),
              bad(base, "batch", inputs=(a, np.concatenate([b, b, b])[:3])),
              bad(base, "rank", inputs=(a, b[0])), bad(base, "transpose2", transpose_b=2),
              bad(base, "a_zp", a_zp=128), bad(base, "shift1", shift=1),
              bad(base, "act", act_min=3, act_max=2),
              bad(base, "rq_overflow", mult=(1 << 31) - 1, shift=2),
              bad(base, "y_shape", ref_raises=False, out_shape=(2, 3, 5))]
    return cases


def unary_case(name, op, shape, alias=None, extreme=False):
    rng = rng_for(name)
    x = s8(rng, shape)
    zp = pick_zp(rng)
    act_min, act_max = pick_act(rng, zp)
    if op == "clamp":
        return Case(name, op, (x,), dict(act_min=act_min, act_max=act_max), alias)
    if op == "lut":
        return Case(name, op, (x, s8(rng, (256,))), {}, alias)
    mult, shift = any_pair(rng, float(np.exp(rng.uniform(-4, 4))), 255, 1.0 if extreme else 0.0)
    return Case(name, op, (x,), dict(in_zp=pick_zp(rng), out_zp=zp, mult=mult, shift=shift,
                                      act_min=act_min, act_max=act_max), alias)


def minmax_case(name, op, shape, alias=None, equal=False):
    """maximum / minimum: random operands (equal=True: b is a), a random fused clamp."""
    rng = rng_for(name)
    a = s8(rng, shape)
    act_min, act_max = pick_act(rng, pick_zp(rng))
    return Case(name, op, (a, a.copy() if equal else s8(rng, shape)),
                dict(act_min=act_min, act_max=act_max), alias)


MINMAX_TAILS = (1, 3, 4, 5, 15, 16, 17, 31, 33, 1000)  # DSP words and MVE vectors, tails


def minmax_cases():
    cases = []
    for op in ("maximum", "minimum"):
        cases += [minmax_case(f"{op}_shape{i}", op, s) for i, s in enumerate(SHAPES)]
        cases += [minmax_case(f"{op}_n{n}", op, (n,)) for n in MINMAX_TAILS]
        cases += [minmax_case(f"{op}_inplace_{k}", op, (3, 7, 5), alias=k) for k in (0, 1)]
        cases += [minmax_case(f"{op}_equal", op, (2, 9), equal=True)]
        x = np.arange(-128, 128, dtype=np.int64)
        a, b = np.repeat(x, 256).astype(np.int8), np.tile(x, 256).astype(np.int8)
        for k in range(4):  # every int8 pair, in four quarters (the board runner's arena)
            part = slice(k * 16384, (k + 1) * 16384)
            act = dict(act_min=-128, act_max=127) if k % 2 else dict(act_min=-3, act_max=60)
            cases.append(Case(f"{op}_all_pairs_{k}", op, (a[part], b[part]), act))
    return cases


def lut_cases():
    """lut: MVE vectors of 16 and 4-element steps with their tails, in place, every int8 code."""
    cases = [unary_case(f"lut_n{n}", "lut", (n,)) for n in MINMAX_TAILS]
    cases += [unary_case(f"lut_inplace_n{n}", "lut", (n,), alias=0) for n in (15, 17, 33)]
    rng = rng_for("lut_every_code")
    cases.append(Case("lut_every_code", "lut", (np.arange(-128, 128, dtype=np.int8),
                                                s8(rng, (256,))), {}))
    return cases


def elementwise_cases(n_random):
    cases = minmax_cases() + lut_cases()
    for i, shape in enumerate(SHAPES):
        for op, make in (("add", add_case), ("mul", mul_case)):
            cases.append(make(f"{op}_shape{i}", shape))
            cases.append(make(f"{op}_shape{i}_extreme", shape, extreme=True))
        for op in ("clamp", "lut", "rescale"):
            cases.append(unary_case(f"{op}_shape{i}", op, shape))
    for alias in (0, 1):
        cases += [add_case(f"add_inplace_{alias}", (2, 4, 4, 5), alias),
                  mul_case(f"mul_inplace_{alias}", (2, 4, 4, 5), alias)]
    cases += [unary_case(f"{op}_inplace", op, (3, 7, 5), alias=0)
              for op in ("clamp", "lut", "rescale")]
    cases += [unary_case(f"rescale_extreme_{i:02d}", "rescale", (4, 64), extreme=True)
              for i in range(12)]
    cases += [mul_case(f"mul_extreme_{i:02d}", (4, 64), extreme=True) for i in range(6)]
    for i in range(n_random):
        rng = rng_for(f"elementwise_random_{i}")
        shape = tuple(int(d) for d in rng.integers(1, 9, size=int(rng.integers(1, 5))))
        alias = int(rng.integers(0, 2)) if rng.random() < 0.3 else None
        cases += [add_case(f"add_random_{i:03d}", shape, alias, extreme=rng.random() < 0.5),
                  mul_case(f"mul_random_{i:03d}", shape, alias, extreme=rng.random() < 0.5),
                  unary_case(f"rescale_random_{i:03d}", "rescale", shape,
                             extreme=rng.random() < 0.5)]
    return cases


def compare_case(name, shape_a, shape_b=None, kind=None, same=False, alias=None, scales=None):
    """compare: random operands, zero points and float32 scales (same: a's qparams for b, as the
    threshold form), the attributes compare_attrs makes of them."""
    rng = rng_for(name)
    sa, sb = scales or (float(np.exp(rng.uniform(-12, 4))) for _ in range(2))
    a_zp = pick_zp(rng)
    b_zp, sb = (a_zp, sa) if same else (pick_zp(rng), sb)
    attrs = dict(kind=int(rng.integers(0, 6)) if kind is None else kind, a_zp=a_zp, b_zp=b_zp,
                 **ref_elementwise.compare_attrs(sa, sb))
    return Case(name, "compare", (s8(rng, shape_a), s8(rng, shape_b or shape_a)), attrs, alias)


def where_case(name, shapes, ident=False, alias=None):
    """where: a random 0/1 mask, operands and rescales (ident: both sides already in y's qparams,
    the pure select)."""
    rng = rng_for(name)
    out_zp = pick_zp(rng)
    attrs = dict(out_zp=out_zp)
    for k in ("a", "b"):
        zp = out_zp if ident else pick_zp(rng)
        mult, shift = (1 << 30, 30) if ident else quant.quantize_multiplier(
            float(np.exp(rng.uniform(-5, 3))))
        attrs.update({f"{k}_zp": zp, f"{k}_mult": mult, f"{k}_shift": shift})
    mask = rng.integers(0, 2, size=shapes[0]).astype(np.uint8)
    return Case(name, "where", (mask, s8(rng, shapes[1]), s8(rng, shapes[2])), attrs, alias)


BCAST3 = [((5, 7), (5, 7), (5, 7)), ((1, 8, 8), (2, 8, 8), (1,)), ((8, 1), (1, 9), (8, 9)),
          ((3, 1, 5), (1,), (2, 3, 4, 5)), ((1, 1, 1, 1, 1, 33), (2, 1, 2, 1, 3, 33), (1, 33)),
          ((4, 4), (2, 3, 4, 4), (3, 1, 1)), ((), (6,), (1,))]


def select_cases():
    """compare: every kind on every int8 pair (equal qparams, and scales 3:7 with other zero
    points), ties at equal real values, scales whose ratio exceeds 255 (only signs matter),
    MVE widths and tails, every broadcast pattern, in place; where: pure selects and rescales
    on the same shapes and on three-way broadcasts of ranks 0..6."""
    x = np.arange(-128, 128, dtype=np.int64)
    a, b = np.repeat(x, 256).astype(np.int8), np.tile(x, 256).astype(np.int8)
    cases = []
    for kind in range(6):
        part = slice((kind % 4) * 16384, (kind % 4 + 1) * 16384)
        same = dict(kind=kind, a_zp=3, b_zp=3, a_mult=1, a_shift=0, b_mult=1, b_shift=0)
        ratio = dict(kind=kind, a_zp=-5, b_zp=17, **ref_elementwise.compare_attrs(3.0, 7.0))
        cases += [Case(f"compare_pairs_same_{kind}", "compare", (a[part], b[part]), same),
                  Case(f"compare_pairs_ratio_{kind}", "compare", (a[part], b[part]), ratio)]
        cases.append(compare_case(f"compare_ties_{kind}", (40,), kind=kind,
                                  scales=(0.5, 0.25)))  # 2 (a - za) == b - zb often
        cases.append(compare_case(f"compare_dominated_{kind}", (64,), kind=kind,
                                  scales=(1e-9, 3.0)))
    cases += [compare_case(f"compare_n{n}", (n,), same=n % 2 == 0) for n in MINMAX_TAILS]
    bcast = [((2, 8, 5), (8, 5)), ((2, 8, 5), (2, 8, 1)), ((2, 1, 5), (2, 8, 5)),
             ((8, 1), (1, 9)), ((2, 3, 4, 5), (3, 1, 1))]
    for i, (sa, sb) in enumerate(bcast):
        for same in (False, True):
            cases.append(compare_case(f"compare_bcast{i}_{int(same)}", sa, sb, same=same))
    cases += [compare_case("compare_scalar_b", (3, 17), (1,), same=True),
              compare_case("compare_scalar_a", (1, 1), (4, 19), same=True),
              compare_case("compare_rank6", (2, 1, 3, 1, 2, 5), (1, 2, 1, 4, 1, 5)),
              compare_case("compare_inplace_0", (3, 7, 5), alias=0),
              compare_case("compare_inplace_1", (3, 7, 5), same=True, alias=1)]
    for n in MINMAX_TAILS:
        cases += [where_case(f"where_ident_n{n}", ((n,),) * 3, ident=True),
                  where_case(f"where_rq_n{n}", ((n,),) * 3)]
    for i, shapes in enumerate(BCAST3):
        cases += [where_case(f"where_bcast{i}_ident", shapes, ident=True),
                  where_case(f"where_bcast{i}_rq", shapes)]
    cases += [where_case(f"where_inplace_{k}", ((3, 7, 5),) * 3, ident=k == 1, alias=k)
              for k in range(3)]
    return cases


def select_bad_cases():
    cmp = compare_case("compare_base", (2, 5))
    wh = where_case("where_base", ((2, 5),) * 3)
    m, wa, wb = wh.inputs
    return [bad(cmp, "kind6", kind=6), bad(cmp, "mult0", a_mult=0),
            bad(cmp, "mult_big", b_mult=(1 << 24) + 1), bad(cmp, "shift32", a_shift=32),
            bad(cmp, "shift_negative", b_shift=-1), bad(cmp, "zp128", b_zp=128),
            bad(cmp, "shape", inputs=(cmp.inputs[0], cmp.inputs[1][:, :2])),
            bad(cmp, "y_shape", ref_raises=False, out_shape=(5, 2)),
            bad(wh, "mask_int8", inputs=(m.astype(np.int8), wa, wb)),
            bad(wh, "zp", a_zp=-129), bad(wh, "out_zp", out_zp=128),
            bad(wh, "shift1", b_shift=1), bad(wh, "overflow", a_mult=(1 << 31) - 1, a_shift=2),
            bad(wh, "shape", inputs=(m, wa[:, :2], wb)),
            bad(wh, "y_shape", ref_raises=False, out_shape=(5, 2))]


def elem_speedup_cases():
    """add and mul at the edges of their fast paths (add: input shifts 8/9/31/32, output shifts
    32/33/54/55; mul: shifts 17/18/32/33/54/55), zero points -128/127, narrow activations,
    vector tails 1..17 and 1000 elements, in place."""
    shapes = [(1,), (3,), (4,), (5,), (15,), (16,), (17,), (1000,), (2, 3, 5), (7, 9)]
    zps = [-128, 127, 0, -1]

    def log_mult(rng, cap):
        return int(math.exp(rng.uniform(math.log(max(1, cap) / 64 + 1), math.log(max(1, cap)))))

    def out_mult(rng, max_acc, shift):  # about 150 at max_acc
        return max(1, min((1 << 31) - 1, round(150 * rng.uniform(0.5, 2) * 2.0**shift / max_acc)))

    cases = []
    add_shifts = [(9, 31, 33), (31, 9, 54), (8, 12, 48), (12, 32, 48), (11, 13, 32),
                  (11, 13, 55), (9, 9, 33), (31, 31, 33), (20, 10, 40), (13, 11, 48)]
    for i, (sa, sb, so) in enumerate(add_shifts):
        rng = rng_for(f"add_fast_{i}")
        a_zp, b_zp, out_zp = zps[i % 4], zps[(i + 1) % 4], zps[(i + 2) % 4]
        a_m = log_mult(rng, min((1 << 31) - 1, (1 << (29 + sa)) // 255))  # |a32|, |b32| < 2^30
        b_m = log_mult(rng, min((1 << 31) - 1, (1 << (29 + sb)) // 255))
        a32, b32 = (int(quant.rq(255, m, s)) for m, s in ((a_m, sa), (b_m, sb)))
        act_min, act_max = pick_act(rng, out_zp) if i % 3 else (-128, 127)
        attrs = dict(a_zp=a_zp, a_mult=a_m, a_shift=sa, b_zp=b_zp, b_mult=b_m, b_shift=sb,
                     out_zp=out_zp, out_mult=out_mult(rng, a32 + b32 + 1, so), out_shift=so,
                     act_min=act_min, act_max=act_max)
        shape = shapes[i % len(shapes)]
        cases.append(Case(f"add_fast_{i:02d}", "add", (s8(rng, shape), s8(rng, shape)), attrs,
                          alias=(None, 0, 1)[i % 3]))
    for i, shift in enumerate([17, 18, 25, 32, 33, 40, 54, 55, 31, 20]):
        rng = rng_for(f"mul_fast_{i}")
        out_zp = zps[(i + 2) % 4]
        act_min, act_max = pick_act(rng, out_zp) if i % 3 else (-128, 127)
        attrs = dict(a_zp=zps[i % 4], b_zp=zps[(i + 1) % 4], out_zp=out_zp,
                     mult=out_mult(rng, 255 * 255, shift), shift=shift, act_min=act_min,
                     act_max=act_max)
        shape = shapes[(i + 3) % len(shapes)]
        cases.append(Case(f"mul_fast_{i:02d}", "mul", (s8(rng, shape), s8(rng, shape)), attrs,
                          alias=(None, 1, 0)[i % 3]))
    for n in range(1, 18):  # every MVE tail, typical scales
        cases += [add_case(f"add_fast_tail_{n:02d}", (n,)),
                  mul_case(f"mul_fast_tail_{n:02d}", (n,))]
    # avg pool windows of more than 256 elements (no 16-bit lanes), 4-channel blocks + tails
    cases += [pool_case(f"avgpool_big_window_c{c}", "avg_pool2d", (1, 17, 17, c), (17, 17))
              for c in (4, 7, 16, 21)]
    # softmax tables: the largest legal entry everywhere, one bad entry in each position class
    sm = softmax_case("softmax_table_full", (2, 9), table=np.full(256, 65536))
    cases.append(sm)
    for d, v in ((255, 65537), (254, -1), (129, (1 << 31) - 1), (2, -65535)):
        t = sm.inputs[1].copy()
        t[d] = v
        cases.append(bad(sm, f"table_{d}", inputs=(sm.inputs[0], t)))
    return cases


# ----------------------------------------------------------------------------- pooling

def pool_case(name, op, x_shape, kernel, stride=(1, 1), pads=(0, 0, 0, 0), **extra):
    rng = rng_for(name)
    attrs = dict(kernel_h=kernel[0], kernel_w=kernel[1], stride_h=stride[0], stride_w=stride[1],
                 pad_top=pads[0], pad_left=pads[1], pad_bottom=pads[2], pad_right=pads[3])
    zp = pick_zp(rng)
    if op == "avg_pool2d":
        attrs.update(count_include_pad=0, divisor=0, in_zp=zp,
                     out_zp=zp if rng.random() < 0.7 else pick_zp(rng))
    attrs["act_min"], attrs["act_max"] = pick_act(rng, zp) if rng.random() < 0.5 else (-128, 127)
    attrs.update(extra)
    return Case(name, op, (s8(rng, x_shape),), attrs)


POOL_EDGES = [  # name, x, kernel, stride, pads
    ("2x2s2_even", (1, 8, 8, 3), (2, 2), (2, 2), (0, 0, 0, 0)),
    ("2x2s2_odd", (1, 9, 9, 3), (2, 2), (2, 2), (0, 0, 0, 0)),
    ("2x2s2_odd_pad", (1, 9, 9, 5), (2, 2), (2, 2), (0, 0, 1, 1)),
    ("3x3s2_pad", (1, 9, 9, 5), (3, 3), (2, 2), (1, 1, 1, 1)),
    ("3x3s1_pad", (1, 6, 6, 4), (3, 3), (1, 1), (1, 1, 1, 1)),
    ("asym_c17", (1, 6, 7, 17), (3, 2), (1, 2), (2, 0, 0, 1)),
    ("c1_batch2", (2, 5, 5, 1), (2, 3), (1, 1), (0, 1, 1, 0)),
    ("stride_gt_kernel", (1, 10, 10, 2), (2, 2), (3, 3), (0, 0, 0, 0)),
    ("big_pad", (1, 4, 4, 3), (3, 3), (1, 1), (2, 2, 2, 2)),
    ("global_25x5", (1, 25, 5, 64), (25, 5), (1, 1), (0, 0, 0, 0)),
    # the shapes of lifted compositions: 1-D pools ([N, C, L, 1], a 1 x k window), and the
    # per-axis max of gathered windows (dilated / uneven adaptive max: kernel = stride)
    ("1d_1x3s2_ceil", (1, 6, 13, 1), (1, 3), (1, 2), (0, 1, 0, 2)),
    ("1d_1x4s3_batch2", (2, 3, 17, 1), (1, 4), (1, 3), (0, 2, 0, 2)),
    ("rows_3x1", (1, 21, 10, 8), (3, 1), (3, 1), (0, 0, 0, 0)),
    ("cols_1x3", (1, 7, 21, 19), (1, 3), (1, 3), (0, 0, 0, 0)),
]


# max_pool2d around the channel blocks of its paths (MVE 16 per vector, the last predicated;
# DSP 4 per word, then a scalar tail): padded borders, ceil-mode windows cut by the bottom /
# right edge, strides past the kernel, and the per-axis forms of dilated pools (kernel = stride
# over gathered windows)
MAXPOOL_WIDTHS = (1, 3, 4, 15, 16, 17, 33, 64)
MAXPOOL_GEOMETRY = [  # name, (H, W), kernel, stride, pads
    ("3x3s1_pad", (5, 6), (3, 3), (1, 1), (1, 1, 1, 1)),
    ("3x3s2_ceil", (8, 7), (3, 3), (2, 2), (0, 0, 1, 2)),
    ("2x2s3_gap", (8, 7), (2, 2), (3, 3), (0, 1, 1, 0)),
    ("rows_3x1_gathered", (6, 3), (3, 1), (3, 1), (0, 0, 0, 0)),
    ("cols_1x3_gathered", (3, 7), (1, 3), (1, 3), (0, 1, 0, 1)),
]


def maxpool_width_cases():
    cases = []
    for name, hw, k, s, p in MAXPOOL_GEOMETRY:
        for c in MAXPOOL_WIDTHS:
            cases.append(pool_case(f"maxpool_{name}_c{c}", "max_pool2d", (1, *hw, c), k, s, p))
    # every tap below act_min (the clamp's floor wins) and every tap above act_max
    for c, lo, hi in ((17, 100, 127), (33, -128, -100)):
        cases.append(pool_case(f"maxpool_clamped_c{c}", "max_pool2d", (1, 5, 5, c), (3, 3),
                               (2, 2), (1, 1, 1, 1), act_min=lo, act_max=hi))
    return cases


def pool_cases(n_random):
    cases = maxpool_width_cases()
    for name, x, k, s, p in POOL_EDGES:
        cases.append(pool_case(f"maxpool_{name}", "max_pool2d", x, k, s, p))
        for cip in (0, 1):
            cases.append(pool_case(f"avgpool_{name}_cip{cip}", "avg_pool2d", x, k, s, p,
                                   count_include_pad=cip))
    cases += [pool_case(f"avgpool_divisor_{d}", "avg_pool2d", (1, 6, 6, 4), (3, 3), (1, 1),
                        (1, 1, 1, 1), divisor=d) for d in (1, 7, 9, 1000, 1 << 30)]
    cases += [pool_case("avgpool_zp_extreme", "avg_pool2d", (1, 5, 5, 3), (2, 2), (1, 1),
                        (1, 1, 1, 1), in_zp=-128, out_zp=127, act_min=-128, act_max=127),
              pool_case("avgpool_ties", "avg_pool2d", (1, 8, 8, 6), (2, 2), (1, 1),
                        (0, 0, 1, 1), in_zp=0, out_zp=0, divisor=2, act_min=-128, act_max=127)]
    for i in range(n_random):
        rng = rng_for(f"pool_random_{i}")
        x = (int(rng.integers(1, 3)), int(rng.integers(1, 12)), int(rng.integers(1, 12)),
             int(rng.integers(1, 20)))
        k = (int(rng.integers(1, min(x[1], 4) + 1)), int(rng.integers(1, min(x[2], 4) + 1)))
        s = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
        p = tuple(int(rng.integers(0, k[j % 2])) for j in range(4))
        cases.append(pool_case(f"maxpool_random_{i:03d}", "max_pool2d", x, k, s, p))
        cases.append(pool_case(f"avgpool_random_{i:03d}", "avg_pool2d", x, k, s, p,
                               count_include_pad=int(rng.integers(0, 2)),
                               divisor=int(rng.choice([0, 0, 0, rng.integers(1, 50)]))))
    return cases


def resize_case(name, x_shape, out_hw, mode, align=False, scale=None, act=None, c_scale=None):
    """A resize case with PyTorch's geometry (ref/pool.py resize_axis) for out_hw."""
    from mcutorch.quant import quantize_multiplier
    from mcutorch.ref.pool import resize_axis
    rng = rng_for(name)
    (yn, yd, yo, yb), (xn, xd, xo, xb) = (resize_axis(size, out, mode, align, scale)
                                          for size, out in zip(x_shape[1:3], out_hw))
    linear = mode == "linear"
    mult, shift = quantize_multiplier(1.0 / (yn * xn)) if linear else (0, 0)
    lo, hi = act or ((-128, 127) if rng.random() < 0.6 else pick_act(rng, pick_zp(rng)))
    attrs = dict(mode=int(linear), scale_y_n=yn, scale_y_d=yd, offset_y=yo, border_y=yb,
                 scale_x_n=xn, scale_x_d=xd, offset_x=xo, border_x=xb, mult=mult, shift=shift,
                 act_min=lo, act_max=hi)
    return Case(name, "resize", (s8(rng, x_shape),), attrs)


RESIZE_GEOMETRY = [  # name, x NHWC, output (H, W), scale factor (None: a size)
    ("x2", (1, 5, 7, 8), (10, 14), 2.0), ("x1p5", (1, 7, 5, 3), (10, 7), 1.5),
    ("x3", (2, 3, 4, 5), (9, 12), 3.0), ("half", (1, 8, 9, 4), (4, 4), 0.5),
    ("7to12", (1, 7, 7, 17), (12, 12), None), ("1x1", (1, 1, 1, 6), (2, 2), 2.0),
    ("10to6", (1, 10, 10, 1), (6, 6), None), ("h1_linear1d", (1, 1, 9, 16), (1, 18), 2.0),
]


def resize_cases():
    cases = []
    for name, x, out, scale in RESIZE_GEOMETRY:
        for mode, align in (("nearest", False), ("nearest-exact", False), ("linear", False),
                            ("linear", True)):
            tag = mode.replace("-", "_") + ("_ac" if align else "")
            cases.append(resize_case(f"resize_{tag}_{name}", x, out, mode, align, scale))
    cases += [resize_case(f"resize_bilinear_c{c}", (1, 3, 3, c), (6, 6), "linear", scale=2.0)
              for c in SIMD_COUNTS]
    cases += [resize_case("resize_bilinear_relu", (1, 4, 4, 9), (8, 8), "linear", scale=2.0,
                          act=(0, 127)),
              resize_case("resize_nearest_clamp", (1, 4, 4, 9), (8, 8), "nearest", scale=2.0,
                          act=(-20, 30)),
              resize_case("resize_bilinear_x4_big", (1, 8, 8, 32), (32, 32), "linear",
                          scale=4.0, act=(-128, 127)),
              resize_case("resize_nearest_x2_big", (1, 16, 16, 32), (32, 32), "nearest",
                          scale=2.0, act=(-128, 127))]
    return cases


# ----------------------------------------------------------------------------- softmax

def softmax_case(name, shape, scale=None, table=None, spread=255):
    rng = rng_for(name)
    if table is None:
        table = softmax_exp_table(scale if scale is not None else float(np.exp(rng.uniform(-6, 0))))
    lo = int(rng.integers(-128, 128 - min(spread, 255)))
    return Case(name, "softmax", (s8(rng, shape, lo, lo + min(spread, 255)), i32(table)), {})


def softmax_cases(n_random):
    cases = [softmax_case(f"softmax_row{n}", (3, n)) for n in (1, 2, 12)]
    cases += [softmax_case("softmax_row1000", (1, 1000)),
              softmax_case("softmax_row1000_narrow", (2, 1000), spread=10),
              softmax_case("softmax_rank1", (12,)),
              softmax_case("softmax_rank4", (2, 2, 3, 5)),
              softmax_case("softmax_equal", (2, 7), spread=0),
              softmax_case("softmax_big_scale", (4, 12), scale=1.0),
              softmax_case("softmax_tiny_scale", (4, 12), scale=1e-4)]
    tie = np.zeros(256, np.int64)
    tie[0], tie[1] = 511 * 128, 128  # row [0, -1]: 256 * 128 / 65536 = 0.5 exactly
    cases.append(replace(softmax_case("softmax_tie", (1, 2), table=tie),
                         inputs=(np.array([[0, -1]], np.int8), i32(tie))))
    for i in range(n_random):
        rng = rng_for(f"softmax_random_{i}")
        shape = (int(rng.integers(1, 4)), int(rng.integers(1, 300)))
        cases.append(softmax_case(f"softmax_random_{i:03d}", shape,
                                  spread=int(rng.integers(0, 256))))
    return cases


# ----------------------------------------------------------------------------- movement

def movement_cases(n_random):
    rng = rng_for("movement")
    cases = []
    for rank, shape in ((1, (7,)), (2, (3, 5)), (3, (2, 3, 5)), (4, (2, 3, 4, 5))):
        x = s8(rng, shape)
        for perm in itertools.permutations(range(rank)):
            tag = "".join(map(str, perm))
            cases.append(Case(f"transpose_r{rank}_{tag}", "transpose", (x,),
                              transpose_attrs(perm)))
        for axis in range(rank):
            parts = []
            for j, n in enumerate((1, 3, 2)):
                s = list(shape)
                s[axis] = n
                parts.append(s8(rng, tuple(s)))
            cases.append(Case(f"concat_r{rank}_axis{axis}", "concat", tuple(parts),
                              concat_attrs(axis, rank)))
        pads = [(int(rng.integers(0, 3)), int(rng.integers(0, 3))) for _ in range(rank)]
        for value in (-128, 127, 0):
            cases.append(Case(f"pad_r{rank}_v{value}", "pad", (x,), pad_attrs(pads, value)))
    cases += [Case("concat_single", "concat", (s8(rng, (2, 3, 4)),), concat_attrs(1, 3)),
              Case("concat_empty_part", "concat", (s8(rng, (2, 3)), s8(rng, (2, 0)),
                                                   s8(rng, (2, 4))), concat_attrs(1, 2)),
              Case("pad_none", "pad", (s8(rng, (1, 3, 3, 2)),), pad_attrs([(0, 0)] * 4, 5)),
              Case("pad_nhwc_spatial", "pad", (s8(rng, (1, 5, 4, 17)),),
                   pad_attrs([(0, 0), (1, 2), (2, 1), (0, 0)], -3))]
    cases += transpose_cases(rng)
    for i, (a, b) in enumerate((((2, 3, 4), (24,)), ((5,), (5,)), ((1, 4, 4, 3), (1, 48)))):
        cases.append(Case(f"copy_{i}", "copy", (s8(rng, a),), {}, out_shape=b))
    for i in range(n_random):
        r = rng_for(f"movement_random_{i}")
        rank = int(r.integers(1, 5))
        shape = tuple(int(d) for d in r.integers(1, 7, size=rank))
        x = s8(r, shape)
        cases += [Case(f"transpose_random_{i:03d}", "transpose", (x,),
                       transpose_attrs(tuple(int(p) for p in r.permutation(rank)))),
                  Case(f"pad_random_{i:03d}", "pad", (x,),
                       pad_attrs([tuple(int(v) for v in r.integers(0, 4, 2)) for _ in shape],
                                 int(r.integers(-128, 128))))]
    return cases


def embedding_cases():
    """Token ids of rank 1..5 (0 and V - 1 included), row widths around the copy sizes, a
    one-row table; ids outside [0, V) are MT_STATUS_BAD_INPUT, bad operands BAD_ARGUMENT."""
    rng = rng_for("embedding")
    cases = []
    for v, d, shape in ((1, 1, (3,)), (2, 3, (2, 4)), (50, 16, (1, 12)), (7, 17, (2, 2, 3)),
                        (300, 64, (1, 2, 2, 5)), (5, 2, (1, 1, 2, 2, 3))):
        ids = rng.integers(0, v, size=shape).astype(np.int32)
        ids.flat[0], ids.flat[-1] = 0, v - 1
        table = s8(rng, (v, d))
        cases.append(Case(f"embedding_v{v}_d{d}_r{len(shape)}", "embedding", (ids, table), {}))
        for k, bad_id in enumerate((v, -1, 2**31 - 1, -2**31)):
            wrong = ids.copy()
            wrong.flat[int(rng.integers(0, wrong.size))] = bad_id
            cases.append(Case(f"embedding_v{v}_d{d}_bad_id{k}", "embedding", (wrong, table), {},
                              status=BAD_INPUT, out_shape=shape + (d,)))
    ids, table = i32([[0, 1, 2]]), s8(rng, (4, 3))
    cases += [Case("embedding_bad_ids_int8", "embedding", (ids.astype(np.int8), table), {},
                   status=BAD_ARGUMENT, out_shape=(1, 3, 3)),
              Case("embedding_bad_table_rank", "embedding", (ids, table.reshape(4, 3, 1)), {},
                   status=BAD_ARGUMENT, out_shape=(1, 3, 3)),
              Case("embedding_bad_out_width", "embedding", (ids, table), {},
                   status=BAD_ARGUMENT, out_shape=(1, 3, 2), ref_raises=False),
              Case("embedding_bad_out_rank", "embedding", (ids, table), {},
                   status=BAD_ARGUMENT, out_shape=(1, 9), ref_raises=False)]
    return cases


def transpose_cases(rng):
    """Runs around the 16-byte vector (and 4-byte word) widths with their tails, x strides at
    the edges of the u8 / u16 / u32 gather offsets (17 | 18, 9362 | 9363), merged outer dims,
    every permutation of odd-sized and of size-1 4-D shapes, and an empty tensor."""
    cases = []
    for n in (1, 3, 4, 5, 15, 16, 17, 31, 32, 33, 47):  # run length n, x stride 1 or m
        for m in (2, 3, 17, 18):
            cases += [Case(f"transpose_run{n}_s{m}", "transpose", (s8(rng, (m, n)),),
                           transpose_attrs((1, 0))),
                      Case(f"transpose_copy{n}_r{m}", "transpose", (s8(rng, (m, 2, n)),),
                           transpose_attrs((1, 0, 2)))]
    for m, n in ((1000, 41), (9362, 5), (9363, 5), (9362 * 2, 2), (20000, 1)):  # u16 / u32
        cases.append(Case(f"transpose_wide_s{m}_n{n}", "transpose", (s8(rng, (n, m)),),
                          transpose_attrs((1, 0))))
    for shape in ((3, 5, 7, 9), (1, 5, 1, 17), (5, 1, 1, 3), (1, 1, 19, 1)):
        x = s8(rng, shape)
        for perm in itertools.permutations(range(4)):
            tag = "x".join(map(str, shape)) + "_" + "".join(map(str, perm))
            cases.append(Case(f"transpose_{tag}", "transpose", (x,), transpose_attrs(perm)))
    cases += [Case("transpose_nhwc_nchw_6x7x33", "transpose", (s8(rng, (1, 6, 7, 33)),),
                   transpose_attrs((0, 3, 1, 2))),
              Case("transpose_nchw_nhwc_33x6x7", "transpose", (s8(rng, (1, 33, 6, 7)),),
                   transpose_attrs((0, 2, 3, 1))),
              Case("transpose_empty", "transpose", (s8(rng, (2, 0, 3)),),
                   transpose_attrs((2, 0, 1)))]
    return cases


# ----------------------------------------------------------------------------- bad arguments

def bad(case, suffix, ref_raises=True, inputs=None, out_shape=None, **attrs):
    """`case` mutated so that the kernel must answer MT_STATUS_BAD_ARGUMENT; y keeps the shape
    the unmutated case has (unless out_shape says otherwise)."""
    base_shape = out_shape or reference_output(case).shape
    return Case(f"{case.name}_bad_{suffix}", case.op, inputs or case.inputs,
                {**case.attrs, **attrs}, status=BAD_ARGUMENT, out_shape=base_shape,
                ref_raises=ref_raises)


def bad_cases():
    conv = mac_case("conv2d_base", "conv2d", (1, 5, 5, 4), (6, 3, 3, 2), pads=(1,) * 4, groups=2)
    dw = mac_case("dw_base", "depthwise_conv2d", (1, 5, 5, 3), (3, 3, 6), pads=(1,) * 4, mult=2)
    fc = mac_case("fc_base", "fully_connected", (2, 9), (4, 9))
    x, w, b, m, s = conv.inputs
    cases = [bad(conv, "groups3", groups=3), bad(conv, "in_zp128", in_zp=128),
             bad(conv, "stride0", stride_h=0), bad(conv, "dilation0", dilation_w=0),
             bad(conv, "pad_negative", pad_left=-1), bad(conv, "act_empty", act_min=5, act_max=4),
             bad(conv, "shift1", inputs=(x, w, b, m, i32([1] * 6))),
             bad(conv, "shift63", inputs=(x, w, b, m, i32([63] * 6))),
             bad(conv, "mult_negative", inputs=(x, w, b, i32([-1] * 6), s)),
             bad(conv, "bias_short", inputs=(x, w, b[:5], m, s)),
             bad(conv, "y_shape", ref_raises=False, out_shape=(1, 5, 4, 6)),
             bad(conv, "window_too_big", pad_top=0, pad_bottom=0,
                 inputs=(x[:, :2], w, b, m, s), out_shape=(1, 1, 5, 6)),
             bad(dw, "mult3", depth_multiplier=3), bad(dw, "out_zp_low", out_zp=-129),
             bad(dw, "weight_2hwc", inputs=(dw.inputs[0], dw.inputs[1][None].repeat(2, 0),
                                             *dw.inputs[2:])),
             bad(fc, "in_mismatch", inputs=(fc.inputs[0][:, :8], *fc.inputs[1:])),
             bad(fc, "y_shape", ref_raises=False, out_shape=(2, 5))]
    fcf = folded(fc)
    cases += [bad(fcf, "in_mismatch", inputs=(fcf.inputs[0][:, :8], *fcf.inputs[1:])),
              bad(fcf, "bias_short", inputs=(*fcf.inputs[:2], fcf.inputs[2][:3], *fcf.inputs[3:])),
              bad(fcf, "in_zp128", in_zp=128),
              bad(fcf, "y_shape", ref_raises=False, out_shape=(2, 5))]
    add = add_case("add_base", (2, 5))
    mul = mul_case("mul_base", (2, 5))
    cases += [bad(add, "shape", inputs=(add.inputs[0], add.inputs[1][:, :2])),  # no broadcast
              bad(add, "overflow", a_mult=(1 << 31) - 1, a_shift=2),
              bad(add, "zp", b_zp=300), bad(mul, "shift1", shift=1),
              bad(mul, "shape", inputs=(mul.inputs[0], mul.inputs[1].reshape(5, 2))),
              bad(unary_case("clamp_base", "clamp", (4,)), "act", act_min=3, act_max=-3),
              bad(unary_case("lut_base", "lut", (4,)), "table255",
                  inputs=(s8(rng_for("t"), (4,)), s8(rng_for("t"), (255,)))),
              bad(unary_case("rescale_base", "rescale", (4,)), "shift63", shift=63)]
    for op in ("maximum", "minimum"):
        base = minmax_case(f"{op}_base", op, (2, 5))
        cases += [bad(base, "shape", inputs=(base.inputs[0], base.inputs[1][:, :2])),
                  bad(base, "act", act_min=9, act_max=8),
                  bad(base, "y_shape", ref_raises=False, out_shape=(5, 2))]
    mp = pool_case("maxpool_base", "max_pool2d", (1, 4, 4, 2), (2, 2), (2, 2))
    ap = pool_case("avgpool_base", "avg_pool2d", (1, 4, 4, 2), (2, 2), (2, 2))
    cases += [bad(mp, "window_in_padding", pad_top=2, out_shape=(1, 3, 2, 2)),
              bad(mp, "kernel0", kernel_w=0), bad(ap, "cip2", count_include_pad=2),
              bad(ap, "divisor_negative", divisor=-1),
              bad(ap, "divisor_huge", divisor=(1 << 30) + 1),
              bad(ap, "window_in_padding", pad_left=3, out_shape=(1, 2, 3, 2))]
    rs = resize_case("resize_base", (1, 3, 3, 5), (6, 6), "linear", scale=2.0)
    rn = resize_case("resize_nearest_base", (1, 3, 3, 5), (6, 6), "nearest", scale=2.0)
    cases += [bad(rs, "mode2", mode=2), bad(rs, "n0", scale_y_n=0),
              bad(rs, "n_huge", scale_x_n=(1 << 11) + 1, border_x=0),
              bad(rs, "d0", scale_x_d=0), bad(rs, "border", border_y=rs.attrs["border_y"] + 1),
              bad(rs, "offset_huge", offset_x=(1 << 16) + 1), bad(rs, "shift1", shift=1),
              bad(rs, "rq_overflow", mult=(1 << 31) - 1, shift=2),
              bad(rs, "act", act_min=4, act_max=3),
              bad(rs, "y_shape", ref_raises=False, out_shape=(1, 6, 5, 5)),
              bad(rs, "y_channels", ref_raises=False, out_shape=(1, 6, 6, 4)),
              bad(rn, "mult", mult=1 << 30)]
    sm = softmax_case("softmax_base", (2, 5))
    zero_first, too_big = sm.inputs[1].copy(), sm.inputs[1].copy()
    zero_first[0], too_big[3] = 0, 65537
    cases += [bad(sm, "table0", inputs=(sm.inputs[0], zero_first)),
              bad(sm, "table_big", inputs=(sm.inputs[0], too_big)),
              bad(sm, "row_too_long", inputs=(s8(rng_for("long"), (1, 32768)), sm.inputs[1]),
                  out_shape=(1, 32768))]
    x4 = s8(rng_for("x4"), (2, 3))
    tr = Case("transpose_base", "transpose", (x4,), transpose_attrs((1, 0)))
    cc = Case("concat_base", "concat", (x4, x4), concat_attrs(0, 2))
    pd = Case("pad_base", "pad", (x4,), pad_attrs([(1, 0), (0, 2)], 0))
    cases += [bad(tr, "not_perm", perm2=2), bad(tr, "moves_lead", perm0=3, perm2=0),
              bad(cc, "off_axis", inputs=(x4, x4[:, :2])), bad(cc, "axis1", axis=1),
              bad(pd, "negative", after3=-1), bad(pd, "lead_dim", before0=1),
              bad(pd, "value", value=128),
              bad(Case("copy_base", "copy", (x4,), {}), "numel", ref_raises=False,
                  out_shape=(7,))]
    return cases


DIM_MAX = (1 << 30) - 1  # window ops: dims, kernels, strides, dilations, pads (MT_DIM_MAX)
INT32_MAX = (1 << 31) - 1


def domain_edge_cases():
    """Each attribute at the edge of its domain (docs/numerics.md, "Domain"): the last value
    both executors accept (run, bit-exact) and the first they both refuse. Zero-size batches
    stand for inputs too large to build."""
    conv = mac_case("conv2d_edge", "conv2d", (1, 5, 5, 4), (6, 3, 3, 2), pads=(1,) * 4, groups=2)
    dw = mac_case("dw_edge", "depthwise_conv2d", (1, 5, 5, 3), (3, 3, 6), pads=(1,) * 4, mult=2)
    x, w, b, m, s = conv.inputs
    far = dict(stride_h=DIM_MAX, pad_top=DIM_MAX)  # windows 2^30 apart: 2 rows, one in padding
    empty_tall = (np.zeros((0, DIM_MAX + 1, 5, 4), np.int8), w, b, m, s)
    cases = [
        replace(conv, name="conv2d_edge_far", attrs={**conv.attrs, **far}),
        replace(conv, name="conv2d_edge_padded_max", attrs={
            **conv.attrs, **far, "pad_bottom": INT32_MAX - DIM_MAX - 5}),  # H + pads = 2^31 - 1
        replace(dw, name="dw_edge_far", attrs={**dw.attrs, "stride_w": DIM_MAX,
                                               "pad_right": DIM_MAX, "pad_left": 0}),
        bad(conv, "stride_2p30", stride_h=DIM_MAX + 1),
        bad(conv, "stride_int32_max", stride_w=INT32_MAX),
        bad(conv, "dilation_2p30", dilation_h=DIM_MAX + 1),
        bad(conv, "pad_2p30", pad_left=DIM_MAX + 1, out_shape=(1, 5, 5, 6)),
        bad(conv, "padded_2p31", **far, pad_bottom=INT32_MAX - DIM_MAX - 4,
            out_shape=(1, 3, 5, 6)),
        bad(conv, "height_2p30", inputs=empty_tall, out_shape=(0, 5, 5, 6)),
        bad(dw, "stride_2p30", stride_w=DIM_MAX + 1),
        bad(dw, "dilation_2p30", dilation_w=DIM_MAX + 1),
        bad(dw, "pad_2p30", pad_bottom=DIM_MAX + 1, out_shape=(1, 5, 5, 6)),
        bad(dw, "in_zp_low", in_zp=-129),
        bad(dw, "act_high", act_max=128),
    ]
    fc = mac_case("fc_edge", "fully_connected", (2, 9), (4, 9))
    cases += [bad(fc, "out_zp128", out_zp=128), bad(fc, "act_low", act_min=-129),
              bad(folded(fc), "out_zp128", out_zp=128)]
    xp = s8(rng_for("pool_edge"), (1, 4, 3, 2))
    window = dict(kernel_h=DIM_MAX, kernel_w=2, stride_h=2, stride_w=1, pad_top=DIM_MAX - 1,
                  pad_left=0, pad_bottom=0, pad_right=1)  # 2 x 3 outputs, the kernel 2^30 - 1
    mp = Case("maxpool_edge_kernel_max", "max_pool2d", (xp,), dict(window, act_min=-128,
                                                                     act_max=127))
    ap = Case("avgpool_edge_kernel_max", "avg_pool2d", (xp,), dict(
        window, act_min=-128, act_max=127, count_include_pad=0, divisor=0, in_zp=3, out_zp=-1))
    wide = np.zeros((0, 1 << 12, (1 << 11) + 1, 1), np.int8)  # windows of 2^23 (+ 2^12) values
    big = Case("avgpool_edge_window_2p23", "avg_pool2d", (wide,), dict(
        kernel_h=1 << 12, kernel_w=1 << 11, stride_h=1, stride_w=1, pad_top=0, pad_left=0,
        pad_bottom=0, pad_right=0, count_include_pad=0, divisor=0, in_zp=0, out_zp=0,
        act_min=-128, act_max=127))
    cases += [mp, ap, big,
              bad(mp, "kernel_2p30", kernel_h=DIM_MAX + 1, pad_top=DIM_MAX),
              bad(mp, "stride_2p30", stride_w=DIM_MAX + 1),
              bad(mp, "stride0", stride_h=0), bad(mp, "pad_negative", pad_right=-1),
              bad(mp, "act_high", act_max=128),
              bad(ap, "in_zp_high", in_zp=128), bad(ap, "out_zp_low", out_zp=-129),
              bad(ap, "count_2p30", count_include_pad=1),  # kernel_h * kernel_w > 2^30
              bad(ap, "divisor_int32_max", divisor=INT32_MAX),
              bad(big, "window", kernel_w=(1 << 11) + 1, out_shape=(0, 1, 1, 1))]
    mul = mul_case("mul_edge", (2, 5))
    resc = unary_case("rescale_edge", "rescale", (2, 5))
    corner = dict(a_zp=-128, b_zp=-128, mult=1 << 30)  # products in [0, 255^2]
    top = dict(in_zp=-128, shift=3)  # x - in_zp in [0, 255]
    cases += [replace(mul, name="mul_edge_rq_max", attrs={**mul.attrs, **corner, "shift": 15}),
              bad(mul, "rq_overflow", **corner, shift=14),  # 2^16 * 255^2 >= 2^31
              bad(mul, "rq_overflow_small_data", mult=INT32_MAX, shift=2,
                  inputs=(np.zeros((2, 5), np.int8), np.zeros((2, 5), np.int8))),
              replace(resc, name="rescale_edge_rq_max", attrs={**resc.attrs, **top,
                                                               "mult": 67372035}),
              bad(resc, "rq_overflow", **top, mult=67372036)]  # rq(255) = 2^31
    return cases


# ----------------------------------------------------------------------------- case files

def conv_px_cases():
    """conv2d through mt_dot_px_s8: pixel groups across rows and images with 1..3 left over,
    odd and single output channels, windows read in place (pure C) with stride and dilation,
    windows over 255 bytes (packed and not, pure C), windows too big for four (MVE) per gather,
    extreme zero points and scales; fully-connected shapes around the blocks of four outputs."""
    return [
        mac_case("px_batch2_odd", "conv2d", (2, 3, 5, 3), (5, 3, 3, 3), pads=(1, 1, 1, 1)),
        mac_case("px_cout1", "conv2d", (1, 5, 3, 7), (1, 2, 2, 7), pads=(0, 1, 0, 0)),
        mac_case("px_cout3_c16", "conv2d", (1, 6, 9, 16), (3, 3, 3, 16), pads=(1, 1, 1, 1)),
        mac_case("px_inplace_s2", "conv2d", (1, 9, 11, 8), (6, 3, 3, 8), stride=(2, 2),
                 pads=(1, 1, 1, 0)),
        mac_case("px_inplace_dil", "conv2d", (1, 9, 10, 6), (4, 3, 3, 6), dil=(2, 1),
                 pads=(2, 1, 2, 1), zp=(-128, 127)),
        mac_case("px_run300", "conv2d", (1, 4, 5, 100), (5, 3, 3, 100), pads=(1, 1, 1, 1),
                 zp=(127, -128)),
        mac_case("px_k360", "conv2d", (1, 5, 4, 40), (7, 3, 3, 40), pads=(1, 1, 1, 1),
                 zp=(-128, 0)),
        mac_case("px_k702", "conv2d", (1, 4, 7, 78), (2, 3, 3, 78), pads=(0, 1, 1, 1),
                 extreme=1.0),
        mac_case("px_c1_s2", "conv2d", (1, 11, 6, 1), (9, 5, 4, 1), stride=(2, 2),
                 pads=(2, 1, 2, 2), extreme=1.0),
        mac_case("px_rgb_s2", "conv2d", (1, 9, 9, 3), (8, 3, 3, 3), stride=(2, 2),
                 pads=(0, 0, 1, 1), zp=(-128, -128)),
    ] + [mac_case(f"px_fc_out{n}", "fully_connected", (2, 21), (n, 21), extreme=0.5)
         for n in (1, 2, 3, 6, 7, 9)]


# ----------------------------------------------------------------------------- int16 MAC ops

A16_FORMS = ("tight", "bound", "bound_neg", "bound+1", "bias_big", "shift16", "shift47")


def a16_case(name, op, x_shape, w_shape, form="random", *, stride=(1, 1), dil=(1, 1),
             pads=(0, 0, 0, 0), groups=1, mult=1):
    """An a16w8 conv2d / depthwise_conv2d / fully_connected case (docs/numerics.md section 6):
    int16 x, int8 weights, an int64 bias, 16-bit multipliers, zero points 0. `form` picks which
    output stage the kernels take: "random" and "tight" (sum |w| of more than 511 products)
    the 32-bit one; "bound" / "bound_neg" reach |acc| = 2^31 - 1 exactly with every product at
    +-2^22 (still 32-bit), "bound+1" one past it, "bias_big" a bias beyond int32, "shift16" /
    "shift47" a shift outside [17, 46]: the 64-bit form."""
    rng = rng_for(name)
    x = rng.integers(-32767, 32768, size=x_shape).astype(np.int16)
    x.flat[rng.integers(x.size)] = -32768  # kernels also accept -32768
    w = s8(rng, w_shape, -127, 127)
    w.flat[rng.integers(w.size)] = -128
    cout = w_shape[0] if op != "depthwise_conv2d" else w_shape[-1]
    taps = w.size // cout
    bias = rng.integers(-(1 << 22), 1 << 22, size=cout)
    shift = np.full(cout, 21 + math.ceil(math.log2(taps + 1) / 2))
    if form == "tight":
        w = s8(rng, w_shape, -20, 20)
    elif form.startswith("bound"):
        x[...] = -32768
        w[...] = 127 if form == "bound_neg" else -128
        room = (1 << 31) - 1 - taps * (1 << 22) + (form == "bound+1")
        bias[...] = -room if form == "bound_neg" else room
        shift[...] = 40
    elif form == "bias_big":
        bias = rng.integers(1 << 31, 1 << 32, size=cout) * rng.choice([-1, 1], size=cout)
        shift[...] = 34
    elif form == "shift16":
        x //= 64
        w = s8(rng, w_shape, -3, 3)
        bias = rng.integers(-1000, 1000, size=cout)
        shift[...] = 16
    elif form == "shift47":
        bias = rng.integers(1 << 44, 1 << 46, size=cout)
        shift[...] = 47
    m = i32(rng.integers(1 << 14, 1 << 15, size=cout))
    lo, hi = [(-32767, 32767), (0, 32767), (-20000, 12000)][int(rng.integers(3))]
    attrs = dict(in_zp=0, out_zp=0, act_min=lo, act_max=hi)
    if op != "fully_connected":
        attrs.update(stride_h=stride[0], stride_w=stride[1], dilation_h=dil[0],
                     dilation_w=dil[1], pad_top=pads[0], pad_left=pads[1], pad_bottom=pads[2],
                     pad_right=pads[3])
        attrs.update(groups=groups) if op == "conv2d" else attrs.update(depth_multiplier=mult)
    return Case(name, op, (x, w, bias.astype(np.int64), m, i32(shift)), attrs)


def a16_cases():
    """The int16 MAC kernels: every conv edge geometry; 1x1 convs over odd pixel counts and
    across images (pixels in pairs); a conv1d run with clipped edges; fully_connected rows
    1..5 by outputs 1..7 (channel groups of three and four with every remainder) and long
    rows; depthwise channel counts 1..17 (MVE 8-channel and DSP 4-channel passes and their
    tails) and a depth multiplier; each output-stage form on a gathered 3x3, a 1x1, a conv1d,
    fully_connected and depthwise."""
    cases = [a16_case(f"a16_{n}", "conv2d", xs, ws, stride=st, dil=d, pads=p, groups=g)
             for n, xs, ws, st, d, p, g in CONV_EDGES]
    cases += [a16_case("a16_pw_odd_px", "conv2d", (1, 3, 5, 13), (7, 1, 1, 13)),
              a16_case("a16_pw_batch2", "conv2d", (2, 3, 3, 8), (6, 1, 1, 8)),
              a16_case("a16_conv1d_s1", "conv2d", (2, 1, 19, 8), (7, 1, 5, 8), pads=(0, 2, 0, 2)),
              a16_case("a16_conv1d_s2", "conv2d", (1, 1, 20, 5), (4, 1, 3, 5), stride=(1, 2),
                       pads=(0, 1, 0, 0))]
    cases += [a16_case(f"a16_fc_n{n}_out{o}_k{k}", "fully_connected", (n, k), (o, k))
              for n, o, k in ((1, 1, 1), (2, 2, 7), (3, 3, 8), (4, 4, 9), (5, 5, 64),
                              (2, 6, 33), (3, 7, 17), (1, 12, 64))]
    cases += [a16_case(f"a16_dw_c{c}_m{m}", "depthwise_conv2d", (1, 5, 4, c), (3, 3, c * m),
                       pads=(1, 1, 1, 1), mult=m, stride=(1 + (c % 2), 1))
              for c, m in ((1, 1), (3, 1), (4, 1), (5, 1), (8, 1), (9, 1), (13, 1), (17, 1),
                           (3, 2))]
    shapes = {"3x3": ("conv2d", (1, 4, 5, 6), (7, 3, 3, 6), (1, 1, 1, 1)),
              "1x1": ("conv2d", (1, 3, 3, 16), (5, 1, 1, 16), (0, 0, 0, 0)),
              "conv1d": ("conv2d", (1, 1, 9, 6), (4, 1, 3, 6), (0, 0, 0, 0)),
              "fc": ("fully_connected", (3, 40), (5, 40), None),
              "dw": ("depthwise_conv2d", (1, 4, 4, 10), (3, 3, 10), (0, 0, 0, 0))}
    for form in A16_FORMS:
        for key, (op, xs, ws, pads) in shapes.items():
            if form == "tight":  # more than 511 products per channel
                xs, ws = ((3, 600), (5, 600)) if op == "fully_connected" else (xs, ws)
                if op == "conv2d" and key == "3x3":
                    xs, ws = (1, 4, 4, 64), (5, 3, 3, 64)
                elif op != "fully_connected":
                    continue
            kw = {} if pads is None else dict(pads=pads)
            cases.append(a16_case(f"a16_{form}_{key}", op, xs, ws, form, **kw))
    return cases


def reference_output(case):
    y = kernel_for(case.op, case.variant)(*case.inputs, **case.attrs)
    return y.reshape(case.out_shape) if case.out_shape is not None else y


def expected_output(case):
    if case.status == OK:
        return reference_output(case)
    if case.ref_raises:
        with pytest.raises(ValueError):
            kernel_for(case.op, case.variant)(*case.inputs, **case.attrs)
    return np.zeros(case.out_shape, np.uint8 if case.op == "compare" else np.int8)


def tensor_record(a, rng) -> bytes:
    a = np.ascontiguousarray(a)
    misalign = (int(rng.integers(0, 16)) if a.dtype == np.int8 else
                int(rng.choice([0, 2, 6, 10])) if a.dtype == np.int16 else
                int(rng.choice([0, 8])) if a.dtype == np.int64 else  # int64: 8-aligned
                int(rng.choice([0, 4, 8, 12])))
    shape = list(a.shape) + [0] * (6 - a.ndim)
    data = a.astype(a.dtype.newbyteorder("<")).tobytes()
    head = struct.pack("<2I6Ii2I", DTYPE_ID[a.dtype], a.ndim, *shape, 0, misalign, len(data))
    return head + data + b"\0" * (-len(data) % 4)


def case_bytes(case) -> bytes:
    op = ops.get(case.op)
    y = expected_output(case)
    rng = rng_for(case.name + "/layout")
    attrs = [case.attrs[a] for a in op.attrs]
    head = struct.pack(f"<9I{len(attrs)}i", MAGIC, VERSION, op.opcode,
                       op.variants.index(case.variant), case.status,
                       NONE if case.alias is None else case.alias, len(attrs),
                       len(case.inputs), 1, *[int(v) for v in attrs])
    return head + b"".join(tensor_record(a, rng) for a in (*case.inputs, y))


def all_cases(n_random):
    cases = (with_folded(conv_cases(n_random)) + elementwise_cases(n_random) +
             elem_speedup_cases() +
             pool_cases(n_random) + resize_cases() + softmax_cases(n_random) +
             movement_cases(n_random) + select_cases() + select_bad_cases() +
             with_folded(simd_cases()) + bad_cases() + domain_edge_cases() +
             with_folded(conv_px_cases()) +
             conv1x1_mve_cases() + conv1x1_cases() + depthwise_speed_cases() +
             matmul_cases(n_random) + convt_cases() + conv_add_cases() + embedding_cases() +
             a16_cases())
    names = [c.name for c in cases]
    assert len(set(names)) == len(names), "case names must be unique"
    return cases


def write_cases(cases, folder: Path, max_bytes=None) -> Path:
    """One <name>.mtkc per case plus cases.lst naming them; returns the list file."""
    folder.mkdir(parents=True, exist_ok=True)
    for case in cases:
        data = case_bytes(case)
        assert max_bytes is None or 2 * len(data) < max_bytes, f"{case.name} too big for a board"
        (folder / f"{case.name}.mtkc").write_bytes(data)
    listing = folder / "cases.lst"
    listing.write_text("".join(f"{c.name}.mtkc\n" for c in cases))
    return listing


def runner_summary(output: str, n_cases: int) -> None:
    lines = output.strip().splitlines()
    assert lines and lines[-1] == f"run_kernel: {n_cases} cases, 0 failed", "\n".join(lines[-60:])


# ----------------------------------------------------------------------------- builds

def kernel_sources():
    return sorted({s for k in ck.KERNELS.values() for s in k.sources}) + [ck.ALL_TABLE_SOURCE]


RUNNER_CACHE = ROOT / "build" / "kernel-runner"  # built runners, keyed by their inputs


def cached_runner(name: str, sources, flags, build) -> Path:
    """The runner `build(out)` makes from `sources` (every kernel: the same for every case table
    of a session), built once per distinct input: the key hashes the flags and the bytes of the
    sources and of every header they can include, so a changed kernel is rebuilt. Written
    beside its final name and renamed into place, so parallel test workers never see half."""
    headers = sorted(h for d in (*ck.INCLUDE_DIRS, RUNNER_DIR) for h in Path(d).rglob("*.h"))
    key = hashlib.sha256(repr((name, list(flags), [(str(f), f.read_bytes())
                                                   for f in [*sources, *headers]])).encode())
    out = RUNNER_CACHE / key.hexdigest()[:16] / name
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        part = out.with_name(f"{name}.{os.getpid()}.part")
        build(part)
        os.replace(part, out)
    return out


def build_host_runner(out: Path | None = None) -> Path:
    """The host runner (ASan + UBSan); cached by content unless `out` is given."""
    if shutil.which("gcc") is None:
        pytest.fail("gcc not found: run `make toolchain`")
    includes = [f"-I{d}" for d in (*ck.INCLUDE_DIRS, RUNNER_DIR)]
    sources = [RUNNER_DIR / "run_kernel.c", RUNNER_DIR / "rk_io_host.c", *kernel_sources()]

    def build(path: Path) -> Path:
        cmd = ["gcc", *HOST_FLAGS, *includes, *map(str, sources), "-o", str(path)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        return path

    return build(out) if out is not None else cached_runner("run_kernel", sources, HOST_FLAGS,
                                                            build)


def run_host(cases, tmp: Path):
    listing = write_cases(cases, tmp / "cases")
    exe = build_host_runner()
    proc = subprocess.run([str(exe), "@cases.lst"], cwd=listing.parent, capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0 and "run_kernel:" not in proc.stdout:  # crashed: name the case
        proc = subprocess.run([str(exe), "-v", "@cases.lst"], cwd=listing.parent,
                              capture_output=True, text=True, timeout=600)
    runner_summary(proc.stdout + proc.stderr, len(cases))
    assert proc.returncode == 0


def run_board(cases, tmp: Path, board: str, cpu: str):
    from mcutorch.device import qemu, toolchain
    if shutil.which(toolchain.GCC) is None or shutil.which(toolchain.QEMU) is None:
        pytest.fail("arm-none-eabi-gcc or qemu-system-arm not found: run `make toolchain`")
    listing = write_cases(cases, tmp / "cases", max_bytes=ARENA_LIMIT)
    sources = [RUNNER_DIR / "run_kernel.c", RUNNER_DIR / "rk_io_board.c", *kernel_sources()]
    elf = cached_runner(f"run_kernel_{board}_{cpu}.elf", sources, ["-Werror"],
                        lambda out: toolchain.build_elf(sources, [*ck.INCLUDE_DIRS, RUNNER_DIR],
                                                        board, cpu, out, extra_flags=["-Werror"]))
    result = qemu.run_elf(elf, board, ["@cases.lst"], cwd=listing.parent, timeout=300,
                            target=cpu)
    assert result.fault is None, result.fault + "\n" + result.stdout[-3000:]
    runner_summary(result.stdout, len(cases))
    assert result.exit_code == 0


# ----------------------------------------------------------------------------- tests

@pytest.fixture(scope="module")
def fast_cases():
    return all_cases(FAST_RANDOM)


def test_kernels_host(fast_cases, tmp_path):
    run_host(fast_cases, tmp_path)


@pytest.mark.qemu
@pytest.mark.parametrize("board,cpu", BOARD_PARAMS)
def test_kernels_qemu(fast_cases, tmp_path, board, cpu):
    run_board(fast_cases, tmp_path, board, cpu)


@pytest.mark.qemu
@pytest.mark.slow
@pytest.mark.parametrize("board,cpu", [("mps3-an547", "cortex-m55+nomve"),
                                       ("mps2-an505", "cortex-m33+nodsp")])
def test_conv_add_isa_switches(tmp_path, board, cpu):
    """conv2d_add's fused output stage on the cores with their SIMD switched off: the M55's DSP
    paths (+nomve) and the M33's pure C (+nodsp), in place over skip, bit-exact."""
    run_board(conv_add_cases(), tmp_path, board, cpu)


@pytest.mark.slow
def test_kernels_host_sweep(tmp_path):
    run_host(all_cases(SLOW_RANDOM), tmp_path)


@pytest.mark.slow
@pytest.mark.qemu
@pytest.mark.parametrize("board,cpu", [BOARD_BUILDS[0], BOARD_BUILDS[-1]])
def test_kernels_qemu_sweep(tmp_path, board, cpu):
    run_board(all_cases(SLOW_RANDOM), tmp_path, board, cpu)


def test_kernel_table_links_only_used_kernels(tmp_path):
    """kernel_table_c + sources_for build a table holding exactly the used kernels."""
    if shutil.which("gcc") is None:
        pytest.fail("gcc not found: run `make toolchain`")
    used = {(op, "default") for op in ("conv2d", "softmax", "avg_pool2d", "delegate")}
    (tmp_path / "table.c").write_text(ck.kernel_table_c(used))
    opcodes = sorted(ops.get(op).opcode for op, _ in used if op != "delegate")
    (tmp_path / "main.c").write_text(
        '#include "mt_kernels.h"\nint main(void) {\n'
        "  static const int used[] = {" + ", ".join(map(str, opcodes)) + "};\n"
        "  int bad = mt_kernels_model.n_rows != MT_OP_COUNT;\n"
        "  for (int op = 0, k = 0; op < MT_OP_COUNT; op++) {\n"
        "    int want = k < (int)(sizeof used / sizeof used[0]) && used[k] == op;\n"
        "    bad |= (mt_kernels_model.rows[op].variants[0] != 0) != want;\n"
        "    k += want;\n  }\n  return bad;\n}\n")
    srcs = [tmp_path / "main.c", tmp_path / "table.c", *ck.sources_for(used)]
    includes = [f"-I{d}" for d in ck.INCLUDE_DIRS]
    exe = tmp_path / "table"
    subprocess.run(["gcc", *HOST_FLAGS, *includes, *map(str, srcs), "-o", str(exe)], check=True)
    assert subprocess.run([str(exe)]).returncode == 0
    assert [p.name for p in ck.sources_for(used)] == [
        "mt_conv2d_s8.c", "mt_avg_pool2d_s8.c", "mt_softmax_s8.c"]


@pytest.mark.qemu
def test_kws_kernel_text_size(tmp_path):
    """The kernels a KWS model links (and their table) stay within the code budget."""
    from mcutorch.device import toolchain
    if shutil.which(toolchain.GCC) is None:
        pytest.fail("arm-none-eabi-gcc not found: run `make toolchain`")
    used = {(op, "default") for op in KWS_OPS}
    (tmp_path / "table.c").write_text(ck.kernel_table_c(used))
    (tmp_path / "with.c").write_text('#include "mt_kernels.h"\n'
                                     "int main(void) { return mt_kernels_model.n_rows == 0; }\n")
    (tmp_path / "without.c").write_text("int main(void) { return 0; }\n")
    sizes = {}
    for name, srcs in (("with", [tmp_path / "table.c", *ck.sources_for(used)]), ("without", [])):
        elf = toolchain.build_elf([tmp_path / f"{name}.c", *srcs], ck.INCLUDE_DIRS, "mps3-an547",
                               "cortex-m55", tmp_path / f"{name}.elf", opt="-Os")
        sizes[name] = toolchain.size_of(elf)["text"]
    text = sizes["with"] - sizes["without"]
    print(f"KWS kernels ({', '.join(KWS_OPS)}) + table: {text} B of text at -Os on Cortex-M55")
    assert text <= KWS_TEXT_BUDGET


def test_every_op_has_a_kernel_file():
    for op in ops.OPS:
        if op.name in ck.NO_KERNEL:
            continue
        k = ck.kernel(op.name)
        text = k.sources[0].read_text()
        assert f"mt_status {k.function}(const mt_op_args *args)" in text, k.sources[0]
        assert len(text.splitlines()) <= 300, f"{k.sources[0]} is longer than 300 lines"
        assert cortex_m.scratch_bytes(op.name, [], {}) == 0
        for v in op.variants:
            k = ck.kernel(op.name, v)
            assert f"mt_status {k.function}(const mt_op_args *args)" in k.sources[0].read_text()


def test_folded_variant_matches_ref():
    """The Python "folded" fully_connected on bias' equals the default one on the original bias."""
    rng = rng_for("folded_vs_ref")
    for i in range(20):
        n, n_in, n_out = (int(v) for v in rng.integers(1, (4, 300, 40)))
        case = mac_case(f"fold_{i}", "fully_connected", (n, n_in), (n_out, n_in))
        folded(case)  # asserts equality
