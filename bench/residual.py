"""`python -m bench.residual`: fused residuals (conv2d_add) against conv2d + add, exact, per core.

    python -m bench.residual [--models resnet8] [--boards cortex-m55,cortex-m33,...]

Per model and board (`bench.boards.BOARDS`: M0+, M3, M4, M7, M33, M55), the program compiled
with the residual fusion and without it (`bench.__main__.unfused`: conv2d + add as two ops, as
before opcode 33), one inference each, counted with mcutorch's QEMU plugin:

* total: `mt_invoke` of the plain -O3 runner firmware, entry to return (exact);
* residual ops: the kernels of the fused ops (conv2d_add) against the kernels they replace (each
  add and the conv2d fused into it), summed (`mcutorch.device.exact.dispatch_exact`, kernel
  entry to the instruction after its call, no profiling hooks).

Both programs give the same integers (tests/py/test_residual.py); the fused plan puts y over the
skip and needs no conv output tensor.
"""
from __future__ import annotations

import argparse

import mcutorch
from mcutorch.api import CompiledModel
from mcutorch.errors import McutorchError
from mcutorch.compiler import build_graph, compile_graph, resolve_regions
from mcutorch.device.exact import dispatch_exact, exact_counts
from mcutorch.device.firmware import build, runner_files
from mcutorch.device.kernels import NO_KERNEL
from mcutorch.targets import parse_target

from .__main__ import SHORT, unfused
from .boards import BOARDS
from .dispatch import model_and_data


def residual_ops(program) -> list[int]:
    """Indices of the ops the fusion replaces or made: conv2d_add, or each add and the later of
    the conv2d ops feeding it (the one `passes.fuse.residuals` fuses)."""
    producer = {t: i for i, op in enumerate(program.ops) for t in op.outputs}
    picked = []
    for i, op in enumerate(program.ops):
        if op.name == "conv2d_add":
            picked.append(i)
        elif op.name == "add":
            convs = [producer[t] for t in op.inputs
                     if t in producer and program.ops[producer[t]].name == "conv2d"]
            if convs:
                picked += [i, max(convs)]
    return picked


def count(program, x, board: str) -> tuple[int, int | None]:
    """(mt_invoke instructions, instructions of the residual ops' kernels; None when a kernel
    calls another kernel, as the row-block conv2d_add of format 1.5 did)."""
    try:
        d = dispatch_exact(program, x, board)
    except McutorchError:
        files, args = runner_files(program, x)
        return exact_counts(build(program, board, opt="-O3"), board, args, files=files,
                            begin_symbol=None, end_symbol=None)["total"], None
    kernel_ops = [i for i, op in enumerate(program.ops) if op.name not in NO_KERNEL]
    per = dict(zip(kernel_ops, d.per_op))  # no delegates: execution order is op order
    return d.total, sum(per[i] for i in residual_ops(program))


def measure(name: str, boards, qmodel=None, x0=None) -> list[dict]:
    """Rows of `print_table` for one model (quantized here unless qmodel and its input x0)."""
    if qmodel is None:
        model, cal = model_and_data(name)
        qmodel, x0 = mcutorch.quantize(model, (cal[0],), calibration=cal), cal[0]
    rows = []
    for board, target in boards:
        regions, board_name = resolve_regions(board, None)
        progs = []
        for fused in (False, True):
            if fused:
                g = compile_graph(build_graph(qmodel), parse_target(target), regions,
                                  board_name, name)
            else:
                with unfused():
                    g = compile_graph(build_graph(qmodel), parse_target(target), regions,
                                      board_name, name)
            progs.append(CompiledModel(g).program)
        x = CompiledModel(progs[0]).quantize_inputs([x0])
        (t0, r0), (t1, r1) = (count(p, x, board) for p in progs)
        rows.append({"name": name, "target": target, "unfused": t0, "fused": t1,
                     "res_unfused": r0, "res_fused": r1, "n": len(residual_ops(progs[1]))})
    return rows


def print_table(rows: list[dict]) -> None:
    print("\n## Fused residuals: conv2d_add against conv2d + add (exact instructions, QEMU "
          "plugin, -O3, one inference)")
    print(f"{'model':<7} {'target':<14} {'conv2d + add':>13} {'conv2d_add':>11} {'change':>9} "
          f"{'instr':>10} | {'residual ops: unfused':>21} {'fused':>10} {'change':>9}")
    for r in rows:
        a, b = r["res_unfused"], r["res_fused"]
        res = (f"{a:>21,} {b:>10,} {(b - a) / a:>+9.3%}" if a and b is not None
               else f"{a or 0:>21,} {'-':>10} {'-':>9}")
        d = r["fused"] - r["unfused"]
        print(f"{SHORT.get(r['name'], r['name']):<7} {r['target']:<14} {r['unfused']:>13,} "
              f"{r['fused']:>11,} {d / r['unfused']:>+9.3%} {d:>+10,} | {res}")
    print("total: mt_invoke entry to return; residual ops: the kernels of the fused ops, against "
          "each add plus the conv2d fused into it.")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet8")
    ap.add_argument("--boards", default="all", help="'all' or targets (cortex-m55,...)")
    args = ap.parse_args(argv)
    boards = [b for b in BOARDS if args.boards == "all" or b[1] in args.boards.split(",")]
    rows = [r for name in args.models.split(",") if name for r in measure(name, boards)]
    print_table(rows)


if __name__ == "__main__":
    main()
