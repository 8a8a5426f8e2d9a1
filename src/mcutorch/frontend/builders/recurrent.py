"""nn.LSTM / nn.GRU / nn.RNN as observable step-by-step modules, swapped in before torch.export.

A fused `aten.lstm` node hides its gates from PT2E: nothing could observe them. `swap(model)`
returns a copy of the model in which each recurrent module is replaced by the module of the same
name here (`LSTM`, `GRU`, `RNN`) holding the same parameters and computing the same function with
ops mcutorch compiles: one linear over all time steps for the input projection of a layer and
direction, one linear of the state per step (its weight one parameter, stored once in the
program), sigmoid / tanh tables, mul, add, sub, time slices and stack / cat. torch.export unrolls
the static time loop, so PT2E observes every gate of every step. Each node of a step carries
node.meta["custom"][STEP_KEY]; the quantizer gives the nodes in the same place of every step one
observer (Quantizer.share_steps), so every step has the same qparams and constants: the program
stores the step's weights, biases and multipliers once, whatever the sequence length. The state
is int8.

An LSTM step (gates i, f, g, o; the two biases summed into the input projection):
    a = xw[t] + h @ W_hh^T;  c = sigmoid(a_f) * c + sigmoid(a_i) * tanh(a_g);
    h = sigmoid(a_o) * tanh(c)
A GRU step (b_hr, b_hz summed into the input projection, b_hn kept inside r * (...)):
    r = sigmoid(xw_r[t] + h W_hr^T);  z = sigmoid(xw_z[t] + h W_hz^T)
    n = tanh(xw_n[t] + r * (h W_hn^T + b_hn));  h = n + z * (h - n)
With no initial state the first step drops the terms of h = 0 (and of c = 0).

Refused by name with the user's file:line (`UnsupportedOpError`): PackedSequence input
(pack_padded_sequence), LSTM proj_size, dropout between layers while training (QAT), inputs of
an unexpected rank. The shown module type is the user's (`rnn: torch.nn.LSTM`, capture.module_of).
"""
from __future__ import annotations

import abc
import copy
import traceback

import torch
import torch.fx.traceback as fx_traceback
from torch import nn
from torch.nn import functional as F

from mcutorch.errors import UnsupportedOpError

STEP_KEY = "mcutorch_step"  # node.meta["custom"]: (layer and direction, step, has a state)


def _caller() -> str:
    """file:line of the user code that called the recurrent module (outside torch and here)."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        path = frame.filename
        if "/torch/" not in path and "/torchao/" not in path and path != __file__:
            return f"{path.rsplit('/', 1)[-1]}:{frame.lineno}"
    return "<unknown>"


class _Recurrent(nn.Module, abc.ABC):
    """The common part: configuration and parameters copied from the torch module."""

    def __init__(self, original: nn.RNNBase, name: str):
        super().__init__()
        self.mode, self.name = original.mode, name
        for key in ("input_size", "hidden_size", "num_layers", "bias", "batch_first",
                    "bidirectional", "dropout", "proj_size"):
            setattr(self, key, getattr(original, key))
        self.dirs = 2 if self.bidirectional else 1
        h = self.hidden_size
        for layer in range(self.num_layers):
            for d in range(self.dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                w_ih = getattr(original, "weight_ih" + sfx).detach().clone()
                w_hh = getattr(original, "weight_hh" + sfx).detach().clone()
                b_ih = torch.zeros(w_ih.shape[0]) if not self.bias else \
                    getattr(original, "bias_ih" + sfx).detach().clone()
                b_hh = torch.zeros(w_ih.shape[0]) if not self.bias else \
                    getattr(original, "bias_hh" + sfx).detach().clone()
                b_in, b_state = b_ih + b_hh, None
                if self.mode == "GRU":  # b_hn stays inside r * (h W_hn^T + b_hn)
                    b_in = torch.cat([(b_ih + b_hh)[:2 * h], b_ih[2 * h:]])
                    b_state = b_hh[2 * h:]
                self.register_parameter("weight_ih" + sfx, nn.Parameter(w_ih))
                self.register_parameter("weight_hh" + sfx, nn.Parameter(w_hh))
                self.register_parameter("bias_in" + sfx, nn.Parameter(b_in))
                if b_state is not None:
                    self.register_parameter("bias_hn" + sfx, nn.Parameter(b_state))

    def _refuse(self, what: str):
        where = f" in {self.name}" if self.name else ""
        raise UnsupportedOpError(f"{_caller()}{where}: torch.nn.{type(self).__name__}: {what}")

    def _check(self, x):
        if isinstance(x, nn.utils.rnn.PackedSequence):
            self._refuse("a PackedSequence input (pack_padded_sequence) is not supported: "
                         "mcutorch compiles one static sequence length; pad the batch and pass "
                         "the padded tensor")
        if self.proj_size:
            self._refuse(f"proj_size={self.proj_size} (LSTM with projections) is not supported")
        if self.training and self.dropout > 0 and self.num_layers > 1:
            self._refuse(f"dropout={self.dropout} between layers in training mode (QAT) is not "
                         "supported: set dropout=0")
        if not isinstance(x, torch.Tensor) or x.dim() != 3:
            self._refuse("the input must be one [batch, time, features] tensor (unbatched "
                         "[time, features] inputs are not supported)")

    def forward(self, x, hx=None):
        self._check(x)
        seq = x if self.batch_first else x.transpose(0, 1)  # [B, T, C]
        lstm = self.mode == "LSTM"
        h0, c0 = (hx if lstm else (hx, None)) if hx is not None else (None, None)
        finals_h, finals_c = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(self.dirs):
                k = layer * self.dirs + d
                state = (None if h0 is None else h0[k], None if c0 is None else c0[k])
                hs, h, c = self._direction(seq, layer, d, *state)
                outs.append(hs)
                finals_h.append(h)
                finals_c.append(c)
            seq = outs[0] if self.dirs == 1 else torch.cat(outs, 2)
        out = seq if self.batch_first else seq.transpose(0, 1)
        h_n = torch.stack(finals_h, 0)
        return (out, (h_n, torch.stack(finals_c, 0))) if lstm else (out, h_n)

    def _direction(self, seq, layer: int, d: int, h, c):
        """One layer and direction over the sequence: ([B, T, H] states, last h, last c)."""
        sfx = f"_l{layer}" + ("_reverse" if d else "")
        w_hh = getattr(self, "weight_hh" + sfx)
        b_hn = getattr(self, "bias_hn" + sfx, None)
        xw = F.linear(seq, getattr(self, "weight_ih" + sfx), getattr(self, "bias_in" + sfx))
        steps = range(seq.shape[1] - 1, -1, -1) if d else range(seq.shape[1])
        hs = {}
        for t in steps:  # tagged: the quantizer gives every step the same qparams
            with fx_traceback.annotate({STEP_KEY: (f"{self.name}.l{layer}d{d}", t, h is not None)}):
                h, c = self._step(xw[:, t], h, c, w_hh, b_hn)
            hs[t] = h
        return torch.stack([hs[t] for t in sorted(hs)], 1), h, c

    @abc.abstractmethod
    def _step(self, a, h, c, w_hh, b_hn):
        """One time step: (h, c) from the input projection a = x W_ih^T + b of this step and the
        state before it (None at the first step from a zero state); LSTM, GRU, RNN define it."""


class LSTM(_Recurrent):
    """nn.LSTM unrolled (module docstring)."""

    def _step(self, a, h, c, w_hh, b_hn):
        hs = self.hidden_size
        if h is not None:
            a = a + F.linear(h, w_hh)
        i, f = torch.sigmoid(a[:, :hs]), torch.sigmoid(a[:, hs:2 * hs])
        g, o = torch.tanh(a[:, 2 * hs:3 * hs]), torch.sigmoid(a[:, 3 * hs:])
        c = i * g if c is None else f * c + i * g
        return o * torch.tanh(c), c


class GRU(_Recurrent):
    """nn.GRU unrolled (module docstring)."""

    def _step(self, a, h, c, w_hh, b_hn):
        hs = self.hidden_size
        if h is None:  # h = 0: W_h h = 0, h - n = -n
            r, z = torch.sigmoid(a[:, :hs]), torch.sigmoid(a[:, hs:2 * hs])
            n = torch.tanh(a[:, 2 * hs:] + r * b_hn)
            return n - z * n, None
        s = F.linear(h, w_hh)
        r = torch.sigmoid(a[:, :hs] + s[:, :hs])
        z = torch.sigmoid(a[:, hs:2 * hs] + s[:, hs:2 * hs])
        n = torch.tanh(a[:, 2 * hs:] + r * (s[:, 2 * hs:] + b_hn))
        return n + z * (h - n), None


class RNN(_Recurrent):
    """nn.RNN (tanh or relu) unrolled: h = act(x W_ih^T + b_ih + b_hh + h W_hh^T)."""

    def _step(self, a, h, c, w_hh, b_hn):
        if h is not None:
            a = a + F.linear(h, w_hh)
        return (torch.tanh(a) if self.mode == "RNN_TANH" else torch.relu(a)), None


KINDS = {nn.LSTM: LSTM, nn.GRU: GRU, nn.RNN: RNN}


def swap(model: nn.Module) -> nn.Module:
    """`model` itself when it has no nn.LSTM / nn.GRU / nn.RNN, else a copy with each replaced
    by its unrolled module (same parameters, same outputs to float rounding).

    Example:
        >>> m = swap(nn.LSTM(8, 16, batch_first=True))
        >>> type(m).__name__
        'LSTM'
    """
    if type(model) in KINDS:
        return KINDS[type(model)](model, "").train(model.training)
    if not any(type(m) in KINDS for m in model.modules()):
        return model
    model = copy.deepcopy(model)
    for name, module in list(model.named_modules()):
        if type(module) in KINDS:
            parent, _, leaf = name.rpartition(".")
            new = KINDS[type(module)](module, name).train(module.training)
            setattr(model.get_submodule(parent) if parent else model, leaf, new)
    return model
