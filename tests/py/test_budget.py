"""Size budget of the compiler core: the code a newcomer reads to understand mcutorch.

Counted in lines of code (tokenizer-based: comments, blank lines and docstrings do not count).
Not counted: the op registry's entries (ops/<family>.py), lift's per-op builders
(frontend/builders/<family>.py), the reference kernels (ref/, the definitions of the ops), the
model zoo, and the device side (C builds and runners): code that grows with each op added. The
budget is raised only by a commit that says why in its message; a change that makes the core
smaller lowers it in the same commit. The C runtime core has its own budget
(tests/py/test_c_guards.py).
"""
from __future__ import annotations

import io
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "mcutorch"
CORE = ("compiler.py", "ir.py", "quant.py", "errors.py", "targets.py", "ops/__init__.py",
        "ops/defs.py", "frontend", "passes", "plan", "program", "backends")
# lines of code: 4,349 when set; 5,198 with the input checks, any-PT2E lift, functions as tables
# and graph hygiene (constant folding, no-ops, out-of-scope errors); 5,254 with the readers'
# overlap rule and format limits; 5,318 with the load-time MAC accumulator bound; 5,143 with
# lift's builders moved to frontend/builders/ (per-op code, not counted); 5,313 with the op
# breadth of broadcasting, sub, div, strided_slice, gather, reductions, log_softmax, var, norm
# (their requant rules, layout fixups, TOSA lowerings and the readers' gather index check);
# 5,361 with resize (its requant rule, TOSA RESIZE lowering and bounds, the U55 Vela limit);
# 5,411 with matmul (TOSA MATMUL lowering, layout fixup, requant rule, the readers' K bound,
# the U55 width rule); 5,416 with adaptive max pooling's (values, indices) pair in lift;
# 5,496 with compare / where (two quantizer rules, their requant rules and TOSA lowerings, uint8
# masks through the TOSA verifier, the Ethos-U55 constraint)
# 5,545 with conv_transpose2d (its TOSA check and lowering, the U55 stride rule, the quantizer's
# axis-1 weight spec), conv1d/conv3d BatchNorm folding, unused views dropped; 5,546 with
# BatchNorm folded into transposed convs (the layout-aware weight scaling is in builders/norm.py);
# 5,623 with int16 activations in the quantizer (whole model or per layer by name/type, the
# int16 spec, refusal of ops without an int16 form by name) and the 16-bit requant multiplier
# 5,777 with QAT (frontend/qat.py: fake-quant forms of the specs, the conv + BatchNorm
# annotation PT2E's QAT fusion needs, the BatchNorm checks, convert; capture's training mode)
# +404 with stateful models (5,950 on their own; 6,181 with the above): frontend/state.py (the
# state as a function's inputs and outputs, in-place writes as values), passes/persistent.py,
# format 1.5's PERSISTENT records in the model, writer, reader and validator, quantize_like /
# transfer_qparams (a streaming model quantized with its windowed model's qparams), the Ethos-U
# partitioner keeping the state on the CPU, the state written in place by the op computing it,
# buffer reassignment as state and the named refusals of writes through views / before any read
# +32 (6,213) with the CPU fallback in Vela's scratch (planner segments: own-lifetime views,
# byte-range interference and live bytes; the fallback's RAM / flash cost in the compile report)
# +66 (6,279) with fused residuals (the conv2d + add fusion pass, its split for TOSA, conv2d_add's
# requant rule and TOSA check/lowering, the readers' `residual` overlap kind, its planner pairs);
# 6,281 with QAT on a stateful model refused by name
# +48 (6,329) with format 1.5's per-op activation dtype rule (OpDef.dtypes, checked by
# validate.py and generated into mt_program.h), the int64 (int48 bias) dtype checked at load,
# the interpreter telling rescale its output dtype and the int16 MAC bound at load
# +23 (6,352): mcutorch.compile of a16w8 models (lift's int16 tensors, clamps, int48 bias and
# the OpDef.dtypes check naming an op without an int16 kernel; 16-bit MAC multipliers); 6,354
# with that check also run after the passes (a transpose the layout pass adds).
# +35 (6,389) with int16 TOSA lowerings (int48 accumulators and bias, apply_scale_16 RESCALEs,
# int16 inputs and random verification values, the int16 range checks of the MAC/add/mul/rescale
# bounds) and the int16 add's 15-bit left shift; +22 (6,411) with int16 tables (TOSA TABLE's
# 513 interpolated entries: the quantizer's int16 function and fixed (1/32768, 0) specs, the
# requant rule, TOSA TABLE -> RESCALE and its slope check).
# +42 (6,453) with embeddings of int32 token ids (format 1.6): lift of integer model inputs and
# aten.embedding, the readers' token-id qparams rule, Port.ids_below and run()'s integer input
# check, max_norm refused by name, summary / inspect naming the ids; 6,458 with both merged
# (the Recorder keeping int16 values and token ids); +5 (6,463) with attention (capture calls
# the scaled-dot-product rewrite of frontend/builders/attention.py; views become reshapes).
# +33 (6,500 with the above and their merge; 6,387 on its own): nn.LSTM / GRU / RNN unrolled
# before export (capture's swap and step tags, the user's module and file:line in messages),
# the quantizer's shared qparams across time steps, identical constants stored once in the
# program, an own export's fused aten.lstm / gru / rnn refused by name with the way out (the
# unrolled module itself is per-op code in frontend/builders/recurrent.py)
# +95 (6,600 with the above and the merge; 6,449 on its own) with ring buffers for streaming
# histories (format 1.6): passes/ring.py (the concat + slice history pattern -> ring_write into
# a ring window, 51), the readers' ring window checks (TENSOR_FLAG_RING, its block's extent in
# the persistent checks, the initial position, ring_write's frame, OP_FLAG_RING), the ring
# window in the model / writer / emit and the Ethos-U partitioner ordering a ring window's
# readers after its ring_write; +2 (6,602) with the int16 kernels (an int16 conv is not fused
# with its add: conv2d_add is int8); +5 (6,607) with a16w8 recurrent layers (a builder's view
# of an int16 tensor stays int16 in lift, int16 constant operands); +5 (6,612) with the int16
# reduce_sum (its 2^16 - 1 count bound at compile time, the int16 sum range in the TOSA check,
# the keepdim tensor keeps the dtype); +2 (6,614): an op sharing its input's qparams follows an
# int16 input (Quantizer.is_int16), so no rescale pair surrounds a mean or pool in forward.
# +228 (6,842) with format 1.8's lstm / gru ops: passes/recurrent.py (192: matching an unrolled
# LSTM / GRU step on the IR, chaining steps through their state, runs of equal constants and
# attributes, the stack's views replaced by the op's sequence, the folded state-product bias),
# the readers' lstm / gru record check (shapes, step range, tables, gate scratch), the h0 / c0
# activation operands, compile(fuse_recurrent=False) and the gate scratch size.
# +74 (6,688 alone) with format 1.8's alias kind `overlap` (a depthwise / 1x1 conv's output over
# its own input): OpDef.overlap, the readers' least-delta check, the planner's chains at an offset
# (overlap pairs delta bytes below their input, the peak-op pair choice, the plan kept only when
# smaller than the one without), overlap_pairs and compile(overlap=False). Both: 6,915.
# +18 (6,632 alone): a16w8 attention (format 1.8) - the readers' int16 matmul bound (_check_matmul),
# the int16 softmax table and matmul multiplier in requant, the int16 where/masked_fill spec and
# scalar, the int16 matmul's 2-byte scratch; +15 (6,647): the int16 matmul's TOSA lowering
# (MATMUL i16 x i16 -> i48, its int48 / apply_scale_16 check) and the Ethos-U55/U65 rule that
# keeps it on the CPU (Vela refuses it). The three: 6,948.
# +13 (6,961) with format 1.9's rnn_tanh / rnn_relu: passes/recurrent.py matching an unrolled
# nn.RNN step (fc, add of the time slice, the tanh table or none), the readers' table index.
# +60 (7,021): the readers' lifetime check across ops (validate.py check_lifetimes: the run orders
# with and without the NPU, live ranges, views, the handover op, op and Vela scratch areas).
# +4 (7,025): the readers' rule that a delegate's fast scratch shares no byte with its scratch
# (the NPU uses both at once; the C loader's twin in mt_validate.c).
BUDGET = 7025
SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
        tokenize.ENCODING, tokenize.ENDMARKER}


def code_lines(source: str) -> int:
    """Physical lines holding code; a statement that is only a string (a docstring) is skipped."""
    lines: set[int] = set()
    statement: list[tokenize.TokenInfo] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NEWLINE or tok.type == tokenize.ENDMARKER:
            if not (len(statement) == 1 and statement[0].type == tokenize.STRING):
                for t in statement:
                    lines.update(range(t.start[0], t.end[0] + 1))
            statement = []
        elif tok.type not in SKIP:
            statement.append(tok)
    return len(lines)


PER_OP = "frontend/builders"  # its family modules; __init__.py and _common.py are core


def core_files() -> list[Path]:
    files = []
    for entry in CORE:
        path = PACKAGE / entry
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return [f for f in files if not (str(f.relative_to(PACKAGE)).startswith(PER_OP)
                                     and not f.name.startswith("_"))]


def test_code_lines_counts_code_only():
    src = ('"""doc"""\n# comment\n\nx = (1,\n     2)  # two lines\n'
           'def f():\n    """doc"""\n    return x\n')
    assert code_lines(src) == 4


def test_compiler_core_stays_within_its_budget():
    sizes = {str(p.relative_to(PACKAGE)): code_lines(p.read_text()) for p in core_files()}
    total = sum(sizes.values())
    biggest = sorted(sizes.items(), key=lambda kv: -kv[1])[:8]
    print(f"compiler core: {total} lines of code (budget {BUDGET}); largest: {biggest}")
    assert total <= BUDGET, (f"compiler core {total} > {BUDGET} lines of code; largest files "
                             f"{biggest}. Make it smaller, or raise BUDGET in a commit that "
                             "says why.")
