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
from mcutorch.errors import UsageError
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


def test_modules_without_an_int16_form_stay_int8_with_the_reason():
    xtr = digits_split("rows", 0)[0].reshape(-1, 64)
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(64, 32), nn.LogSoftmax(-1), nn.Linear(32, 10)).eval()
    plan = mcutorch.mixed_precision(m, (xtr[:1],), list(xtr[:128].split(64)))
    (norm,) = [s for s in plan.steps[1:] if s["module"].startswith("1")]
    assert not norm["kept"] and "no int16 form" in norm["reason"] and norm["ram"] is None
    assert "1" not in plan.int16_layers


def test_an_int16_conv1d_compiles_bit_exact():
    """A Conv1d's [N, C, 1, L] views keep the int16 dtype (they were int8, failing the IR's
    byte-size check): the int16 conv2d kernel runs it, the reference and host C agree."""
    xtr = digits_split("rows", 0)[0]
    m = digits_tcn("rows", width=4, depth=1).eval()
    q = mcutorch.quantize(m, (xtr[:1],), [xtr[:32]],
                          quantizer=mcutorch.Quantizer(int16_layers=["features"]))
    program = mcutorch.compile(q, (xtr[:1],), target="cortex-m55")
    assert any(o.name == "conv2d" for o in program.program.ops)
    xs = program._quantize([xtr[:1].numpy()])
    np.testing.assert_array_equal(crt.run_host(program.program, xs)[0],
                                  Interpreter(program.program).invoke(xs)[0])


@pytest.mark.parametrize("budget", [0, -5, 1.5, "8K"])
def test_bad_budget(budget):
    m, xtr, _, _ = mlp()
    with pytest.raises(UsageError, match="ram_budget"):
        mcutorch.mixed_precision(m, (xtr[:1],), [xtr[:8]], ram_budget=budget)
