"""resize (nn.Upsample / F.interpolate: nearest, nearest-exact, bilinear and 1-D linear, with
align_corners, a scale factor or a size): the definition against PyTorch on the int8 values, the
TOSA lowering on the reference model (and the reason where TOSA 1.0 cannot express the
geometry), the Ethos-U55/U85 placement Vela 5.2 gives, refusals before calibration, and end to end
from a U-Net-style decoder and a YOLO-style neck against PyTorch's fake-quant model, with the
host C runtime and the emulated M55 equal to the reference. The C kernel's cases (every mode and
geometry below, channel counts around the MVE width, clamps, bad arguments) run with the other
kernels in test_kernels_c.py on the host (ASan + UBSan) and on every emulated board."""
from __future__ import annotations

import numpy as np
import needs
import pytest
import torch
from torch import nn

needs.module("tosa_serializer")
needs.module("tosa_reference_model")
needs.module("ethosu.vela")

import mcutorch  # noqa: E402
from mcutorch.backends import ethos_u, tosa  # noqa: E402
from mcutorch.backends.ethos_u.vela import VelaError, compile_tosa, vela_config  # noqa: E402
from mcutorch.backends.tosa import rules as tosa_rules  # noqa: E402
from mcutorch.compare import layer_by_layer  # noqa: E402
from mcutorch.compiler import build_graph  # noqa: E402
from mcutorch.device import crt  # noqa: E402
from mcutorch.errors import UnsupportedOpError  # noqa: E402
from mcutorch.ir import Graph, Node, Tensor  # noqa: E402
from mcutorch.quant import quantize_multiplier  # noqa: E402
from mcutorch.ref import KERNELS  # noqa: E402
from mcutorch.ref.pool import resize_axis  # noqa: E402

F = nn.functional
U55, U85 = "cortex-m55+ethos-u55-128", "cortex-m55+ethos-u85-256"
MODES = [("nearest", False), ("nearest-exact", False), ("bilinear", False), ("bilinear", True)]
GEOMETRY = [  # (H, W), scale factor or output size
    ((7, 7), 2.0), ((7, 5), 1.5), ((4, 6), 3.0), ((8, 9), 0.5), ((7, 7), (12, 12)),
    ((1, 1), 2.0), ((5, 9), (3, 4)), ((10, 10), (6, 6)), ((3, 8), (5, 17)),
]


def _attrs(hw, out_hw, mode, align, scale, act=(-128, 127)):
    """The program attributes lift + requant give (ref/pool.py resize_axis per axis)."""
    geo = "linear" if mode == "bilinear" else mode
    (yn, yd, yo, yb), (xn, xd, xo, xb) = (resize_axis(s, o, geo, align, scale)
                                          for s, o in zip(hw, out_hw))
    mult, shift = quantize_multiplier(1.0 / (yn * xn)) if geo == "linear" else (0, 0)
    return dict(mode=int(geo == "linear"), scale_y_n=yn, scale_y_d=yd, offset_y=yo, border_y=yb,
                scale_x_n=xn, scale_x_d=xd, offset_x=xo, border_x=xb, mult=mult, shift=shift,
                act_min=act[0], act_max=act[1])


def _torch(x: np.ndarray, mode, align, size_or_scale) -> np.ndarray:
    """F.interpolate on the int8 values as floats (NHWC in and out)."""
    t = torch.tensor(x.astype(np.float32)).permute(0, 3, 1, 2)
    kw = {"size": size_or_scale} if isinstance(size_or_scale, tuple) else {
        "scale_factor": size_or_scale}
    if mode == "bilinear":
        kw["align_corners"] = align
    return F.interpolate(t, mode=mode, **kw).permute(0, 2, 3, 1).numpy()


def _case(hw, size_or_scale, mode, align, seed=0):
    x = np.random.default_rng(seed).integers(-128, 128, (2, *hw, 5), dtype=np.int8)
    want = _torch(x, mode, align, size_or_scale)
    scale = None if isinstance(size_or_scale, tuple) else size_or_scale
    return x, want, _attrs(hw, want.shape[1:3], mode, align, scale)


# ----------------------------------------------------------------------------- definition

@pytest.mark.parametrize("mode,align", MODES, ids=lambda v: str(v))
@pytest.mark.parametrize("hw,size_or_scale", GEOMETRY, ids=str)
def test_definition_against_torch(hw, size_or_scale, mode, align):
    """On int8 values (the shared qparams make real and quantized steps equal): nearest picks
    PyTorch's pixels exactly; bilinear is PyTorch's value rounded, within 1 LSB (ties round half
    up here, half to even in PyTorch, and PyTorch's float32 weights differ below 2^-20)."""
    x, want, attrs = _case(hw, size_or_scale, mode, align)
    got = KERNELS["resize"](x, **attrs).astype(np.int64)
    diff = np.abs(got - np.clip(np.round(want), -128, 127))
    if mode == "bilinear":
        assert diff.max() <= 1
        assert np.all(np.abs(got - want) <= 0.5 + 1e-4)  # the real value, rounded
    else:
        assert diff.max() == 0


@pytest.mark.parametrize("mode,align", [("nearest", False), ("linear", False), ("linear", True)])
def test_one_d_is_two_d_with_h1(mode, align):
    x = np.random.default_rng(1).integers(-128, 128, (1, 1, 9, 4), dtype=np.int8)
    t = torch.tensor(x[:, 0].astype(np.float32)).permute(0, 2, 1)
    kw = {"align_corners": align} if mode == "linear" else {}
    want = F.interpolate(t, scale_factor=2.5, mode=mode, **kw).permute(0, 2, 1).numpy()[:, None]
    attrs = _attrs((1, 9), (1, want.shape[2]), "bilinear" if mode == "linear" else mode,
                   align, 2.5)
    got = KERNELS["resize"](x, **attrs).astype(np.int64)
    assert np.abs(got - np.round(want)).max() <= (1 if mode == "linear" else 0)


def test_bilinear_weights_and_clamp():
    """A 2x2 input doubled with align_corners: the middle is the exact mean; the clamp applies."""
    x = np.array([[[[0], [100]], [[-100], [20]]]], np.int8)
    attrs = _attrs((2, 2), (3, 3), "bilinear", True, None)
    y = KERNELS["resize"](x, **attrs)[0, :, :, 0]
    assert y.tolist() == [[0, 50, 100], [-50, 5, 60], [-100, -40, 20]]
    relu = KERNELS["resize"](x, **{**attrs, "act_min": 0})[0, :, :, 0]
    assert relu.min() == 0 and relu.max() == 100


@pytest.mark.parametrize("bad", [dict(mode=2), dict(scale_y_n=0), dict(scale_x_d=0),
                                 dict(border_y=2), dict(shift=1), dict(act_min=5, act_max=4),
                                 dict(mult=(1 << 31) - 1, shift=2)], ids=str)
def test_definition_refuses_outside_its_domain(bad):
    x, _, attrs = _case((4, 4), 2.0, "bilinear", False)
    with pytest.raises(ValueError):
        KERNELS["resize"](x, **{**attrs, **bad})


# ----------------------------------------------------------------------------- TOSA

def _graph(x_shape, attrs) -> Graph:
    y = KERNELS["resize"](np.zeros(x_shape, np.int8), **attrs)
    xt, yt = Tensor("x", x_shape), Tensor("y", y.shape)
    return Graph([Node("resize", [xt], [yt], dict(attrs))], [xt], [yt])


@pytest.mark.parametrize("mode,align", MODES, ids=lambda v: str(v))
@pytest.mark.parametrize("hw,size_or_scale", GEOMETRY, ids=str)
def test_tosa_reference_model(hw, size_or_scale, mode, align):
    """RESIZE (+ RESCALE for bilinear) equals the reference bit for bit wherever TOSA's bounds
    hold; elsewhere the rule says why (align_corners on a size-1 axis)."""
    x, _, attrs = _case(hw, size_or_scale, mode, align)
    graph = _graph(x.shape, attrs)
    ok, why = tosa.tosa_support(graph.nodes[0])
    if hw == (1, 1) and align:
        assert not ok and "border" in why
        return
    assert ok, why
    rng = np.random.default_rng(3)
    for arrays in ([np.full(x.shape, -128, np.int8)], [np.full(x.shape, 127, np.int8)], [x],
                   [rng.integers(-128, 128, x.shape, dtype=np.int8)]):
        tosa.verify(graph, None, arrays)


def test_tosa_with_fused_clamp():
    for mode in ("nearest", "bilinear"):
        x, _, attrs = _case((5, 5), 2.0, mode, False)
        graph = _graph(x.shape, {**attrs, "act_min": -10, "act_max": 40})
        tosa.verify(graph, None, [x])


def test_tosa_bounds_give_reasons():
    attrs = _attrs((40, 40), (2, 2), "nearest", False, None)  # shrink by 20: d >= 16 n
    assert "16" in tosa_rules.check_resize(_graph((1, 40, 40, 3), attrs).nodes[0])
    assert tosa_rules.check_resize(_graph((1, 4, 4, 3), _attrs((4, 4), (8, 8), "bilinear", True,
                                                               None)).nodes[0]) == ""


# ----------------------------------------------------------------------------- Ethos-U

def _vela(attrs, x_shape, npu) -> str:
    graph = _graph(x_shape, attrs)
    try:
        compile_tosa(tosa.lower_graph(graph, graph.nodes).flatbuffer, vela_config(npu))
        return ""
    except VelaError as e:
        return str(e)


@pytest.mark.parametrize("scale,on_u55", [(2.0, True), (4.0, True), (8.0, True), (16.0, False),
                                          (3.0, False)])
def test_u55_resize_limit_both_sides(scale, on_u55):
    """The U55 rule (constraints.py) agrees with Vela 5.2 on both sides of its limit; the U85
    takes every one."""
    attrs = _attrs((3, 3), (int(3 * scale),) * 2, "nearest", False, scale)
    node = _graph((1, 3, 3, 8), attrs).nodes[0]
    assert (ethos_u.npu_check(node, "ethos-u55-128") == "") == on_u55
    assert (_vela(attrs, (1, 3, 3, 8), "ethos-u55-128") == "") == on_u55
    assert ethos_u.npu_check(node, "ethos-u85-256") == ""
    assert _vela(attrs, (1, 3, 3, 8), "ethos-u85-256") == ""


def test_u55_refuses_bilinear():
    attrs = _attrs((4, 4), (8, 8), "bilinear", False, 2.0)
    node = _graph((1, 4, 4, 8), attrs).nodes[0]
    assert "bilinear" in ethos_u.npu_check(node, "ethos-u55-128")
    assert "Resize" in _vela(attrs, (1, 4, 4, 8), "ethos-u55-128")
    assert _vela(attrs, (1, 4, 4, 8), "ethos-u85-256") == ""


# ----------------------------------------------------------------------------- end to end

class UNetDecoder(nn.Module):
    """Encoder (two strided convs) and a decoder: bilinear x2 upsample, concat with the skip,
    conv; then an upsample to a size (7 -> 12 style fractional) with align_corners."""

    def __init__(self):
        super().__init__()
        self.e1 = nn.Conv2d(3, 8, 3, padding=1)
        self.e2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.d1 = nn.Conv2d(24, 8, 3, padding=1)
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
        self.head = nn.Conv2d(8, 4, 1)

    def forward(self, x):
        skip = torch.relu(self.e1(x))
        z = torch.relu(self.e2(skip))
        z = torch.relu(self.d1(torch.cat([self.up(z), skip], dim=1)))
        z = F.interpolate(self.head(z), size=(19, 19), mode="bilinear", align_corners=True)
        return z


class YoloNeck(nn.Module):
    """A strided backbone, a nearest x2 upsample of the deep feature concatenated with the
    shallow one (an FPN / YOLO neck), a 1-D nearest-exact upsample of pooled rows."""

    def __init__(self):
        super().__init__()
        self.b1 = nn.Conv2d(3, 8, 3, padding=1)
        self.b2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.lat = nn.Conv2d(16, 8, 1)
        self.out = nn.Conv2d(16, 6, 3, padding=1)

    def forward(self, x):
        p3 = F.relu(self.b1(x))
        p4 = F.relu(self.b2(p3))
        up = F.interpolate(self.lat(p4), scale_factor=2, mode="nearest")
        y = self.out(torch.cat([up, p3], dim=1))
        rows = F.interpolate(y.mean(dim=3), scale_factor=1.5, mode="nearest-exact")
        return y, rows


def _quantized(model_cls, hw, seed):
    torch.manual_seed(seed)
    model = model_cls().eval()
    cal = [torch.randn(1, 3, *hw) for _ in range(8)]
    return mcutorch.quantize(model, (cal[0],), calibration=cal), cal


@pytest.mark.parametrize("model_cls,hw", [(UNetDecoder, (10, 10)), (YoloNeck, (8, 8))],
                         ids=["unet_decoder", "yolo_neck"])
def test_end_to_end_against_fake_quant(model_cls, hw):
    """>= 99 % of the outputs within 1 LSB of PyTorch's fake-quant model (layer by layer too);
    the host C runtime equals the Python reference."""
    qmodel, cal = _quantized(model_cls, hw, 0)
    program = mcutorch.compile(qmodel, (cal[0],))
    assert sum(op.name == "resize" for op in program.program.ops) == 2
    for x in cal[-2:]:
        ours, theirs = program.run(x), qmodel(x)
        ours, theirs = (ours if isinstance(ours, tuple) else (ours,),
                        theirs if isinstance(theirs, tuple) else (theirs,))
        for k, (a, b) in enumerate(zip(ours, theirs)):
            t = program.program.tensors[program.program.outputs[k]]
            diff = np.abs(np.round(a.numpy() / t.scale) - np.round(b.detach().numpy() / t.scale))
            assert (diff <= 1).mean() >= 0.99, (k, (diff <= 1).mean())
    report = layer_by_layer(qmodel, (cal[1],))
    assert "resize" in {r["op"] for r in report}
    assert all(r["within_1lsb"] >= 0.99 for r in report), report
    x8 = program.quantize_inputs([cal[1]])
    want = program.run_int8(x8)
    got = crt.run_host(program.program, x8)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    tosa.verify_program_graph(build_graph(qmodel))


def test_yolo_neck_on_the_npus():
    """U55: the nearest x2 upsample runs in the delegate, the 1-D nearest-exact x1.5 stays on the
    CPU with the reason; U85: both resizes on the NPU. Every program gives the CPU one's
    integers."""
    qmodel, cal = _quantized(YoloNeck, (8, 8), 0)
    cpu = mcutorch.compile(qmodel, (cal[0],))
    x8 = cpu.quantize_inputs([cal[1]])
    want = cpu.run_int8(x8)
    for target, on_npu in ((U55, 1), (U85, 2)):
        program = mcutorch.compile(qmodel, (cal[0],), target=target, board="mps3-an547")
        rows = [r for r in program.program.metadata["placement"] if r["op"] == "resize"]
        assert sum(r["on"] == "NPU" for r in rows) == on_npu, rows
        if target == U55:
            assert "U85 takes it" in next(r["why"] for r in rows if r["on"] == "CPU")
        for got in (program.run_int8(x8), crt.run_host(program.program, x8)):
            assert all(np.array_equal(a, b) for a, b in zip(got, want))


@pytest.mark.qemu
def test_emulated_m55_runs_the_unet_decoder():
    from mcutorch.device import firmware

    qmodel, cal = _quantized(UNetDecoder, (10, 10), 0)
    program = mcutorch.compile(qmodel, (cal[0],), target="cortex-m55", board="mps3-an547")
    x8 = program.quantize_inputs([cal[1]])
    run = firmware.run(program.program, x8, "mps3-an547")
    assert all(np.array_equal(a, b) for a, b in zip(run.outputs, program.run_int8(x8)))


@pytest.mark.parametrize("fn", [
    lambda x: F.interpolate(x, scale_factor=2, mode="bicubic"),
    lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", antialias=True),
    lambda x: F.interpolate(x, scale_factor=0.123456789, mode="nearest"),
], ids=["bicubic", "antialias", "irrational_scale"])
def test_unsupported_forms_are_refused_before_calibration(fn):
    class M(nn.Module):
        def forward(self, x):
            return fn(x)

    with pytest.raises(UnsupportedOpError, match=r"test_resize\.py:\d+"):
        mcutorch.quantize(M(), (torch.randn(1, 2, 9, 9),))
