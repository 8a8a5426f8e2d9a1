"""`python -m bench.zoo`: the model zoo: params and MACs (ours vs published); per model compiled
for cortex-m55, bit-exactness of the host C runtime, exact M55 instructions per inference
(and per MAC), RAM and flash; compiled for cortex-m55+ethos-u55-128, the share of MACs on the
NPU and Vela's estimate; and the exact M55 profile's top three ops with their ISA path.

    python -m bench.zoo [--models mobilenet_v3_small,...] [--no-boards] [--no-npu]

MACs are counted by forward hooks on conv / transposed conv / linear layers (models/counting.py).
"Ours@paper" is our network built in the published configuration (mostly 224x224, 1000
classes), compared with the paper's figure; "MACs" is our catalog configuration (96x96, 10
classes, ...). Where a model does not compile, the op refused first is shown instead.

Every program is compiled with the mps3-an547 memory map. M55 instr: exact count (mcutorch's
QEMU plugin) of one inference of an -O3 firmware; the profile is `mcutorch run --board
mps3-an547 --profile --exact` (-Os firmware with per-op markers), each op's share of that run's
instructions, summed over the ops of one kind; ISA: the path its kernel takes on the M55
(device/isa_path.py: MVE, DSP or C). RAM: planned arenas + runtime state + the runtime's
worst-case stack (gcc call graph); flash: text + rodata of the -Os firmware, runner excluded.
"""
from __future__ import annotations

import argparse
import re
import time
from collections import defaultdict

import numpy as np

import mcutorch
from mcutorch.device import crt
from mcutorch.device.exact import exact_counts
from mcutorch.device.firmware import build as build_firmware, runner_files
from mcutorch.errors import UnsupportedOpError
from mcutorch.models import ZOO, build, example_input, published_check, zoo_cost

from .__main__ import warm_up
from .npu import _macs

BOARD = "mps3-an547"
NPU = "ethos-u55-128"
TOP = 3
MVE_LIMIT = 0.10  # the bound: no op without an MVE path above 10 % of the instructions


def first_refusal(err: UnsupportedOpError) -> str:
    found = re.search(r"\((aten\.[\w.]+)\)", str(err))
    return f"refused: {found.group(1)}" if found else f"refused: {str(err)[:40]}"


def measure(name: str, boards: bool, npu: bool) -> dict:
    row: dict = {"name": name, "cost": zoo_cost(name), "published": published_check(name)}
    model = build(name).eval()
    cal = [example_input(model, seed=i) for i in range(4)]
    t0 = time.perf_counter()
    try:
        qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal)
        program = mcutorch.compile(qmodel, (cal[0],), target="cortex-m55", board=BOARD,
                                   name=name)
    except UnsupportedOpError as err:
        return {**row, "status": first_refusal(err)}
    row["compile_s"] = time.perf_counter() - t0
    x = example_input(model, seed=99)
    xs = program.quantize_inputs([x])
    want = program.run_int8(xs)
    exact = all(np.array_equal(g, w) for g, w in zip(crt.run_host(program.program, xs), want))
    row["status"] = "bit-exact" if exact else "C != reference"
    info = mcutorch.analyze(program, board=BOARD if boards else None, inputs=[x.numpy()])
    row["ram"], row["flash"] = info["totals"]["ram"]["total"], info["totals"]["flash"]["total"]
    if boards:
        files, args = runner_files(program.program, xs)
        fast = exact_counts(build_firmware(program.program, BOARD, opt="-O3"), BOARD, args,
                            files=files, begin_symbol=None, end_symbol=None)
        row["m55"] = fast["total"]
        row["profile"] = profile_rows(info)
    if npu:
        row.update(measure_npu(name, qmodel, cal[0], want, xs))
    return row


def profile_rows(info: dict) -> list[tuple[str, float, str]]:
    """(op, share of the profiled run's instructions, ISA path) of the costliest op kinds."""
    counts: dict[str, int] = defaultdict(int)
    isa: dict[str, set] = defaultdict(set)
    for o in info["ops"]:
        if o["instructions"]:
            counts[o["op"]] += o["instructions"]
            isa[o["op"]].add(o["isa"])
    total = info["instructions"]["total"]
    top = sorted(counts, key=lambda op: -counts[op])
    return [(op, counts[op] / total, "/".join(sorted(isa[op]))) for op in top]


def measure_npu(name: str, qmodel, x, want, xs) -> dict:
    """The cortex-m55+ethos-u55-128 program: NPU share of MACs, Vela's estimate, and whether its
    host run (CPU versions of the delegates) equals the cortex-m55 program's outputs."""
    t0 = time.perf_counter()
    program = mcutorch.compile(qmodel, (x,), target=f"cortex-m55+{NPU}", board=BOARD,
                               name=name).program
    compile_s = time.perf_counter() - t0
    delegates = program.metadata["ethos_u"]["delegates"]
    est = [d["estimate"] for d in delegates]
    npu_macs = sum(d["macs"] for d in delegates)
    cpu_macs = sum(_macs(program, i) for i in program.main_ops())
    same = all(np.array_equal(g, w) for g, w in zip(crt.run_host(program, xs), want))
    return {"npu_share": npu_macs / max(1, npu_macs + cpu_macs), "delegates": len(delegates),
            "npu_cycles": sum(e.get("cycles_npu", 0.0) for e in est),
            "npu_ms": 1e3 * sum(e.get("inference_time", 0.0) for e in est),
            "npu_compile_s": compile_s, "npu_same": same,
            "npu_config": program.metadata["ethos_u"]["config"]}


def millions(v: float) -> str:
    return f"{v / 1e6:8.3f}"


def print_table(rows: list[dict]) -> None:
    print("\n## Model zoo (random seeded weights; params and MACs in millions)")
    print(f"{'model':<19} {'params':>8} {'MACs':>8} | {'ours@paper':>21} {'published':>17} "
          f"{'ratio':>11} | {'compile s':>9}  status")
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
        print(f"{r['name']:<19} {millions(c.params)} {millions(c.macs)} | {paper:>21} "
              f"{published:>17} {ratios:>11} | {compile_s}  {r['status']}")
    print("ours@paper / published: params / MACs of our layer list in the paper's configuration "
          "against the paper's figure (sources: mcutorch/models/zoo.py).")


def _cell(r: dict, key: str, fmt: str, width: int) -> str:
    return f"{r[key]:>{width}{fmt}}" if key in r else f"{'-':>{width}}"


def print_device_table(rows: list[dict]) -> None:
    print(f"\n## Cortex-M55 ({BOARD}) and cortex-m55+{NPU}")
    print(f"{'model':<19} {'params':>9} {'MACs':>11} {'M55 instr':>12} {'instr/MAC':>9} "
          f"{'RAM B':>9} {'flash B':>9} | {'on NPU':>7} {'dlg':>3} {'Vela cycles':>11} "
          f"{'Vela ms':>8} {'NPU==M55':>8}")
    for r in rows:
        if "ram" not in r:
            print(f"{r['name']:<19} {r['status']}")
            continue
        c = r["cost"]
        per_mac = f"{r['m55'] / c.macs:9.3f}" if "m55" in r else f"{'-':>9}"
        npu = (f"{100 * r['npu_share']:>6.1f}% {r['delegates']:>3} {r['npu_cycles']:>11,.0f} "
               f"{r['npu_ms']:>8.3f} {'yes' if r['npu_same'] else 'NO':>8}"
               if "npu_share" in r else "-")
        print(f"{r['name']:<19} {c.params:>9,} {c.macs:>11,} {_cell(r, 'm55', ',', 12)} "
              f"{per_mac} {r['ram']:>9,} {r['flash']:>9,} | {npu}")
    cfg = next((r["npu_config"] for r in rows if "npu_config" in r), {})
    print("M55 instr: exact, -O3 firmware, one inference. RAM: arenas + state + worst-case "
          "stack. flash: -Os firmware without the runner.\non NPU: share of MACs inside "
          f"Ethos-U delegates; Vela cycles / ms: Vela's estimate for the delegates "
          f"({cfg.get('accelerator')}, {cfg.get('system_config')}, {cfg.get('memory_mode')}; "
          "CPU ops not included; no NPU runs here);\nNPU==M55: the NPU program's host run "
          "(the delegates' CPU versions) gives the cortex-m55 program's outputs bit for bit.")


def print_profile_table(rows: list[dict]) -> list[tuple[str, str, float]]:
    """The exact M55 profile's top ops; returns every (model, op, share) above MVE_LIMIT whose
    kernel has no MVE path."""
    print(f"\n## Exact M55 profile (mcutorch run --board {BOARD} --profile --exact): top "
          f"{TOP} ops per model, share of the instructions, ISA path")
    print(f"{'model':<19} " + " | ".join(f"{f'op {k + 1}':<30}" for k in range(TOP)))
    over = []
    for r in rows:
        if "profile" not in r:
            continue
        cells = [f"{op:<17} {share:6.1%} {isa:<5}" for op, share, isa in r["profile"][:TOP]]
        print(f"{r['name']:<19} " + " | ".join(f"{c:<30}" for c in cells))
        over += [(r["name"], op, share) for op, share, isa in r["profile"]
                 if share > MVE_LIMIT and "MVE" not in isa.split("/")]
    print(f"ops without an MVE path above {MVE_LIMIT:.0%} of a model's instructions: "
          + (", ".join(f"{op} in {m} ({s:.1%})" for m, op, s in over) or "none"))
    return over


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(ZOO))
    ap.add_argument("--no-boards", action="store_true",
                    help="skip the M55 instruction counts and the profile")
    ap.add_argument("--no-npu", action="store_true", help=f"skip the {NPU} compile")
    args = ap.parse_args(argv)
    warm_up()
    rows = [measure(n, not args.no_boards, not args.no_npu)
            for n in args.models.split(",") if n]
    print_table(rows)
    print_device_table(rows)
    if not args.no_boards:
        print_profile_table(rows)


if __name__ == "__main__":
    main()
