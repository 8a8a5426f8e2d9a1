"""The `mcutorch analyze --html` page: one self-contained file (inline CSS and SVG, no script,
no network) with the report's tables and three pictures: the memory timeline (one chart per
region: each planned buffer a bar over op index x arena offset), instructions per layer (with a
board) and MACs per layer.

The SVG is written here rather than drawn by a plotting library because every bar carries
what a reader or a test needs to find it: ``class="bar tensor"`` (or ``view``, ``scratch``) and
``data-tensor``/``data-op`` attributes, and a ``<title>`` tooltip with the buffer's name, bytes,
offset and live ops. Bars, axes and labels are all it draws.
"""
from __future__ import annotations

import math
from html import escape
from pathlib import Path

W, H = 920, 300  # chart size in px
LEFT, RIGHT, TOP, BOTTOM = 78, 16, 14, 34  # plot margins
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#86bcb6")
COLOURS = {"instructions": PALETTE[0], "macs": PALETTE[1], "error": PALETTE[3]}
CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 20px; } h2 { font-size: 17px; margin-top: 28px; }
table { border-collapse: collapse; font-size: 12px; }
td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: right; white-space: nowrap; }
td.l, th.l { text-align: left; }
td.why { white-space: normal; min-width: 260px; max-width: 420px; }
.note { color: #555; font-size: 12px; max-width: 960px; }
svg { display: block; margin: 6px 0 16px; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
.axis { stroke: #888; stroke-width: 1; }
.grid { stroke: #e4e4e4; stroke-width: 1; }
.bar.view { fill-opacity: 0.15; stroke-dasharray: 3 2; }
.bar.scratch { fill: #bbb; }
"""


def _ticks(top: float, n: int = 5) -> list[float]:
    """About n round tick values from 0 to top."""
    if top <= 0:
        return [0]
    raw = top / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    return [k * step for k in range(int(top / step + 1e-9) + 1)]


def _frame(x_label: str, y_label: str, n_ops: int, y_top: float, y_fmt) -> list[str]:
    """Axes, grid lines and labels of a chart with ops 0..n_ops-1 across."""
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM
    out = []
    for v in _ticks(y_top):
        y = TOP + ph - (v / y_top * ph if y_top else 0)
        out.append(f'<line class="grid" x1="{LEFT}" y1="{y:.1f}" x2="{W - RIGHT}" '
                   f'y2="{y:.1f}"/><text x="{LEFT - 6}" y="{y + 4:.1f}" '
                   f'text-anchor="end">{escape(y_fmt(v))}</text>')
    step = max(1, n_ops // 24)
    for i in range(0, n_ops, step):
        x = LEFT + (i + 0.5) * pw / max(n_ops, 1)
        out.append(f'<text x="{x:.1f}" y="{H - BOTTOM + 14}" text-anchor="middle">{i}</text>')
    out.append(f'<line class="axis" x1="{LEFT}" y1="{TOP + ph}" x2="{W - RIGHT}" '
               f'y2="{TOP + ph}"/><line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" '
               f'y2="{TOP + ph}"/>')
    out.append(f'<text x="{LEFT + pw / 2}" y="{H - 4}" text-anchor="middle">'
               f'{escape(x_label)}</text><text x="12" y="{TOP + ph / 2}" text-anchor="middle" '
               f'transform="rotate(-90 12 {TOP + ph / 2})">{escape(y_label)}</text>')
    return out


def _svg(body: list[str], label: str, kind: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart {kind}" width="{W}" '
            f'height="{H}" viewBox="0 0 {W} {H}" role="img" aria-label="{escape(label)}">'
            + "".join(body) + "</svg>")


def timeline_svg(bars: list[dict], region: str, n_ops: int, size: int) -> str:
    """One region's memory timeline: each planned buffer a bar over its live ops x its bytes."""
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM
    top = max([size, *(b["offset"] + b["bytes"] for b in bars), 1])
    body = _frame("op index (run order)", "arena offset (bytes)", n_ops, top, lambda v: f"{v:,}")
    rank = {id(b): k for k, b in enumerate(sorted(bars, key=lambda b: (b["first"], b["offset"])))}
    for b in sorted(bars, key=lambda b: -b["bytes"]):  # small bars drawn last, on top
        x0 = LEFT + b["first"] * pw / max(n_ops, 1)
        x1 = LEFT + (b["last"] + 1) * pw / max(n_ops, 1)
        h = max(b["bytes"] / top * ph, 1.5)
        y = TOP + ph - (b["offset"] + b["bytes"]) / top * ph
        color = PALETTE[rank[id(b)] % len(PALETTE)]  # neighbours in time differ
        edge = color if b["kind"] == "view" else "#fff"
        data = f' data-tensor="{b["tensor"]}"' if b["tensor"] is not None else ""
        tip = (f'{b["name"]}: {b["bytes"]:,} B at {region}+{b["offset"]:,}, live ops '
               f'{b["first"]}..{b["last"]}' + (f" (a view of tensor {b.get('view_of')}'s bytes)"
                                                 if b["kind"] == "view" else ""))
        body.append(f'<rect class="bar {b["kind"]}" data-region="{escape(region)}"{data} '
                    f'x="{x0:.1f}" y="{y:.1f}" width="{max(x1 - x0 - 1, 1):.1f}" '
                    f'height="{h:.1f}" fill="{color}" stroke="{edge}">'
                    f'<title>{escape(tip)}</title></rect>')
    if not bars:
        body.append(f'<text x="{LEFT + pw / 2}" y="{TOP + ph / 2}" text-anchor="middle">'
                    "nothing planned in this region</text>")
    return _svg(body, f"memory timeline of {region}", "timeline")


def per_op_svg(values: list[tuple[int, str, float | None]], what: str, kind: str,
               n_ops: int, fmt: str = ",.0f") -> str:
    """A bar per op: (op index, label, value or None); `fmt` formats axis and tooltip values."""
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM
    top = max([v for _, _, v in values if v] + [1e-9])
    body = _frame("op index", what, n_ops, top, lambda v: format(v, fmt))
    for i, label, v in values:
        if not v:
            continue
        x = LEFT + i * pw / max(n_ops, 1)
        h = v / top * ph
        body.append(f'<rect class="bar {kind}" data-op="{i}" x="{x + 1:.1f}" '
                    f'y="{TOP + ph - h:.1f}" width="{max(pw / max(n_ops, 1) - 2, 1):.1f}" '
                    f'height="{h:.1f}" fill="{COLOURS.get(kind, PALETTE[0])}">'
                    f'<title>{escape(f"op {i} {label}: {format(v, fmt)} {what}")}</title></rect>')
    return _svg(body, f"{what} per op", kind)


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
            ("RAM: runtime state", r["state"]), ("RAM: worst-case stack", r["stack"]),
            ("RAM total", r["total"])]
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
