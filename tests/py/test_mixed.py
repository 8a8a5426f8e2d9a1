"""mcutorch.mixed_precision: int16 activations for the most sensitive modules under a RAM
budget, on a small MLP trained on scikit-learn's digits (real data, real PT2E, real compiles)."""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest
import torch
from torch import nn

import mcutorch
from mcutorch.device import crt
from mcutorch.errors import UnsupportedOpError, UsageError
from mcutorch.models.digits import digits_split, digits_tcn
from mcutorch.ref.interpreter import Interpreter


@lru_cache(maxsize=None)
def mlp():
    xtr, ytr, xte, yte = digits_split("rows", 0)
    xtr, xte = xtr.reshape(len(xtr), -1), xte.reshape(len(xte), -1)
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU(),
                      nn.Linear(16, 10))
    opt = torch.optim.Adam(m.parameters(), 3e-3)
    for _ in range(25):
        for i in range(0, len(xtr), 64):
            opt.zero_grad()
            nn.functional.cross_entropy(m(xtr[i:i + 64]), ytr[i:i + 64]).backward()
            opt.step()
    return m.eval(), xtr, xte, yte


def test_unlimited_budget_moves_the_sensitive_modules_and_the_quantizer_reproduces_it():
    m, xtr, xte, yte = mlp()
    cal = list(xtr[:256].split(64))
    plan = mcutorch.mixed_precision(m, (xtr[:1],), cal, evaluate=lambda q: float(
        (q(xte).argmax(1) == yte).float().mean()))
    assert plan.int16_layers, str(plan)
    # a Linear and the ReLU fused into it move together
    assert {"0", "1"} <= set(plan.int16_layers) or {"2", "3"} <= set(plan.int16_layers) or \
        "4" in plan.int16_layers
    assert plan.chosen["sqnr_db"] > plan.baseline["sqnr_db"]
    assert plan.chosen["ram"] >= plan.baseline["ram"]
    assert list(plan.quantizer.int16_layers) == plan.int16_layers
    q = mcutorch.quantize(m, (xtr[:1],), cal, quantizer=plan.quantizer)
    program = mcutorch.compile(q, (xtr[:1],), target="cortex-m55")
    s = program.summary()
    assert sum(s["regions"].values()) + s["state_bytes"] == plan.chosen["ram"]
    for x in xte[:4]:  # the program on the reference and on the host C runtime: same integers
        xs = program._quantize([x[None].numpy()])
        (want,) = Interpreter(program.program).invoke(xs)
        (got,) = crt.run_host(program.program, xs)
        np.testing.assert_array_equal(got, want)
    text = str(plan)
    assert "(all int8)" in text and "output SQNR" in text and "accuracy" in text


def test_a_budget_below_every_move_keeps_all_int8_and_says_why():
    m, xtr, _, _ = mlp()
    cal = list(xtr[:128].split(64))
    first = mcutorch.mixed_precision(m, (xtr[:1],), cal)
    plan = mcutorch.mixed_precision(m, (xtr[:1],), cal, ram_budget=first.baseline["ram"])
    assert plan.int16_layers == [] and plan.quantizer.int16_layers == ()
    assert len(plan.steps) > 1
    assert all("over budget" in s["reason"] for s in plan.steps[1:])


def test_modules_without_an_int16_kernel_stay_int8_with_the_reason():
    xtr = digits_split("rows", 0)[0]
    m = digits_tcn("rows", width=4, depth=2).eval()
    plan = mcutorch.mixed_precision(m, (xtr[:1],), list(xtr[:128].split(64)))
    convs = [s for s in plan.steps[1:] if s["module"].startswith("features.")]
    assert convs and all("no int16 kernel" in s["reason"] and "Conv1d" in s["reason"]
                         for s in convs)
    assert plan.int16_layers in ([], ["classifier"])


def test_int16_conv1d_is_refused_by_name_not_an_internal_error():
    xtr = digits_split("rows", 0)[0]
    m = digits_tcn("rows", width=4, depth=1).eval()
    q = mcutorch.quantize(m, (xtr[:1],), [xtr[:32]],
                          quantizer=mcutorch.Quantizer(int16_layers=["features"]))
    with pytest.raises(UnsupportedOpError, match=r"Conv1d.*conv2d with int16 activations"):
        mcutorch.compile(q, (xtr[:1],), target="cortex-m55")


@pytest.mark.parametrize("budget", [0, -5, 1.5, "8K"])
def test_bad_budget(budget):
    m, xtr, _, _ = mlp()
    with pytest.raises(UsageError, match="ram_budget"):
        mcutorch.mixed_precision(m, (xtr[:1],), [xtr[:8]], ram_budget=budget)
