"""Recurrent layers: `lstm`, `gru`, `rnn_tanh` and `rnn_relu`, the steps of one layer and
direction as one op.

Each is defined as the composition of the existing ops the unrolled step runs
(frontend/builders/recurrent.py, docs/numerics.md "Recurrent layers"), in that order, with the
attributes of each under its prefix (ops/recurrent.py): a fused program computes the unrolled
program's integers bit for bit, every intermediate in the qparams the unrolled op had.
"""
from __future__ import annotations

import inspect

import numpy as np

from mcutorch import ops
from mcutorch.ops.recurrent import FC, GRU_ROLES, LSTM_ROLES, RNN_ROLES
from mcutorch.ref._common import as_activation, as_array, check
from mcutorch.ref.conv import fully_connected
from mcutorch.ref.elementwise import add, lut, mul, sub

OPS = {"add": add, "mul": mul, "sub": sub}
FC_NAMES = ("in_zp", "out_zp", "act_min", "act_max")


def _part(attrs: dict, prefix: str) -> dict:
    n = len(prefix)
    return {k[n:]: v for k, v in attrs.items() if k.startswith(prefix)}


def _ops(attrs: dict, roles) -> dict:
    """role -> the unrolled op of that role, bound to its attributes."""
    return {r: (lambda a, b, f=OPS[op], kw=_part(attrs, r + "_"): f(a, b, **kw))
            for r, op in roles}


def _steps(x, h0, weight, gates: int, steps: int, start: int, reverse: int):
    """Check the shared operands; the times of the steps, in run order."""
    wide = as_activation(x, "x", 3)
    check(as_activation(h0, "h0", 2) == wide, "h0: x's dtype")
    as_array(weight, np.int8, "weight", 2)
    b, t, g = x.shape
    hidden = h0.shape[1]
    check(h0.shape[0] == b and g == gates * hidden and weight.shape == (g, hidden),
          f"x {x.shape}, h0 {h0.shape} and weight {weight.shape}: not [B, T, {gates}H], [B, H] "
          f"and [{gates}H, H]")
    check(reverse in (0, 1) and 1 <= steps and 0 <= start < t
          and 0 <= (start - steps + 1 if reverse else start + steps - 1) < t,
          f"steps {steps} from start {start} (reverse {reverse}) leave the {t} time steps")
    return [start - j if reverse else start + j for j in range(steps)], hidden


def _fc(h, weight, bias, mult, shift, attrs):
    kw = dict(zip(FC_NAMES, (attrs[k] for k in FC)))
    return fully_connected(h, weight, bias, mult, shift, **kw)


def lstm(x, weight, bias, mult, shift, h0, c0, table_i, table_f, table_g, table_o, table_c, *,
         steps, start, reverse, **attrs):
    """(y, h, c): `steps` LSTM steps; y[:, k] is h at time min(times) + k."""
    # x: (B, T, 4H); weight: (4H, H) int8; h0, c0: (B, H) -> y: (B, steps, H), h, c: (B, H)
    times, hs = _steps(x, h0, weight, 4, steps, start, reverse)
    check(c0.shape == h0.shape and c0.dtype == h0.dtype, f"c0 {c0.shape}: h0's shape and dtype")
    op = _ops(attrs, LSTM_ROLES)
    h, c, ys = h0, c0, {}
    for t in times:
        a = op["x"](np.ascontiguousarray(x[:, t]), _fc(h, weight, bias, mult, shift, attrs))
        i, f, g, o = (lut(np.ascontiguousarray(a[:, k * hs:(k + 1) * hs]), tb)
                      for k, tb in enumerate((table_i, table_f, table_g, table_o)))
        c = op["c"](op["fm"](f, c), op["im"](i, g))
        h = ys[t] = op["hm"](o, lut(c, table_c))
    return np.stack([ys[t] for t in sorted(ys)], 1), h, c


def gru(x, weight, bias, mult, shift, h0, bias_n, table_r, table_z, table_n, *, steps, start,
        reverse, **attrs):
    """(y, h): `steps` GRU steps; y[:, k] is h at time min(times) + k."""
    # x: (B, T, 3H); weight: (3H, H) int8; h0: (B, H); bias_n: (H,) -> y: (B, steps, H), h: (B, H)
    times, hs = _steps(x, h0, weight, 3, steps, start, reverse)
    check(bias_n.shape == (hs,) and bias_n.dtype == h0.dtype, f"bias_n {bias_n.shape}: [H] of "
          "h0's dtype")
    op = _ops(attrs, GRU_ROLES)
    h, ys = h0, {}
    for t in times:
        s = _fc(h, weight, bias, mult, shift, attrs)
        xr, xz, xn = (np.ascontiguousarray(x[:, t, k * hs:(k + 1) * hs]) for k in range(3))
        sr, sz, sn = (np.ascontiguousarray(s[:, k * hs:(k + 1) * hs]) for k in range(3))
        r, z = lut(op["r"](xr, sr), table_r), lut(op["z"](xz, sz), table_z)
        n = lut(op["n"](xn, op["rn"](r, op["b"](sn, bias_n))), table_n)
        h = ys[t] = op["h"](n, op["zd"](z, op["d"](h, n)))
    return np.stack([ys[t] for t in sorted(ys)], 1), h


def _rnn(x, weight, bias, mult, shift, h0, table, attrs):
    """nn.RNN's steps: h = add(x[:, t], fc(h)) (clamped), then lut(., table) when given."""
    # x: (B, T, H); weight: (H, H) int8; h0: (B, H) -> y: (B, steps, H), h: (B, H)
    head = {k: attrs.pop(k) for k in ("steps", "start", "reverse")}
    times, _ = _steps(x, h0, weight, 1, **head)
    op = _ops(attrs, RNN_ROLES)
    h, ys = h0, {}
    for t in times:
        a = op["x"](np.ascontiguousarray(x[:, t]), _fc(h, weight, bias, mult, shift, attrs))
        h = ys[t] = a if table is None else lut(a, table)
    return np.stack([ys[t] for t in sorted(ys)], 1), h


def rnn_tanh(x, weight, bias, mult, shift, h0, table, **attrs):
    """(y, h): `steps` nn.RNN (tanh) steps; y[:, k] is h at time min(times) + k."""
    return _rnn(x, weight, bias, mult, shift, h0, table, attrs)


def rnn_relu(x, weight, bias, mult, shift, h0, **attrs):
    """(y, h): `steps` nn.RNN (relu) steps: the add's clamp is the ReLU."""
    return _rnn(x, weight, bias, mult, shift, h0, None, attrs)


def _declare(fn) -> None:
    """State fn's keyword-only attributes by name, in the registry's order (50 / 87: the
    prefixed attributes of each composed op arrive in **attrs)."""
    sig = inspect.signature(fn)
    params = [p for p in sig.parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    kw = [inspect.Parameter(a, inspect.Parameter.KEYWORD_ONLY) for a in ops.get(fn.__name__).attrs]
    fn.__signature__ = sig.replace(parameters=[*params, *kw])


for _fn in (lstm, gru, rnn_tanh, rnn_relu):
    _declare(_fn)
