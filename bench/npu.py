"""`python -m bench.npu`: Ethos-U offload per model: MACs on the NPU, Vela's estimate, compile s.

    python -m bench.npu [--models kws,vww,...] [--npu ethos-u55-128] [--large] [--no-verify]

Per model (the five MLPerf Tiny networks with their reference weights, MobileNetV2-0.35 at 96):
the share of MACs in Ethos-U delegates, Vela's estimated inference time and SRAM use for the
whole NPU part (Ethos_U55_High_End_Embedded, Shared_Sram, 500 MHz unless --npu/--system-config
say otherwise), mcutorch's compile time (export, passes, partition, TOSA, bit-exact TOSA check,
Vela, plan, emit), and the ops left on the CPU. Reference figures printed beside: TFLite + Vela
and ExecuTorch's Ethos-U flow (published runs on this machine kind).
Vela's numbers are its model of the NPU and memory system, not a measurement: no Ethos-U runs here.
"""
from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

import mcutorch
from mcutorch.models import REFERENCE_TFLITE, build, example_input, load_tflite_weights

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "mlperf_tiny"
MODELS = ["ds_cnn_kws", "mobilenet_v1_vww", "resnet8", "fc_autoencoder", "ds_cnn_sww",
          "mobilenet_v2"]
SHORT = {"ds_cnn_kws": "KWS", "mobilenet_v1_vww": "VWW", "resnet8": "IC", "fc_autoencoder": "AD",
         "ds_cnn_sww": "SWW", "mobilenet_v2": "MNv2-0.35/96", "mobilenet_v2_large": "MNv2-1.0/224"}
# Reference figures (ms on Ethos-U55-128; ExecuTorch compile seconds) for this configuration.
TFLITE_VELA_MS = {"ds_cnn_kws": 0.18, "mobilenet_v1_vww": 0.44, "resnet8": 0.40,
                  "fc_autoencoder": 0.40, "ds_cnn_sww": 0.12}
EXECUTORCH_MS = {"ds_cnn_kws": 0.18, "mobilenet_v1_vww": 0.77, "resnet8": 0.43,
                 "fc_autoencoder": 0.56, "ds_cnn_sww": 0.27}
EXECUTORCH_COMPILE_S = {"ds_cnn_kws": 4.8, "mobilenet_v1_vww": 10.8, "mobilenet_v2": 22.7}


def make_model(name: str):
    """The network, with its MLPerf Tiny reference weights when the data folder has them."""
    if name == "mobilenet_v2":
        return build(name, width=0.35, resolution=96).eval()
    if name == "mobilenet_v2_large":
        return build("mobilenet_v2", width=1.0, resolution=224).eval()
    model = build(name)
    path = DATA / REFERENCE_TFLITE[name]
    if path.exists():
        load_tflite_weights(model, path)
    return model.eval()


def calibration(name: str, model) -> list[torch.Tensor]:
    """Real samples where the reference data has them (as tests/py/test_mlperf.py), else seeded
    inputs in range."""
    if name == "ds_cnn_sww" and (DATA / "sww_calibration_samples.npz").exists():
        specs = np.load(DATA / "sww_calibration_samples.npz")["specs"][:8]
        return [torch.from_numpy(s[None].transpose(0, 3, 1, 2)).float() for s in specs]
    if name == "fc_autoencoder" and (DATA / "normal_id_01_00000000_hist_librosa.bin").exists():
        rows = np.fromfile(DATA / "normal_id_01_00000000_hist_librosa.bin", np.float32)
        return [torch.from_numpy(r[None]) for r in rows.reshape(-1, 640)[:8]]
    return [example_input(model, seed=i) for i in range(4)]


def measure(name: str, npu: str, options: dict, verify: bool, per_channel: bool = True) -> dict:
    """Compile `name` for cortex-m55+`npu` and collect the offload figures."""
    torch.manual_seed(0)
    model = make_model(name)
    cal = calibration(name, model)
    t0 = time.perf_counter()
    qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal,
                               quantizer=mcutorch.Quantizer(per_channel=per_channel))
    t1 = time.perf_counter()
    compiled = mcutorch.compile(qmodel, (cal[0],), target=f"cortex-m55+{npu}",
                                board="mps3-an547", name=name, verify=verify,
                                npu_options=options)
    program = compiled.program
    t2 = time.perf_counter()
    lean = mcutorch.compile(qmodel, (cal[0],), target=f"cortex-m55+{npu}", board="mps3-an547",
                            name=name, verify=False, npu_options=options, npu_fallback=False)
    meta = program.metadata
    delegates = meta["ethos_u"]["delegates"]
    est = [d["estimate"] for d in delegates]
    npu_macs = sum(d["macs"] for d in delegates)
    cpu_macs = sum(_macs(program, i) for i in program.main_ops())
    cpu_ops = Counter(r["op"] for r in meta["placement"]
                      if r["on"] == "CPU" and r["op"] != "reshape")
    return {"name": name, "label": SHORT.get(name, name) + ("" if per_channel else " (pt)"),
            "npu_share": npu_macs / max(1, npu_macs + cpu_macs),
            "macs": npu_macs + cpu_macs, "delegates": len(delegates),
            "ms": 1e3 * sum(e.get("inference_time", 0.0) for e in est),
            "sram_kib": max((e.get("sram_memory_used", 0.0) for e in est), default=0.0),
            "cycles": sum(e.get("cycles_npu", 0.0) for e in est), "quantize_s": t1 - t0,
            "compile_s": t2 - t1,
            "vela_s": program.timings["vela_seconds"],
            "cpu_ops": ", ".join(f"{op}x{n}" if n > 1 else op for op, n in cpu_ops.items()),
            "config": meta["ethos_u"]["config"],
            "ram": [sum(r.size for r in c.program.regions) for c in (compiled, lean)],
            "flash": [len(c.to_bytes()) for c in (compiled, lean)],
            "fallback_cost": meta["ethos_u"].get("fallback_cost", {})}


def _macs(program, i: int) -> int:
    """MACs of main-loop op i (0 for delegate ops: those are counted as NPU work)."""
    from mcutorch.ops import macs

    op = program.ops[i]
    ins = [program.tensors[t].shape for t in op.inputs]
    outs = [program.tensors[t].shape for t in op.outputs]
    return macs(op.name, ins, outs, op.attrs)


def _ref(table: dict, name: str, fmt: str) -> str:
    return format(table[name], fmt) if name in table else "-"


def print_table(rows: list[dict]) -> None:
    cfg = rows[0]["config"] if rows else {}
    print(f"Ethos-U offload: {cfg.get('accelerator')}, {cfg.get('system_config')}, "
          f"{cfg.get('memory_mode')} (Vela's estimate; no NPU runs here)")
    head = (f"{'model':<13} {'MACs':>11} {'on NPU':>7} {'dlg':>3} {'NPU cycles':>11} "
            f"{'est. ms':>8} {'TFL+Vela':>8} {'ExecuTorch':>10} {'SRAM KiB':>9} "
            f"{'quant s':>7} {'compile s':>9} {'(Vela s)':>8} {'ET total s':>10}")
    print(head)
    print("-" * len(head))
    for r in rows:
        n = r["name"]
        print(f"{r['label']:<13} {r['macs']:>11,} {100 * r['npu_share']:>6.1f}% "
              f"{r['delegates']:>3} {r['cycles']:>11,.0f} {r['ms']:>8.3f} "
              f"{_ref(TFLITE_VELA_MS, n, '.2f'):>8} {_ref(EXECUTORCH_MS, n, '.2f'):>10} "
              f"{r['sram_kib']:>9.1f} {r['quantize_s']:>7.2f} {r['compile_s']:>9.2f} "
              f"{r['vela_s']:>8.2f} "
              f"{_ref(EXECUTORCH_COMPILE_S, n, '.1f'):>10}")
    print("\nCPU fallback (the delegates' CPU versions, run when no NPU driver is linked):")
    head = (f"{'model':<13} {'RAM with':>10} {'without':>10} {'ratio':>6} {'program with':>13} "
            f"{'without':>10} {'ratio':>6} {'CPU consts':>10}")
    print(head)
    print("-" * len(head))
    for r in rows:
        (rw, ro), (fw, fo) = r["ram"], r["flash"]
        print(f"{r['label']:<13} {rw:>10,} {ro:>10,} {rw / max(ro, 1):>6.2f} {fw:>13,} "
              f"{fo:>10,} {fw / max(fo, 1):>6.2f} {r['fallback_cost'].get('flash', 0):>10,}")
    print("RAM: all planned arenas (mps3-an547); program: the program file (constants, Vela's "
          "command streams and weights);\nCPU consts: the constants only the CPU versions read "
          "(Vela encodes its own copy of the weights).")
    print("\nops left on the CPU (Cortex-M55 kernels):")
    for r in rows:
        print(f"  {r['label']:<13} {r['cpu_ops'] or '-'}")
    print("\nest. ms: Vela's inference_time summed over the delegates (CPU ops not included). "
          "quant s: torch.export + PT2E + calibration;\ncompile s: mcutorch.compile of the "
          "quantized module (lift, passes, partition, TOSA, bit-exact TOSA check, Vela, plan,\n"
          "emit); ET total s: ExecuTorch's Ethos-U flow end to end (published figure).\n"
          "TFL+Vela, ExecuTorch, ET total s: reference figures for the Ethos-U55-128 "
          "(Ethos_U55_High_End_Embedded, Shared_Sram).\n"
          "(pt): weights quantized per tensor (Quantizer(per_channel=False)), as the reference "
          "AD .tflite is; default rows are per channel.")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--npu", default="ethos-u55-128")
    ap.add_argument("--system-config", default=None)
    ap.add_argument("--memory-mode", default=None)
    ap.add_argument("--large", action="store_true", help="add MobileNetV2 1.0 at 224x224")
    ap.add_argument("--no-verify", action="store_true", help="skip the TOSA reference check")
    args = ap.parse_args(argv)
    names = [n for n in args.models.split(",") if n] + (["mobilenet_v2_large"] * args.large)
    options = {"system_config": args.system_config, "memory_mode": args.memory_mode}
    mcutorch.compile(*_warm_up(), target=f"cortex-m55+{args.npu}")  # one-time imports
    rows = [measure(n, args.npu, options, not args.no_verify) for n in names]
    if "fc_autoencoder" in names:  # the reference AD model quantizes its weights per tensor
        rows.append(measure("fc_autoencoder", args.npu, options, not args.no_verify, False))
    print_table(rows)


def _warm_up():
    m = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.ReLU()).eval()
    x = torch.randn(1, 1, 6, 6)
    return mcutorch.quantize(m, (x,)), (x,)


if __name__ == "__main__":
    main()
