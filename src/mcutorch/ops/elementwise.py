"""Element-wise ops (runtime/kernels/elementwise/): the output may be placed over an input."""
from __future__ import annotations

import math

import numpy as np

from mcutorch.ops.defs import OpDef, Source

ACT = ("act_min", "act_max")
SIGMOID = (1 / 256, -128)  # fixed output qparams (docs/numerics.md)
TANH = (1 / 128, 0)


_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])
_SELU = (1.0507009873554804934193349852946, 1.6732632423543772848170429916717)  # scale, alpha
# Giles' single-precision erfinv polynomials (w < 5 and w >= 5), refined by Newton below.
_ERFINV = ((2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
            -0.00125372503, -0.00417768164, 0.246640727, 1.50140941),
           (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
            -0.0076224613, 0.00943887047, 1.00167406, 2.83297682))


def _erfinv(v):
    """erf^-1 in float64 (±1 -> ±inf, |v| > 1 -> NaN): Giles' start, three Newton steps."""
    v = np.asarray(v, np.float64)
    out = np.where(np.abs(v) == 1, np.copysign(np.inf, v), np.nan)
    y = v[np.abs(v) < 1]
    w = -np.log((1 - y) * (1 + y))
    p = np.where(w < 5, np.polyval(_ERFINV[0], w - 2.5),
                 np.polyval(_ERFINV[1], np.sqrt(np.maximum(w, 5)) - 3))
    x = p * y
    for _ in range(3):
        x = x - (_erf(x) - y) / (2 / math.sqrt(math.pi) * np.exp(-x * x))
    out[np.abs(v) < 1] = x
    return out


def _gelu(v, approximate="none"):
    if approximate == "tanh":
        return 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))
    return 0.5 * v * (1 + _erf(v / math.sqrt(2)))


def _elu(v, alpha=1.0, scale=1.0, input_scale=1.0):
    return np.where(v > 0, scale * v, scale * alpha * np.expm1(v * input_scale))


def _logit(v, eps=None):
    v = v if eps is None else np.clip(v, eps, 1 - eps)
    return np.log(v / (1 - v))


def _round(v, decimals=0):
    if decimals >= 0:
        return np.rint(v * 10.0 ** decimals) / 10.0 ** decimals
    return np.rint(v / 10.0 ** -decimals) * 10.0 ** -decimals


def _div(v, other, rounding_mode=None):
    q = v / other
    return {None: q, "trunc": np.trunc(q), "floor": np.floor_divide(v, other)}[rounding_mode]


def _softplus(v, beta=1.0, threshold=20.0):
    return np.where(v * beta > threshold, v, np.logaddexp(0, v * beta) / beta)


def _sources(names, fn, args=(), quant="free", qparams=None, inplace=True, overload="default",
             operand="self"):
    """One Source per aten name and overload (names, overloads: space-separated), and each
    one's in-place form `name_`, for one float function."""
    return tuple(Source(f"aten.{name}{suffix}.{o}", quant, qparams, fn=fn, args=args,
                        operand=operand)
                 for name in names.split() for o in overload.split()
                 for suffix in (("", "_") if inplace else ("",)))


def _add(v, other, alpha=1):
    return v + alpha * other


def _sub(v, other, alpha=1):
    return v - alpha * other


def _mul(v, other):
    return v * other


# One 256-entry table per function of one tensor (its other arguments compile-time constants): a
# new one is one entry here (docs/adding_an_op.md). The table of `fn` is made by make_lut, which
# saturates ±inf and maps NaN (outside the function's domain) to the output zero point.
_UNARY = {  # aten name (and its in-place form) -> float64 function
    "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2,
    "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt, "rsqrt": lambda v: 1 / np.sqrt(v),
    "reciprocal": lambda v: 1 / v, "square": np.square, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh,
    "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "erf": _erf, "erfc": _erfc, "erfinv": _erfinv, "sinc": np.sinc,
    "deg2rad": np.deg2rad, "rad2deg": np.rad2deg, "abs": np.abs, "neg": np.negative,
    "sign": np.sign, "sgn": np.sign, "floor": np.floor, "ceil": np.ceil, "round": np.rint,
    "trunc": np.trunc, "frac": lambda v: v - np.trunc(v),
    "hardswish": lambda v: v * np.clip(v + 3, 0, 6) / 6,
    "hardsigmoid": lambda v: np.clip(v + 3, 0, 6) / 6, "silu": lambda v: v / (1 + np.exp(-v)),
    "mish": lambda v: v * np.tanh(np.logaddexp(0, v)),
    "selu": lambda v: _elu(v, _SELU[1], _SELU[0]),
}
LUT_SOURCES = (
    *_sources("sigmoid", lambda v: 1 / (1 + np.exp(-v)), quant="fixed", qparams=SIGMOID),
    *_sources("tanh", np.tanh, quant="fixed", qparams=TANH),
    *(s for name, fn in _UNARY.items() for s in _sources(name, fn)),
    *_sources("round", _round, ("decimals",), overload="decimals"),
    *_sources("logit", _logit, ("eps",)),
    *_sources("gelu", _gelu, ("approximate",)),
    *_sources("elu", _elu, ("alpha", "scale", "input_scale")),
    *_sources("celu", lambda v, alpha: np.maximum(v, 0) + np.minimum(0, alpha * np.expm1(
        v / alpha)), ("alpha",)),
    *_sources("leaky_relu", lambda v, negative_slope: np.where(v > 0, v, v * negative_slope),
              ("negative_slope",)),
    *_sources("threshold", lambda v, threshold, value: np.where(v > threshold, v, value),
              ("threshold", "value")),
    *_sources("softplus", _softplus, ("beta", "threshold"), inplace=False),
    *_sources("hardshrink", lambda v, lambd: np.where(np.abs(v) > lambd, v, 0), ("lambd",),
              inplace=False),
    *_sources("softshrink", lambda v, lambd: np.where(v > lambd, v - lambd, np.where(
        v < -lambd, v + lambd, 0)), ("lambd",), inplace=False),
    *_sources("log_sigmoid", lambda v: -np.logaddexp(0, -v), inplace=False),
    # a tensor and a constant scalar (x - 2, 1 - x, x / 3, x ** 2, 2 ** x; x + 1 and x * 0.5
    # are the add/mul sources, their fn below; x - y of two tensors is refused)
    *_sources("pow", lambda v, exponent: np.power(v, exponent), ("exponent",),
              overload="Tensor_Scalar", inplace=False),
    *_sources("pow_", lambda v, exponent: np.power(v, exponent), ("exponent",),
              overload="Scalar", inplace=False),  # x.pow_(2)
    *_sources("pow", lambda v, self: np.power(self, v), ("self",), overload="Scalar",
              inplace=False, operand="exponent"),  # 2 ** x
    *_sources("add", _add, ("other", "alpha"), overload="Scalar"),
    *_sources("sub", _sub, ("other", "alpha"), overload="Scalar"),
    *_sources("rsub", lambda v, other, alpha: other - alpha * v, ("other", "alpha"),
              overload="Scalar", inplace=False),
    *_sources("mul", _mul, ("other",), overload="Scalar"),
    *_sources("div true_divide", _div, ("other",), overload="Scalar"),
    *_sources("div", _div, ("other", "rounding_mode"), overload="Tensor_mode Scalar_mode"),
    *_sources("fmod", lambda v, other: np.fmod(v, other), ("other",), overload="Scalar"),
    *_sources("remainder", lambda v, other: np.remainder(v, other), ("other",),
              overload="Scalar"),
)
# compare's kinds, in the order of its `kind` attribute (aten names)
COMPARE_KINDS = ("eq", "ne", "gt", "ge", "lt", "le")
COMPARE_ATTRS = ("kind", "a_zp", "a_mult", "a_shift", "b_zp", "b_mult", "b_shift")
WHERE_ATTRS = ("a_zp", "a_mult", "a_shift", "b_zp", "b_mult", "b_shift", "out_zp")
ACTIVATION_SOURCES = tuple(Source(f"aten.{name}", "activation") for name in (
    "relu.default", "relu_.default", "relu6.default", "hardtanh.default", "hardtanh_.default",
    "clamp.default"))

A16 = (("int8", "int8"), ("int16", "int16"))  # two int16 operands (a16w8, format 1.5)


def _c16(op: str) -> dict:
    """The C files of add, sub, mul: the int8 kernel and the int16 forms it dispatches to."""
    return {"default": (f"elementwise/mt_{op}_s8.c", "elementwise/mt_binary_s16.c")}


OPS = (
    OpDef("add", 3, ("a", "b"), ("y",),
          ("a_zp", "a_mult", "a_shift", "b_zp", "b_mult", "b_shift",
           "out_zp", "out_mult", "out_shift", *ACT), family="elementwise",
          sources=_sources("add", _add, ("other", "alpha"), "binary", overload="Tensor"),
          fusable=True, alias=("inplace",), c_sources=_c16("add"), dtypes=A16,
          doc="TOSA-style: RESCALE both to int32, ADD, RESCALE to int8"),
    OpDef("mul", 4, ("a", "b"), ("y",), ("a_zp", "b_zp", "out_zp", "mult", "shift", *ACT),
          family="elementwise",
          sources=_sources("mul", _mul, ("other",), "binary", overload="Tensor"),
          fusable=True, alias=("inplace",), c_sources=_c16("mul"), dtypes=A16),
    OpDef("clamp", 7, ("x",), ("y",), ACT, family="elementwise", sources=ACTIVATION_SOURCES,
          qparams="shared", alias=("inplace",),
          doc="a standalone ReLU/ReLU6/clamp (lifted as a rescale when its qparams change)"),
    OpDef("lut", 8, ("x", "table"), ("y",), (), {"table": "int8[256] indexed by x + 128; "
                                                  "int16[513] interpolated for an int16 x"},
          family="elementwise", sources=LUT_SOURCES, alias=("inplace",),
          dtypes=(("int8", "int8"), ("int16", "int16")),  # int16: TOSA TABLE's (format 1.6)
          doc="sigmoid, tanh, hardswish, ...: one 256-entry table made at compile time"),
    OpDef("rescale", 9, ("x",), ("y",), ("in_zp", "out_zp", "mult", "shift", *ACT),
          family="elementwise", fusable=True, alias=("inplace",),
          dtypes=tuple((a, b) for a in ("int8", "int16") for b in ("int8", "int16")),
          doc="new qparams, int8 or int16 (since 1.5) on either side"),
    OpDef("maximum", 16, ("a", "b"), ("y",), ACT, family="elementwise",
          sources=(Source("aten.maximum.default", "shared"),), qparams="shared", fusable=True,
          alias=("inplace",), since=2, doc="y = clamp(max(a, b)); a, b and y share qparams"),
    OpDef("minimum", 17, ("a", "b"), ("y",), ACT, family="elementwise",
          sources=(Source("aten.minimum.default", "shared"),), qparams="shared", fusable=True,
          alias=("inplace",), since=2, doc="y = clamp(min(a, b)); a, b and y share qparams"),
    OpDef("sub", 26, ("a", "b"), ("y",),
          ("a_zp", "a_mult", "a_shift", "b_zp", "b_mult", "b_shift",
           "out_zp", "out_mult", "out_shift", *ACT), family="elementwise",
          sources=(*_sources("sub", _sub, ("other", "alpha"), "binary", overload="Tensor"),
                   Source("aten.rsub.Tensor", "binary")),  # rsub(y, x) = x - alpha * y
          fusable=True, alias=("inplace",), since=3, c_sources=_c16("sub"), dtypes=A16,
          doc="a - b as add's sequence with SUB: RESCALE both to int32, SUB, RESCALE to int8"),
    OpDef("div", 27, ("a", "b"), ("y",), ("a_zp", "b_zp", "out_zp", "mult", "shift", *ACT),
          family="elementwise",
          sources=_sources("div true_divide", _div, ("other",), "binary", overload="Tensor"),
          fusable=True, alias=("inplace",), since=3,
          tosa="div: TOSA 1.0 INTDIV divides int32 truncating toward zero; the definition "
               "divides the 40-bit (a - a_zp) * mult and rounds half away from zero",
          doc="a / b: round((a - a_zp) * mult / (b - b_zp)) then rq's shift; b = b_zp gives "
              "127 / -128 / out_zp by the sign of a - a_zp"),
    OpDef("compare", 28, ("a", "b"), ("y",), COMPARE_ATTRS, family="elementwise",
          sources=tuple(Source(f"aten.{k}.{o}", "compare") for k in COMPARE_KINDS
                        for o in ("Tensor", "Scalar")),
          alias=("inplace",), since=4, dtypes=(("int8", "uint8"),),
          doc="y = (sa (a - a_zp) KIND sb (b - b_zp)) as a uint8 0/1 mask, decided exactly in "
              "int64 from the scales' integer ratio; a constant scalar side is an int8 "
              "threshold on a's codes"),
    OpDef("where", 29, ("mask", "a", "b"), ("y",), WHERE_ATTRS, family="elementwise",
          sources=(Source("aten.where.self", "select"), Source("aten.where.ScalarOther", "select"),
                   Source("aten.where.ScalarSelf", "select"),
                   Source("aten.masked_fill.Scalar", "select")),
          alias=("inplace",), since=4, dtypes=(("int8", "int8"), ("int16", "int16")),
          doc="y = mask ? rescale(a) : rescale(b) into y's qparams (numpy broadcasting of all "
              "three); a scalar operand is an int8 constant in y's qparams"),
)
