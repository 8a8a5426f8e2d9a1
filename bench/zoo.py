"""`python -m bench.zoo`: the model zoo: params and MACs (ours vs published), and for the models
that compile for cortex-m55, compile time, bit-exactness of the host C runtime and the exact
M55 instruction count per inference on mps3-an547.

    python -m bench.zoo [--models mobilenet_v3_small,...] [--no-boards]

MACs are counted by forward hooks on conv / transposed conv / linear layers (models/counting.py).
"Ours@paper" is our network built in the published configuration (mostly 224x224, 1000
classes), compared with the paper's figure; "MACs" is our catalog configuration (96x96, 10
classes, ...). Where a model does not compile yet, the op refused first is shown instead.
"""
from __future__ import annotations

import argparse
import re
import time

import numpy as np

import mcutorch
from mcutorch.device import crt
from mcutorch.errors import UnsupportedOpError
from mcutorch.models import ZOO, build, example_input, published_check, zoo_cost

from . import boards as board_bench
from .__main__ import warm_up


def first_refusal(err: UnsupportedOpError) -> str:
    found = re.search(r"\((aten\.[\w.]+)\)", str(err))
    return f"refused: {found.group(1)}" if found else f"refused: {str(err)[:40]}"


def measure(name: str, boards: bool) -> dict:
    row: dict = {"name": name, "cost": zoo_cost(name), "published": published_check(name)}
    model = build(name).eval()
    cal = [example_input(model, seed=i) for i in range(4)]
    t0 = time.perf_counter()
    try:
        qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal)
        program = mcutorch.compile(qmodel, (cal[0],), target="cortex-m55", name=name)
    except UnsupportedOpError as err:
        return {**row, "status": first_refusal(err)}
    row["compile_s"] = time.perf_counter() - t0
    xs = program.quantize_inputs([example_input(model, seed=99)])
    exact = all(np.array_equal(g, w) for g, w in
                zip(crt.run_host(program.program, xs), program.run_int8(xs)))
    row["status"] = "bit-exact" if exact else "C != reference"
    if boards:
        row["m55"] = board_bench.measure(name, qmodel, cal[0], "mps3-an547",
                                         "cortex-m55")["instructions"]
    return row


def millions(v: float) -> str:
    return f"{v / 1e6:8.3f}"


def print_table(rows: list[dict]) -> None:
    print("\n## Model zoo (random seeded weights; params and MACs in millions)")
    print(f"{'model':<19} {'params':>8} {'MACs':>8} | {'ours@paper':>21} {'published':>17} "
          f"{'ratio':>11} | {'compile s':>9} {'M55 instr':>11}  status")
    for r in rows:
        c, pub = r["cost"], r["published"]
        if pub:
            ours, p = pub
            paper = f"{millions(ours.params)}/{millions(ours.macs)}"
            published = f"{p.params / 1e6:7.3f}/{p.macs / 1e6:8.1f}"
            ratios = f"{ours.params / p.params:4.2f}/{ours.macs / p.macs:4.2f}"
        else:
            paper, published, ratios = "-", "none", "-"
        compile_s = f"{r['compile_s']:9.2f}" if "compile_s" in r else f"{'-':>9}"
        m55 = f"{r['m55']:>11,}" if "m55" in r else f"{'-':>11}"
        print(f"{r['name']:<19} {millions(c.params)} {millions(c.macs)} | {paper:>21} "
              f"{published:>17} {ratios:>11} | {compile_s} {m55}  {r['status']}")
    print("ours@paper / published: params / MACs of our layer list in the paper's configuration "
          "against the paper's figure (sources: mcutorch/models/zoo.py). M55 instr: exact count "
          "per inference of an -O3 firmware on mps3-an547 (QEMU plugin).")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(ZOO))
    ap.add_argument("--no-boards", action="store_true", help="skip the M55 instruction counts")
    args = ap.parse_args(argv)
    warm_up()
    print_table([measure(n, not args.no_boards) for n in args.models.split(",") if n])


if __name__ == "__main__":
    main()
