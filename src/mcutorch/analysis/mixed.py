"""Mixed precision under a RAM budget: which layers to run with int16 activations.

`mixed_precision(model, example_inputs, calibration, ram_budget=...)` starts from the all-int8
program, ranks the model's modules by their error against the float model (the lowest SQNR of
their layers, `mcutorch.compare.sensitivity`), and tries them in that order: each module is moved
to int16 activations (`Quantizer(int16_layers=[...])`), the model quantized and compiled for the
target, and the move kept when the program still fits `ram_budget` (planned arena regions +
persistent tensors + the C runtime's bind-time state, the bytes `mcutorch compile` reports) and
the model's output moved closer to the float model's. A module whose ops have no int16 form or
no int16 kernel, or that would exceed the budget, is left int8 and the reason recorded.

The result is a `MixedPrecision`: `.quantizer` (an ordinary `Quantizer` the user can edit or pass
on to `mcutorch.quantize`), `.int16_layers`, `.steps` (every candidate tried: RAM, output SQNR,
optional accuracy, kept or why not) and a printable trade-off table (`print(plan)`).

Example:
    >>> plan = mcutorch.mixed_precision(model, (x,), calibration, ram_budget=32_000)
    >>> print(plan)                  # int8 vs chosen: RAM, output SQNR, accuracy
    >>> qmodel = mcutorch.quantize(model, (x,), calibration, quantizer=plan.quantizer)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from mcutorch.errors import McutorchError, UsageError


@dataclass
class MixedPrecision:
    """What `mixed_precision` chose; `steps[0]` is the all-int8 program."""
    quantizer: object
    int16_layers: list[str]
    ram_budget: int | None
    steps: list[dict] = field(default_factory=list)

    @property
    def baseline(self) -> dict:
        return self.steps[0]

    @property
    def chosen(self) -> dict:
        return [s for s in self.steps if s["kept"]][-1]

    def parts(self) -> list:
        from mcutorch.ui.tables import add, table

        t = table("step", "module to int16", "RAM B", "output SQNR dB", "accuracy", "kept",
                  right=("step", "RAM B", "output SQNR dB", "accuracy"), wrap=("kept",))
        for i, s in enumerate(self.steps):
            acc = "" if s.get("accuracy") is None else f"{100 * s['accuracy']:.2f} %"
            ram = "" if s["ram"] is None else f"{s['ram']:,}"
            sqnr = "" if s["sqnr_db"] is None else f"{s['sqnr_db']:.1f}"
            add(t, i, s["module"] or "(all int8)", ram, sqnr, acc,
                "yes" if s["kept"] else s["reason"])
        b, c = self.baseline, self.chosen
        budget = f"{self.ram_budget:,} B" if self.ram_budget is not None else "none"
        acc = ("" if c.get("accuracy") is None else
               f", accuracy {100 * b['accuracy']:.2f} % -> {100 * c['accuracy']:.2f} %")
        return [f"mixed precision (RAM budget {budget}): int16 activations for "
                f"{self.int16_layers or 'no module'}", t,
                f"chosen: RAM {b['ram']:,} -> {c['ram']:,} B, output SQNR vs float "
                f"{b['sqnr_db']:.1f} -> {c['sqnr_db']:.1f} dB{acc}"]

    def __str__(self) -> str:
        from mcutorch.ui.tables import text

        return text(self.parts())


def mixed_precision(model: torch.nn.Module, example_inputs, calibration, ram_budget=None, *,
                    target: str = "cortex-m55", data=None, evaluate=None,
                    min_gain_db: float = 0.1, max_steps: int = 32) -> MixedPrecision:
    """Propose int16 activations for the model's most sensitive modules within `ram_budget`
    bytes (None: no limit) on `target`. `data` (default: the calibration batches) measures the
    output SQNR vs the float model; `evaluate(qmodel) -> float` (e.g. held-out accuracy in
    [0, 1]) is reported for each step when given. A move is kept when it fits the budget and
    raises the output SQNR by at least `min_gain_db`. At most `max_steps` modules are tried."""
    import mcutorch
    from mcutorch.compare import sensitivity

    calibration = list(calibration)
    data = list(data) if data is not None else calibration
    if ram_budget is not None and (not isinstance(ram_budget, int) or ram_budget <= 0):
        raise UsageError(f"ram_budget={ram_budget!r}: give the bytes of RAM the program may use "
                         "(a positive int), or None for no limit")
    model.eval()
    floats = _outputs(model, data)

    def attempt(layers, module):
        step = {"module": module, "layers": list(layers), "ram": None, "sqnr_db": None,
                "accuracy": None, "kept": False, "reason": ""}
        try:
            q = mcutorch.quantize(model, example_inputs, calibration,
                                  quantizer=mcutorch.Quantizer(int16_layers=list(layers)))
            program = mcutorch.compile(q, example_inputs, target=target)
        except McutorchError as exc:
            step["reason"] = _short(exc)
            return step, None
        s = program.summary()
        step["ram"] = sum(s["regions"].values()) + s["state_bytes"]
        step["sqnr_db"] = _sqnr(floats, _outputs(q, data))
        if evaluate is not None:
            step["accuracy"] = float(evaluate(q))
        return step, q

    base, q8 = attempt([], "")
    if q8 is None:
        raise UsageError(f"the all-int8 model does not compile for {target}: {base['reason']}")
    base["kept"] = True
    plan = MixedPrecision(mcutorch.Quantizer(), [], ram_budget, [base])
    if ram_budget is not None and base["ram"] > ram_budget:
        base["reason"] = "the all-int8 program is over the budget"
    order = _modules_by_sensitivity(sensitivity(model, q8, data, example_inputs),
                                    _fused_into(model, example_inputs))
    current = base
    for group in order[:max_steps]:
        step, _ = attempt([*plan.int16_layers, *group], "+".join(group))
        plan.steps.append(step)
        if step["ram"] is None:
            continue
        if ram_budget is not None and step["ram"] > ram_budget:
            step["reason"] = f"over budget ({step['ram']:,} B > {ram_budget:,} B)"
        elif step["sqnr_db"] < current["sqnr_db"] + min_gain_db:
            step["reason"] = f"no gain (< {min_gain_db} dB)"
        else:
            step["kept"] = True
            plan.int16_layers += group
            current = step
    plan.quantizer = mcutorch.Quantizer(int16_layers=list(plan.int16_layers))
    return plan


ACTIVATIONS = ("aten.relu", "aten.relu_", "aten.hardtanh", "aten.hardtanh_", "aten.clamp",
               "aten.relu6")


def _fused_into(model, example_inputs) -> dict[str, str]:
    """Activation modules (ReLU, ReLU6, Hardtanh, a clamp) whose input comes from another module:
    {activation module: producer module}. The fused output is the activation's, so the two are
    one candidate: the producer's int16 output is the activation's input."""
    from mcutorch.frontend.capture import as_tuple, capture, module_of

    graph = capture(model, as_tuple(example_inputs)).graph
    fused = {}
    for n in graph.nodes:
        if n.op != "call_function" or not str(n.target).startswith(ACTIVATIONS):
            continue
        src = n.args[0] if n.args and isinstance(n.args[0], torch.fx.Node) else None
        mine = module_of(n).split(":")[0]
        theirs = module_of(src).split(":")[0] if src is not None and src.op == "call_function" \
            else ""
        if mine and theirs and mine != theirs:
            fused[mine] = theirs
    return fused


def _modules_by_sensitivity(rows: list[dict], fused: dict[str, str]) -> list[list[str]]:
    """Candidate groups of module names (a producer with the activation fused into it), the
    worst SQNR of their layers first."""
    worst: dict[str, float] = {}
    for r in rows:
        name = r["source"].split(":")[0] if r["source"] not in ("", "model input") else ""
        if name:
            name = fused.get(name, name)
            worst[name] = min(worst.get(name, math.inf), r["sqnr_db"])
    members = {name: [name, *(a for a, p in fused.items() if p == name)] for name in worst}
    return [members[n] for n in sorted(worst, key=lambda n: worst[n])]


def _outputs(fn, data) -> list[np.ndarray]:
    out = []
    with torch.no_grad():
        for batch in data:
            batch = batch if isinstance(batch, (tuple, list)) else (batch,)
            y = fn(*batch)
            ys = y if isinstance(y, (tuple, list)) else (y,)
            out += [t.detach().double().numpy().ravel() for t in ys]
    return out


def _sqnr(ref: list[np.ndarray], got: list[np.ndarray]) -> float:
    signal = sum(float((r ** 2).sum()) for r in ref)
    noise = sum(float(((g - r) ** 2).sum()) for r, g in zip(ref, got))
    return math.inf if noise == 0 else 10 * math.log10(signal / noise) if signal else -math.inf


def _short(exc: Exception) -> str:
    text = str(exc).split("\n")[0]
    return text if len(text) <= 160 else text[:157] + "..."
