"""Per model and board: instructions per inference, RAM per region, flash split (C runtime)."""
from __future__ import annotations

from mcutorch.api import CompiledModel
from mcutorch.compiler import build_graph, compile_graph, resolve_regions
from mcutorch.crt import state_size
from mcutorch.firmware import build, flash_split
from mcutorch.targets import parse_target

BOARDS = [("mps2-an385", "cortex-m0plus"), ("mps2-an385", "cortex-m3"),
          ("mps2-an386", "cortex-m4"), ("mps2-an500", "cortex-m7"),
          ("mps2-an505", "cortex-m33"), ("mps3-an547", "cortex-m55")]


def measure(name: str, qmodel, x, board: str, target: str) -> dict:
    regions, board_name = resolve_regions(board, None)
    program = CompiledModel(compile_graph(build_graph(qmodel), parse_target(target), regions,
                                          board_name, name))
    q = program.quantize_inputs([x])
    program.run_on_board(q, board)
    total = program.last_run.instructions
    program.run_on_board(q, board, profile=True)
    per_op = sum(program.last_run.per_op.values())
    prof_total = program.last_run.instructions
    split = flash_split(build(program.program, board), program.program)
    ram = {r.name: r.size for r in program.program.regions if r.size}
    return {"name": name, "board": board, "target": target, "instructions": total,
            "overhead": (prof_total - per_op) / prof_total if prof_total else 0.0,
            "ram": ram, "state": state_size(program.program), **split,
            "top": sorted(program.last_run.per_op.items(), key=lambda kv: -kv[1])[:3],
            "ops": [op.name for op in program.program.ops]}


def print_table(rows: list[dict], short: dict, tflm: dict, et: dict) -> None:
    print("\n## C runtime on emulated boards (portable kernels, -Os; QEMU -icount, SysTick)")
    print(f"{'model':<6} {'target':<14} {'instructions':>13} {'dispatch<=':>10} "
          f"{'RAM B (arenas+state)':>21} {'vs TFLM':>7} {'vs ET':>6} {'core B':>7} "
          f"{'kernels B':>9} {'program B':>10}")
    for r in rows:
        ram = sum(r["ram"].values()) + r["state"]
        t, e = tflm.get(r["name"], 0), et.get(r["name"], (0, 0))[0]
        print(f"{short[r['name']]:<6} {r['target']:<14} {r['instructions']:>13,} "
              f"{r['overhead'] * 100:>9.2f}% {ram:>21,} "
              f"{ram / t if t else 0:>6.2f}x {ram / e if e else 0:>5.2f}x {r['runtime_core']:>7,} "
              f"{r['kernels']:>9,} {r['program']:>10,}")
    print("dispatch<=: share of a profiled run outside the kernels (interpreter + profiling "
          "hooks; an upper bound on dispatch). RAM: planned arenas of every region + runtime "
          "state; the runner's stack is not counted. core B: loader + validator + interpreter "
          "text+rodata.")
