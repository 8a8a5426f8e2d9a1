"""Element-wise functions as tables: every float function of one int8 tensor (exp, log, GELU,
x * 0.5, 1 - x, x ** 2, ...) is a `lut` Source of the registry (ops/elementwise.py). Each Source's
float64 function against its aten op, every function end to end against PyTorch's fake-quant
model, out-of-domain inputs (±inf saturates, NaN -> the zero point) and their calibration."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

import mcutorch
from mcutorch import ops
from mcutorch.compare import layer_by_layer
from mcutorch.errors import QuantizeError, UnsupportedOpError

F = nn.functional
A = torch.ops.aten


def _aten(name: str):
    _, op, overload = name.split(".")
    return getattr(getattr(torch.ops.aten, op), overload)


FN_SOURCES = [s for d in ops.REGISTRY for s in d.sources if s.fn is not None]
# constant arguments each Source's function is checked with (besides the schema defaults)
SAMPLE = {"other": 0.7, "alpha": 1.5, "exponent": 3, "self": 2.5, "threshold": 0.3,
          "value": -2.0, "decimals": 1, "rounding_mode": "floor", "negative_slope": 0.2,
          "lambd": 0.4, "beta": 2.0, "eps": 0.05, "approximate": "tanh", "scale": 1.2,
          "input_scale": 0.8}
GRID = np.concatenate([np.linspace(-6, 6, 241), [-1.0, -0.0, 0.0, 1.0, 1e-3, -0.999, 0.999]])


@pytest.mark.parametrize("src", FN_SOURCES, ids=lambda s: s.aten)
def test_every_function_matches_its_aten_op(src):
    """Source.fn (float64 numpy) == the aten overload in float64, defaults and SAMPLE arguments,
    NaN and ±inf where torch gives them."""
    op = _aten(src.aten)
    schema = {a.name: a for a in op._schema.arguments}
    defaults = {n: schema[n].default_value if schema[n].has_default_value() else SAMPLE[n]
                for n in src.args}  # what lift passes when the node leaves them out
    for kw in (defaults, {n: SAMPLE[n] for n in src.args}):
        want = op(**{src.operand: torch.tensor(GRID, dtype=torch.float64)}, **kw).numpy()
        with np.errstate(all="ignore"):
            got = np.asarray(src.fn(GRID.copy(), **kw), np.float64)
        assert got.shape == want.shape
        assert np.array_equal(np.isnan(got), np.isnan(want)), (kw, GRID[np.isnan(got)
                                                                        != np.isnan(want)])
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True,
                                   err_msg=str(kw))


# ----------------------------------------------------------------------------- end to end
# (name, function of v.x (model input), v.y (conv output, any real), v.p = sigmoid(y) in (0, 1),
#  v.t = tanh(y) in [-1, 1)): each keeps its inputs inside its function's domain.
FUNCTIONS = {
    "unary": [
        ("exp(input)", lambda v: torch.exp(v.x)), ("exp", lambda v: torch.exp(v.y)),
        ("exp2", lambda v: torch.exp2(v.y)), ("expm1", lambda v: torch.expm1(v.y)),
        ("log", lambda v: torch.log(v.p)), ("log2", lambda v: torch.log2(v.p)),
        ("log10", lambda v: torch.log10(v.p)), ("log1p", lambda v: torch.log1p(v.p)),
        ("sqrt", lambda v: torch.sqrt(v.p)), ("rsqrt", lambda v: torch.rsqrt(v.p)),
        ("reciprocal", lambda v: torch.reciprocal(v.p)), ("square", lambda v: torch.square(v.y)),
        ("sin", lambda v: torch.sin(v.y)), ("cos", lambda v: torch.cos(v.y)),
        ("tan", lambda v: torch.tan(v.t)), ("asin", lambda v: torch.asin(v.t)),
        ("acos", lambda v: torch.acos(v.t)), ("atan", lambda v: torch.atan(v.y)),
        ("sinh", lambda v: torch.sinh(v.y)), ("cosh", lambda v: torch.cosh(v.y)),
        ("asinh", lambda v: torch.asinh(v.y)), ("acosh", lambda v: torch.acosh(v.p * 3 + 1)),
        ("atanh", lambda v: torch.atanh(v.t)), ("erf", lambda v: torch.erf(v.y)),
        ("erfc", lambda v: torch.erfc(v.y)), ("erfinv", lambda v: torch.erfinv(v.t)),
        ("sinc", lambda v: torch.sinc(v.y)), ("deg2rad", lambda v: torch.deg2rad(v.y)),
        ("rad2deg", lambda v: torch.rad2deg(v.t)), ("abs", lambda v: torch.abs(v.y)),
        ("neg", lambda v: -v.y), ("sign", lambda v: torch.sign(v.y)),
        ("sgn", lambda v: torch.sgn(v.y)), ("sigmoid", lambda v: torch.sigmoid(v.y * 2)),
        ("tanh", lambda v: torch.tanh(v.p)),
    ],
    "activations": [
        ("floor", lambda v: torch.floor(v.y)), ("ceil", lambda v: torch.ceil(v.y)),
        ("round", lambda v: torch.round(v.y)), ("round(decimals=1)",
                                                lambda v: torch.round(v.t, decimals=1)),
        ("trunc", lambda v: torch.trunc(v.y)), ("frac", lambda v: torch.frac(v.y)),
        ("hardswish", lambda v: F.hardswish(v.y)), ("hardsigmoid", lambda v: F.hardsigmoid(v.y)),
        ("silu", lambda v: F.silu(v.y)), ("mish", lambda v: F.mish(v.y)),
        ("selu", lambda v: F.selu(v.y)), ("celu", lambda v: F.celu(v.y, 0.7)),
        ("elu", lambda v: F.elu(v.y)), ("elu(0.5)", lambda v: F.elu(v.y, 0.5)),
        ("gelu", lambda v: F.gelu(v.y)), ("gelu(tanh)", lambda v: F.gelu(v.y, approximate="tanh")),
        ("leaky_relu", lambda v: F.leaky_relu(v.y)),
        ("leaky_relu(0.2)", lambda v: F.leaky_relu(v.y, 0.2)),
        ("threshold", lambda v: F.threshold(v.y, 0.1, 2.0)),
        ("softplus", lambda v: F.softplus(v.y)),
        ("softplus(2, 1)", lambda v: F.softplus(v.y, beta=2, threshold=1)),
        ("hardshrink", lambda v: F.hardshrink(v.y)), ("softshrink", lambda v: F.softshrink(v.y)),
        ("logsigmoid", lambda v: F.logsigmoid(v.y)), ("logit", lambda v: torch.logit(v.p)),
        ("logit(eps)", lambda v: torch.logit(v.p, 0.05)),
    ],
    "scalars": [
        ("x * 0.5", lambda v: v.y * 0.5), ("0.5 * x", lambda v: 0.5 * v.y),
        ("x.mul(-3)", lambda v: v.y.mul(-3)), ("x + 1", lambda v: v.y + 1),
        ("1 + x", lambda v: 1 + v.y), ("x - 2", lambda v: v.y - 2), ("1 - x", lambda v: 1 - v.y),
        ("x / 3", lambda v: v.y / 3), ("2 / x", lambda v: 2 / v.p),
        ("x ** 2", lambda v: v.y ** 2), ("pow(x, 3)", lambda v: torch.pow(v.y, 3)),
        ("x ** 0.5", lambda v: v.p ** 0.5), ("x ** -1", lambda v: v.p ** -1),
        ("2 ** x", lambda v: 2 ** v.y), ("add(alpha)", lambda v: torch.add(v.y, 2, alpha=3)),
        ("sub(alpha)", lambda v: torch.sub(v.y, 2, alpha=0.5)),
        ("rsub(alpha)", lambda v: torch.rsub(v.y, 3, alpha=2)),
        ("div(floor)", lambda v: torch.div(v.y, 0.7, rounding_mode="floor")),
        ("div(trunc)", lambda v: torch.div(v.y, 0.7, rounding_mode="trunc")),
        ("true_divide", lambda v: torch.true_divide(v.y, 3)),
        ("fmod", lambda v: torch.fmod(v.y, 0.7)),
        ("remainder", lambda v: torch.remainder(v.y, 0.7)),
        ("add.Scalar", lambda v: A.add.Scalar(v.y, 0.5)),
        ("sub.Scalar", lambda v: A.sub.Scalar(v.y, 0.5)),
        ("mul.Scalar", lambda v: A.mul.Scalar(v.y, 0.5)),
        ("div.Scalar", lambda v: A.div.Scalar(v.y, 0.5)),
        ("div.Scalar_mode", lambda v: A.div.Scalar_mode(v.y, 0.5, rounding_mode="floor")),
        ("true_divide.Scalar", lambda v: A.true_divide.Scalar(v.y, 0.5)),
        ("relu(x * 2)", lambda v: torch.relu(v.y * 2)),  # a following clamp fuses
        # in-place forms, each on a value of its own
        ("exp_", lambda v: (v.y + 0.5).exp_()), ("silu_", lambda v: F.silu(v.y * 2, True)),
        ("hardswish_", lambda v: F.hardswish(v.y * 2, True)),
        ("sigmoid_", lambda v: (v.y * 2).sigmoid_()), ("mul_", lambda v: (v.y + 1).mul_(0.5)),
        ("add_", lambda v: (v.y * 2).add_(1)), ("pow_", lambda v: (v.y * 2).pow_(2)),
        ("sub_", lambda v: (v.y * 2).sub_(1)), ("div_", lambda v: (v.y * 2).div_(3)),
    ],
}


class Functions(nn.Module):
    """A 1x1 conv, sigmoid and tanh of it, and one output per function of the group."""

    def __init__(self, fns):
        super().__init__()
        self.conv, self.fns = nn.Conv2d(3, 4, 1), fns

    def forward(self, x):
        y = self.conv(x)
        v = SimpleNamespace(x=x, y=y, p=torch.sigmoid(y), t=torch.tanh(y))
        return tuple(fn(v) for _, fn in self.fns)


def _quantized(group: str):
    torch.manual_seed(1)
    model = Functions(FUNCTIONS[group]).eval()
    cal = [torch.randn(2, 3, 8, 8) * 1.5 for _ in range(4)]
    return mcutorch.quantize(model, (cal[0],), calibration=cal), cal


@pytest.mark.parametrize("group", FUNCTIONS)
def test_functions_end_to_end(group):
    """Every function of the group compiled to a `lut`, each output within 1 LSB of PyTorch's
    fake-quant model on >= 99 % of its elements, and each op in layer_by_layer."""
    qmodel, cal = _quantized(group)
    x = torch.randn(2, 3, 8, 8) * 1.5
    program = mcutorch.compile(qmodel, (x,))
    names = [name for name, _ in FUNCTIONS[group]]
    ops_run = [op.name for op in program.program.ops]
    assert set(ops_run) <= {"conv2d", "lut", "rescale", "clamp"}, ops_run
    assert ops_run.count("lut") >= len(names)
    ours, theirs = program.run(x), qmodel(x)
    bad = {}
    for name, k, a, b in zip(names, program.program.outputs, ours, theirs):
        t = program.program.tensors[k]
        qa, qb = (np.round(v.detach().numpy() / t.scale) + t.zero_point for v in (a, b))
        assert np.isfinite(b.detach().numpy()).all(), name  # inputs inside every domain
        share = float((np.abs(qa - qb) <= 1).mean())
        if share < 0.99:
            bad[name] = share
    assert not bad, bad
    rows = layer_by_layer(qmodel, (cal[1],))
    assert {r["op"] for r in rows} >= {"lut"}
    assert not [r for r in rows if r["within_1lsb"] < 0.99], rows


def test_every_function_source_is_compiled_end_to_end():
    """The table above reaches every lut Source (in-place forms aside) and add/mul with a
    scalar; their in-place forms are checked against torch above."""
    seen = set()
    for group in FUNCTIONS:
        model = Functions(FUNCTIONS[group]).eval()
        ep = torch.export.export(model, (torch.randn(1, 3, 4, 4),), strict=False)
        seen |= {str(n.target) for n in ep.module().graph.nodes if n.op == "call_function"}
    want = {s.aten for s in FN_SOURCES if "_." not in s.aten}
    assert want <= seen, sorted(want - seen)


# ----------------------------------------------------------------------------- domains

def test_outside_the_domain_saturates_and_nan_is_zero():
    """log of a ReLU output: log(0) = -inf saturates to -128, as PyTorch's quantize does. sqrt of
    negative values is NaN: the output zero point (0.0; PyTorch's int8 cast of NaN gives code 0).
    Both observers saw the finite values only."""

    class LogRelu(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 1)

        def forward(self, x):
            r = torch.relu(self.conv(x))
            return torch.log(r), torch.sqrt(r - 0.5)

    torch.manual_seed(2)
    model = LogRelu().eval()
    cal = [torch.randn(1, 3, 8, 8) for _ in range(3)]
    qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal)
    program = mcutorch.compile(qmodel, (cal[0],))
    log_t, sqrt_t = (program.program.tensors[k] for k in program.program.outputs)
    assert math.isfinite(log_t.scale) and math.isfinite(sqrt_t.scale)
    ours = [o.numpy() for o in program.run(cal[0])]
    theirs = [o.detach().numpy() for o in qmodel(cal[0])]
    floats = [o.detach().numpy() for o in model(cal[0])]
    q = lambda v, t: np.round(v / t.scale) + t.zero_point  # noqa: E731
    assert np.isneginf(floats[0]).any()  # log(0)
    assert np.abs(q(ours[0], log_t) - q(theirs[0], log_t)).max() <= 1
    assert (q(ours[0], log_t)[np.isneginf(floats[0])] == -128).all()
    nan = np.isnan(floats[1])
    assert nan.any() and (ours[1][nan] == 0).all()
    assert np.abs(q(ours[1], sqrt_t) - q(theirs[1], sqrt_t))[~nan].max() <= 1


def test_calibration_with_no_finite_value_is_an_error():
    class LogNeg(nn.Module):
        def forward(self, x):
            return torch.log(-torch.relu(x) - 1)  # NaN everywhere

    x = torch.randn(1, 8)
    with pytest.raises(QuantizeError, match=r"no finite value at test_lut_functions.py:\d+ "
                                            r"\(aten.log\).*domain"):
        mcutorch.quantize(LogNeg().eval(), (x,))


def test_a_tensor_where_a_constant_is_needed_is_refused_before_calibration():
    class FloorDiv(nn.Module):  # x - y and x / y of two tensors are the sub and div ops
        def forward(self, x, y):
            return torch.div(x, y, rounding_mode="floor")

    x = torch.randn(1, 8)
    with pytest.raises(UnsupportedOpError, match=r"aten.div.Tensor_mode\): its other is the "
                                                 r"tensor y;.*constant number"):
        mcutorch.quantize(FloorDiv().eval(), (x, x))


def test_add_of_two_tensors_stays_add():
    class Add(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(8, 8), nn.Linear(8, 8)

        def forward(self, x):
            return self.a(x) + self.b(x) * 0.5

    x = torch.randn(2, 8)
    program = mcutorch.compile(mcutorch.quantize(Add().eval(), (x,)), (x,))
    assert [op.name for op in program.program.ops].count("add") == 1
    assert [op.name for op in program.program.ops].count("lut") == 1


def test_erfinv_is_accurate():
    y = np.linspace(-0.999999, 0.999999, 2001)
    x = ops.elementwise._erfinv(y)
    assert np.abs(np.vectorize(math.erf)(x) - y).max() < 1e-13
