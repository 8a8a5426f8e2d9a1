"""Per model and board: instructions per inference, RAM per region, flash split (C runtime)."""
from __future__ import annotations

from mcutorch.api import CompiledModel
from mcutorch.compiler import build_graph, compile_graph, resolve_regions
from mcutorch.device.crt import state_size
from mcutorch.device.exact import exact_counts
from mcutorch.device.firmware import build, flash_split, run, runner_files
from mcutorch.targets import parse_target

BOARDS = [("mps2-an385", "cortex-m0plus"), ("mps2-an385", "cortex-m3"),
          ("mps2-an386", "cortex-m4"), ("mps2-an500", "cortex-m7"),
          ("mps2-an505", "cortex-m33"), ("mps3-an547", "cortex-m55")]


def measure(name: str, qmodel, x, board: str, target: str) -> dict:
    regions, board_name = resolve_regions(board, None)
    program = CompiledModel(compile_graph(build_graph(qmodel), parse_target(target), regions,
                                          board_name, name))
    q = program.quantize_inputs([x])
    files, args = runner_files(program.program, q)
    fast = exact_counts(build(program.program, board, opt="-O3"), board, args, files=files,
                        begin_symbol=None, end_symbol=None)  # exact: mcutorch's QEMU plugin
    prof = run(program.program, q, board, profile=True)
    per_op, prof_total = sum(prof.per_op.values()), prof.instructions
    split = flash_split(build(program.program, board), program.program)
    ram = {r.name: r.size for r in program.program.regions if r.size}
    return {"name": name, "board": board, "target": target, "instructions": fast["total"],
            "overhead": (prof_total - per_op) / prof_total if prof_total else 0.0,
            "ram": ram, "state": state_size(program.program), **split,
            "top": sorted(prof.per_op.items(), key=lambda kv: -kv[1])[:3],
            "ops": [op.name for op in program.program.ops]}


# CMSIS-NN v7.0 whole networks (GCC 12.2 -O3, QEMU 7.2 exact counts, TFLM qparams, double
# rounding; measured on this machine kind), instructions per inference.
CMSIS_NN = {
    "ds_cnn_kws": {"cortex-m55": 1784752, "cortex-m33": 7800488, "cortex-m3": 10544690},
    "mobilenet_v1_vww": {"cortex-m55": 6422617, "cortex-m33": 24531618, "cortex-m3": 32073710},
    "resnet8": {"cortex-m55": 4804705, "cortex-m33": 29922515, "cortex-m3": 41751677},
    "fc_autoencoder": {"cortex-m55": 146640, "cortex-m33": 578701, "cortex-m3": 952126},
    "ds_cnn_sww": {"cortex-m55": 407472, "cortex-m33": 2216852, "cortex-m3": 4261843},
}


def print_table(rows: list[dict], short: dict, tflm: dict, et: dict) -> None:
    print("\n## C runtime on emulated boards (instructions: -O3 build, exact, QEMU plugin; "
          "flash: -Os build)")
    print(f"{'model':<6} {'target':<14} {'instructions':>13} {'CMSIS-NN':>11} {'ratio':>6} "
          f"{'dispatch<=':>10} "
          f"{'RAM B (arenas+state)':>21} {'vs TFLM':>7} {'vs ET':>6} {'core B':>7} "
          f"{'kernels B':>9} {'program B':>10}")
    for r in rows:
        ram = sum(r["ram"].values()) + r["state"]
        t, e = tflm.get(r["name"], 0), et.get(r["name"], (0, 0))[0]
        peer = CMSIS_NN.get(r["name"], {}).get(r["target"], 0)
        ratio = f"{r['instructions'] / peer:5.2f}x" if peer else "    -"
        print(f"{short[r['name']]:<6} {r['target']:<14} {r['instructions']:>13,} "
              f"{peer or 0:>11,} {ratio:>6} {r['overhead'] * 100:>9.2f}% {ram:>21,} "
              f"{ram / t if t else 0:>6.2f}x {ram / e if e else 0:>5.2f}x {r['runtime_core']:>7,} "
              f"{r['kernels']:>9,} {r['program']:>10,}")
    print("dispatch<=: share of a profiled (SysTick) run outside the kernels (interpreter + "
          "profiling hooks; an upper bound on dispatch; exact: python -m bench.dispatch). RAM: "
          "planned arenas of every region + "
          "runtime state; the runner's stack is not counted. core B: loader + validator + "
          "interpreter text+rodata.")
