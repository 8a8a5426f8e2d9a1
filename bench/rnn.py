"""`python -m bench.rnn`: the recurrent zoo (models/sequence.py: an LSTM and a GRU over the rows
of scikit-learn's digits, a CRNN = conv1d front end + GRU over the pixels, a GRU over token
embeddings of the rows: int32 token-id input) and what unrolling
costs per time step on the Cortex-M55.

    python -m bench.rnn [--seeds 3] [--models lstm_digits,...] [--no-boards]

Accuracy (per model and seed, held-out 20 % of the 1,797 digits): the float model trained with
`train_digits` (25 epochs, seconds on a CPU), int8 = `mcutorch.quantize` with 512 training
digits as calibration: "fake-q" is PyTorch's converted model, "program" the compiled program
(cortex-m55, mps3-an547 memory map) run on the Python reference. "C == ref" is the host C
runtime on every held-out digit against the reference; "M55 == ref" the -O3 firmware on
mps3-an547 (QEMU) on the first 16 held-out digits, seed 0. M55 instr: the exact count (QEMU
plugin) of one inference; RAM: planned arenas + C runtime state (8 B per operand and 28 B per
op, bound once) + worst-case stack; flash: runtime core + the program's kernels + the program
file (`mcutorch.analyze`); "of which state" and "program" show what the unrolled op records cost.

Fused vs unrolled: the same model compiled with the lstm / gru ops (the default) and with
`fuse_recurrent=False` (every step's ops): M55 instructions, RAM and flash of each (both give
the reference's integers on the board).

Per step: nn.LSTM / nn.GRU / nn.RNN (tanh) (8 inputs, 32 hidden) alone at T = 8 and 16, fused and
unrolled, and the difference per step: ops, runtime state, stripped program bytes (op and tensor
records, no names), constant bytes (0: the weights are stored once) and exact M55 instructions, with
the share of the instructions in the gate matmuls (fully_connected).

a16w8: the same model quantized with `Quantizer(int16_layers=...)` naming every module but an
nn.Embedding (int16 gates and states,
sigmoid / tanh as 513-entry int16 tables), compiled and run on the reference ("C == ref" covers
both programs; on the board, its instructions and RAM beside the int8 ones).
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from torch import nn

import mcutorch
from mcutorch.device import crt
from mcutorch.device.exact import exact_counts
from mcutorch.device.firmware import build as build_firmware, runner_files
from mcutorch.device import firmware
from mcutorch.models.sequence import SEQUENCE_MODELS, train_digits
from mcutorch.ref.interpreter import Interpreter

BOARD = "mps3-an547"
ON_BOARD = 16  # held-out digits run as firmware


def accuracy(logits, y) -> float:
    return 100.0 * float((torch.as_tensor(np.asarray(logits)).argmax(1) == y).float().mean())


def m55_instructions(program) -> int:
    t = program.tensors[program.inputs[0]]
    x = np.zeros(t.shape, np.dtype(t.dtype))
    files, args = runner_files(program, [x])
    return exact_counts(build_firmware(program, BOARD, opt="-O3"), BOARD, args, files=files,
                        begin_symbol=None, end_symbol=None)["total"]


def measure(name: str, seed: int, boards: bool) -> dict:
    t0 = time.perf_counter()
    model, (xtr, ytr, xte, yte) = train_digits(name, seed)
    row = {"name": name, "seed": seed, "train_s": time.perf_counter() - t0}
    with torch.no_grad():
        row["float"] = accuracy(model(xte), yte)
        cal = [xtr[i:i + 64] for i in range(0, 512, 64)]
        qmodel = mcutorch.quantize(model, (xtr[:1],), calibration=cal)
        row["fakeq"] = accuracy(qmodel(xte), yte)
        wide = [n for n, m in model.named_children()  # int16 but the embedding (int8 table)
                if not isinstance(m, nn.Embedding) and any(True for _ in m.parameters())]
        q16 = mcutorch.quantize(model, (xtr[:1],), calibration=cal,
                                quantizer=mcutorch.Quantizer(int16_layers=wide))
    a16 = mcutorch.compile(q16, (xtr[:1],), board=BOARD, name=name)
    sets16 = [a16.quantize_inputs([xte[i:i + 1].numpy()]) for i in range(len(xte))]
    ref16 = [Interpreter(a16.program).invoke(xs)[0] for xs in sets16]
    row["a16_exact"] = all(np.array_equal(h[0], r) for h, r in
                           zip(crt.run_host_sequence(a16.program, sets16)[0], ref16))
    o16 = a16.program.tensors[a16.program.outputs[0]]
    row["a16w8"] = accuracy(np.concatenate([r.astype(np.float32) * o16.scale for r in ref16]), yte)
    compiled = mcutorch.compile(qmodel, (xtr[:1],), board=BOARD, name=name)
    p = compiled.program
    sets = [compiled.quantize_inputs([xte[i:i + 1].numpy()]) for i in range(len(xte))]
    interp = Interpreter(p)
    ref = [interp.invoke(xs)[0] for xs in sets]
    host = crt.run_host_sequence(p, sets)[0]
    row["c_exact"] = all(np.array_equal(h[0], r) for h, r in zip(host, ref))
    out = p.tensors[p.outputs[0]]
    logits = np.concatenate([(r.astype(np.float32) - out.zero_point) * out.scale for r in ref])
    row["program"] = accuracy(logits, yte)
    row["ops"], row["weight_bytes"] = len(p.ops), len(p.constants)
    if boards and seed == 0:
        run = firmware.run(p, sets[:ON_BOARD], BOARD)
        row["m55_exact"] = all(np.array_equal(o[0], r) for o, r in zip(run.outputs, ref))
        row["m55"] = m55_instructions(p)
        info = mcutorch.analyze(compiled, board=BOARD, inputs=[xte[:1].numpy()])
        row["ram"], row["flash"] = info["totals"]["ram"], info["totals"]["flash"]
        fc = sum(o["instructions"] or 0 for o in info["ops"] if o["op"] == "fully_connected")
        row["fc_share"] = fc / max(1, sum(o["instructions"] or 0 for o in info["ops"]))
        plain = mcutorch.compile(qmodel, (xtr[:1],), board=BOARD, name=name,
                                 fuse_recurrent=False)  # the steps unrolled: the same integers
        run_u = firmware.run(plain.program, sets[:ON_BOARD], BOARD)
        row["m55_exact"] &= all(np.array_equal(o[0], r) for o, r in zip(run_u.outputs, ref))
        row["m55_unrolled"] = m55_instructions(plain.program)
        info_u = mcutorch.analyze(plain, board=BOARD, inputs=[xte[:1].numpy()])
        row["ram_unrolled"] = info_u["totals"]["ram"]["total"]
        row["flash_unrolled"] = info_u["totals"]["flash"]["total"]
        row["ops_unrolled"] = len(plain.program.ops)
        row["m55_a16"] = m55_instructions(a16.program)
        run16 = firmware.run(a16.program, sets16[:ON_BOARD], BOARD)
        row["m55_a16_exact"] = all(np.array_equal(o[0], r) for o, r in zip(run16.outputs, ref16))
        info16 = mcutorch.analyze(a16, board=BOARD, inputs=[xte[:1].numpy()])
        row["ram_a16"] = info16["totals"]["ram"]["total"]
    return row


class Alone(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.rnn = kind(8, 32, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0][:, -1]


def per_step(kind, steps: int, boards: bool, fuse: bool = True) -> dict:
    torch.manual_seed(0)
    model = Alone(kind).eval()
    cal = [torch.rand(1, steps, 8) for _ in range(8)]
    compiled = mcutorch.compile(mcutorch.quantize(model, cal[0], calibration=cal), cal[0],
                                board=BOARD, fuse_recurrent=fuse)
    p = compiled.program
    row = {"ops": len(p.ops), "state": crt.state_size(p), "program": len(p.stripped().to_bytes()),
           "constants": len(p.constants),
           "arena": sum(r.size for r in p.regions)}
    if boards:
        row["m55"] = m55_instructions(p)
    return row


def print_accuracy(rows: list[dict]) -> None:
    print("\nRecurrent zoo on held-out digits (accuracy %; int8 PTQ; a16w8 = int16 activations, "
          "the compiled program)")
    print(f"{'model':<12} {'seed':>4} {'train s':>7} {'float':>6} {'fake-q':>6} {'program':>7} "
          f"{'a16w8':>6} {'ops':>4} {'C == ref':>8}")
    for r in rows:
        print(f"{r['name']:<12} {r['seed']:>4} {r['train_s']:>7.1f} {r['float']:>6.2f} "
              f"{r['fakeq']:>6.2f} {r['program']:>7.2f} {r['a16w8']:>6.2f} {r['ops']:>4} "
              f"{'yes' if r['c_exact'] and r['a16_exact'] else 'NO':>8}")
    for name in dict.fromkeys(r["name"] for r in rows):
        mine = [r for r in rows if r["name"] == name]
        f, q, w = (np.mean([r[k] for r in mine]) for k in ("float", "program", "a16w8"))
        print(f"{name:<12} mean over {len(mine)} seeds: float {f:.2f}, int8 program {q:.2f} "
              f"({q - f:+.2f} points; target: within 1 point), a16w8 {w:.2f} ({w - f:+.2f})")


def print_device(rows: list[dict]) -> None:
    rows = [r for r in rows if "m55" in r]
    if not rows:
        return
    print(f"\nOn {BOARD} (Cortex-M55), seed 0; fused = lstm / gru ops (passes/recurrent.py), "
          "unrolled = compile(..., fuse_recurrent=False)")
    print(f"{'model':<12} {'M55==ref':>8} {'M55 instr':>10} {'gate FC':>7} {'RAM B':>7} "
          f"{'of which state':>14} {'flash B':>8} {'program':>8} {'weights':>8} "
          f"{'a16w8 instr':>11} {'a16w8 RAM':>9}")
    for r in rows:
        ram, flash = r["ram"], r["flash"]
        ok = r["m55_exact"] and r["m55_a16_exact"]
        print(f"{r['name']:<12} {'yes' if ok else 'NO':>8} {r['m55']:>10,} "
              f"{r['fc_share']:>7.0%} {ram['total']:>7,} {ram['state']:>14,} "
              f"{flash['total']:>8,} {flash['program']:>8,} {r['weight_bytes']:>8,} "
              f"{r['m55_a16']:>11,} {r['ram_a16']:>9,}")
    print(f"\n{'model':<12} {'ops fused/unrolled':>18} {'M55 instr fused/unrolled':>25} "
          f"{'RAM B fused/unrolled':>21} {'flash B fused/unrolled':>23}")
    for r in rows:
        print(f"{r['name']:<12} {r['ops']:>8} / {r['ops_unrolled']:<7} "
              f"{r['m55']:>12,} / {r['m55_unrolled']:<10,} "
              f"{r['ram']['total']:>9,} / {r['ram_unrolled']:<9,} "
              f"{r['flash']['total']:>10,} / {r['flash_unrolled']:<10,}")


def print_per_step(boards: bool) -> None:
    print("\nPer time step (8 inputs, 32 hidden, batch 1): T = 8, T = 16, and (T16 - T8) / 8")
    keys = ["ops", "state", "program", "constants", "arena"] + (["m55"] if boards else [])
    print(f"{'layer':<13} {'T':>5} " + " ".join(f"{k:>10}" for k in keys))
    for kind in (nn.LSTM, nn.GRU, nn.RNN):
        for fuse in (True, False):
            _per_step_rows(kind, fuse, boards, keys)
    print("state: C runtime bytes bound at load (8 B per operand, 28 B per op); program: the "
          "stripped program file; constants: weights, biases, multipliers, tables.")


def _per_step_rows(kind, fuse: bool, boards: bool, keys: list[str]) -> None:
    a, b = per_step(kind, 8, boards, fuse), per_step(kind, 16, boards, fuse)
    name = kind.__name__ + ("" if fuse else " unrolled")
    for label, r in (("8", a), ("16", b), ("/step", {k: (b[k] - a[k]) / 8 for k in keys})):
        print(f"{name:<13} {label:>5} " + " ".join(f"{r[k]:>10,.0f}" for k in keys))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--models", default=",".join(SEQUENCE_MODELS))
    ap.add_argument("--no-boards", action="store_true")
    args = ap.parse_args(argv)
    boards = not args.no_boards
    rows = []
    for name in args.models.split(","):
        for seed in range(args.seeds):
            rows.append(measure(name, seed, boards))
    print_accuracy(rows)
    print_device(rows)
    print_per_step(boards)


if __name__ == "__main__":
    main()
