"""Ethos-U delegates (mcutorch.backends.ethos_u): the U55/U85 partitions, Vela refusals moved to
the CPU, identical outputs on every executor, and the binding of each delegate's I/O inside Vela's
scratch area, which the CPU fallback never exercises (test_binding_* guard it).
Needs the `npu` extra (tosa-tools, ethos-u-vela)."""
from __future__ import annotations

import math
from functools import cache

import numpy as np
import needs
import pytest
import torch

needs.module("tosa_serializer")
needs.module("ethosu.vela")

import mcutorch  # noqa: E402
from mcutorch.device import crt  # noqa: E402
from mcutorch.backends import ethos_u  # noqa: E402
from mcutorch.backends.ethos_u import constraints  # noqa: E402
from mcutorch.compiler import build_graph  # noqa: E402
from mcutorch.errors import McutorchError  # noqa: E402
from mcutorch.ir import Node, Tensor  # noqa: E402
from mcutorch.program.model import Program  # noqa: E402

F = torch.nn.functional
U55, U85 = "cortex-m55+ethos-u55-128", "cortex-m55+ethos-u85-256"


class Smooth(torch.nn.Module):
    """A padded 9x9 average (U55: CPU, U85: NPU) and a channel softmax (CPU everywhere) between
    convolutions."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2 = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Conv2d(8, 8, 3, padding=1)
        self.c3, self.fc = torch.nn.Conv2d(8, 16, 1), torch.nn.Linear(16, 5)

    def forward(self, x):
        x = F.avg_pool2d(F.relu(self.c1(x)), 9, 1, padding=4, count_include_pad=False)
        x = F.relu(self.c3(torch.softmax(self.c2(x), dim=1)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class Skip(torch.nn.Module):
    """A residual across a CPU op (its tensor is another delegate's output: copy in) and the
    input read again, through a reshape view, after the first delegate (copy in)."""

    def __init__(self):
        super().__init__()
        self.f1, self.f2 = torch.nn.Linear(16, 16), torch.nn.Linear(16, 16)

    def forward(self, x):
        a = self.f1(x)
        return self.f2(torch.softmax(a, dim=-1)) + a, torch.softmax(x.reshape(2, 8), dim=-1)


class MinMax(torch.nn.Module):
    """maximum and minimum between convolutions: RESCALE, MAXIMUM/MINIMUM on int32, RESCALE."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Conv2d(3, 8, 1)

    def forward(self, x):
        a, b = self.a(x), self.b(x)
        return torch.minimum(torch.maximum(a, b), F.relu(a))


class Functions(torch.nn.Module):
    """Tables (TOSA TABLE) between convolutions: functions with and without arguments, and
    binary ops with a constant scalar."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Conv2d(8, 8, 1)

    def forward(self, x):
        y = self.a(x)
        y = F.gelu(y, approximate="tanh") + torch.exp(-y.abs()) * 0.5
        y = F.elu(self.b(torch.sin(y) ** 2), 0.5)
        return torch.log1p(torch.sigmoid(1 - y))


def _model(name: str):
    torch.manual_seed(0)
    if name == "kws":
        from mcutorch.models import build, example_input

        model = build("kws").eval()
        return model, [example_input(model, seed=i) for i in range(3)]
    model = {"smooth": Smooth, "skip": Skip, "minmax": MinMax, "functions": Functions}[name]()
    model = model.eval()
    shape = (1, 16) if name == "skip" else (1, 3, 16, 16)
    return model, [torch.randn(shape) for _ in range(3)]


@cache
def quantized(name: str):
    model, xs = _model(name)
    return mcutorch.quantize(model, (xs[0],), calibration=xs), xs


@cache
def compiled(name: str, target: str, fallback: bool = True):
    q, xs = quantized(name)
    return mcutorch.compile(q, (xs[0],), target=target, board="mps3-an547",
                            npu_fallback=fallback)


def int8_inputs(name: str):
    program = compiled(name, "cortex-m55")
    return program, program.quantize_inputs([quantized(name)[1][-1]])


def placement(program) -> list[tuple[str, str, object]]:
    """(op, where, delegate) per graph node (host rows and copies left out)."""
    return [(r["op"], r["on"], r["delegate"]) for r in program.program.metadata["placement"]
            if r["on"] != "host" and r["op"] != "copy"]


# ----------------------------------------------------------------------------- partitions

def test_u55_and_u85_split_differently():
    u55, u85 = placement(compiled("smooth", U55)), placement(compiled("smooth", U85))
    assert u55 == [("conv2d", "NPU", 0), ("avg_pool2d", "CPU", None), ("conv2d", "NPU", 1),
                   ("softmax", "CPU", None), ("conv2d", "NPU", 2), ("avg_pool2d", "NPU", 2),
                   ("reshape", "NPU", 2), ("fully_connected", "NPU", 2)]
    assert u85 == [("conv2d", "NPU", 0), ("avg_pool2d", "NPU", 0), ("conv2d", "NPU", 0),
                   ("softmax", "CPU", None), ("conv2d", "NPU", 1), ("avg_pool2d", "NPU", 1),
                   ("reshape", "NPU", 1), ("fully_connected", "NPU", 1)]
    why = {r["op"]: r["why"] for r in compiled("smooth", U55).program.metadata["placement"]
           if r["on"] == "CPU"}
    assert "kernel <= 8x8" in why["avg_pool2d"] and "no softmax" in why["softmax"]
    assert len(compiled("smooth", U55).program.delegates) == 3


@pytest.mark.parametrize("target", [U55, U85])
def test_maximum_minimum_go_to_the_npu(target):
    """Vela takes the int32 MAXIMUM/MINIMUM sequence on U55 and U85: one delegate, no CPU op."""
    rows = placement(compiled("minmax", target))
    assert {op for op, _, _ in rows} >= {"maximum", "minimum"}
    assert {(on, dlg) for _, on, dlg in rows} == {("NPU", 0)}


def test_function_tables_go_to_the_npu():
    """Every `lut` (gelu, exp, abs, neg, x * 0.5, sin, x ** 2, elu, 1 - x, sigmoid, log1p) is
    a TABLE in the U55 delegate; the program matches the CPU-only one."""
    rows = placement(compiled("functions", U55))
    assert [op for op, _, _ in rows].count("lut") == 11
    assert {(on, dlg) for _, on, dlg in rows} == {("NPU", 0)}
    x = quantized("functions")[1][-1]
    npu, cpu = compiled("functions", U55).run(x), compiled("functions", "cortex-m55").run(x)
    assert torch.equal(npu, cpu)


def test_npu_programs_are_reproducible():
    """Two compiles of one model for an Ethos-U give the same bytes (Vela's wall time is kept
    in Program.timings, never in the file)."""
    q, xs = quantized("smooth")
    a, b = (mcutorch.compile(q, (xs[0],), target=U55).program for _ in range(2))
    assert a.to_bytes() == b.to_bytes()
    assert a.timings["vela_seconds"] > 0


def test_partition_stays_acyclic_and_views_stay_outside():
    graph = build_graph(quantized("skip")[0])
    part = ethos_u.partition(graph, "ethos-u55-128")
    ops = [[n.op for n in g if n.op != "reshape"] for g in part.groups]
    assert ops == [["fully_connected"], ["fully_connected", "add"]]  # add never joins f1
    graph.nodes = ethos_u.contracted_order(graph, part.groups)
    seen = {id(t) for t in graph.inputs}
    for node in graph.nodes:  # still a topological order, each group consecutive
        assert all(t.is_const or id(t) in seen for t in node.inputs)
        seen |= {id(t) for t in node.outputs}
    for g in part.groups:
        at = sorted(graph.nodes.index(n) for n in g)
        assert at == list(range(at[0], at[0] + len(at)))
    readers = {id(t) for n in graph.nodes for t in n.inputs}
    for g in part.groups:  # no reshape in a group hands its output out
        inside = {id(t) for n in g for t in n.inputs}
        for n in g:
            if n.op == "reshape":
                assert id(n.outputs[0]) in inside
                assert not any(n.outputs[0] is t for t in graph.outputs)
    assert readers


def _node(op, x_shape, y_shape, w_shape=None, **attrs) -> Node:
    ins = [Tensor("x", x_shape)] + ([Tensor("w", w_shape)] if w_shape else [])
    return Node(op, ins, [Tensor("y", y_shape)], attrs)


def test_constraint_rules():
    pool = {"kernel_h": 9, "kernel_w": 9, "stride_h": 1, "stride_w": 1, "pad_top": 4,
            "pad_left": 4, "pad_bottom": 4, "pad_right": 4, "count_include_pad": 0, "divisor": 0}
    padded = _node("avg_pool2d", (1, 16, 16, 8), (1, 16, 16, 8), **pool)
    assert "8x8" in ethos_u.npu_check(padded, "ethos-u55-128")
    assert "8x8" in ethos_u.npu_check(padded, "ethos-u65-512")
    assert ethos_u.npu_check(padded, "ethos-u85-256") == ""
    counted = _node("avg_pool2d", (1, 16, 16, 8), (1, 16, 16, 8), **{**pool,
                                                                      "count_include_pad": 1})
    assert ethos_u.npu_check(counted, "ethos-u55-128") == ""  # lowered as PAD + AVG_POOL2D
    small = _node("avg_pool2d", (1, 16, 16, 8), (1, 16, 16, 8),
                  **{**pool, "kernel_h": 8, "kernel_w": 8, "pad_bottom": 3, "pad_right": 3})
    assert ethos_u.npu_check(small, "ethos-u55-32") == ""
    wide = _node("fully_connected", (1, 70000), (1, 2), (2, 70000))
    assert all("65536" in ethos_u.npu_check(wide, n) for n in ("ethos-u55-64", "ethos-u85-512"))
    assert ethos_u.family("ethos-u85-2048") == "u85"


# ----------------------------------------------------------------------------- Vela

def test_vela_config_defaults_and_errors():
    assert ethos_u.vela_config("ethos-u55-128").system_config == "Ethos_U55_High_End_Embedded"
    assert ethos_u.vela_config("ethos-u65-256").memory_mode.startswith("Dedicated_Sram")
    cfg = ethos_u.vela_config("ethos-u55-64", memory_mode="Sram_Only")
    assert cfg.memory_mode == "Sram_Only" and cfg.system_config.startswith("Ethos_U55")
    with pytest.raises(ethos_u.VelaError, match="unknown System_Config 'No_Such'"):
        ethos_u.vela_config("ethos-u55-128", "No_Such")
    graph = build_graph(quantized("skip")[0])
    tg = ethos_u.delegate.tosa.lower_graph(graph, graph.nodes[:1])
    bad = ethos_u.vela_config("ethos-u55-128", extra=("--optimise", "Sideways"))
    with pytest.raises(ethos_u.VelaError, match="Sideways"):
        ethos_u.compile_tosa(tg.flatbuffer, bad)
    good = ethos_u.compile_tosa(tg.flatbuffer, ethos_u.vela_config("ethos-u55-128"))
    assert good.command_stream[:4] == b"COP1" and good.estimate["cycles_npu"] > 0


def test_vela_refusal_moves_the_op_to_the_cpu(monkeypatch):
    """Switch off the partitioner's U55 rule for padded AVG_POOL2D: Vela refuses the subgraph,
    the pool moves to the CPU with Vela's reason, and the program still runs bit-exactly."""
    rules = [r for r in constraints.RULES if r.name != "avg_pool_padded_kernel"]
    monkeypatch.setattr(constraints, "RULES", rules)
    q, xs = quantized("smooth")
    program = mcutorch.compile(q, (xs[0],), target=U55, board="mps3-an547")
    rows = [r for r in program.program.metadata["placement"] if r["op"] == "avg_pool2d"]
    assert rows[0]["on"] == "CPU" and "Vela refused" in rows[0]["why"], rows[0]
    assert "AvgPool" in rows[0]["why"] and rows[1]["on"] == "NPU"
    cpu, x = int8_inputs("smooth")
    assert all(np.array_equal(a, b) for a, b in zip(program.run_int8(x), cpu.run_int8(x)))


def test_verify_runs_the_tosa_check(monkeypatch):
    calls = []
    monkeypatch.setattr(ethos_u.delegate.tosa, "verify", lambda *a: calls.append(a))
    q, xs = quantized("skip")
    mcutorch.compile(q, (xs[0],), target=U55, verify=False)
    assert calls == []
    mcutorch.compile(q, (xs[0],), target=U55)  # verify=True is the default
    assert len(calls) == 2 * 2  # two delegates, two random input sets each


# ----------------------------------------------------------------------------- executors

CASES = [("smooth", U55), ("smooth", U85), ("skip", U55), ("kws", U55), ("minmax", U55),
         ("minmax", U85)]


@pytest.mark.parametrize("name,target", CASES)
def test_python_and_host_c_runtime_agree(name, target):
    cpu, x = int8_inputs(name)
    want = cpu.run_int8(x)
    program = compiled(name, target)
    for got in (program.run_int8(x), crt.run_host(program.program, x)):
        assert all(np.array_equal(a, b) for a, b in zip(got, want))


@pytest.mark.qemu
def test_emulated_m55_agrees():
    from mcutorch.device import firmware

    for name, targets in (("skip", (U55, U85)), ("kws", (U55,))):
        cpu, x = int8_inputs(name)  # the fallback, in arenas of exactly the planned size
        for target in targets:
            run = firmware.run(compiled(name, target).program, x, "mps3-an547")
            assert all(np.array_equal(a, b) for a, b in zip(run.outputs, cpu.run_int8(x)))


def test_no_npu_fallback_drops_the_cpu_versions():
    full, lean = compiled("smooth", U55), compiled("smooth", U55, False)
    assert all(d.cpu_ops is None for d in lean.program.delegates)
    assert [o.name for o in lean.program.ops] == ["delegate", "avg_pool2d", "delegate",
                                                  "softmax", "delegate"]
    assert len(lean.program.constants) < len(full.program.constants)
    _, x = int8_inputs("smooth")
    with pytest.raises(McutorchError, match="without a CPU version"):
        lean.run_int8(x)
    with pytest.raises(McutorchError, match="no_npu"):
        crt.run_host(lean.program, x)


@pytest.mark.parametrize("name", ["skip", "kws"])
def test_cpu_version_shares_vela_scratch(name):
    """The CPU version runs instead of the NPU, so its own tensors sit in Vela's scratch
    (beside the delegate's I/O still live): the plan with it is within 5 % of the plan
    without, the compile report names what is left, and it still runs bit-exact."""
    full, lean = compiled(name, U55), compiled(name, U55, False)
    ram = [sum(r.size for r in c.program.regions) for c in (full, lean)]
    assert ram[0] <= 1.05 * ram[1]
    cost = full.summary()["npu_fallback"]
    assert cost["ram"] == ram[0] - ram[1] and lean.summary()["npu_fallback"]["ram"] == 0
    p = full.program
    cpu_ops = {i for d in p.delegates for i in range(d.cpu_ops[0], sum(d.cpu_ops))}
    bound = {b.tensor for d in p.delegates for b in d.inputs + d.outputs}
    own = {t for i in cpu_ops for t in p.ops[i].outputs} - bound
    inside = [t for t in own for d in p.delegates
              if p.tensors[t].region == d.scratch.region
              and d.scratch.offset <= p.tensors[t].offset < d.scratch.offset + d.scratch.size]
    assert inside, "no CPU-version tensor reuses a delegate's scratch"
    assert cost["flash"] > 0 and cost["flash"] <= len(p.constants) - len(lean.program.constants)
    cpu, x = int8_inputs(name)
    for got in (full.run_int8(x), crt.run_host(p, x)):
        assert all(np.array_equal(a, b) for a, b in zip(got, cpu.run_int8(x)))


# ----------------------------------------------------------------------------- the binding

def _vela_alone(path, accelerator: str, cfg: dict, tmp_path) -> dict:
    """Vela's raw output for one emitted .tosa, read with numpy only (not ethos_u.read_raw)."""
    from ethosu.vela import vela

    out = tmp_path / path.stem
    args = [str(path), "--output-format", "raw", "--output-dir", str(out),
            "--config", str(ethos_u.vela.config_file()), "--accelerator-config", accelerator,
            "--system-config", cfg["system_config"], "--memory-mode", cfg["memory_mode"]]
    assert vela.main(args) == 0
    with np.load(out / f"{path.stem}_vela.npz", allow_pickle=True) as z:
        return {k: z[k] for k in z.files}


def _main_positions(p: Program):
    """(writers, readers): first main-loop position writing each tensor (-1: program input) and
    last one reading it (len(ops): program output). A reshape view has no writer: its reads
    count for its root, the tensor at the same bytes written last before the view's first read."""
    writers, readers = {t: -1 for t in p.inputs}, {t: len(p.ops) for t in p.outputs}
    first_read: dict = {t: len(p.ops) for t in p.outputs}
    for i in p.main_ops():
        for t in p.ops[i].inputs:
            readers[t] = max(readers.get(t, -1), i)
            first_read[t] = min(first_read.get(t, i), i)
        for t in p.ops[i].outputs:
            writers.setdefault(t, i)

    def place(t):
        return p.tensors[t].region, p.tensors[t].offset, p.tensors[t].nbytes

    for v in [t for t in readers if t not in writers and p.tensors[t].storage == "arena"]:
        roots = [t for t, w in writers.items() if place(t) == place(v) and w < first_read[v]]
        root = max(roots, key=lambda t: writers[t])
        readers[root] = max(readers.get(root, -1), readers[v])
    return writers, readers


def _check_binding(p: Program, k: int, raw: dict, capsys=None) -> None:
    d = p.delegates[k]
    blob = bytes(p.constants)
    assert blob[d.command[0]:sum(d.command)] == raw["cmd_data"].tobytes()
    weights = raw["weight_data"].tobytes()
    assert blob[d.weights[0]:sum(d.weights)] == (b"" if weights == b"\0" else weights)
    assert d.scratch.size == int(raw["scratch_size"]) and p.regions[d.scratch.region].npu
    fast = int(raw["scratch_fast_size"])
    assert (d.fast_scratch.size if d.fast_scratch else 0) == fast
    if fast:
        assert p.regions[d.fast_scratch.region].npu
    for kind, bindings in (("input", d.inputs), ("output", d.outputs)):
        assert len(bindings) == len(raw[f"{kind}_offset"])
        for b, off, shape, size, region in zip(bindings, raw[f"{kind}_offset"],
                                               raw[f"{kind}_shape"], raw[f"{kind}_elem_size"],
                                               raw[f"{kind}_region"]):
            t = p.tensors[b.tensor]
            assert (b.offset, b.shape, b.elem_size) == (int(off), tuple(map(int, shape)),
                                                        int(size))
            assert int(region) == int(raw["scratch_region"])  # Vela's slot 1: the scratch
            assert t.region == d.scratch.region and t.offset == d.scratch.offset + b.offset
            assert t.elem_size == b.elem_size and t.numel == math.prod(b.shape)
            base = p.regions[t.region].base
            assert base + t.offset == base + d.scratch.offset + int(off)  # driver's address


def _check_lifetimes(p: Program, k: int) -> None:
    """Producers write delegate inputs in place, consumers read outputs in place, and nothing
    that lives across the delegate sits in its scratch areas (Vela may reuse them)."""
    d = p.delegates[k]
    at = next(i for i in p.main_ops() if p.ops[i].name == "delegate"
              and p.ops[i].attrs["index"] == k)
    writers, readers = _main_positions(p)
    for b in d.inputs:
        assert writers[b.tensor] < at
    for b in d.outputs:
        assert writers[b.tensor] == at and readers[b.tensor] > at
    for area in (d.scratch, d.fast_scratch):
        if area is None:
            continue
        for t, first in writers.items():
            info = p.tensors[t]
            if first < at < readers.get(t, -1) and info.region == area.region:
                assert (info.offset + info.nbytes <= area.offset
                        or area.offset + area.size <= info.offset), (k, p.tensor_name(t))


def _check_cpu_version(p: Program, k: int) -> None:
    """The CPU version never writes over an input binding it still has to read."""
    d = p.delegates[k]
    if d.cpu_ops is None:
        return
    ops = [p.ops[i] for i in range(d.cpu_ops[0], sum(d.cpu_ops))]
    for b in d.inputs:
        lo = d.scratch.offset + b.offset
        hi = lo + p.tensors[b.tensor].nbytes
        last = max((j for j, op in enumerate(ops) if b.tensor in op.inputs), default=-1)
        for j, op in enumerate(ops[:last + 1]):
            for t in op.outputs:
                w = p.tensors[t]
                if w.region == d.scratch.region:
                    assert w.offset + w.nbytes <= lo or hi <= w.offset, (k, j, op.name)


BINDING_CASES = [("smooth", U55, True), ("smooth", U85, True), ("skip", U55, True),
                 ("skip", U85, False), ("kws", U85, True)]


@pytest.mark.parametrize("name,target,fallback", BINDING_CASES)
def test_binding_record_vela_and_plan_agree(name, target, fallback, tmp_path):
    """For every delegate: the record, Vela's raw output (Vela run again on the TOSA file the
    compiler handed it, parsed here with numpy) and the planned addresses agree."""
    q, xs = quantized(name)
    folder = tmp_path / "tosa"
    program = mcutorch.compile(q, (xs[0],), target=target, board="mps3-an547",
                               emit_tosa=folder, npu_fallback=fallback).program
    p = Program.from_bytes(program.to_bytes())  # what an executor reads
    cfg = p.metadata["ethos_u"]["config"]
    assert len(p.delegates) == len(list(folder.glob("delegate_*.tosa"))) >= 1
    for k in range(len(p.delegates)):
        raw = _vela_alone(folder / f"delegate_{k}.tosa", cfg["accelerator"], cfg, tmp_path)
        _check_binding(p, k, raw)
        _check_lifetimes(p, k)
        _check_cpu_version(p, k)


class TwoOut(torch.nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.f1, self.f2 = torch.nn.Linear(16, 16), torch.nn.Linear(16, n)

    def forward(self, x):
        a = self.f1(x)
        return self.f2(a), torch.softmax(a, dim=-1)


@pytest.mark.parametrize("n", [8, 32])
def test_vela_keeps_the_tosa_output_order(n):
    """Bindings pair TOSA outputs with Vela's by position; Vela's raw output carries no names,
    so check that it follows the TOSA graph's order whether the first output is the smaller or
    the larger one (the TOSA graph lists the program output first, then the softmax input)."""
    x = torch.randn(1, 16)
    q = mcutorch.quantize(TwoOut(n).eval(), (x,))
    d = mcutorch.compile(q, (x,), target=U55).program.delegates[0]
    assert [b.shape[-1] for b in d.outputs] == [n, 16]


def test_copies_where_bytes_cannot_move():
    p = compiled("skip", U55).program
    copies = [p.op_source(i) for i in p.main_ops() if p.ops[i].name == "copy"]
    assert len(copies) == 2, copies  # the input (read again later) and a (bound to delegate 0)
    meta = p.metadata["ethos_u"]["delegates"]
    assert [d["copies_in"] for d in meta] == [1, 1]


# ----------------------------------------------------------------------------- CLI

def test_cli_compile_and_inspect(tmp_path, capsys):
    from mcutorch.cli import main

    src = tmp_path / "net.py"
    src.write_text("import torch\n"
                   "def model():\n"
                   "    torch.manual_seed(0)\n"
                   "    return torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.Softmax(-1))\n"
                   "def example_inputs():\n"
                   "    return (torch.randn(1, 8),)\n")
    out = tmp_path / "net.mtp"
    assert main(["compile", str(src), "--target", U55, "--emit-tosa", str(tmp_path / "t"),
                 "--no-npu-fallback", "--memory-mode", "Sram_Only", "-o", str(out)]) == 0
    assert (tmp_path / "t" / "delegate_0.tosa").is_file()
    assert "1 delegate(s)" in capsys.readouterr().out
    p = mcutorch.load(out).program
    assert p.delegates[0].cpu_ops is None
    assert p.metadata["ethos_u"]["config"]["memory_mode"] == "Sram_Only"
    assert main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert "placement on ethos-u55-128" in text and "no softmax" in text
    assert "Vela estimate" in text and "at scratch+" in text
    stripped = tmp_path / "net_stripped.mtp"  # what export-c ships: only the I/O facts kept
    p.stripped().save(stripped)
    assert main(["inspect", str(stripped)]) == 0
    text = capsys.readouterr().out
    assert "delegate 0:" in text and "memory plan:" in text and "live lower bound unknown" in text
    assert list(mcutorch.load(stripped).program.metadata) == ["io"]


class _Attention(torch.nn.Module):
    def __init__(self, c=24, d=16):
        super().__init__()
        self.q, self.k, self.v, self.out = (torch.nn.Linear(c, d), torch.nn.Linear(c, d),
                                            torch.nn.Linear(c, d), torch.nn.Linear(d, c))

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        return self.out(torch.softmax(q @ k.transpose(-1, -2) * 0.25, dim=-1) @ v)


@pytest.mark.parametrize("target", [U55, U85])
def test_attention_matmuls_go_to_the_npu(target):
    """Q @ K^T and P @ V are TOSA MATMULs Vela 5.2 places on the U55 and the U85 (softmax stays
    on the CPU); the program gives the CPU-only program's bytes."""
    torch.manual_seed(7)
    model, cal = _Attention().eval(), [torch.randn(1, 16, 24) for _ in range(4)]
    q = mcutorch.quantize(model, (cal[0],), calibration=cal)
    program = mcutorch.compile(q, (cal[0],), target=target, board="mps3-an547")
    rows = [(op, on) for op, on, _ in placement(program) if op in ("matmul", "softmax")]
    assert rows == [("matmul", "NPU"), ("softmax", "CPU"), ("matmul", "NPU")], rows
    cpu = mcutorch.compile(q, (cal[0],))
    x = cpu.quantize_inputs([cal[1]])
    assert all(np.array_equal(a, b) for a, b in zip(program.run_int8(x), cpu.run_int8(x)))


class _Product(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


@pytest.mark.parametrize("n,target,on", [(65536, U55, "NPU"), (66000, U55, "CPU"),
                                         (66000, U85, "NPU")])
def test_matmul_width_limit(n, target, on, monkeypatch):
    """Vela 5.2 takes a MATMUL of N = 65536 columns on the U55 and refuses 66000 (its transpose
    becomes a non-passthrough op: switched off, the rule lets Vela say so); the U85 takes
    66000, and the rule leaves it there."""
    wide = _node("matmul", (1, 1, 4), (1, 1, n), (1, 4, n))
    assert ("65536" in ethos_u.npu_check(wide, target.split("+")[1])) == (on == "CPU")
    monkeypatch.setattr(constraints, "RULES",
                        [r for r in constraints.RULES if r.name != "matmul_channels"])
    ex = (torch.randn(1, 1, 4), torch.randn(1, 4, n))
    q = mcutorch.quantize(_Product(), ex)
    program = mcutorch.compile(q, ex, target=target, board="mps3-an547")
    row = next(r for r in program.program.metadata["placement"] if r["op"] == "matmul")
    assert row["on"] == on and (on == "NPU" or "Vela refused" in row["why"]), row
