"""`mcutorch validate`: run a dataset through the float model, the fake-quant (PT2E converted)
model and the compiled program, and compare.

Classifier (labels y are class indices and output 0 holds one score per class): top-1, per-class
accuracy and the confusion matrix of each executor. With the float model: mean/max absolute
error and cosine similarity of each executor's outputs against it. Always: the worst samples of
the program (misclassified or least confident first; else the largest error).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from mcutorch.analysis.dataset import Dataset, load_dataset
from mcutorch.errors import InputError


def _model_outputs(module, data: Dataset, what: str, progress: bool) -> list[np.ndarray]:
    """Outputs of a torch module (float or fake-quant), sample by sample, stacked per output."""
    import torch

    from mcutorch.ui.progress import track

    rows = []
    with torch.no_grad():
        for i in track(range(len(data)), f"{what} model", enabled=progress):
            xs = [torch.from_numpy(np.asarray(a, np.float32)) for a in data.sample(i)]
            try:
                out = module(*xs)
            except Exception as exc:  # the user's model: say which sample and what it raised
                raise InputError(f"the {what} model raised {type(exc).__name__} on sample {i} "
                                 f"(inputs {[list(x.shape) for x in xs]}): "
                                 f"{str(exc).splitlines()[0] if str(exc) else ''}") from exc
            outs = out if isinstance(out, (tuple, list)) else (out,)
            rows.append([np.asarray(o.detach().float().numpy()) for o in outs])
    return [np.concatenate([r[k] for r in rows]) for k in range(len(rows[0]))]


def _program_outputs(program, data: Dataset, board: str | None) -> list[np.ndarray]:
    out = program.run(*[np.asarray(a) for a in data.inputs], board=board)
    outs = out if isinstance(out, tuple) else (out,)
    return [o.numpy() for o in outs]


def _is_classifier(labels, outputs: list[np.ndarray]) -> bool:
    y, scores = labels, outputs[0]
    if y is None or y.dtype.kind not in "iub" or y.ndim != 1 or scores.ndim != 2:
        return False
    if scores.shape[1] < 2:
        return False
    if y.min() < 0 or y.max() >= scores.shape[1]:
        raise InputError(f"labels y hold classes {int(y.min())}..{int(y.max())}, but the model "
                         f"outputs {scores.shape[1]} scores per sample (classes 0.."
                         f"{scores.shape[1] - 1})")
    return True


def _classification(y: np.ndarray, scores: np.ndarray) -> dict:
    from sklearn.metrics import confusion_matrix

    k = scores.shape[1]
    pred = scores.argmax(axis=1)
    per_class = [{"class": c, "samples": int((y == c).sum()),
                  "accuracy": float((pred[y == c] == c).mean()) if (y == c).any() else None}
                 for c in range(k)]
    return {"top1": float((pred == y).mean()), "per_class": per_class,
            "confusion": confusion_matrix(y, pred, labels=list(range(k))).tolist()}


def _flat(outputs: list[np.ndarray], n: int) -> np.ndarray:
    return np.concatenate([o.reshape(n, -1) for o in outputs], axis=1).astype(np.float64)


def _errors(outputs: list[np.ndarray], reference: list[np.ndarray], n: int) -> dict:
    a, b = _flat(outputs, n), _flat(reference, n)
    if a.shape != b.shape:
        raise InputError(f"outputs of shape {list(a.shape)} cannot be compared with the "
                         f"reference's {list(b.shape)}")
    d = np.abs(a - b)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    cos = np.where(norms > 0, (a * b).sum(axis=1) / np.where(norms > 0, norms, 1), 1.0)
    return {"mean_abs_error": float(d.mean()), "max_abs_error": float(d.max()),
            "cosine": float(cos.mean()), "per_sample_error": d.mean(axis=1)}


def _worst(report: dict, outputs, labels, reference, n: int, count: int) -> list[dict]:
    if report["classifier"]:
        scores = outputs[0]
        true = scores[np.arange(n), labels]
        others = np.where(np.eye(scores.shape[1], dtype=bool)[labels], -np.inf, scores)
        margin = true - others.max(axis=1)  # < 0: misclassified
        order = np.argsort(margin, kind="stable")[:count]
        return [{"sample": int(i), "label": int(labels[i]), "predicted": int(scores[i].argmax()),
                 "margin": float(margin[i])} for i in order]
    if reference is None:
        return []
    err = _errors(outputs, reference, n)["per_sample_error"]
    order = np.argsort(-err, kind="stable")[:count]
    return [{"sample": int(i), "mean_abs_error": float(err[i])} for i in order]


def validate(program, data, model=None, qmodel=None, board: str | None = None,
             worst: int = 5, progress: bool = False) -> dict:
    """Compare `program` (a CompiledModel or a .mtp path) on the dataset `data` (a Dataset or an
    .npz path, mcutorch.analysis.dataset) with the labels, the float `model` and the fake-quant
    `qmodel` (each optional). `board` runs the program's whole dataset in one QEMU run.

    Example:
        >>> r = mcutorch.validate("kws.mtp", "test.npz", model=float_model)
        >>> r["executors"]["program"]["top1"], r["executors"]["program"]["vs_float"]["cosine"]
    """
    import mcutorch

    program = mcutorch.load(program) if isinstance(program, (str, Path)) else program
    data = data if isinstance(data, Dataset) else load_dataset(data)
    n = len(data)
    if data.labels is None and model is None:
        raise InputError(f"nothing to validate against: {data.path or 'the dataset'} has no "
                         "labels y, and no float model was given (--model model.py)")
    runs = {"program": _program_outputs(program, data, board)}
    if model is not None:
        runs["float"] = _model_outputs(model, data, "float", progress)
    if qmodel is not None:
        runs["fake_quant"] = _model_outputs(qmodel, data, "fake-quant", progress)
    classifier = _is_classifier(data.labels, runs["program"])
    report = {"samples": n, "dataset": data.path, "runs_on": board or "host",
              "classifier": classifier, "executors": {}}
    for name in ("float", "fake_quant", "program"):
        if name not in runs:
            continue
        row = {}
        if classifier:
            row.update(_classification(data.labels, runs[name][0]))
        elif data.labels is not None:
            row["vs_labels"] = _drop(_errors(runs[name], [data.labels], n))
        if name != "float" and "float" in runs:
            row["vs_float"] = _drop(_errors(runs[name], runs["float"], n))
            if classifier:
                row["vs_float"]["top1_agreement"] = float(
                    (runs[name][0].argmax(1) == runs["float"][0].argmax(1)).mean())
        report["executors"][name] = row
    reference = runs.get("float") or ([data.labels] if data.labels is not None else None)
    report["worst"] = _worst(report, runs["program"], data.labels, reference, n, worst)
    return report


def _drop(errors: dict) -> dict:
    return {k: v for k, v in errors.items() if k != "per_sample_error"}


def render(report: dict) -> str:
    """The validate report as text (what `mcutorch validate` prints in a pipe)."""
    from mcutorch.ui.tables import text

    return text(parts(report))


NAMES = {"sample": "sample", "label": "label", "predicted": "predicted", "margin": "margin",
         "mean_abs_error": "mean |err|"}


def parts(report: dict) -> list:
    """The report's lines and rich tables (mcutorch.ui.tables), in print order."""
    from mcutorch.ui.tables import add, table

    rows = report["executors"].values()
    classifier = any("top1" in r for r in rows)
    agreement = any("top1_agreement" in r.get("vs_float", {}) for r in rows)
    heads = ["executor"] + (["top-1"] if classifier else []) + ["vs", "mean |err|", "max |err|",
                                                                "cosine"]
    summary = table(*heads, *(["top-1 agreement"] if agreement else []),
                    right=("top-1", "mean |err|", "max |err|", "cosine", "top-1 agreement"))
    for name, row in report["executors"].items():
        top1 = [f"{row['top1']:.4f}"] if classifier else []
        against = [(label, row[key]) for key, label in (("vs_labels", "labels"),
                                                         ("vs_float", "float")) if key in row]
        for k, (label, e) in enumerate(against or [("", None)]):
            cells = [name.replace("_", "-") if k == 0 else "", *(top1 if k == 0 else [""] *
                                                                 len(top1)), label]
            cells += ([f"{e['mean_abs_error']:.6g}", f"{e['max_abs_error']:.6g}",
                       f"{e['cosine']:.6f}"] if e else [None] * 3)
            if agreement:
                cells.append(f"{e['top1_agreement']:.4f}" if e and "top1_agreement" in e
                             else None)
            add(summary, *cells)
    out = [f"{report['samples']} samples from {report['dataset'] or 'the dataset'}; program "
           f"run on {report['runs_on']}", summary]
    prog = report["executors"]["program"]
    if "per_class" in prog:
        k = len(prog["confusion"])
        confusion = table("label", *(f"-> {c}" for c in range(k)), "samples", "accuracy",
                          right=("label", *(f"-> {c}" for c in range(k)), "samples",
                                 "accuracy"))
        for c, counts in zip(prog["per_class"], prog["confusion"]):
            add(confusion, c["class"], *counts, c["samples"],
                None if c["accuracy"] is None else f"{c['accuracy']:.3f}")
        out += ["program per class: confusion matrix (rows: label, columns -> c: predicted c), "
                "samples and accuracy", confusion]
    if report["worst"]:
        keys = list(report["worst"][0])
        worst = table(*(NAMES.get(key, key) for key in keys),
                      right=tuple(NAMES.get(key, key) for key in keys))
        for w in report["worst"]:
            add(worst, *(f"{w[key]:.6g}" if isinstance(w[key], float) else w[key]
                         for key in keys))
        out += ["worst samples of the program:", worst]
    return out
