"""The `mcutorch analyze --html` page: one self-contained file (inline CSS and SVG, no script,
no network) with the report's tables and three pictures: the memory timeline (one chart per
region: each planned buffer a bar over op index x arena offset), instructions per layer (with a
board), MACs per layer and, with the float model, the error per layer.

The charts are drawn with matplotlib (its SVG backend, through `matplotlib.figure.Figure`: no
pyplot, no display) and inlined. Each bar is a patch with a gid; the SVG matplotlib writes is
then read back with xml.etree, and the element of each gid gets what a reader or a test needs to
find it: ``class="bar tensor"`` (or ``view``, ``scratch``, ``macs``, ...) and ``data-tensor``,
``data-region`` or ``data-op`` attributes, and a ``<title>`` tooltip with the buffer's name,
bytes, offset and live ops. Every id in a chart is prefixed with the chart's own id (ids stay
unique in the page), and the SVG keeps no metadata, dates or random ids: the same report gives
the same page byte for byte. matplotlib is imported when a chart is drawn, never by
``import mcutorch``.
"""
from __future__ import annotations

import functools
import io
from html import escape
from pathlib import Path
from xml.etree import ElementTree as ET

SIZE = (9.2, 3.0)  # chart size in inches (matplotlib's SVG: 72 pt per inch)
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#86bcb6")
COLOURS = {"instructions": PALETTE[0], "macs": PALETTE[1], "error": PALETTE[3]}
SCRATCH = "#bbbbbb"
SVG_NS, XLINK_NS = "http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"
# deterministic SVG: fixed hash salt for matplotlib's clip-path and marker ids; text as <text>
RC = {"svg.hashsalt": "mcutorch", "svg.fonttype": "none", "font.size": 9,
      "axes.spines.top": False, "axes.spines.right": False}
CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 20px; } h2 { font-size: 17px; margin-top: 28px; }
table { border-collapse: collapse; font-size: 12px; }
td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: right; white-space: nowrap; }
td.l, th.l { text-align: left; }
td.why { white-space: normal; min-width: 260px; max-width: 420px; }
.note { color: #555; font-size: 12px; max-width: 960px; }
svg.chart { display: block; margin: 6px 0 16px; }
"""


def _drawn(chart):
    """Run a chart function under mcutorch's matplotlib settings (RC), set for that chart only."""
    @functools.wraps(chart)
    def draw(*args, **kwargs):
        import matplotlib

        with matplotlib.rc_context(RC):
            return chart(*args, **kwargs)
    return draw


def _axes():
    """A figure of one plot, made without pyplot (no global state, no display)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=SIZE, layout="constrained")
    ax = fig.add_subplot()
    ax.grid(axis="y", color="#e4e4e4", linewidth=0.8)
    ax.set_axisbelow(True)
    return fig, ax


def _op_axis(ax, n_ops: int, shift: float) -> None:
    """Op indices across, about 24 labels, op i at i + shift (a timeline's op i spans
    [i, i + 1): shift 0.5; a bar per op centred on i: shift 0)."""
    step = max(1, n_ops // 24)
    ax.set_xticks([i + shift for i in range(0, n_ops, step)],
                  [str(i) for i in range(0, n_ops, step)])
    ax.set_xlim(shift - 0.5, max(n_ops, 1) + shift - 0.5)


def _y_format(ax, fmt: str) -> None:
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: format(v, fmt)))


def _svg(fig, chart_id: str, kind: str, label: str, marks: dict[str, dict]) -> str:
    """The figure as one inline <svg> element. `marks` maps a patch's gid to the attributes its
    element gets (a "title" entry becomes its tooltip)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})  # no date: the same bytes each run
    root = ET.fromstring(buf.getvalue())
    for meta in root.findall(f"{{{SVG_NS}}}metadata"):
        root.remove(meta)
    for el in root.iter():
        old = el.get("id")
        if old is not None:
            el.set("id", f"{chart_id}-{old}")
        href = el.attrib.pop(f"{{{XLINK_NS}}}href", None)
        if href is not None:  # SVG 2 href: no xlink namespace in the page
            el.set("href", f"#{chart_id}-{href[1:]}" if href.startswith("#") else href)
        for key, value in el.attrib.items():
            if "url(#" in value:
                el.set(key, value.replace("url(#", f"url(#{chart_id}-"))
        attrs = marks.get(old) if old is not None else None
        if attrs:
            attrs = dict(attrs)
            tip = attrs.pop("title", None)
            for key, value in attrs.items():
                el.set(key, value)
            if tip is not None:
                title = ET.Element(f"{{{SVG_NS}}}title")
                title.text = tip
                el.insert(0, title)
    root.set("id", chart_id)
    root.set("class", f"chart {kind}")
    root.set("role", "img")
    root.set("aria-label", label)
    ET.register_namespace("", SVG_NS)  # <svg xmlns=...> with unprefixed tags
    return ET.tostring(root, encoding="unicode")


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text)


@_drawn
def timeline_svg(bars: list[dict], region: str, n_ops: int, size: int) -> str:
    """One region's memory timeline: each planned buffer a bar over its live ops x its bytes."""
    from matplotlib.ticker import MaxNLocator

    fig, ax = _axes()
    top = max([size, *(b["offset"] + b["bytes"] for b in bars), 1])
    rank = {id(b): k for k, b in enumerate(sorted(bars, key=lambda b: (b["first"], b["offset"])))}
    marks = {}
    for k, b in enumerate(sorted(bars, key=lambda b: -b["bytes"])):  # small bars drawn last
        color = PALETTE[rank[id(b)] % len(PALETTE)]  # neighbours in time differ
        view, scratch = b["kind"] == "view", b["kind"] == "scratch"
        (patch,) = ax.bar(b["first"], max(b["bytes"], top / 150), width=b["last"] + 1 - b["first"],
                          bottom=b["offset"], align="edge",
                          color=SCRATCH if scratch else color, alpha=0.25 if view else 1.0,
                          edgecolor=color if view else "#ffffff", linewidth=1.0 if view else 0.5,
                          linestyle="--" if view else "-")
        gid = f"bar{k}"
        patch.set_gid(gid)
        tip = (f'{b["name"]}: {b["bytes"]:,} B at {region}+{b["offset"]:,}, live ops '
               f'{b["first"]}..{b["last"]}' + (f" (a view of tensor {b.get('view_of')}'s bytes)"
                                                 if view else ""))
        marks[gid] = {"class": f"bar {b['kind']}", "data-region": region, "title": tip}
        if b["tensor"] is not None:
            marks[gid]["data-tensor"] = str(b["tensor"])
    _op_axis(ax, n_ops, 0.5)
    ax.set_ylim(0, top)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    _y_format(ax, ",.0f")
    ax.set_xlabel("op index (run order)")
    ax.set_ylabel("arena offset (bytes)")
    if not bars:
        ax.text(0.5, 0.5, "nothing planned in this region", transform=ax.transAxes,
                ha="center", va="center", color="#555555")
    return _svg(fig, f"timeline-{_slug(region)}", "timeline", f"memory timeline of {region}",
                marks)


@_drawn
def per_op_svg(values: list[tuple[int, str, float | None]], what: str, kind: str,
               n_ops: int, fmt: str = ",.0f") -> str:
    """A bar per op: (op index, label, value or None); `fmt` formats axis and tooltip values."""
    fig, ax = _axes()
    marks = {}
    for i, label, v in values:
        if not v:
            continue
        (patch,) = ax.bar(i, v, width=0.8, color=COLOURS.get(kind, PALETTE[0]))
        patch.set_gid(f"op{i}")
        marks[f"op{i}"] = {"class": f"bar {kind}", "data-op": str(i),
                           "title": f"op {i} {label}: {format(v, fmt)} {what}"}
    _op_axis(ax, n_ops, 0.0)
    ax.set_ylim(0, max([v for _, _, v in values if v] + [1e-9]) * 1.05)
    _y_format(ax, fmt)
    ax.set_xlabel("op index")
    ax.set_ylabel(what)
    return _svg(fig, f"chart-{_slug(kind)}", kind, f"{what} per op", marks)


def _td(v, left: bool = False) -> str:
    text = f"{v:,}" if isinstance(v, int) else ("" if v is None else str(v))
    return f'<td class="l">{escape(text)}</td>' if left else f"<td>{escape(text)}</td>"


def _ops_table(info: dict) -> str:
    ins = info["instructions"]
    heads = ["#", "op", "variant", "ISA", "on", "input", "output", "MACs", "weights B",
             "activations B", "arena (in → out)", "why not on the NPU"]
    if ins:
        heads.insert(10, "instructions")
        if ins["clock_mhz"]:
            heads.insert(11, f"instructions ÷ {ins['clock_mhz']:g} MHz (µs, an estimate)")
    if info.get("accuracy"):
        heads[-2:-2] = ["l2r vs float", "rmse (LSB)"]
    rows = []
    for o in info["ops"]:
        where = (", ".join(f"{t['region']}+{t['offset']}" for t in o["inputs"]) + " → "
                 + ", ".join(f"{t['region']}+{t['offset']}" for t in o["outputs"]))
        name = o["op"] if o["cpu_version_of"] is None else f"[{o['cpu_version_of']}] {o['op']}"
        cells = [_td(o["index"]), _td(name, True), _td(o["variant"], True), _td(o["isa"], True),
                 _td(o["runs_on"], True),
                 _td(" ".join(str(t["shape"]) for t in o["inputs"]), True),
                 _td(" ".join(str(t["shape"]) for t in o["outputs"]), True), _td(o["macs"]),
                 _td(o["weight_bytes"]), _td(o["activation_bytes"])]
        if ins:
            cells.append(_td(o.get("instructions")))
            if ins["clock_mhz"]:
                est = o.get("estimate_us")
                cells.append(_td(None if est is None else f"{est:.2f}"))
        if info.get("accuracy"):
            e = o.get("error") or {}
            cells += [_td(None if e.get("l2r") is None else f"{e['l2r']:.5f}"),
                      _td(None if "rmse_lsb" not in e else f"{e['rmse_lsb']:.3f}")]
        cells += [_td(where, True), f'<td class="l why">{escape(o["why_not_npu"])}</td>']
        rows.append(f'<tr data-op="{o["index"]}">' + "".join(cells) + "</tr>")
    head = "".join(f'<th class="l">{escape(h)}</th>' for h in heads)
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _totals(info: dict) -> str:
    f, r = info["totals"]["flash"], info["totals"]["ram"]
    rows = [("flash: runtime core", f["runtime_core"]), ("flash: kernels", f["kernels"]),
            *((f"  kernel {k}", v) for k, v in f["per_kernel"].items()),
            ("flash: program", f["program"]), ("flash total", f["total"]),
            *((f"RAM: arena {k}", v) for k, v in r["arenas"].items()),
            ("RAM: persistent (kept across invokes)", r["persistent"]),
            ("RAM: runtime state (run-time binding)", r["state"]),
            ("RAM: worst-case stack", r["stack"]), ("RAM total (run-time binding)", r["total"]),
            ("bound ahead of time: tables in flash", r["static_tables"]),
            ("bound ahead of time: ring views in RAM", r["static_ring_views"]),
            ("RAM total (bound ahead of time)", r["static_total"])]
    body = "".join(f"<tr>{_td(k, True)}{_td(v)}</tr>" for k, v in rows)
    return (f"<table><tr><th class='l'>what</th><th>bytes</th></tr>{body}</table>"
            f"<p class='note'>Flash measured: {escape(f['how'])} ({escape(f['board'])} link). "
            f"Stack: gcc call graph ({escape(' → '.join(r['stack_chain']))}). MACs "
            f"{info['totals']['macs']:,}.</p>")


def page(info: dict) -> str:
    """The whole HTML page of an `analyze` report."""
    t, ins, n = info["target"], info["instructions"], len(info["ops"])
    parts = [f"<h1>mcutorch analyze: {escape(info['model'] or 'program')} for "
             f"{escape(t['name'])}</h1>",
             f"<p class='note'>ISA level {escape(t['isa'])}, NPU {escape(t['npu'])}."
             + (" Stripped program: no names or placement notes." if info["stripped"] else "")
             + "</p>", "<h2>Totals</h2>", _totals(info), "<h2>Layers</h2>", _ops_table(info)]
    if ins:
        parts.append(f"<p class='note'>Instructions: {ins['total']:,} per inference on "
                     f"{escape(ins['board'])} ({escape(ins['how'])}; input: "
                     f"{escape(ins['input'])})."
                     + (" The board has no NPU driver, so delegates ran their CPU version."
                        if any(o["op"] == "delegate" for o in info["ops"]) else "")
                     + (f" Instructions / MHz at {ins['clock_mhz']:g} MHz: "
                        f"{ins['estimate_us']:,.1f} µs, an estimate at one instruction per "
                        "cycle, not a measured time." if ins["clock_mhz"] else "") + "</p>")
    parts.append("<h2>Memory timeline</h2><p class='note'>One chart per region: each planned "
                 "buffer is a bar from the op that writes it to the last op that reads it, at "
                 "its arena offset; dashed: a view of another tensor's bytes; grey: scratch.</p>")
    for r in info["regions"]:
        bars = [b for b in info["timeline"] if b["region"] == r["name"]]
        parts.append(f"<h3>{escape(r['name'])}: {r['bytes']:,} B planned"
                     + (f" of {r['capacity']:,}" if r["capacity"] else "") + "</h3>")
        parts.append(timeline_svg(bars, r["name"], n, r["bytes"]))
    if ins:
        parts.append("<h2>Instructions per layer</h2>")
        parts.append(per_op_svg([(o["index"], o["op"], o.get("instructions"))
                                 for o in info["ops"]], "instructions", "instructions", n))
    parts.append("<h2>MACs per layer</h2>")
    parts.append(per_op_svg([(o["index"], o["op"], o["macs"]) for o in info["ops"]], "MACs",
                            "macs", n))
    parts.append("<h2>Error vs the float model per layer</h2>")
    acc = info.get("accuracy")
    if acc:
        parts.append(f"<p class='note'>{escape(acc['how'])}; input: {escape(acc['input'])}. "
                     "l2r = ||int8 − float|| / ||float|| (%); an op the compiler added has no "
                     "float counterpart.</p>")
        parts.append(per_op_svg([(o["index"], o["op"], 100 * o["error"]["l2r"]
                                  if o.get("error") and o["error"]["l2r"] is not None else None)
                                 for o in info["ops"]], "l2r (%)", "error", n, ".3g"))
    else:
        parts.append("<p class='note'>Not measured: give the float model (mcutorch analyze "
                     "--model model.py, or analyze(..., model=, example_inputs=, "
                     "calibration=)).</p>")
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>mcutorch analyze {escape(info['model'])}</title><style>{CSS}</style>"
            f"</head><body>{''.join(parts)}</body></html>\n")


def write_html(info: dict, path) -> Path:
    """Write the page of `info` (an `analyze` report) to `path`; returns the path."""
    path = Path(path)
    path.write_text(page(info), encoding="utf-8")
    return path
