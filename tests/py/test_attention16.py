"""a16w8 attention (format 1.8): the int16 forms of matmul, softmax, norm and where
(docs/numerics.md section 6) one op at a time (reference = an independent formula = host C =
emulated boards) and in nn.MultiheadAttention, F.scaled_dot_product_attention and
nn.TransformerEncoderLayer compiled all-int16 (host C = reference, layer by layer against
PyTorch's fake-quant model), and the int16 programs both readers refuse."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import mcutorch
from mcutorch import quant
from mcutorch.program import schema as S
from mcutorch.ref.reduce import norm_constants
from mcutorch.ref.softmax import softmax_exp_table16

M16 = 32767


def _program(name, ins, consts, out, attrs, target="cortex-m55", scratch=0):
    """One op over arena inputs (dtype, shape), constant operands (arrays) and an arena output,
    with `scratch` bytes of scratch after them."""
    from mcutorch.program import Area, ConstantPool, OpInfo, Program, RegionInfo, TensorInfo
    from test_program import _target_info

    pool, tensors, at = ConstantPool(), [], 0
    for dtype, shape in (*ins, out):
        tensors.append(TensorInfo.arena(dtype, shape, 0, at, 0.5))
        at += -(-tensors[-1].nbytes // 16) * 16
    y = tensors.pop()
    tensors += [pool.tensor(np.ascontiguousarray(c)) for c in consts] + [y]
    k = len(tensors) - 1
    area = Area(0, at, scratch) if scratch else None
    return Program(_target_info(target), [RegionInfo("ram", at + scratch + 16)], tensors,
                   [OpInfo(name, list(range(k)), [k], attrs, scratch=area)],
                   list(range(len(ins))), [k], pool.to_bytes())


def _values(rng, shape, fill=None):
    if fill is not None:
        return np.full(shape, fill, np.int16)
    return rng.integers(-M16, M16 + 1, shape).astype(np.int16)


# --- matmul: a [.., M, K] @ b [.., K, N] (b [.., N, K] with transpose_b), int16 -----------------
MATMUL16 = {  # a shape, b shape, transpose_b, (fill a, fill b)
    "qk_t": ((2, 8, 16), (2, 8, 16), 1, (None, None)),
    "pv": ((2, 8, 8), (2, 8, 8), 0, (None, None)),
    "tails": ((1, 5, 13), (1, 13, 7), 0, (None, None)),
    "bcast": ((3, 1, 4, 9), (1, 2, 9, 5), 0, (None, None)),
    "long_k": ((1, 2, 300), (1, 3, 300), 1, (None, None)),
    "extremes": ((1, 3, 33), (1, 5, 33), 1, (-32768, -32768)),
    "extremes_mixed": ((1, 3, 33), (1, 33, 6), 0, (M16, -32768)),
}


def _matmul16_program(case, target="cortex-m55", **change):
    sa, sb, tb, _ = MATMUL16[case]
    k = sa[-1]
    mult, shift = quant.quantize_multiplier16(8000 / (math.sqrt(k) * 3.6e8))
    n = sb[-2] if tb else sb[-1]
    y = (*np.broadcast_shapes(sa[:-2], sb[:-2]), sa[-2], n)
    attrs = dict(transpose_b=tb, a_zp=0, b_zp=0, out_zp=0, mult=mult, shift=shift,
                 act_min=-M16, act_max=M16)
    attrs.update(change)
    return _program("matmul", [("int16", sa), ("int16", sb)], [], ("int16", y), attrs, target,
                    0 if tb else 2 * sb[-1] * sb[-2])


def _matmul16_inputs(case, seed=0):
    rng = np.random.default_rng(seed)
    sa, sb, _, (fa, fb) = MATMUL16[case]
    return [_values(rng, sa, fa), _values(rng, sb, fb)]


def _matmul16_expect(p, a, b):
    at = p.ops[0].attrs
    bb = np.swapaxes(b, -1, -2) if at["transpose_b"] else b
    acc = np.matmul(a.astype(object), bb.astype(object))  # Python ints: no overflow possible
    r = (acc * at["mult"] + (1 << at["shift"] - 1)) >> at["shift"]
    return np.clip(r, at["act_min"], at["act_max"]).astype(np.int16)


# --- softmax: rows along the last axis, output (1/32768, 0) -------------------------------------
SOFTMAX16 = {  # shape, input scale, fill
    "random": ((4, 8), 8 / M16, None),
    "row1": ((3, 1), 8 / M16, None),
    "equal": ((2, 33), 8 / M16, 1234),
    "extremes": ((2, 6), 1e-4, "alternate"),  # d = 65534: both table halves at their ends
    "steep": ((3, 17), 0.01, "narrow"),  # d up to 1200: e from 2^30 down to ~2^-22 (0)
    "long": ((1, 300), 4 / M16, None),
}


def _softmax16_program(case, target="cortex-m55", table=None):
    shape, s, _ = SOFTMAX16[case]
    table = softmax_exp_table16(s) if table is None else table
    return _program("softmax", [("int16", shape)], [table], ("int16", shape), {}, target)


def _softmax16_inputs(case, seed=0):
    shape, _, fill = SOFTMAX16[case]
    if fill == "alternate":
        return [np.resize(np.array([M16, -M16], np.int16), shape)]
    rng = np.random.default_rng(seed)
    if fill == "narrow":
        return [rng.integers(-600, 601, shape).astype(np.int16)]
    return [_values(rng, shape, fill)]


# --- norm: layer_norm over the last axis, int16 x and y -----------------------------------------
NORM16 = {  # shape, axes mask, fill
    "rows16": ((4, 16), 2, None),
    "rows64": ((2, 64), 2, None),
    "constant": ((3, 8), 2, 777),  # D = 0: z = 0, y = beta
    "extremes": ((2, 10), 2, "alternate"),
    "seq_emb": ((1, 8, 16), 4, None),
}
NORM_SCALE = 4 / M16


def _norm16_constants(case, seed=0):
    shape, _, _ = NORM16[case]
    rng = np.random.default_rng(seed)
    e = shape[-1]
    gamma, beta = rng.uniform(0.5, 1.5, e), rng.uniform(-0.5, 0.5, e)
    return norm_constants(gamma, beta, 1e-5, e, NORM_SCALE, NORM_SCALE, True), gamma, beta


def _norm16_program(case, target="cortex-m55"):
    shape, axes, _ = NORM16[case]
    (sign, beta, mult, shift, eps), _, _ = _norm16_constants(case)
    return _program("norm", [("int16", shape)], [sign, beta, mult, shift], ("int16", shape),
                    dict(axes=axes, eps=eps, inner=1, out_zp=0, act_min=-M16, act_max=M16),
                    target)


def _norm16_inputs(case, seed=0):
    shape, _, fill = NORM16[case]
    if fill == "alternate":
        return [np.resize(np.array([M16, -32768], np.int16), shape)]
    rng = np.random.default_rng(seed)
    return [(rng.normal(0, 0.3, shape) * 8192 + rng.normal(0, 2000, shape[:-1] + (1,)))
            .clip(-M16, M16).astype(np.int16) if fill is None else _values(rng, shape, fill)]


# --- where: an attention mask over int16 scores -------------------------------------------------
WHERE16 = {  # mask shape, a shape, b shape, identity rescales
    "causal_scalar": ((1, 8, 8), (1, 1, 1), (2, 8, 8), True),
    "rescaled": ((2, 1, 8), (2, 4, 8), (1, 1, 1), False),
}


def _where16_program(case, target="cortex-m55"):
    sm, sa, sb, ident = WHERE16[case]
    rng = np.random.default_rng(3)
    mask = (rng.random(sm) < 0.4).astype(np.uint8)
    y = np.broadcast_shapes(sm, sa, sb)
    am, ash = (1 << 30, 30) if ident else quant.quantize_multiplier(0.75)
    bm, bsh = (1 << 30, 30) if ident else quant.quantize_multiplier(1.5)
    attrs = dict(a_zp=0, a_mult=am, a_shift=ash, b_zp=0, b_mult=bm, b_shift=bsh, out_zp=0)
    from mcutorch.program import ConstantPool, OpInfo, Program, RegionInfo, TensorInfo
    from test_program import _target_info

    pool, at, tensors = ConstantPool(), 0, [None]
    for shape in (sa, sb, y):
        tensors.append(TensorInfo.arena("int16", shape, 0, at, 0.5))
        at += -(-tensors[-1].nbytes // 16) * 16
    tensors[0] = pool.tensor(mask)
    return Program(_target_info(target), [RegionInfo("ram", at)], tensors,
                   [OpInfo("where", [0, 1, 2], [3], attrs)], [1, 2], [3], pool.to_bytes())


def _where16_inputs(case, seed=0):
    rng = np.random.default_rng(seed)
    _, sa, sb, ident = WHERE16[case]
    return [np.full(sa, -M16, np.int16) if ident else _values(rng, sa), _values(rng, sb)]


CASES = ([("matmul", c) for c in MATMUL16] + [("softmax", c) for c in SOFTMAX16] +
         [("norm", c) for c in NORM16] + [("where", c) for c in WHERE16])
MAKERS = {"matmul": (_matmul16_program, _matmul16_inputs),
          "softmax": (_softmax16_program, _softmax16_inputs),
          "norm": (_norm16_program, _norm16_inputs), "where": (_where16_program, _where16_inputs)}


def _case(op, case, target="cortex-m55"):
    make, inputs = MAKERS[op]
    return make(case, target), inputs(case)


def test_int16_matmul_is_the_int48_definition():
    """The reference's int16 matmul equals Python-integer sums, requantized with the 16-bit
    multiplier (no float anywhere), on every case (extremes: |acc| = 33 * 2^30)."""
    from mcutorch.ref.interpreter import Interpreter

    for case in MATMUL16:
        p = _matmul16_program(case)
        a, b = _matmul16_inputs(case)
        (got,) = Interpreter(p).invoke([a, b])
        np.testing.assert_array_equal(got, _matmul16_expect(p, a, b), err_msg=case)


def test_int16_softmax_against_float_softmax():
    """The int16 softmax (two Q30 exp tables, an integer division) against round(2^15 softmax)
    of the dequantized row in float64: measured within 1 LSB on every element of every case
    (the tables' 2^-30 relative error is far below the output's 2^-15)."""
    from mcutorch.ref.interpreter import Interpreter

    worst = 0
    for case, (shape, s, _) in SOFTMAX16.items():
        (x,) = _softmax16_inputs(case)
        (got,) = Interpreter(_softmax16_program(case)).invoke([x])
        v = x.astype(np.float64) * s
        e = np.exp(v - v.max(axis=-1, keepdims=True))
        want = np.minimum(np.rint(32768 * e / e.sum(axis=-1, keepdims=True)), M16)
        worst = max(worst, int(np.abs(got - want).max()))
        if case == "equal":
            assert np.all(got == round(32768 / 33)), got
    print(f"int16 softmax vs float64: max {worst} LSB")
    assert worst <= 1


def test_int16_norm_against_float_layer_norm():
    """The int16 norm (sums in int64, the normalised integer rsqrt, z in Q20) against float64
    layer_norm of the dequantized input, quantized: measured within 1 LSB on every element
    (the Q20 z and 17-bit R keep the integer error below half an output LSB)."""
    from mcutorch.ref.interpreter import Interpreter

    worst = 0
    for case, (shape, _, fill) in NORM16.items():
        (x,) = _norm16_inputs(case)
        _, gamma, beta = _norm16_constants(case)
        (got,) = Interpreter(_norm16_program(case)).invoke([x])
        v = x.astype(np.float64) * NORM_SCALE
        z = (v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + 1e-5)
        want = np.clip(np.rint((z * gamma + beta) / NORM_SCALE), -M16, M16)
        worst = max(worst, int(np.abs(got - want).max()))
    print(f"int16 norm vs float64: max {worst} LSB")
    assert worst <= 1


@pytest.mark.parametrize("op,case", CASES, ids=[f"{o}-{c}" for o, c in CASES])
def test_int16_attention_ops_alike_in_the_reference_and_host_c(op, case):
    """Each case: the program's reference run = host C (ASan + UBSan) bit for bit, and the
    output not constant (the case exercises the arithmetic)."""
    from mcutorch.device import crt
    from mcutorch.program import Program
    from mcutorch.ref.interpreter import Interpreter

    p, xs = _case(op, case)
    p = Program.from_bytes(p.to_bytes())
    (want,) = Interpreter(p).invoke(xs)
    (got,) = crt.run_host(p, xs)
    np.testing.assert_array_equal(got, want)
    assert want.dtype == np.int16
    assert case in ("equal", "constant", "row1") or "extremes" in case or len(np.unique(want)) > 2


BOARDS = [("cortex-m55", "mps3-an547"), ("cortex-m0plus", "mps2-an385"),
          ("cortex-m33", "mps2-an505")]
OP_BOARDS = BOARDS + [("cortex-m3", "mps2-an385"), ("cortex-m4", "mps2-an386"),
                      ("cortex-m7", "mps2-an500"), ("cortex-m23", "mps2-an505")]


@pytest.mark.slow
@pytest.mark.parametrize("target,board", OP_BOARDS)
def test_int16_attention_ops_on_boards(target, board):
    """Every case above as firmware on every emulated core: M55 (MVE), M0+ (Armv6-M, unaligned
    access trapping), M33 (DSP), M3, M4, M7 and M23: the reference's integers."""
    from mcutorch.device import firmware
    from mcutorch.ref.interpreter import Interpreter

    for op, case in CASES:
        p, xs = _case(op, case, target)
        run = firmware.run(p, xs, board)
        np.testing.assert_array_equal(run.outputs[0], Interpreter(p).invoke(xs)[0],
                                      err_msg=f"{op} {case} on {board}")
        print(f"{board} {op} {case}: {run.instructions} instructions")


REFUSED16 = {  # (program maker, change) -> the readers' reason
    "matmul_zp": (lambda: _matmul16_program("qk_t", a_zp=1), "bad_op"),
    "matmul_mult32": (lambda: _matmul16_program("qk_t", mult=1 << 15), "bad_op"),
    "matmul_rq_int32": (lambda: _matmul16_program("long_k", mult=1 << 14, shift=20), "bad_op"),
    "matmul_mixed": (lambda: _program("matmul", [("int16", (1, 2, 4)), ("int8", (1, 3, 4))],
                                      [], ("int16", (1, 2, 3)), _matmul16_program("qk_t")
                                      .ops[0].attrs), "bad_op"),
    "softmax_int16_to_int8": (lambda: _program("softmax", [("int16", (2, 5))],
                                               [softmax_exp_table16(0.01)], ("int8", (2, 5)), {}),
                              "bad_op"),
    "norm_int8_to_int16": (lambda: _program(
        "norm", [("int8", (2, 8))], list(norm_constants(np.ones(8), np.zeros(8), 1e-5, 8, 0.1,
                                                        0.1)[:4]), ("int16", (2, 8)),
        dict(axes=2, eps=1, inner=1, out_zp=0, act_min=-M16, act_max=M16)), "bad_op"),
}


@pytest.mark.parametrize("case", sorted(REFUSED16))
def test_hostile_int16_programs_refused_by_both_readers(case):
    """A zero point, a 32-bit multiplier or an rq leaving int32 on an int16 matmul, and mixed
    dtypes: both program readers refuse them at load with the same reason."""
    from mcutorch.device import crt
    from test_program import reason_of, unchecked_bytes

    make, reason = REFUSED16[case]
    blob = unchecked_bytes(make())
    assert reason_of(blob) == reason
    assert crt.check_host([blob]) == [S.ERROR_CODES[reason]]


def test_int16_softmax_table_domain_refused_by_both_executors():
    """A 256-entry table or an entry beyond 2^30 with an int16 x: the reference refuses it by
    name, the C kernel with bad_argument (the table is a constant operand, as for int8)."""
    from mcutorch.device import crt
    from mcutorch.errors import ExecutionError, McutorchError
    from mcutorch.ref.interpreter import Interpreter

    good = softmax_exp_table16(0.01)
    for table in (good[:256].copy(), np.where(np.arange(512) == 3, 1 << 30 + 1, good)
                  .astype(np.int32)):
        p = _softmax16_program("random", table=table)
        x = _softmax16_inputs("random")
        with pytest.raises(ExecutionError, match=r"softmax: an int16 x takes a 512-entry"):
            Interpreter(p).invoke(x)
        with pytest.raises(McutorchError, match="bad_argument"):
            crt.run_host(p, x)


# --- whole attention models, all int16 ----------------------------------------------------------
MODELS16 = ["mha_bf_h1", "mha_bf_h2_mask", "mha_tb_h4_mask", "mha_need_weights", "sdpa",
            "sdpa_causal", "sdpa_float_mask", "encoder_pre_relu", "encoder_post_relu",
            "encoder_pre_gelu", "encoder_post_gelu", "encoder_pre_gelu_mask"]
FAST16 = {"mha_bf_h2_mask", "sdpa_causal", "encoder_post_relu", "encoder_pre_gelu_mask"}


def _compiled16(name, target="cortex-m55"):
    from test_attention import MODELS

    factory, shape = MODELS[name]
    torch.manual_seed(11)
    model = factory().eval()
    cal = [torch.randn(*shape) for _ in range(8)]
    q = mcutorch.quantize(model, (cal[0],), calibration=cal,
                          quantizer=mcutorch.Quantizer(activations="int16"))
    return q, mcutorch.compile(q, (cal[0],), target=target), cal


@pytest.mark.parametrize("name", [n if n in FAST16 else pytest.param(n, marks=pytest.mark.slow)
                                  for n in MODELS16])
def test_int16_attention_models_compile_all_int16(name):
    """Quantizer(activations="int16") on MHA / SDPA / TransformerEncoderLayer: every activation
    of the program is int16 (matmul, softmax, norm and the mask's where included); host C (ASan
    + UBSan) = the reference; layer by layer (each op fed PyTorch's own int16 input) every op
    within 1 LSB of the fake-quant model on >= 99 % of its elements (measured: 100 %, max 1
    LSB, softmax included); end to end within 4 LSB of the int16 output."""
    from mcutorch.compare import layer_by_layer
    from mcutorch.device import crt

    qmodel, compiled, cal = _compiled16(name)
    p = compiled.program
    ops = {op.name for op in p.ops}
    assert {"matmul", "softmax"} <= ops and ("norm" in ops) == name.startswith("encoder")
    acts = {p.tensors[t].dtype for op in p.ops for t in (*op.inputs, *op.outputs)
            if p.tensors[t].storage != "const"}
    assert acts == {"int16"}, acts
    for x in cal[1:3]:
        xs = compiled.quantize_inputs([x])
        got, want = crt.run_host(p, xs), compiled.run_int8(xs)
        assert all(np.array_equal(a, b) for a, b in zip(got, want))
    rows = layer_by_layer(qmodel, (cal[1],))
    per_op = {}
    for r in rows:
        per_op.setdefault(r["op"], []).append((r["within_1lsb"], r["max_lsb"]))
    print(name, {op: (min(w for w, _ in v), max(m for _, m in v)) for op, v in per_op.items()})
    assert {"matmul", "softmax"} <= set(per_op)
    assert all(w >= 0.99 for v in per_op.values() for w, _ in v), per_op
    # end to end the int16 LSBs of several layers add up (measured: 93.2-99.4 % within 1 LSB,
    # max 2-4 LSB of the int16 output over the 12 models)
    from test_attention import _lsb

    lsb = np.concatenate([_lsb(compiled, qmodel, x) for x in cal[1:]])
    assert float(np.mean(lsb <= 1 + 1e-3)) >= 0.93 and lsb.max() <= 4 + 1e-3, lsb.max()


@pytest.mark.slow
@pytest.mark.qemu
@pytest.mark.parametrize("target,board", BOARDS)
def test_int16_encoder_runs_on_the_emulated_boards(target, board):
    """The all-int16 encoder layer (norm first, GELU, causal mask) as firmware on the M55 (MVE),
    M33 (DSP) and M0+ (Armv6-M): the reference's integers on every input."""
    from mcutorch.device import firmware

    _, compiled, cal = _compiled16("encoder_pre_gelu_mask", target)
    sets = [compiled.quantize_inputs([x]) for x in cal[1:4]]
    run = firmware.run(compiled.program, sets, board)
    for got, x in zip(run.outputs, sets):
        assert all(np.array_equal(a, b) for a, b in zip(got, compiled.run_int8(x)))
