"""The MLPerf Tiny networks (reference weights) and MobileNetV2 through the whole compiler."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
import torch

import mcutorch
from mcutorch.compare import layer_by_layer
from mcutorch.models import REFERENCE_TFLITE, build, example_input, load_tflite_weights

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "mlperf_tiny"
MLPERF = ["ds_cnn_kws", "mobilenet_v1_vww", "resnet8", "fc_autoencoder", "ds_cnn_sww"]


def data_dir() -> Path:
    if not DATA.is_dir():
        pytest.fail(f"MLPerf Tiny reference data not found at {DATA} (expected ../shared)")
    return DATA


def real_calibration(name: str, model) -> list[torch.Tensor]:
    """Real samples where the reference data has them, else seeded inputs in range."""
    if name == "ds_cnn_sww":
        specs = np.load(data_dir() / "sww_calibration_samples.npz")["specs"]
        return [torch.from_numpy(s[None].transpose(0, 3, 1, 2)).float() for s in specs]
    if name == "fc_autoencoder":
        rows = np.fromfile(data_dir() / "normal_id_01_00000000_hist_librosa.bin", np.float32)
        return [torch.from_numpy(r[None]) for r in rows.reshape(-1, 640)]
    if name == "ds_cnn_kws":
        q = np.load(data_dir() / "kws_sample_input.npy").astype(np.float32)
        real = torch.from_numpy(((q - 83) * 0.5847).transpose(0, 3, 1, 2))
        return [real] + [example_input(model, seed=i) for i in range(7)]
    return [example_input(model, seed=i) for i in range(8)]


@lru_cache(maxsize=None)
def compiled(name: str):
    """(float model, quantized module, program, calibration) for a network, cached per session."""
    kw = {"width": 0.35, "resolution": 96} if name == "mobilenet_v2" else {}
    model = build(name, **kw)
    if name in REFERENCE_TFLITE:
        load_tflite_weights(model, data_dir() / REFERENCE_TFLITE[name])
    model.eval()
    cal = real_calibration(name, model)
    qmodel = mcutorch.quantize(model, (cal[0],), calibration=cal)
    program = mcutorch.compile(qmodel, (cal[0],), target="cortex-m55", name=name)
    return model, qmodel, program, cal


@pytest.mark.parametrize("name", MLPERF + ["mobilenet_v2"])
def test_end_to_end_matches_fake_quant(name):
    model, qmodel, program, cal = compiled(name)
    x = cal[-1]
    out = program.program.tensors[program.program.outputs[0]]
    ours = np.round(program.run(x).numpy() / out.scale)
    theirs = np.round(qmodel(x).detach().numpy() / out.scale)
    assert np.abs(ours - theirs).max() <= 1


@pytest.mark.parametrize("name", MLPERF + ["mobilenet_v2"])
def test_layer_by_layer_within_one_lsb(name):
    _, qmodel, _, cal = compiled(name)
    rows = layer_by_layer(qmodel, (cal[-1],))
    assert rows
    share = sum(r["within_1lsb"] * r["elements"] for r in rows) / sum(r["elements"] for r in rows)
    assert share >= 0.99, rows
    assert min(r["within_1lsb"] for r in rows) >= 0.99, rows


@pytest.mark.parametrize("name", MLPERF)
def test_cosine_to_float_model(name):
    model, _, program, cal = compiled(name)
    xs = cal[:4]
    for x in xs:
        ours = program.run(x).flatten()
        ref = model(x).detach().flatten()
        cos = torch.nn.functional.cosine_similarity(ours, ref, dim=0).item()
        assert cos >= 0.98, (name, cos)


def test_kws_sample_is_class_5():
    _, _, program, _ = compiled("ds_cnn_kws")
    q = np.load(data_dir() / "kws_sample_input.npy")
    (y,) = program.run_int8([q.astype(np.int8)])  # the program's input is int8 NHWC already
    assert int(np.argmax(y)) == 5


def test_sww_real_samples_accuracy():
    _, _, program, _ = compiled("ds_cnn_sww")
    data = np.load(data_dir() / "sww_calibration_samples.npz")
    x = torch.from_numpy(data["specs"].transpose(0, 3, 1, 2)).float()
    predictions = program.run(x).argmax(1).numpy()
    correct = int((predictions == data["labels"]).sum())
    assert correct >= 40, correct


def test_arena_is_close_to_the_lower_bound():
    for name in MLPERF:
        s = compiled(name)[2].summary()
        assert sum(s["regions"].values()) <= 1.05 * s["lower_bound"], (name, s)
