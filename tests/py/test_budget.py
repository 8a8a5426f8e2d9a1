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
# int16 spec, refusal of ops without an int16 form by name) and the 16-bit requant multiplier;
# 5,667 with format 1.5's per-op activation dtype rule (OpDef.dtypes, checked by validate.py and
# generated into mt_program.h), the int64 (int48 bias) dtype checked at load and the interpreter
# telling rescale its output dtype (int8 or int16); 5,671 with the int16 MAC bound at load (int64
# bias, 16-bit multiplier, accumulator within int48)
BUDGET = 5671
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
