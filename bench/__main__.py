"""`make bench`: per model, compile time, reference-runtime speed, program and RAM sizes, peers.

    python -m bench [--models kws,vww,...] [--large]
"""
from __future__ import annotations

import argparse
import contextlib
import tempfile
import time
from pathlib import Path

import torch

import mcutorch
from mcutorch.compare import layer_by_layer
from mcutorch.models import REFERENCE_TFLITE, build, example_input, load_tflite_weights

from . import boards as board_bench
from .peers import EXECUTORCH, TFLM_PUBLISHED, tflm_arena
from mcutorch.device.crt import state_size

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "mlperf_tiny"
MODELS = ["ds_cnn_kws", "mobilenet_v1_vww", "resnet8", "fc_autoencoder", "ds_cnn_sww",
          "mobilenet_v2"]
SHORT = {"ds_cnn_kws": "KWS", "mobilenet_v1_vww": "VWW", "resnet8": "IC", "fc_autoencoder": "AD",
         "ds_cnn_sww": "SWW", "mobilenet_v2": "MNv2-0.35/96", "mobilenet_v2_large": "MNv2-1.0/224"}


def make_model(name: str):
    if name == "mobilenet_v2":
        return build(name, width=0.35, resolution=96)
    if name == "mobilenet_v2_large":
        return build("mobilenet_v2", width=1.0, resolution=224)
    model = build(name)
    path = DATA / REFERENCE_TFLITE[name]
    if path.exists():
        load_tflite_weights(model, path)
    return model.eval()


def warm_up() -> None:
    """Pay torch.export's one-time initialisation outside the timed region (imports excluded)."""
    m = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.ReLU()).eval()
    x = torch.randn(1, 1, 6, 6)
    mcutorch.compile(mcutorch.quantize(m, (x,)), (x,))


@contextlib.contextmanager
def unfused():
    """Compile without the residual fusion (conv2d + add as two ops), as before opcode 33."""
    from mcutorch import passes

    saved = passes.PIPELINE
    passes.PIPELINE = tuple(p for p in saved if p[0] != "fuse_residuals")
    try:
        yield
    finally:
        passes.PIPELINE = saved


def measure(name: str, workdir: Path) -> dict:
    torch.manual_seed(0)
    model = make_model(name).eval()
    cal = [example_input(model, seed=i) for i in range(4)]
    t0 = time.perf_counter()
    qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal)
    program = mcutorch.compile(qmodel, (cal[0],), target="cortex-m55", name=name)
    path = program.save(workdir / f"{name}.mtp")
    compile_s = time.perf_counter() - t0
    loaded = mcutorch.load(path)
    q = loaded.quantize_inputs([cal[0]])
    loaded.run_int8(q)
    runs = 20
    t0 = time.perf_counter()
    for _ in range(runs):
        loaded.run_int8(q)
    ms = (time.perf_counter() - t0) / runs * 1e3
    s = loaded.summary()
    with unfused():  # the layer-by-layer bound: no fused residual, no output over its input
        plain = mcutorch.compile(qmodel, (cal[0],), target="cortex-m55", name=name,
                                 overlap=False)
    no_overlap = mcutorch.compile(qmodel, (cal[0],), target="cortex-m55", name=name,
                                  overlap=False)
    return {"name": name, "compile_s": compile_s, "ms": ms, "bytes": s["program_bytes"],
            "arena": sum(s["regions"].values()), "lower": s["lower_bound"],
            "no_overlap": sum(no_overlap.summary()["regions"].values()),
            "state": state_size(loaded.program, 4), "program": loaded, "plain": plain,
            "unfused_lower": plain.summary()["lower_bound"],
            "qmodel": qmodel, "x": cal[0],
            **agreement(model, qmodel, loaded, example_input(model, seed=99))}


def agreement(model, qmodel, program, x) -> dict:
    """Layer-by-layer and end-to-end agreement with PyTorch on one held-out input."""
    rows = layer_by_layer(qmodel, (x,))
    total = sum(r["elements"] for r in rows)
    out = program.program.tensors[program.program.outputs[0]]
    ours, fq, ref = program.run(x), qmodel(x).detach(), model(x).detach()
    lsb = (torch.round(ours / out.scale) - torch.round(fq / out.scale)).abs().max().item()
    cos = torch.nn.functional.cosine_similarity(ours.flatten(), ref.flatten(), dim=0).item()
    return {"exact": sum(r["exact"] * r["elements"] for r in rows) / total,
            "within1": sum(r["within_1lsb"] * r["elements"] for r in rows) / total,
            "worst_layer": min(r["within_1lsb"] for r in rows), "e2e_lsb": lsb, "cos": cos}


def print_numerics_table(rows: list[dict]) -> None:
    print("\n## Agreement with PyTorch (one held-out seeded input; layers fed PyTorch's int8 "
          "input)")
    print(f"{'model':<13} {'layers exact':>12} {'<=1 LSB':>8} {'worst layer':>11} "
          f"{'e2e LSB vs fake-quant':>21} {'cosine vs float':>15}")
    for r in rows:
        print(f"{SHORT[r['name']]:<13} {r['exact']:>12.4f} {r['within1']:>8.4f} "
              f"{r['worst_layer']:>11.4f} {r['e2e_lsb']:>21.0f} {r['cos']:>15.4f}")


def ratio(a: float, b: float) -> str:
    return f"{a / b:5.2f}x" if b else "   - "


def print_memory_table(rows: list[dict]) -> None:
    from mcutorch.device.binding import table_bytes

    print("\n## RAM (cortex-m55): layer-by-layer lower bound without fusion, the plan (fused "
          "residuals, y over the skip, depthwise / 1x1 outputs over their inputs), the plan "
          "without overlap (compile(overlap=False)), the C runtime state of the run-time "
          "binding (mt_bind_state) and RAM with it; RAM bound ahead of time (export-c / "
          "standalone NAME_binding.c: views and kernel args in flash, +tables B of flash), "
          "peers against it")
    print(f"{'model':<13} {'LB unfused':>10} {'plan B':>8} {'no ovl B':>8} {'state B':>7} "
          f"{'RAM B':>8} {'AOT RAM B':>9} {'tables B':>8} {'AOT/LB':>6} | {'TFLM B':>7} "
          f"{'RAM/TFLM':>8} {'AOT/TFLM':>8} | {'ET B':>7} {'AOT/ET':>6}")
    for r in rows:
        flash, ring = table_bytes(r["program"].program)
        aot = r["arena"] + r["program"].program.persistent_size + ring
        name, total = r["name"], aot
        tfl = DATA / REFERENCE_TFLITE.get(name, "-")
        tflm = (tflm_arena(tfl)[0] if tfl.exists() else 0) or TFLM_PUBLISHED.get(name, 0)
        et = EXECUTORCH.get(name, (0, 0.0))[0]
        print(f"{SHORT[name]:<13} {r['unfused_lower']:>10,} {r['arena']:>8,} "
              f"{r['no_overlap']:>8,} {r['state']:>7,} {r['arena'] + r['state']:>8,} "
              f"{aot:>9,} {flash:>8,} {ratio(total, r['unfused_lower']):>6} | {tflm:>7,} "
              f"{ratio(r['arena'] + r['state'], tflm):>8} {ratio(total, tflm):>8} | {et:>7,} "
              f"{ratio(total, et):>6}")


def print_residual_instructions(rows: list[dict]) -> None:
    """Models with conv2d_add: exact instructions against conv2d + add on M0+, M3, M33, M55."""
    from . import residual  # it imports this module's unfused()

    fused = [r for r in rows if any(op.name == "conv2d_add" for op in r["program"].program.ops)]
    boards = [b for b in board_bench.BOARDS
              if b[1] in ("cortex-m0plus", "cortex-m3", "cortex-m33", "cortex-m55")]
    if fused:
        residual.print_table([row for r in fused
                              for row in residual.measure(r["name"], boards, r["qmodel"], r["x"])])


def print_compiler_table(rows: list[dict]) -> None:
    print("\n## Compiler core (cortex-m55, Python reference runtime on this host)")
    print(f"{'model':<13} {'compile s':>9} {'ref ms':>7} {'program B':>10} {'arena B':>8} "
          f"{'lower B':>8} {'arena/LB':>8} | {'TFLM B':>7} {'ours/TFLM':>9} | {'ET B':>7} "
          f"{'ours/ET':>7} {'ET s':>5} {'s/ET s':>6}")
    for r in rows:
        name = r["name"]
        tfl = DATA / REFERENCE_TFLITE.get(name, "-")
        tflm, _, how = tflm_arena(tfl) if tfl.exists() else (0, 0, "n/a")
        tflm = tflm or TFLM_PUBLISHED.get(name, 0)
        et_bytes, et_s = EXECUTORCH.get(name, (0, 0.0))
        print(f"{SHORT[name]:<13} {r['compile_s']:>9.2f} {r['ms']:>7.1f} {r['bytes']:>10,} "
              f"{r['arena']:>8,} {r['lower']:>8,} {ratio(r['arena'], r['lower']):>8} | "
              f"{tflm or 0:>7,} {ratio(r['arena'], tflm):>9} | {et_bytes:>7,} "
              f"{ratio(r['arena'], et_bytes):>7} {et_s:>5.1f} {ratio(r['compile_s'], et_s):>6}")
    print("TFLM: tflite-micro wheel (x86-64) print_allocations total for the reference .tflite, "
          "measured now; ET: ExecuTorch 1.5.1 Cortex-M flow figures from this machine kind "
          "(not installed here).")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--large", action="store_true", help="add MobileNetV2 1.0 at 224x224")
    ap.add_argument("--boards", default="all", help="'all', 'none' or targets (cortex-m55,...)")
    args = ap.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    if args.large:
        names.append("mobilenet_v2_large")
    warm_up()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(n, Path(tmp)) for n in names]
    print_compiler_table(rows)
    print_memory_table(rows)
    print_numerics_table(rows)
    if args.boards != "none":
        print_residual_instructions(rows)
    if args.boards != "none":
        wanted = [b for b in board_bench.BOARDS
                  if args.boards == "all" or b[1] in args.boards.split(",")]
        tflm = {r["name"]: (tflm_arena(DATA / REFERENCE_TFLITE[r["name"]])[0]
                            or TFLM_PUBLISHED.get(r["name"], 0))
                for r in rows if r["name"] in REFERENCE_TFLITE}
        board_rows = [board_bench.measure(r["name"], r["qmodel"], r["x"], b, t)
                      for r in rows if r["name"] in REFERENCE_TFLITE for b, t in wanted]
        board_bench.print_table(board_rows, SHORT, tflm, EXECUTORCH)


if __name__ == "__main__":
    main()
