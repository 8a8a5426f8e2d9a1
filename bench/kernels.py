"""Per-layer instruction counts of the C kernels on emulated boards, against CMSIS-NN v7.0.

    python -m bench.kernels [--cpus cortex-m55,cortex-m33,cortex-m3] [--opt -O3] [--layers kws]

Each layer is one kernel call with random int8 operands (realistic requantization scales), run
by the kernel test runner (tests/c/kernels/run_kernel.c) under QEMU; its output is checked bit
for bit against the Python reference before the count is reported. Counts are exact: mcutorch's
QEMU plugin (`mcutorch.device.exact`) counts the instructions between the runner's marker functions
rk_kernel_begin / rk_kernel_end, i.e. the kernel call plus the ~5 instructions of the call
itself. CMSIS-NN figures: v7.0, GCC 12.2 -O3, exact counts (KWS layers on three cores, the wider
VWW / ResNet-8 layers on the M55 only; none for the residual add and the lut).
"""
from __future__ import annotations

import argparse
import math
import struct
import tempfile
import zlib
from pathlib import Path

import numpy as np

from mcutorch import ops, quant

from mcutorch.device import toolchain
from mcutorch.device import kernels as ck
from mcutorch.device.exact import exact_counts
from mcutorch.ref import fold_bias, kernel_for, softmax_exp_table, transpose_attrs
from mcutorch.ref.pool import resize_axis

ROOT = Path(__file__).resolve().parents[1]
RUNNER_DIR = ROOT / "tests" / "c" / "kernels"
BOARD_OF = {"cortex-m55": "mps3-an547", "cortex-m33": "mps2-an505", "cortex-m3": "mps2-an385",
            "cortex-m4": "mps2-an386", "cortex-m7": "mps2-an500",
            "cortex-m0plus": "mps2-an385"}
CPUS = ("cortex-m55", "cortex-m33", "cortex-m3")

# name: (op, x shape, w shape or None, attrs, CMSIS-NN v7.0 instructions on M55 / M33 / M3)
LAYERS = {
    "kws_conv1_10x4_s2": ("conv2d", (1, 49, 10, 1), (64, 10, 4, 1),
                          dict(stride=(2, 2), pads=(4, 1, 5, 1)), (289_026, 1_105_743, 1_362_449)),
    "kws_dw_3x3": ("depthwise_conv2d", (1, 25, 5, 64), (3, 3, 64), dict(pads=(1, 1, 1, 1)),
                   (166_859, 593_925, 674_314)),
    "kws_pw_64to64": ("conv2d", (1, 25, 5, 64), (64, 1, 1, 64), {},
                      (202_860, 1_064_880, 1_592_000)),
    "kws_avgpool_25x5": ("avg_pool2d", (1, 25, 5, 64), (25, 5), {}, (9_347, 50_983, 107_582)),
    # max pools: SqueezeNet 1.1's 3x3 s2 ceil mode (56 -> 28: the last window is cut by the
    # edge; 32 channels so the case fits the board runner's 256 KiB arena) and BlazeFace's
    # 2x2 s2 shortcut pool; MACs: input elements
    "sqz_maxpool_3x3s2_ceil_56x56x32": ("max_pool2d", (1, 56, 56, 32), (3, 3),
                                        dict(stride=(2, 2), pads=(0, 0, 1, 1)), None),
    "blaze_maxpool_2x2s2_48x48x16": ("max_pool2d", (1, 48, 48, 16), (2, 2),
                                     dict(stride=(2, 2)), None),
    # a ShuffleNet stem's 3x3 s2 p1 pool (24 channels: a vector and a predicated tail)
    "stem_maxpool_3x3s2p1_48x48x24": ("max_pool2d", (1, 48, 48, 24), (3, 3),
                                      dict(stride=(2, 2), pads=(1, 1, 1, 1)), None),
    # a general (not global) average pool: 3x3 s1 over 24x24x16 (22x22 outputs)
    "avgpool_3x3s1_24x24x16": ("avg_pool2d", (1, 24, 24, 16), (3, 3), {}, None),
    "kws_fc_64to12": ("fully_connected", (1, 64), (12, 64), {}, (652, 2_153, 3_124)),
    "kws_softmax_12": ("softmax", (1, 12), None, {}, (6_851, 6_389, 6_351)),
    "vww_conv1_3x3_s2": ("conv2d", (1, 96, 96, 3), (8, 3, 3, 3),
                         dict(stride=(2, 2), pads=(0, 0, 1, 1)), (990_637, None, None)),
    "vww_dw_3x3": ("depthwise_conv2d", (1, 48, 48, 8), (3, 3, 8), dict(pads=(1, 1, 1, 1)),
                   (863_798, None, None)),
    "vww_pw_8to16": ("conv2d", (1, 48, 48, 8), (16, 1, 1, 8), {}, (641_812, None, None)),
    "resnet8_3x3_16": ("conv2d", (1, 32, 32, 16), (16, 3, 3, 16), dict(pads=(1, 1, 1, 1)),
                       (914_839, None, None)),
    # a decoder's transposed conv (8x8x32 -> 16x16x16, k4 s2 p1: 4 of the 16 taps land on each
    # output pixel), the conv2d it is the adjoint of (16x16x16 -> 8x8x32), and a conv2d with
    # the same output and the same taps per output pixel (2x2 x 32 channels, 16x16x16 out)
    "convT_8x8x32_k4s2p1": ("conv_transpose2d", (1, 8, 8, 32), (16, 4, 4, 32),
                            dict(stride=(2, 2), pads=(1, 1, 1, 1)), None),
    "conv_16x16x16_k4s2p1": ("conv2d", (1, 16, 16, 16), (32, 4, 4, 16),
                             dict(stride=(2, 2), pads=(1, 1, 1, 1)), None),
    "conv_17x17x32_k2": ("conv2d", (1, 17, 17, 32), (16, 2, 2, 32), {}, None),
    # TC-ResNet-style conv1d (k9, 16 -> 24 channels, L = 98) as conv2d on [N, 1, L, C]
    "conv1d_98x16_k9": ("conv2d", (1, 1, 98, 16), (24, 1, 9, 16), dict(pads=(0, 4, 0, 4)), None),
    # a conv2d of the same MACs: 98 output pixels (14x7) x 24 channels, 3x3 x 16 taps per pixel
    "conv_16x9x16_k3": ("conv2d", (1, 16, 9, 16), (24, 3, 3, 16), {}, None),
    "resnet8_add_32x32x16": ("add", (1, 32, 32, 16), None, {}, None),
    "hswish_lut_24x24x16": ("lut", (1, 24, 24, 16), None, {}, None),  # a table function
    # a YOLO neck's nearest x2 and a U-Net decoder's bilinear x2 (align_corners False)
    "yolo_nearest_x2_20x20x32": ("resize", (1, 20, 20, 32), None, {"mode": "nearest"}, None),
    "unet_bilinear_x2_16x16x32": ("resize", (1, 16, 16, 32), None, {"mode": "linear"}, None),
    "gt_threshold_24x24x16": ("compare", (1, 24, 24, 16), None, {}, None),  # x > 0.5
    "gt_ratio_24x24x16": ("compare", (1, 24, 24, 16), None, {"ratio": True}, None),  # x > y
    "masked_fill_24x24x16": ("where", (1, 24, 24, 16), None, {}, None),  # pure select
    "where_rescale_24x24x16": ("where", (1, 24, 24, 16), None, {"ratio": True}, None),
    # layout switches: NHWC -> NCHW (ShuffleNet's round trips around its channel shuffles),
    # TC-ResNet's [1, C, 1, L] -> [1, 1, L, C] between 1-D convs, a channel shuffle in NCHW
    # (groups 2 x 24 channels of 14x14: 196-byte runs) and the same shuffle in NHWC (2-byte runs)
    "nhwc_nchw_24x24x32": ("transpose", (1, 24, 24, 32), None, {"perm": (0, 3, 1, 2)}, None),
    "conv1d_switch_64x49": ("transpose", (1, 64, 1, 49), None, {"perm": (0, 2, 3, 1)}, None),
    "shuffle_nchw_2x24x196": ("transpose", (1, 2, 24, 196), None, {"perm": (0, 2, 1, 3)}, None),
    "shuffle_nhwc_196x2x24": ("transpose", (1, 196, 2, 24), None, {"perm": (0, 1, 3, 2)}, None),
}
# attention's products between two activations (matmul) and fully_connected on the same sizes:
# Q @ K^T is [T, d] x [d, T] (K read in place, transpose_b), P @ V is [T, T] x [T, d]
for _t, _d in ((16, 16), (64, 16), (32, 32), (64, 64)):
    LAYERS.update({
        f"mm_qk_t{_t}_d{_d}": ("matmul", (_t, _d), (_t, _d), dict(transpose_b=1), None),
        f"fc_qk_t{_t}_d{_d}": ("fully_connected", (_t, _d), (_t, _d), {}, None),
        f"mm_pv_t{_t}_d{_d}": ("matmul", (_t, _t), (_t, _d), dict(transpose_b=0), None),
        f"fc_pv_t{_t}_d{_d}": ("fully_connected", (_t, _t), (_d, _t), {}, None)})
# ResNet-8's first residual add (its compiled attributes: the left-shift scheme)
RESNET8_ADD = dict(a_zp=-128, a_mult=1542954677, a_shift=13, b_zp=3, b_mult=1073741824,
                   b_shift=11, out_zp=-128, out_mult=1090485821, out_shift=48, act_min=-128,
                   act_max=127)
# a16w8 (docs/numerics.md section 6): the same MAC layers with int16 activations (int64 bias
# within int48, 16-bit multipliers, zero points 0), named <layer>_a16, each beside its int8 row
A16_LAYERS = ("kws_conv1_10x4_s2", "kws_dw_3x3", "kws_pw_64to64", "kws_fc_64to12", "vww_dw_3x3",
              "resnet8_3x3_16", "conv1d_98x16_k9", "fc_qk_t64_d64", "fc_pv_t64_d64")
A16_CPUS = ("cortex-m55", "cortex-m33")  # the int16 kernels' MVE and DSP paths
GROUPS = {"kws": [k for k in LAYERS if k.startswith("kws")], "all": list(LAYERS),
          "attention": [k for k in LAYERS if k[:3] in ("mm_", "fc_")],
          "a16w8": [n for k in A16_LAYERS for n in (k, k + "_a16")]}


def _rng(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def _s8(rng, shape, lo=-128, hi=127):
    return rng.integers(lo, hi + 1, size=shape).astype(np.int8)


def make_layer(name):
    """(op, inputs, attrs, MACs, variant) of one benchmark layer, operands seeded by its name
    (MACs: elements for the pools, the add, the lut and transpose, output elements for resize, 0 for
    softmax; matmul: M * N * K).

    fully_connected runs variant "folded", as the compiler picks it (backends.cortex_m): the bias
    operand is bias - in_zp * sum(w) and in_zp is 0; its output equals the default one."""
    if name.endswith("_a16"):
        return _make_a16(name)
    op, xs, ws, kw, _ = LAYERS[name]
    rng = _rng(name)
    x = _s8(rng, xs)
    if op == "add":
        return op, (x, _s8(rng, xs)), RESNET8_ADD, x.size, "default"
    if op == "softmax":
        return op, (x, softmax_exp_table(0.1).astype(np.int32)), {}, 0, "default"
    if op == "lut":
        return op, (x, _s8(rng, (256,))), {}, x.size, "default"
    if op == "transpose":
        return op, (x,), transpose_attrs(kw["perm"]), x.size, "default"
    if op == "resize":
        (yn, yd, yo, yb), (xn, xd, xo, xb) = (resize_axis(n, 2 * n, kw["mode"], False, 2.0)
                                              for n in xs[1:3])
        linear = kw["mode"] == "linear"
        mult, shift = quant.quantize_multiplier(1.0 / (yn * xn)) if linear else (0, 0)
        attrs = dict(mode=int(linear), scale_y_n=yn, scale_y_d=yd, offset_y=yo, border_y=yb,
                     scale_x_n=xn, scale_x_d=xd, offset_x=xo, border_x=xb, mult=mult,
                     shift=shift, act_min=-128, act_max=127)
        return op, (x,), attrs, 4 * x.size, "default"
    if op == "compare":  # a threshold (codes compared), or two tensors of scales 3:7
        from mcutorch.ref.elementwise import compare_attrs
        b = _s8(rng, xs) if kw else np.array([17], np.int8)
        ratio = compare_attrs(3.0, 7.0) if kw else compare_attrs(1.0, 1.0)
        return op, (x, b), dict(kind=2, a_zp=-3, b_zp=5 if kw else -3, **ratio), x.size, \
            "default"
    if op == "where":  # masked_fill (both sides in y's qparams) or two rescales
        mask = rng.integers(0, 2, size=xs).astype(np.uint8)
        m, sh = quant.quantize_multiplier(0.7) if kw else (1 << 30, 30)
        attrs = dict(a_zp=4, a_mult=m, a_shift=sh, b_zp=4, b_mult=m, b_shift=sh, out_zp=4)
        return op, (mask, x, np.array([-128], np.int8)), attrs, x.size, "default"
    if op == "avg_pool2d":
        attrs = dict(kernel_h=ws[0], kernel_w=ws[1], stride_h=1, stride_w=1, pad_top=0,
                     pad_left=0, pad_bottom=0, pad_right=0, count_include_pad=0, divisor=0,
                     in_zp=-5, out_zp=-5, act_min=-128, act_max=127)
        return op, (x,), attrs, x.size, "default"
    if op == "max_pool2d":
        s, p = kw["stride"], kw.get("pads", (0, 0, 0, 0))
        attrs = dict(kernel_h=ws[0], kernel_w=ws[1], stride_h=s[0], stride_w=s[1], pad_top=p[0],
                     pad_left=p[1], pad_bottom=p[2], pad_right=p[3], act_min=-100, act_max=127)
        return op, (x,), attrs, x.size, "default"
    if op == "matmul":
        k = xs[-1]
        mult, shift = quant.quantize_multiplier(40.0 / (math.sqrt(k) * 74 * 74))
        attrs = dict(transpose_b=kw["transpose_b"], a_zp=-3, b_zp=5, out_zp=7, mult=mult,
                     shift=shift, act_min=-128, act_max=127)
        b = _s8(rng, ws)
        return op, (x, b), attrs, kernel_for(op)(x, b, **attrs).size * k, "default"
    w = _s8(rng, ws, -127, 127)
    cout = ws[-1] if op == "depthwise_conv2d" else ws[0]
    taps = w.size // cout
    bias = rng.integers(-2000, 2000, size=cout).astype(np.int32)
    real = 40.0 / (math.sqrt(taps) * 74 * 73)
    mult, shift = quant.quantize_multipliers(real * rng.uniform(0.5, 2.0, size=cout))
    attrs = dict(in_zp=-3, out_zp=7, act_min=-128, act_max=127)
    if op != "fully_connected":
        s, p = kw.get("stride", (1, 1)), kw.get("pads", (0, 0, 0, 0))
        attrs.update(stride_h=s[0], stride_w=s[1], dilation_h=1, dilation_w=1, pad_top=p[0],
                     pad_left=p[1], pad_bottom=p[2], pad_right=p[3])
        attrs.update(depth_multiplier=1) if op == "depthwise_conv2d" else attrs.update(groups=1)
    y = kernel_for(op)(x, w, bias, mult, shift, **attrs)
    if op == "fully_connected":
        folded = fold_bias(w, bias, attrs["in_zp"]).astype(np.int32)
        attrs = {**attrs, "in_zp": 0}
        assert (kernel_for(op, "folded")(x, w, folded, mult, shift, **attrs) == y).all()
        return op, (x, w, folded, mult, shift), attrs, y.size * taps, "folded"
    macs = ops.macs(op, [x.shape, w.shape], [y.shape], attrs)
    return op, (x, w, bias, mult, shift), attrs, macs, "default"


def _make_a16(name):
    """make_layer's int16 form of a MAC layer: int16 x over [-32767, 32767], int8 weights, an
    int64 bias, 16-bit multipliers (quantize_multiplier16), zero points 0, the int16 range."""
    op, xs, ws, kw, _ = LAYERS[name[:-4]]
    rng = _rng(name)
    x = rng.integers(-32767, 32768, size=xs).astype(np.int16)
    w = _s8(rng, ws, -127, 127)
    cout = ws[-1] if op == "depthwise_conv2d" else ws[0]
    taps = w.size // cout
    bias = rng.integers(-2**22, 2**22, size=cout).astype(np.int64)
    real = 8000.0 / (math.sqrt(taps) * 18918 * 73) * rng.uniform(0.5, 2.0, size=cout)
    mult, shift = (np.array(v, np.int32) for v in zip(*map(quant.quantize_multiplier16, real)))
    attrs = dict(in_zp=0, out_zp=0, act_min=-32767, act_max=32767)
    if op != "fully_connected":
        s, p = kw.get("stride", (1, 1)), kw.get("pads", (0, 0, 0, 0))
        attrs.update(stride_h=s[0], stride_w=s[1], dilation_h=1, dilation_w=1, pad_top=p[0],
                     pad_left=p[1], pad_bottom=p[2], pad_right=p[3])
        attrs.update(depth_multiplier=1) if op == "depthwise_conv2d" else attrs.update(groups=1)
    y = kernel_for(op)(x, w, bias, mult, shift, **attrs)
    macs = ops.macs(op, [x.shape, w.shape], [y.shape], attrs)
    return op, (x, w, bias, mult, shift), attrs, macs, "default"


def case_bytes(op_name, inputs, attrs, variant="default") -> bytes:
    """A run_kernel case file (format: tests/c/kernels/run_kernel.c), expected = reference."""
    op = ops.get(op_name)
    y = kernel_for(op_name, variant)(*inputs, **attrs)
    vals = [int(attrs[a]) for a in op.attrs]
    out = struct.pack(f"<9I{len(vals)}i", 0x434B544D, 1, op.opcode, op.variants.index(variant), 0,
                      0xFFFFFFFF, len(vals), len(inputs), 1, *vals)
    for a in (*inputs, y):
        a = np.ascontiguousarray(a)
        data = a.astype(a.dtype.newbyteorder("<")).tobytes()
        dtype = {np.dtype(np.int8): 0, np.dtype(np.uint8): 1, np.dtype(np.int16): 2,
                 np.dtype(np.int64): 4}.get(a.dtype, 3)
        shape = list(a.shape) + [0] * (6 - a.ndim)
        out += struct.pack("<2I6Ii2I", dtype, a.ndim, *shape, 0, 0, len(data))
        out += data + b"\0" * (-len(data) % 4)
    return out


def kernel_sources():
    return sorted({s for k in ck.KERNELS.values() for s in k.sources}) + [ck.ALL_TABLE_SOURCE]


def measure(names, cpus=CPUS, opt="-O3", workdir=None) -> dict:
    """{(layer, cpu): instructions}; raises when a kernel disagrees with the reference."""
    with tempfile.TemporaryDirectory(prefix="mt-bench-kernels-") as tmp:
        work = Path(workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        for name in names:
            op, inputs, attrs, _, variant = make_layer(name)
            (work / f"{name}.mtkc").write_bytes(case_bytes(op, inputs, attrs, variant))
        (work / "cases.lst").write_text("".join(f"{n}.mtkc\n" for n in names))
        counts = {}
        for cpu in cpus:
            board = BOARD_OF[cpu]
            srcs = [RUNNER_DIR / "run_kernel.c", RUNNER_DIR / "rk_io_board.c", *kernel_sources()]
            elf = toolchain.build_elf(srcs, [*ck.INCLUDE_DIRS, RUNNER_DIR], board, cpu,
                                   work / f"bench_{cpu}.elf", opt=opt)
            # raises (with the runner's console) when a kernel disagrees with the reference
            c = exact_counts(elf, board, ["@cases.lst"], cwd=work, begin_symbol="rk_kernel_begin",
                             end_symbol="rk_kernel_end", total_symbol=None, timeout=600)
            per_call = [c["per_op"][k] for k in sorted(c["per_op"])]
            if len(per_call) != len(names) or c.get("unmatched"):
                raise RuntimeError(f"{cpu}: {len(per_call)} kernel calls counted for "
                                   f"{len(names)} layers ({c.get('unmatched')} unmatched)")
            counts.update({(name, cpu): n for name, n in zip(names, per_call)})
    return counts


def print_table(counts, names, cpus) -> None:
    print(f"{'layer':<20} {'cpu':<11} {'ours':>10} {'CMSIS-NN':>10} {'ratio':>6} {'instr/MAC':>9}")
    for name in names:
        macs = make_layer(name)[3]
        cmsis = LAYERS[name][4] if name in LAYERS else None
        for cpu in cpus:
            ours = counts[(name, cpu)]
            ref = cmsis[CPUS.index(cpu)] if cmsis and cpu in CPUS else None
            ratio = f"{ours / ref:6.2f}" if ref else "   n/a"
            per_mac = f"{ours / macs:9.3f}" if macs else "      n/a"
            ref_s = f"{ref:>10,}" if ref else f"{'n/a':>10}"
            print(f"{name:<20} {cpu:<11} {ours:>10,} {ref_s} {ratio} {per_mac}")
    print("ratio = ours / CMSIS-NN (below 1: fewer instructions). Counts: exact (QEMU plugin), "
          "the kernel call plus ~5 instructions of call.")
    pairs = [n for n in names if n.endswith("_a16") and n[:-4] in names]
    if pairs:  # the target: an int16 MAC layer within 2x its int8 form, per core
        print(f"\n{'a16w8 layer':<20} {'cpu':<11} {'int8':>10} {'int16':>10} {'int16/int8':>10}")
    for name in pairs:
        for cpu in cpus:
            i8, i16 = counts[(name[:-4], cpu)], counts[(name, cpu)]
            print(f"{name[:-4]:<20} {cpu:<11} {i8:>10,} {i16:>10,} {i16 / i8:>9.2f}x")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpus", default=None,
                   help=f"default {','.join(CPUS)}; with --layers a16w8 cortex-m55,cortex-m33")
    p.add_argument("--opt", default="-O3")
    p.add_argument("--layers", default="all",
                   help="kws, all, attention, a16w8 (int8 and int16 rows), or layer names")
    p.add_argument("--workdir", default=None)
    a = p.parse_args(argv)
    names = GROUPS.get(a.layers) or a.layers.split(",")
    cpus = (a.cpus or (",".join(A16_CPUS) if a.layers == "a16w8" else ",".join(CPUS))).split(",")
    print_table(measure(names, cpus, a.opt, a.workdir), names, cpus)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
