"""`mcutorch analyze`: per-layer facts checked against the parts that produce them (the program,
the firmware build, gcc's call graph, the QEMU plugin), the CLI's errors, and the HTML page in a
real headless Chromium."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from html.parser import HTMLParser

import numpy as np
import pytest
import torch
from torch import nn

import mcutorch
from mcutorch.analysis import analyze, render
from mcutorch.analysis.html import write_html
from mcutorch.cli import main
from mcutorch.device import firmware
from mcutorch.device.isa_path import kernel_isa_path
from mcutorch.device.stack import program_stack
from mcutorch.program.model import Program
from mcutorch.targets import parse_target


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = torch.relu(self.dw(torch.relu(self.conv(x))))
        return torch.softmax(self.fc(nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)), 1)


@pytest.fixture(scope="module")
def net():
    """The float model, its example inputs and its calibration batches."""
    torch.manual_seed(0)
    return Net().eval(), (torch.zeros(1, 1, 8, 8),), [torch.randn(1, 1, 8, 8) for _ in range(4)]


@pytest.fixture(scope="module")
def programs(tmp_path_factory, net):
    """The same small CNN compiled for a Cortex-M55 (mps3-an547 memory), a Cortex-M4 and an
    M55 + Ethos-U55 (softmax stays on the CPU), saved as files."""
    model, example, calibration = net
    qmodel = mcutorch.quantize(model, example, calibration=calibration)
    d = tmp_path_factory.mktemp("analyze")
    out = {}
    for key, target, board in (("m55", "cortex-m55", "mps3-an547"), ("m4", "cortex-m4", None),
                               ("u55", "cortex-m55+ethos-u55-128", "mps3-an547")):
        path = d / f"{key}.mtp"
        mcutorch.compile(qmodel, example, target=target, board=board, name="net").save(path)
        out[key] = path
    return out


@pytest.fixture(scope="module")
def reports(programs):
    """analyze() of each program (no board), computed once."""
    return {key: analyze(path) for key, path in programs.items()}


def _arena_tensors(p: Program) -> list[int]:
    return [i for i, t in enumerate(p.tensors) if t.storage == "arena"]


def test_per_op_facts_agree_with_the_program_and_the_builds(programs, reports):
    p = Program.load(programs["m55"])
    info = reports["m55"]
    assert [o["op"] for o in info["ops"]] == [op.name for op in p.ops]
    target = p.target.as_target()
    for o, op in zip(info["ops"], p.ops):
        consts = [t for t in op.inputs if p.tensors[t].storage == "const"]
        assert o["weight_bytes"] == sum(p.tensors[t].nbytes for t in consts)
        acts = [t for t in (*op.inputs, *op.outputs) if p.tensors[t].storage == "arena"]
        assert o["activation_bytes"] == sum(p.tensors[t].nbytes for t in acts)
        for t in o["inputs"] + o["outputs"]:
            info_t = p.tensors[t["index"]]
            assert (t["region"], t["offset"]) == (p.regions[info_t.region].name, info_t.offset)
        assert o["isa"] == kernel_isa_path(op.name, op.variant, target)
        assert o["runs_on"] == "CPU" and "no NPU" in o["why_not_npu"]
    assert info["totals"]["macs"] == 8 * 8 * 8 * 9 + 8 * 8 * 8 * 9 + 8 * 5
    # flash: the linker map of the program's firmware; RAM: plan + state + gcc's call graph
    elf = firmware.build(p, "mps3-an547")
    split = firmware.flash_split(elf, p)
    flash = info["totals"]["flash"]
    assert {k: flash[k] for k in split} == split
    assert flash["total"] == split["runtime_core"] + split["kernels"] + split["program"]
    assert 0 < sum(flash["per_kernel"].values()) <= flash["kernels"]
    assert set(flash["per_kernel"]) == {f"{op.name}/{op.variant}" for op in p.ops}
    ram = info["totals"]["ram"]
    assert ram["stack"] == program_stack(p).bytes > 0
    assert ram["arenas"] == {r.name: r.size for r in p.regions}
    assert ram["total"] == sum(ram["arenas"].values()) + ram["state"] + ram["stack"]
    # bound ahead of time: the state's views and args in flash (its arena pointers are the
    # binding's own), no ring op so no RAM beyond arenas and stack
    assert ram["static_tables"] == ram["state"] - 4 * len(p.regions) > 0
    assert ram["static_ring_views"] == 0
    assert ram["static_total"] == sum(ram["arenas"].values()) + ram["stack"]
    text = render(info)
    assert "flash" in text and "worst-case stack" in text and "MVE" in text
    json.dumps(info)  # JSON-ready


def test_isa_path_follows_the_target_and_the_kernels_branches():
    m55, m4, m3 = (parse_target(t) for t in ("cortex-m55", "cortex-m4", "cortex-m3"))
    assert kernel_isa_path("conv2d", "default", m55) == "MVE"
    assert kernel_isa_path("conv2d", "default", m4) == "DSP"
    assert kernel_isa_path("conv2d", "default", m3) == "C"
    assert kernel_isa_path("conv2d", "default", parse_target("cortex-m55+nomve")) == "DSP"
    assert kernel_isa_path("softmax", "default", m55) == "MVE"  # an MVE path and no DSP one
    assert kernel_isa_path("softmax", "default", m4) == "C"
    assert kernel_isa_path("copy", "default", m55) == "C"  # plain C on every core


def test_isa_path_of_every_kernel_agrees_with_its_source_blocks():
    """Two independent readings: the machine code gcc emits (device.isa_path) and the kernel's
    #if MT_MVE / MT_DSP blocks (device.ops_doc, docs/supported_ops.md)."""
    from mcutorch import ops
    from mcutorch.device.ops_doc import isa_paths as source_paths

    m55, m4, m3 = (parse_target(t) for t in ("cortex-m55", "cortex-m4", "cortex-m3"))
    for op in ops.OPS:
        if not op.has_kernel:
            continue
        listed = source_paths(op).split(", ")
        for variant in op.variants:
            want = "MVE" if "MVE" in listed else "DSP" if "DSP" in listed else "C"
            assert kernel_isa_path(op.name, variant, m55) == want, (op.name, variant)
            want = "DSP" if "DSP" in listed else "C"
            assert kernel_isa_path(op.name, variant, m4) == want, (op.name, variant)
            assert kernel_isa_path(op.name, variant, m3) == "C", (op.name, variant)


def test_timeline_has_one_bar_per_planned_tensor_and_live_bars_do_not_overlap(programs,
                                                                              reports):
    for key in ("m55", "u55"):
        p = Program.load(programs[key])
        bars = reports[key]["timeline"]
        tensors = [b for b in bars if b["kind"] in ("tensor", "view")]
        assert sorted(b["tensor"] for b in tensors) == _arena_tensors(p)
        owned = [b for b in bars if b["kind"] == "tensor"]
        views = [b for b in bars if b["kind"] == "view"]
        assert views  # flatten: a view of the pooled tensor's bytes
        for v in views:
            root = next(b for b in owned if b["tensor"] == v["view_of"])
            assert (root["region"], root["first"]) == (v["region"], v["first"])
            assert root["last"] >= v["last"] and root["offset"] <= v["offset"]
        for a in owned:
            for b in owned:
                if a is b or a["region"] != b["region"]:
                    continue
                live = a["first"] <= b["last"] and b["first"] <= a["last"]
                bytes_overlap = (a["offset"] < b["offset"] + b["bytes"]
                                 and b["offset"] < a["offset"] + a["bytes"])
                inplace = a["last"] == b["first"] or b["last"] == a["first"]
                assert not (live and bytes_overlap) or inplace, (a, b)


def test_npu_program_placement_and_reasons(programs, reports):
    p = Program.load(programs["u55"])
    info = reports["u55"]
    ops = info["ops"]
    assert ops[0]["op"] == "delegate" and ops[0]["isa"] == "delegate"
    assert ops[0]["runs_on"] == "NPU" and ops[0]["weight_bytes"] == (
        p.delegates[0].weights[1] + p.delegates[0].command[1])
    cpu = [o for o in ops if o["runs_on"] == "CPU"]
    assert [o["op"] for o in cpu] == ["softmax"] and "TOSA 1.0 has no softmax" in \
        cpu[0]["why_not_npu"]
    assert all(o["cpu_version_of"] == 0 for o in ops[1:-1])
    # a stripped program has no placement table: the op registry's reason stands in
    stripped = analyze(p.stripped())
    assert stripped["stripped"]
    from mcutorch import ops as registry

    assert stripped["ops"][-1]["why_not_npu"] == registry.ALL["softmax"].tosa


@pytest.mark.qemu
def test_board_counts_are_the_exact_profile_and_the_estimate_is_labelled(programs):
    from mcutorch.analysis import _counted_inputs
    from mcutorch.device.exact import profile_exact

    p = Program.load(programs["u55"])
    info = analyze(p, board="mps3-an547", clock_mhz=160)
    prof = profile_exact(p, _counted_inputs(p, None)[0], "mps3-an547")
    assert {o["index"]: o["instructions"] for o in info["ops"]} == prof.per_op
    assert info["instructions"]["total"] == prof.total
    for o in info["ops"]:
        assert o["estimate_us"] == pytest.approx(o["instructions"] / 160)
    text = render(info)
    assert "not a measured time" in text and "instructions / MHz" in text


@pytest.mark.qemu
def test_cli_board_input_and_html(programs, tmp_path, capsys):
    x = np.random.default_rng(3).standard_normal((1, 1, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    page = tmp_path / "r.html"
    code, out, err = _cli(capsys, "analyze", str(programs["m55"]), "--board", "mps3-an547",
                          "--clock-mhz", "200", "--input", str(tmp_path / "x.npy"), "--html",
                          str(page), "--json")
    assert code == 0, err
    info = json.loads(out)
    assert info["instructions"]["input"] == "the given input"
    assert all(o["instructions"] > 0 for o in info["ops"])
    assert info["instructions"]["estimate_us"] == pytest.approx(info["instructions"]["total"]
                                                                / 200)
    html = page.read_text()
    assert html.count('class="bar instructions"') == len(info["ops"])
    assert "not a measured time" in html and "<script" not in html and "http" not in \
        html.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_error_against_the_float_model(programs, net):
    model, example, calibration = net
    x = torch.randn(1, 1, 8, 8, generator=torch.Generator().manual_seed(7))
    for key in ("m55", "u55"):
        info = analyze(programs[key], model=model, example_inputs=example,
                       calibration=calibration, inputs=[x.numpy()])
        assert info["accuracy"]["input"] == "the given input"
        errors = [o["error"] for o in info["ops"]]
        assert all(e is not None for e in errors)  # every op has a float counterpart here
        # the last op's figure is the end-to-end error: program.run(x) against model(x)
        got = mcutorch.load(programs[key]).run(x).numpy().astype(np.float64)
        want = model(x).detach().numpy().astype(np.float64)
        assert errors[-1]["rmse"] == pytest.approx(np.sqrt(np.mean((got - want) ** 2)),
                                                   rel=1e-5)
        assert errors[-1]["max_abs"] == pytest.approx(np.abs(got - want).max(), rel=1e-5)
        sqnr = 10 * np.log10((want ** 2).sum() / ((got - want) ** 2).sum())
        assert errors[-1]["sqnr_db"] == pytest.approx(sqnr, abs=1e-3)
        assert errors[-1]["float_node"] == "softmax"
        conv = next(o for o in info["ops"] if o["op"] == "conv2d")
        assert conv["error"]["float_node"] == "relu"  # the conv's output: the fused ReLU's
        for e in errors:  # int8 against float: within a few LSB of each op's output scale
            assert 0 < e["rmse_lsb"] < 3 and 0 < e["l2r"] < 0.1, e
    text = render(info)
    assert "error vs the float model" in text and "relu" in text


def test_error_refuses_a_program_of_other_calibration(programs, net):
    from mcutorch.errors import UsageError

    model, example, _ = net
    other = [torch.full((1, 1, 8, 8), 3.0)]
    with pytest.raises(UsageError, match="not compiled from this model"):
        analyze(programs["m4"], model=model, example_inputs=example, calibration=other)
    with pytest.raises(UsageError, match="stripped"):
        analyze(Program.load(programs["m4"]).stripped(), model=model, example_inputs=example,
                calibration=other)


from test_cli import MODEL_FILE  # noqa: E402  (the CLI tests' tiny model file)


def test_cli_model_file_error_and_html(tmp_path, capsys):
    src = tmp_path / "tiny.py"
    src.write_text(MODEL_FILE)
    mtp = tmp_path / "tiny.mtp"
    assert main(["compile", str(src), "--target", "cortex-m33", "-o", str(mtp)]) == 0
    capsys.readouterr()
    page = tmp_path / "tiny.html"
    code, out, err = _cli(capsys, "analyze", str(mtp), "--model", str(src), "--html",
                          str(page), "--json")
    assert code == 0, err
    info = json.loads(out)
    assert info["accuracy"]["input"] == "the first calibration batch"
    assert [o["error"]["float_node"] for o in info["ops"]] == ["relu", "adaptive_avg_pool2d",
                                                               "linear"]
    assert page.read_text().count('class="bar error"') == 3
    code, _, err = _cli(capsys, "analyze", str(mtp), "--calibration", str(tmp_path / "c.npz"))
    assert code == 2 and "--calibration goes with --model" in err
    png = tmp_path / "errors.png"
    code, out, err = _cli(capsys, "analyze", str(mtp), "--model", str(src), "--plot", str(png))
    assert code == 0, err
    assert "SQNR dB" in out and f"error plot: {png}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, _, err = _cli(capsys, "analyze", str(mtp), "--plot", str(png))
    assert code == 2 and "--plot draws" in err


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_text_json_and_one_line_errors(programs, tmp_path, capsys):
    mtp = str(programs["m4"])
    code, out, _ = _cli(capsys, "analyze", mtp)
    assert code == 0 and "conv2d" in out and "DSP" in out and "flash" in out
    code, out, _ = _cli(capsys, "analyze", mtp, "--json")
    assert code == 0 and json.loads(out)["target"]["name"] == "cortex-m4"
    bad = tmp_path / "bad.mtp"
    bad.write_bytes(Program.load(mtp).to_bytes()[:-7] + b"garbage")
    cases = [
        ([str(tmp_path / "missing.mtp")], "does not exist"),
        ([str(bad)], ""),
        ([mtp, "--board", "mps9-an000"], "unknown board"),
        ([str(programs["m55"]), "--board", "mps2-an385"], "cannot run"),
        ([mtp, "--board", "mps2-an386", "--clock-mhz", "fast"], "--clock-mhz"),
        ([mtp, "--board", "mps2-an386", "--clock-mhz", "0"], "--clock-mhz"),
        ([mtp, "--board", "mps2-an386", "--clock-mhz", "nan"], "--clock-mhz"),
        ([mtp, "--clock-mhz", "160"], "add --board"),
        ([mtp, "--html", str(tmp_path / "no" / "r.html")], "does not exist"),
    ]
    for argv, words in cases:
        code, out, err = _cli(capsys, "analyze", *argv)
        assert code == 2, (argv, err)
        assert err.startswith("mcutorch: error:") and err.count("\n") == 1, (argv, err)
        assert words in err and "Traceback" not in err, (argv, err)


class _Bars(HTMLParser):
    """The charts of the page (an <svg class="chart ..."> with an id) and the timeline bars
    (class "bar" and "tensor"/"view") of each timeline chart, as the browser's DOM has them."""

    def __init__(self):
        super().__init__()
        self.bars: list[dict] = []
        self.charts: list[dict] = []
        self.ids: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.append(a["id"])
        classes = (a.get("class") or "").split()
        if tag == "svg" and "chart" in classes:
            self.charts.append(a)
        if "bar" in classes and {"tensor", "view"} & set(classes):
            self.bars.append({**a, "chart": self.charts[-1]["id"]})


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        if shutil.which(name):
            return shutil.which(name)
    pytest.fail("chromium not found: run `make toolchain` (Debian package chromium)")


def test_html_page_in_headless_chromium(programs, reports, tmp_path):
    from PIL import Image

    p = Program.load(programs["u55"])
    page = write_html(reports["u55"], tmp_path / "report.html")
    browser = _chromium()
    common = [browser, "--headless", "--no-sandbox", "--disable-gpu",
              f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True,
                         text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    parser = _Bars()
    parser.feed(dom.stdout)
    assert sorted(int(b["data-tensor"]) for b in parser.bars) == _arena_tensors(p)
    timelines = [c["id"] for c in parser.charts if "timeline" in c["class"].split()]
    assert timelines == [f"timeline-{r.name}" for r in p.regions]  # one per region (DDR: empty)
    for b in parser.bars:  # each bar in its own region's chart
        t = p.tensors[int(b["data-tensor"])]
        assert b["data-region"] == p.regions[t.region].name
        assert b["chart"] == f"timeline-{b['data-region']}"
    assert [c["id"] for c in parser.charts if c["id"] not in timelines] == ["chart-macs"]
    assert len(parser.ids) == len(set(parser.ids))  # the charts' ids do not collide
    shot = tmp_path / "report.png"
    run = subprocess.run([*common, f"--screenshot={shot}", "--window-size=1280,2000",
                          page.as_uri()], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and shot.is_file(), run.stderr[-2000:]
    with Image.open(shot) as img:
        colours = img.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 10  # not blank: text, bars, axes


def test_html_page_is_the_same_bytes_every_time(reports, tmp_path):
    """No date, no random ids: the page of a report, written twice here and once in a fresh
    process (from the report's JSON), is byte for byte the same; and it is self-contained."""
    info = reports["u55"]
    first = write_html(info, tmp_path / "a.html").read_bytes()
    assert write_html(info, tmp_path / "b.html").read_bytes() == first
    (tmp_path / "r.json").write_text(json.dumps(info))
    code = ("import json, sys\nfrom mcutorch.analysis.html import write_html\n"
            "write_html(json.load(open(sys.argv[1])), sys.argv[2])")
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "r.json"),
                    str(tmp_path / "c.html")], check=True)
    assert (tmp_path / "c.html").read_bytes() == first
    html = first.decode()
    assert html.count("<svg") == len(info["regions"]) + 1  # timelines + MACs (no board)
    assert "<script" not in html and "http" not in html.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    assert html.count('class="bar macs"') == sum(o["macs"] > 0 for o in info["ops"])


def test_api_is_exported_lazily(programs, reports):
    info = mcutorch.analyze(mcutorch.load(programs["m4"]))  # a CompiledModel works too
    assert info == reports["m4"]
