"""Recurrent layers as one op each (runtime/kernels/recurrent/): `lstm`, `gru`, `rnn_tanh` and
`rnn_relu` run the per-step ops of an unrolled nn.LSTM / nn.GRU / nn.RNN layer and direction
(frontend/builders/recurrent.py) for `steps` time steps with one set of weights, tables and
attributes, made by passes/recurrent.py from steps that share every constant and attribute.

The definition is the composition of the existing ops, in the order the unrolled form runs them
(ref/recurrent.py): each attribute group below is that op's attributes under a prefix, in the
op's own order, so a C kernel hands `attrs + MT_<OP>_<PREFIX>_<FIRST>` to the op's kernel.
The MAC operands (x, weight, bias, mult, shift) are the state's product h @ weight^T: "x" is the
input projection of all T steps, whose dtype and range the state shares (in_zp is h's).
"""
from __future__ import annotations

from mcutorch.ops.defs import MAC_OPERANDS, OpDef
from mcutorch.ops.elementwise import OPS as _ELEMENTWISE

_ATTRS = {d.name: d.attrs for d in _ELEMENTWISE}
FC = ("in_zp", "fc_out_zp", "fc_act_min", "fc_act_max")  # fully_connected's OUT_ATTRS
HEAD = ("steps", "start", "reverse")
# role -> op: the unrolled step's ops after its state product s = fc(h)
LSTM_ROLES = (("x", "add"), ("fm", "mul"), ("im", "mul"), ("c", "add"), ("hm", "mul"))
GRU_ROLES = (("r", "add"), ("z", "add"), ("b", "add"), ("rn", "mul"), ("n", "add"),
             ("d", "sub"), ("zd", "mul"), ("h", "add"))
RNN_ROLES = (("x", "add"),)  # nn.RNN: a = add(x[:, t], s), clamped (relu: the clamp is the ReLU)
A16W8 = (("int8", "int8"), ("int16", "int16"))


def _attrs(roles) -> tuple[str, ...]:
    return (*HEAD, *FC, *(f"{r}_{a}" for r, op in roles for a in _ATTRS[op]))


def _sources(name: str, *more: str) -> dict:
    files = (f"recurrent/mt_{name}_s8.c", "conv/mt_fully_connected_s8.c",
             "conv/mt_fully_connected_s16.c", "elementwise/mt_add_s8.c",
             "elementwise/mt_binary_s16.c")
    return {"default": files + tuple(f"elementwise/mt_{k}_s8.c" for k in more)}


def _macs(i, o, a) -> int:  # the state products: steps x B x weight
    return a["steps"] * i[0][0] * i[1][0] * i[1][1]


OPS = (
    OpDef("lstm", 36, (*MAC_OPERANDS, "h0", "c0", "table_i", "table_f", "table_g", "table_o",
                       "table_c"), ("y", "h", "c"), _attrs(LSTM_ROLES),
          {"x": "[B, T, 4H] x @ W_ih^T + b (gates i, f, g, o)", "weight": "W_hh [4H, H]",
           "y": "[B, steps, H] in time order"},
          family="recurrent", mac_axis=0, macs=_macs, c_sources=_sources("lstm", "mul", "lut"),
          since=8, dtypes=A16W8, tosa="lstm: a CPU op; for an Ethos-U target the steps stay "
          "unrolled (ops that lower to TOSA, one delegate)",
          doc="steps time steps from t = start (backwards when reverse): s = fc(h); a = "
              "add(x[:, t], s); i, f, g, o = lut(a's quarters); c = add(mul(f, c), mul(i, g)); "
              "h = mul(o, lut(c)); y[:, t - t_min] = h"),
    OpDef("gru", 37, (*MAC_OPERANDS, "h0", "bias_n", "table_r", "table_z", "table_n"),
          ("y", "h"), _attrs(GRU_ROLES),
          {"x": "[B, T, 3H] x @ W_ih^T + b (gates r, z, n)", "weight": "W_hh [3H, H]",
           "y": "[B, steps, H] in time order"},
          family="recurrent", mac_axis=0, macs=_macs,
          c_sources=_sources("gru", "mul", "lut", "sub"), since=8,
          dtypes=A16W8, tosa="gru: a CPU op; for an Ethos-U target the steps stay unrolled "
          "(ops that lower to TOSA, one delegate)",
          doc="s = fc(h); r = lut(add(x_r, s_r)); z = lut(add(x_z, s_z)); n = lut(add(x_n, "
              "mul(r, add(s_n, bias_n)))); h = add(n, mul(z, sub(h, n)))"),
    OpDef("rnn_tanh", 38, (*MAC_OPERANDS, "h0", "table"), ("y", "h"), _attrs(RNN_ROLES),
          {"x": "[B, T, H] x @ W_ih^T + b_ih + b_hh", "weight": "W_hh [H, H]",
           "y": "[B, steps, H] in time order"},
          family="recurrent", mac_axis=0, macs=_macs, c_sources=_sources("rnn_tanh", "lut"),
          since=9, dtypes=A16W8, tosa="rnn_tanh: a CPU op; for an Ethos-U target the steps stay "
          "unrolled (ops that lower to TOSA, one delegate)",
          doc="nn.RNN(nonlinearity='tanh'): s = fc(h); h = lut(add(x[:, t], s), table); "
              "y[:, t - t_min] = h"),
    OpDef("rnn_relu", 39, (*MAC_OPERANDS, "h0"), ("y", "h"), _attrs(RNN_ROLES),
          {"x": "[B, T, H] x @ W_ih^T + b_ih + b_hh", "weight": "W_hh [H, H]",
           "y": "[B, steps, H] in time order"},
          family="recurrent", mac_axis=0, macs=_macs, c_sources=_sources("rnn_relu"),
          since=9, dtypes=A16W8, tosa="rnn_relu: a CPU op; for an Ethos-U target the steps stay "
          "unrolled (ops that lower to TOSA, one delegate)",
          doc="nn.RNN(nonlinearity='relu'): s = fc(h); h = add(x[:, t], s) (its clamp is the "
              "ReLU); y[:, t - t_min] = h"),
)
