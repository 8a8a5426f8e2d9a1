"""`python -m bench.streaming`: the MLPerf Tiny streaming wake word, streaming vs windowed.

ds_cnn_sww_streaming (one 40-value frame per invoke, four history buffers as persistent tensors)
against the 30-frame ds_cnn_sww, both compiled for cortex-m55 with the mps3-an547 memory map and
the same qparams (the 30-frame model calibrated on the 45 real windows; its observers' ranges
given to the streaming model layer by layer: mcutorch.frontend.quantize.quantize_like).

The streaming model twice: with its four histories as ring windows (passes/ring.py: one
ring_write of the frame per history, the depthwise convs reading the window in place) and, with
the rewrite off (`compile(..., ring_buffers=False)`), as concat + strided_slice copies.

Per frame (streaming) and per window (30-frame): exact M55 instructions of mt_invoke (QEMU
plugin, -O3 firmware; the streaming figure is the mean over the 30 frames of one window, all
30 in one QEMU run; the ring program also as standalone firmware bound ahead of time,
mt_bind_static), data-movement bytes written per frame (concat, strided_slice, copy outputs;
a ring_write's frame twice, once every n-th call), and RAM: the planned arenas, the persistent
tensors (streaming: kept across invokes), the runtime state and the worst-case stack. Also:
windows whose output after frame 30 is bit-identical to the 30-frame program's, and windows
classified right (of 45), on the reference runtime (ring program).
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import torch

import mcutorch
from mcutorch.device import standalone
from mcutorch.device.exact import exact_counts
from mcutorch.device.firmware import build as build_firmware, runner_files
from mcutorch.frontend.quantize import quantize_like
from mcutorch.models import ds_cnn_sww, ds_cnn_sww_streaming, load_tflite_weights

BOARD = "mps3-an547"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "mlperf_tiny"


def measure() -> list[dict]:
    d = np.load(SHARED / "sww_calibration_samples.npz")
    x = torch.from_numpy(d["specs"].astype(np.float32)).permute(0, 3, 1, 2)
    labels = d["labels"].ravel()
    weights = SHARED / "str_ww_ref_model.tflite"
    windows = [x[i:i + 1] for i in range(len(x))]
    q30, qs = quantize_like(load_tflite_weights(ds_cnn_sww_streaming(), weights),
                            (x[:1, :, :1],), load_tflite_weights(ds_cnn_sww(), weights),
                            (windows[0],), windows)
    p30 = mcutorch.compile(q30, target="cortex-m55", board=BOARD)
    ps = mcutorch.compile(qs, target="cortex-m55", board=BOARD)
    pc = mcutorch.compile(qs, target="cortex-m55", board=BOARD, ring_buffers=False)
    same = right = 0
    for i in range(len(x)):
        ps.reset()
        for t in range(30):
            y = ps.run_int8(ps.quantize_inputs([x[i:i + 1, :, t:t + 1]]))[0]
        same += np.array_equal(y, p30.run_int8(p30.quantize_inputs([windows[i]]))[0])
        right += int(y.argmax() == labels[i])
    rows = []
    for name, p, sets, per in (
            ("SWW 30-frame (per window)", p30, [p30.quantize_inputs([windows[0]])], 1),
            ("SWW streaming, ring (per frame)", ps,
             [ps.quantize_inputs([x[:1, :, t:t + 1]]) for t in range(30)], 30),
            ("SWW streaming, copies (per frame)", pc,
             [pc.quantize_inputs([x[:1, :, t:t + 1]]) for t in range(30)], 30)):
        files, args = runner_files(p.program, sets)
        c = exact_counts(build_firmware(p.program, BOARD, opt="-O3"), BOARD, args, files=files,
                         begin_symbol=None, end_symbol=None)
        ram = mcutorch.analyze(p.program)["totals"]["ram"]
        rows.append({"model": name, "instructions": c["total"] / per, "moved": moved_bytes(p),
                     "arenas": sum(ram["arenas"].values()), "persistent": ram["persistent"],
                     "state": ram["state"], "stack": ram["stack"], "ram": ram["total"]})
        if p is ps:  # the same program bound ahead of time: standalone firmware, 30 frames
            elf = standalone.build(p.program, BOARD, frames=sets, opt="-O3",
                                   out=Path(tempfile.mkdtemp()) / "sww.elf", name="sww")
            c = exact_counts(elf, BOARD, begin_symbol=None, end_symbol=None, uart=True)
            rows.append({**rows[-1], "model": "  bound ahead of time (per frame)",
                         "instructions": c["total"] / per, "state": ram["static_ring_views"],
                         "ram": ram["static_total"]})
    rows.append({"model": "bit-identical windows", "instructions": same, "ram": right})
    return rows


def moved_bytes(p) -> float:
    """Bytes the data-movement ops write per invoke: concat / strided_slice / copy outputs, and
    a ring_write's frame into two slots except every n-th call (one)."""
    prog = p.program
    total = 0.0
    for op in prog.ops:
        if op.name in ("concat", "strided_slice", "copy"):
            total += prog.tensors[op.outputs[0]].nbytes
        elif op.name == "ring_write":
            n = op.attrs["slots"]
            total += prog.tensors[op.inputs[0]].nbytes * (2 * n - 1) / n
    return total


def main() -> None:
    rows = measure()
    print("MLPerf Tiny streaming wake word on cortex-m55 (mps3-an547), exact M55 instructions")
    print(f"{'':36}{'instr':>10}{'moved B':>9}{'arenas':>8}{'persist':>8}{'state':>7}"
          f"{'stack':>7}{'RAM':>8}")
    for r in rows[:-1]:
        print(f"{r['model']:36}{r['instructions']:>10.0f}{r['moved']:>9.0f}{r['arenas']:>8}"
              f"{r['persistent']:>8}{r['state']:>7}{r['stack']:>7}{r['ram']:>8}")
    print(f"after frame 30: {rows[-1]['instructions']}/45 windows bit-identical to the 30-frame "
          f"program; {rows[-1]['ram']}/45 classified right")
    print("bound ahead of time: export-c / build --standalone (mt_bind_static), views and kernel "
          "args in flash; its 'state' column is the ring views table, the only RAM it adds")


if __name__ == "__main__":
    main()
