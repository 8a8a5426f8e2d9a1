"""`python -m bench.digits`: float / int8 PTQ / int8 QAT accuracy of small temporal conv nets on
scikit-learn's digits read as sequences (models/digits.py), over several seeds.

    python -m bench.digits [--seeds 3] [--models tcn-pixels-w16,...]

Per model and seed: the 1,797 digits shuffled with the seed, 80 % train / 20 % held out; the
float model trained (Adam 3e-3, batch 64, EPOCHS epochs); PTQ = mcutorch.quantize with the first
512 training digits as calibration; QAT = mcutorch.quantize(..., qat=True) on a copy of the
trained float model, the same calibration, then QAT_EPOCHS epochs at 5e-4 (observers frozen
after FREEZE epochs), converted with mcutorch.convert. Accuracies are on the held-out digits,
of the PyTorch models (the converted fake-quant models for PTQ and QAT); for the first seed the
QAT model is also compiled (cortex-m55) and the held-out set run through the program on the
Python reference runtime ("QAT prog"). QAT trains QAT_EPOCHS more epochs than the float model:
part of its gain over PTQ can be that extra training, not only quantization awareness, so
"float+FT" is the float model trained the same QAT_EPOCHS more epochs at QAT's rate (no
quantization), and "PTQ of FT" its PTQ: QAT against PTQ of FT compares the two int8 models
after the same training.

Also a16w8 (int16 activations, int8 weights) and mixed precision (mcutorch.mixed_precision), and
the same columns for the MLPerf Tiny streaming wake word on its 45 real windows (`sww`).

Target (issue 13): QAT recovers at least half of any int8 PTQ loss above 1 point, per seed and
for the averages over the seeds; "n/a" where the PTQ loss is at most 1 point.
"""
from __future__ import annotations

import argparse
import copy
import time

import numpy as np
import torch
from torch import nn

import mcutorch
from mcutorch.frontend._torchao import pt2e
from mcutorch.models.digits import digits_split, digits_tcn, train_epoch

pt2e()
from torchao.quantization.pt2e import (  # noqa: E402
    disable_observer,
    move_exported_model_to_eval,
    move_exported_model_to_train,
)

EPOCHS, QAT_EPOCHS, FREEZE = 30, 6, 4
MODELS = {  # name: (reading, width, depth, BatchNorm)
    "tcn-pixels-w16": ("pixels", 16, 4, True),
    "tcn-pixels-w8-nobn": ("pixels", 8, 6, False),
    "tcn-pixels-w4-nobn": ("pixels", 4, 6, False),
    "tcn-rows-w4": ("rows", 4, 3, True),
}


def accuracy(model, x, y) -> float:
    with torch.no_grad():
        return 100.0 * (model(x).argmax(1) == y).float().mean().item()


def fit_float(model, x, y, seed: int, epochs: int = EPOCHS, lr: float = 3e-3) -> nn.Module:
    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(epochs):
        model.train()
        train_epoch(model, x, y, opt)
    return model.eval()


def fit_qat(qat, x, y, seed: int):
    """The QAT loop docs/pt2e.md describes."""
    torch.manual_seed(seed)
    opt = torch.optim.Adam(qat.parameters(), lr=5e-4)
    for epoch in range(QAT_EPOCHS):
        move_exported_model_to_train(qat)  # BatchNorm batch statistics
        if epoch == FREEZE:
            qat.apply(disable_observer)  # ranges fixed; the weights still train
        train_epoch(qat, x, y, opt)
    move_exported_model_to_eval(qat)
    return qat


def measure(name: str, seed: int, program: bool) -> dict:
    reading, width, depth, norm = MODELS[name]
    xtr, ytr, xte, yte = digits_split(reading, seed)
    model = fit_float(digits_tcn(reading, width, depth, norm, seed=seed), xtr, ytr, seed)
    calibration = list(xtr[:512].split(64))
    ptq = mcutorch.quantize(model, (xtr[:1],), calibration=calibration)
    qat = mcutorch.quantize(copy.deepcopy(model), (xtr[:1],), calibration=calibration, qat=True)
    fit_qat(qat, xtr, ytr, seed)
    converted = mcutorch.convert(qat)
    tuned = fit_float(copy.deepcopy(model), xtr, ytr, seed, QAT_EPOCHS, 5e-4)  # QAT's schedule
    row = {"float": accuracy(model, xte, yte), "ptq": accuracy(ptq, xte, yte),
           "qat": accuracy(converted, xte, yte), "tuned": accuracy(tuned, xte, yte),
           "tuned_ptq": accuracy(mcutorch.quantize(tuned, (xtr[:1],), calibration=calibration),
                                 xte, yte), "program": None}
    # a16w8: every activation int16 (the convs, the mean over time, the classifier); PyTorch's
    # fake-quant accuracy (the program computes it within 1 LSB per layer)
    a16 = mcutorch.quantize(model, (xtr[:1],), calibration=calibration,
                            quantizer=mcutorch.Quantizer(activations="int16"))
    row["a16w8"] = accuracy(a16, xte, yte)
    plan = mcutorch.mixed_precision(model, (xtr[:1],), calibration[:4],
                                    evaluate=lambda q: accuracy(q, xte, yte) / 100)
    row["mixed"], row["mixed_layers"] = 100 * plan.chosen["accuracy"], plan.int16_layers
    row["ram8"], row["ram_mixed"] = plan.baseline["ram"], plan.chosen["ram"]
    if program:
        compiled = mcutorch.compile(qat, (xtr[:1],), target="cortex-m55")
        out = np.asarray(compiled.run(xte.numpy()))
        row["program"] = 100.0 * float((out.argmax(1) == yte.numpy()).mean())
    return row


def sww() -> dict:
    """The MLPerf Tiny streaming wake word with the reference weights on its 45 real windows
    (../shared/mlperf_tiny): windows right of 45 for float, int8 PTQ, a16w8 (features and
    classifier int16, the softmax int8: it has no int16 form) as fake-quant and as the compiled
    program, and mcutorch.mixed_precision's choice. All 45 windows calibrate (there is no other
    data); QAT needs training data the set does not have."""
    from pathlib import Path

    from mcutorch.models import ds_cnn_sww, load_tflite_weights

    shared = Path(__file__).resolve().parents[2] / "shared" / "mlperf_tiny"
    d = np.load(shared / "sww_calibration_samples.npz")
    x = torch.from_numpy(d["specs"].astype(np.float32)).permute(0, 3, 1, 2)
    y = torch.from_numpy(d["labels"].ravel().astype(np.int64))
    model = load_tflite_weights(ds_cnn_sww(), shared / "str_ww_ref_model.tflite").eval()
    wins = [x[i:i + 1] for i in range(len(x))]

    def right(fn) -> int:
        with torch.no_grad():
            return int((torch.cat([fn(w) for w in wins]).argmax(1) == y).sum())

    q8 = mcutorch.quantize(model, (wins[0],), wins)
    q16 = mcutorch.quantize(model, (wins[0],), wins,
                            quantizer=mcutorch.Quantizer(int16_layers=["features", "classifier"]))
    program = mcutorch.compile(q16, (wins[0],), target="cortex-m55")
    plan = mcutorch.mixed_precision(model, (wins[0],), wins, data=wins[:8],
                                    evaluate=lambda q: right(q) / len(wins))
    s8, s16 = (mcutorch.compile(q, (wins[0],), target="cortex-m55").summary() for q in (q8, q16))
    return {"float": right(model), "int8": right(q8), "a16w8": right(q16),
            "a16w8_program": right(lambda w: torch.as_tensor(np.asarray(program.run(w.numpy())))),
            "mixed": round(plan.chosen["accuracy"] * len(wins)), "mixed_layers": plan.int16_layers,
            "ram8": sum(s8["regions"].values()) + s8["state_bytes"],
            "ram16": sum(s16["regions"].values()) + s16["state_bytes"],
            "ram_mixed": plan.chosen["ram"], "n": len(wins)}


def _target(f: float, p: float, q: float) -> str:
    loss = f - p
    return ("n/a (PTQ loss <= 1 pt)" if loss <= 1 else
            "met" if q - p >= loss / 2 else "NOT met")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args(argv)
    from mcutorch.ui.tables import add, show, table

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny batches: one thread is faster
    nums = ("seed", "float %", "PTQ %", "QAT %", "QAT prog %", "float+FT %", "PTQ of FT %",
            "PTQ loss", "QAT recovered")
    t = table("model", *nums, "target", right=nums)
    summary = table("model", *nums[1:4], *nums[5:], "target", right=nums)
    i16 = ("seed", "float %", "int8 %", "a16w8 %", "mixed %", "RAM int8 B", "RAM mixed B")
    t16 = table("model", *i16, "mixed: int16 modules", right=i16)
    s16 = table("model", *i16[1:5], "a16w8 - float", "mixed - float", "target",
                right=(*i16[1:5], "a16w8 - float", "mixed - float"))
    start = time.perf_counter()
    for name in args.models.split(","):
        rows = [measure(name, seed, program=seed == 0) for seed in range(args.seeds)]
        for seed, r in enumerate(rows):
            add(t, name, seed, f"{r['float']:.2f}", f"{r['ptq']:.2f}", f"{r['qat']:.2f}",
                None if r["program"] is None else f"{r['program']:.2f}", f"{r['tuned']:.2f}",
                f"{r['tuned_ptq']:.2f}", f"{r['float'] - r['ptq']:.2f}",
                f"{r['qat'] - r['ptq']:.2f}",
                _target(r["float"], r["ptq"], r["qat"]))
            add(t16, name, seed, f"{r['float']:.2f}", f"{r['ptq']:.2f}", f"{r['a16w8']:.2f}",
                f"{r['mixed']:.2f}", f"{r['ram8']:,}", f"{r['ram_mixed']:,}",
                ", ".join(r["mixed_layers"]) or "(none)")
        f, p, q, ft, fp = (float(np.mean([r[k] for r in rows]))
                           for k in ("float", "ptq", "qat", "tuned", "tuned_ptq"))
        add(summary, name, f"{f:.2f}", f"{p:.2f}", f"{q:.2f}", f"{ft:.2f}", f"{fp:.2f}",
            f"{f - p:.2f}", f"{q - p:.2f}", _target(f, p, q))
        a, mx = (float(np.mean([r[k] for r in rows])) for k in ("a16w8", "mixed"))
        add(s16, name, f"{f:.2f}", f"{p:.2f}", f"{a:.2f}", f"{mx:.2f}", f"{a - f:+.2f}",
            f"{mx - f:+.2f}", "met" if max(a, mx) >= f - 0.5 else "NOT met")
    torch.set_num_threads(threads)
    show([f"digits as sequences: held-out accuracy over {args.seeds} seeds "
          f"({time.perf_counter() - start:.0f} s)", t,
          "mean over the seeds (target: QAT recovers >= half of a PTQ loss above 1 point):",
          summary,
          "int16 (issue 13): a16w8 = int16 activations wherever the op has an int16 form "
          "(PyTorch fake-quant), mixed = "
          "mcutorch.mixed_precision's choice (compiled for cortex-m55, no RAM budget; RAM = "
          "arena + runtime state):", t16,
          "mean over the seeds (target: a16w8 or mixed within 0.5 points of float):", s16])
    w = sww()
    tw = table("model", "windows", "float", "int8 PTQ", "a16w8", "a16w8 program", "mixed", "QAT",
               "RAM int8 B", "RAM a16w8 B", "RAM mixed B", right=("windows", "float", "int8 PTQ",
                                                                   "a16w8", "a16w8 program",
                                                                   "mixed", "RAM int8 B",
                                                                   "RAM a16w8 B", "RAM mixed B"))
    add(tw, "ds_cnn_sww (reference weights)", w["n"], w["float"], w["int8"], w["a16w8"],
        w["a16w8_program"], w["mixed"], "n/a (no training data)", f"{w['ram8']:,}",
        f"{w['ram16']:,}", f"{w['ram_mixed']:,}")
    show(["streaming wake word, the 45 real windows (windows right; RAM = arena + runtime state, "
          f"cortex-m55); mixed: int16 for {', '.join(w['mixed_layers']) or 'no module'}:", tw])


if __name__ == "__main__":
    main()
