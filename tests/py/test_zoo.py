"""The model zoo (mcutorch.models.zoo): every model builds, runs in float with its stated output
shapes, is deterministic per seed, exports with torch.export, and its parameter and MAC counts
match the published figures where a paper gives them."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from mcutorch.models import MODELS, ZOO, build, cost, example_input, published_check, zoo_cost
from mcutorch.models.counting import count_macs

NAMES = list(ZOO)
# our count in the paper's configuration / the paper's figure: papers round to two digits
# (2.5 M, 56 M, 0.39 B), so 5 % either way
PUBLISHED_RATIO = (0.95, 1.05)


def outputs(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    with torch.no_grad():
        y = model(x)
    return y if isinstance(y, tuple) else (y,)


@pytest.mark.parametrize("name", NAMES)
def test_builds_and_runs_with_the_stated_shapes(name):
    entry = ZOO[name]
    model = build(name).eval()
    assert MODELS[name] is entry.builder
    assert model.input_shape == entry.input_shape
    x = example_input(model)
    assert x.shape == entry.input_shape
    ys = outputs(model, x)
    assert tuple(tuple(y.shape) for y in ys) == entry.output_shapes
    assert all(torch.isfinite(y).all() and y.std() > 0 for y in ys)
    batch = outputs(model, example_input(model, batch=2))
    assert tuple(tuple(y.shape) for y in batch) == tuple((2, *s[1:]) for s in entry.output_shapes)


@pytest.mark.parametrize("name", NAMES)
def test_deterministic_with_a_seed(name):
    before = torch.random.get_rng_state()
    a, b, c = build(name, seed=3), build(name, seed=3), build(name, seed=4)
    assert torch.equal(torch.random.get_rng_state(), before)  # the caller's RNG is untouched
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert any(not torch.equal(sa[k], sc[k]) for k in sa if sa[k].is_floating_point())
    x = example_input(a)
    for ya, yb in zip(outputs(a.eval(), x), outputs(b.eval(), x)):
        assert torch.equal(ya, yb)


@pytest.mark.parametrize("name", NAMES)
def test_exports(name):
    model = build(name).eval()
    x = example_input(model)
    ep = torch.export.export(model, (x,))
    got = ep.module()(x)
    got = got if isinstance(got, tuple) else (got,)
    for g, want in zip(got, outputs(model, x)):
        torch.testing.assert_close(g, want)


@pytest.mark.parametrize("name", [n for n in NAMES if ZOO[n].published])
def test_params_and_macs_match_the_published_figures(name):
    ours, pub = published_check(name)
    print(f"\n{name} in the paper's configuration {pub.kwargs}: {ours.params:,} params "
          f"(published {pub.params:,.0f}), {ours.macs:,} MACs (published {pub.macs:,.0f})")
    lo, hi = PUBLISHED_RATIO
    assert lo <= ours.params / pub.params <= hi
    assert lo <= ours.macs / pub.macs <= hi
    assert pub.source and pub.scale


@pytest.mark.parametrize("name", NAMES)
def test_catalog_configuration_is_counted(name):
    c = zoo_cost(name)
    model = build(name)
    assert c.params == sum(p.numel() for p in model.parameters()) > 0
    assert c.macs > c.params // 4  # every weight is used at least once per pixel it sees
    pub = ZOO[name].published
    if pub is not None and "resolution" in pub.kwargs:
        # a smaller input (and fewer classes) costs less than the paper's configuration
        assert c.macs < pub.macs and c.params <= pub.params


def test_docstring_examples():
    import doctest
    import importlib

    for part in ("counting", "dense", "temporal", "vision", "zoo"):
        mod = importlib.import_module(f"mcutorch.models.{part}")
        failed, tried = doctest.testmod(mod)
        assert failed == 0 and tried > 0, mod.__name__


def test_mac_counting_rules():
    """Convs: outputs x (in/groups) x kernel; transposed convs: inputs x (out/groups) x kernel;
    linears: outputs x in_features; counted per sample."""
    x2 = torch.zeros(2, 4, 8, 8)
    assert count_macs(nn.Conv2d(4, 6, 3, padding=1), x2) == 8 * 8 * 6 * 4 * 9
    assert count_macs(nn.Conv2d(4, 4, 5, 2, 2, groups=4), x2) == 4 * 4 * 4 * 25
    assert count_macs(nn.ConvTranspose2d(4, 3, 2, 2), x2) == 8 * 8 * 4 * 3 * 4
    assert count_macs(nn.Conv1d(4, 5, 3), torch.zeros(1, 4, 10)) == 8 * 5 * 4 * 3
    assert count_macs(nn.Sequential(nn.Flatten(), nn.Linear(256, 7)), x2) == 256 * 7
    assert count_macs(nn.Sequential(nn.ReLU(), nn.MaxPool2d(2), nn.BatchNorm2d(4)), x2) == 0
    reused = nn.Linear(3, 3)  # a module called twice counts twice
    assert count_macs(nn.Sequential(reused, reused), torch.zeros(1, 3)) == 18
    c = cost(nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2)), torch.zeros(1, 1, 5, 5))
    assert c.params == 2 * 9 + 2 + 4 and c.macs == 9 * 2 * 9


# ----------------------------------------------------------------------------- compiled

# the zoo models whose every op mcutorch lowers today; the others are refused before calibration
# (tc_resnet8, har_cnn: aten.conv1d; unet, conv_autoencoder: aten.conv_transpose2d; tiny_yolo:
# aten.upsample_nearest2d) and join this list as those ops land
COMPILES = ["squeezenet1_1", "shufflenet_v2", "mobilenet_v3_small", "mbconv_net", "blazeface"]
SMOKE = "squeezenet1_1"  # the smallest program (38 ops): compiled by the fast suite too


def compile_zoo(name: str):
    import mcutorch

    model = build(name).eval()
    cal = [example_input(model, seed=i) for i in range(4)]
    qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal)
    return model, qmodel, mcutorch.compile(qmodel, (cal[0],), target="cortex-m55", name=name)


def check_compiled(name: str) -> None:
    """Host C runtime == Python reference bit for bit; every layer within 1 LSB of PyTorch's
    fake-quant on >= 99 % of its elements; end to end >= 99 % of the output elements; the
    compiled program's MACs (the op registry's count) == ours (hooks on the float model)."""
    import numpy as np

    from mcutorch.compare import layer_by_layer
    from mcutorch.device import crt
    from mcutorch.report import describe

    model, qmodel, program = compile_zoo(name)
    assert len(program.program.outputs) == len(ZOO[name].output_shapes)
    assert describe(program.program)["total_macs"] == zoo_cost(name).macs
    for seed in (99, 100):
        x = example_input(model, seed=seed)
        xs = program.quantize_inputs([x])
        want = program.run_int8(xs)
        got = crt.run_host(program.program, xs)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    rows = layer_by_layer(qmodel, (x,))
    assert rows and min(r["within_1lsb"] for r in rows) >= 0.99, rows
    ours = program.run(x)
    ours = ours if isinstance(ours, (tuple, list)) else (ours,)
    fq = outputs(qmodel, x)
    close = total = 0
    for index, o, f in zip(program.program.outputs, ours, fq):
        scale = program.program.tensors[index].scale
        diff = (torch.round(torch.as_tensor(o) / scale) - torch.round(f / scale)).abs()
        close, total = close + int((diff <= 1).sum()), total + diff.numel()
    print(f"\n{name}: {len(program.program.ops)} ops, end to end {close / total:.4f} of "
          f"{total} output elements within 1 LSB of fake-quant")
    assert close / total >= 0.99


def test_smoke_model_compiles_bit_exact():
    check_compiled(SMOKE)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in COMPILES if n != SMOKE])
def test_compiles_bit_exact(name):
    check_compiled(name)
