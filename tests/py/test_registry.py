"""The op registry (mcutorch.ops) and the stages that read it: every op has what each stage needs,
the generated C files are current, opcodes only ever grow, and the package's import graph follows
the data flow (no stage imports a later one; the registry and `inspect` never import torch)."""
from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mcutorch import ops
from mcutorch.backends.tosa.rules import RULES as TOSA_RULES
from mcutorch.device import kernels as ck
from mcutorch.device.generate import stale
from mcutorch.frontend.builders import BUILDERS
from mcutorch.passes.requant import RULES as REQUANT_RULES
from mcutorch.ref import KERNELS

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "mcutorch"
# Every opcode ever assigned, in order: append-only (programs store opcodes). A new op appends
# its (opcode, name) here in the same commit that adds it to the registry. None: an opcode
# assigned to an op that another branch adds (its name replaces the None when they meet).
OPCODE_HISTORY = ("conv2d", "depthwise_conv2d", "fully_connected", "add", "mul", "max_pool2d",
                  "avg_pool2d", "clamp", "lut", "rescale", "softmax", "transpose", "concat",
                  "pad", "copy", "delegate", "maximum", "minimum", "strided_slice", "gather",
                  "reduce_sum", "reduce_max", "reduce_min", "log_softmax", "reduce_var", "norm",
                  "sub", "div", "compare", "where", "conv_transpose2d", "resize", "matmul",
                  "conv2d_add", "ring_write", "embedding", "lstm", "gru", "rnn_tanh", "rnn_relu")
# The data flow, earliest first (DESIGN.md): a module may import its own stage or earlier ones.
# ref/ holds the definitions every stage may use; its interpreter runs programs (after emit).
STAGES = {"ops": 0, "ir": 0, "errors": 0, "quant": 0, "targets": 0, "ref": 0, "ui": 0,
          "frontend": 1, "passes": 2, "backends": 3, "plan": 4, "program": 5, "ref.interpreter": 6,
          "device": 7}
TOP_LEVEL_BUDGET = 10  # modules directly in src/mcutorch (packages not counted)


def _aten(name: str):
    """torch.ops.aten.<op>.<overload> for "aten.<op>.<overload>"."""
    _, op, overload = name.split(".")
    return getattr(getattr(torch.ops.aten, op), overload)


def test_opcodes_are_append_only():
    assert tuple(ops.BY_OPCODE[k].name if k in ops.BY_OPCODE else None
                 for k in range(ops.OPCODE_END)) == OPCODE_HISTORY
    assigned = [k for k, name in enumerate(OPCODE_HISTORY) if name is not None]
    assert sorted(ops.BY_OPCODE) == assigned  # dense once the other branches' ops are merged


@pytest.mark.parametrize("d", ops.REGISTRY, ids=lambda d: d.name)
def test_every_stage_has_the_op(d):
    """What each stage needs for an op, by its registry facts."""
    if d.sources:
        assert d.name in BUILDERS, f"{d.name}: lifted from aten but frontend/lift.py has no builder"
        for s in d.sources:
            _aten(s.aten)  # a real aten overload (AttributeError otherwise)
            if d.name == "lut":
                assert s.fn is not None, f"{s.aten}: lut sources carry fn"
            else:  # add/mul: fn is their lut with a constant scalar operand (x * 0.5)
                assert s.fn is None or s.quant == "binary", f"{s.aten}: fn on a non-lut source"
            schema = {a.name for a in _aten(s.aten)._schema.arguments}
            assert s.fn is None or {s.operand, *s.args} <= schema, f"{s.aten}: fn arguments"
    if d.name != "delegate":
        assert d.name in REQUANT_RULES, f"{d.name}: passes/requant.py has no rule"
    if not d.tosa and d.name != "delegate":
        assert d.name in TOSA_RULES, f"{d.name}: tosa is '' but backends/tosa/rules.py lacks it"
    else:
        assert d.name not in TOSA_RULES, f"{d.name}: lowered to TOSA but says {d.tosa!r}"
    if d.has_kernel:
        assert d.opcode is not None
        fn = KERNELS[d.name]  # ref/<family>.py defines it
        params = inspect.signature(fn).parameters.values()
        assert tuple(p.name for p in params if p.kind is p.KEYWORD_ONLY) == d.attrs
        for v in d.variants:
            k = ck.kernel(d.name, v)
            text = k.sources[0].read_text()
            assert f"mt_status {k.function}(const mt_op_args *args)" in text, k.sources[0]
    if d.fusable:
        assert {"act_min", "act_max"} <= set(d.attrs)


def test_stage_tables_name_only_registry_ops():
    assert set(BUILDERS) == {d.name for d in ops.REGISTRY if d.sources}
    assert set(REQUANT_RULES) == {d.name for d in ops.REGISTRY} - {"delegate"}
    assert set(TOSA_RULES) == {d.name for d in ops.REGISTRY if not d.tosa}
    assert set(KERNELS) == {d.name for d in ops.OPS if d.has_kernel}


def test_quantizer_rules_follow_the_registry():
    """Every aten source is annotated the way its registry rule says (one op per rule)."""
    from torch.fx import Graph

    from mcutorch.frontend.quantizer import KEY, Quantizer

    for rule in ops.QUANT_RULES:
        src = next(s for _, s in ops.SOURCES.values() if s.quant == rule)
        g = Graph()
        x = g.placeholder("x")
        x.meta["val"] = torch.zeros(1, 2, 3, 3)
        w = g.placeholder("w")
        w.meta["val"] = torch.zeros(2, 2, 1, 1)
        node = g.call_function(_aten(src.aten), (x, w) if rule in ("mac", "binary") else (x,))
        Quantizer().annotate_node(node)
        ann = node.meta[KEY]
        if rule == "fixed":
            assert (ann.output_qspec.scale, ann.output_qspec.zero_point) == src.qparams
        elif rule == "mac":
            assert ann.input_qspec_map[w].qscheme == torch.per_channel_symmetric
        assert ann.output_qspec is not None or rule in ("mac", "binary", "compare"), rule


def test_generated_c_files_are_current():
    bad = stale()
    assert not bad, f"stale: {[str(p) for p in bad]}; run `python -m mcutorch.device.generate`"


def _stage(module: str) -> int | None:
    parts = module.split(".")[1:]
    for key in (".".join(parts[:2]), parts[0] if parts else ""):
        if key in STAGES:
            return STAGES[key]
    return None


def test_no_stage_imports_a_later_one():
    bad = []
    for f in sorted(PACKAGE.rglob("*.py")):
        rel = f.relative_to(PACKAGE).with_suffix("")
        here = _stage(".".join(("mcutorch", *rel.parts)))
        if here is None:
            continue  # api, cli, compiler, compare, report, models: they drive the stages
        for node in ast.walk(ast.parse(f.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mcutorch"):
                names = [node.module] if node.module != "mcutorch" else [
                    f"mcutorch.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if a.name.startswith("mcutorch")]
            for name in names:
                there = _stage(name)
                if there is None or there > here:
                    bad.append(f"{rel}:{node.lineno} imports {name}")
    assert not bad, bad


def test_top_of_the_package_stays_small():
    modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(modules) <= TOP_LEVEL_BUDGET, modules


HEAVY = ("torch", "tosa_serializer", "matplotlib")  # imported only by the steps that use them


def _imports_torch(code: str) -> bool:
    """Whether `code` imports torch, the TOSA serializer or matplotlib."""
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\n"
                          f"print(*(m in sys.modules for m in {HEAVY!r}))"],
                         capture_output=True, text=True, check=True).stdout.split("\n")[-2]
    return out.split() != ["False"] * len(HEAVY)


def test_registry_imports_neither_torch_nor_tosa():
    assert not _imports_torch("import mcutorch.ops, mcutorch.device.kernels")


def test_import_and_the_html_writer_module_do_not_import_matplotlib():
    """matplotlib is imported when `analyze --html` draws a chart, not before."""
    assert not _imports_torch("import mcutorch.ops, mcutorch.program.model, mcutorch.cli, "
                              "mcutorch.analysis.html")
    assert _imports_torch("from mcutorch.analysis.html import per_op_svg\n"
                          "per_op_svg([(0, 'conv2d', 5.0)], 'MACs', 'macs', 1)")


def test_inspect_does_not_import_torch(tmp_path):
    """`mcutorch inspect` reads a program (and the registry) only."""
    import mcutorch
    from torch import nn

    x = torch.randn(1, 3, 6, 6)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()).eval()
    path = tmp_path / "m.mtp"
    mcutorch.compile(mcutorch.quantize(model, (x,)), (x,)).save(path)
    assert not _imports_torch(f"from mcutorch.cli import main\nmain(['inspect', {str(path)!r}])")


def test_supported_ops_page_lists_every_op_and_its_isa_paths():
    from mcutorch.device import ops_doc

    text = ops_doc.PATH.read_text()
    for op in ops.REGISTRY:
        assert op.name == "delegate" or f"| `{op.name}` |" in text, op.name
    assert ops_doc.isa_paths(ops.get("conv2d")) == "MVE, DSP, C"  # mt_kernel_mac*.h blocks
    assert ops_doc.isa_paths(ops.get("rescale")) == "MVE, C"
    assert ops_doc.isa_paths(ops.get("pad")) == "C"
    assert "no softmax" in text and " overloads: abs, abs_" in text
