"""mcutorch.models: shapes, tflite weight loading, and agreement with the MLPerf Tiny int8
reference models run by the TFLite Micro runtime."""

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from mcutorch.errors import McutorchError
from mcutorch.models import (
    REFERENCE_TFLITE, build, ds_cnn_kws, ds_cnn_sww, example_input, fc_autoencoder,
    load_tflite_weights, make_divisible, mobilenet_v2, read_tflite_layers, resnet8, same_padding,
)
from mcutorch.models.tflite_weights import nhwc_to_nchw_columns

REPO_ROOT = Path(__file__).resolve().parents[2]

# conv/linear parameter counts of the reference models (MLPerf Tiny README); the SWW tflite also
# stores 424 all-zero depthwise biases that the PyTorch model (like the Keras one) does not have
REFERENCE_PARAMS = {"ds_cnn_kws": 22_604, "mobilenet_v1_vww": 210_850, "resnet8": 77_706,
                    "fc_autoencoder": 265_864, "ds_cnn_sww": 46_883 - 424}


@pytest.fixture(scope="session")
def shared() -> Path:
    path = (REPO_ROOT / ".." / "shared" / "mlperf_tiny").resolve()
    if not path.is_dir():
        pytest.fail(f"MLPerf Tiny reference folder not found at {path}: it is expected beside the "
                    f"repository as <repo_root>/../shared/mlperf_tiny")
    return path


def loaded(name: str, shared: Path) -> nn.Module:
    return load_tflite_weights(build(name), shared / REFERENCE_TFLITE[name])


def cosine(a, b) -> float:
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def run_tflite(path: Path, x_nhwc: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Quantize a float NHWC/NC input, run the int8 model in TFLite Micro; returns the dequantized
    output and, when the model ends in SOFTMAX, the dequantized logits that feed it."""
    import tflite
    from tflite_micro import runtime

    it = runtime.Interpreter.from_file(str(path), arena_size=2 << 20,
                                       intrepreter_config=runtime.InterpreterConfig.kPreserveAllTensors)
    qin = it.get_input_details(0)["quantization_parameters"]
    qout = it.get_output_details(0)["quantization_parameters"]
    q = np.round(x_nhwc / qin["scales"][0]) + qin["zero_points"][0]
    it.set_input(np.clip(q, -128, 127).astype(np.int8), 0)
    it.invoke()
    out = (it.get_output(0).astype(np.float32) - qout["zero_points"][0]) * qout["scales"][0]
    model = tflite.Model.GetRootAsModel(path.read_bytes(), 0)
    graph = model.Subgraphs(0)
    last = graph.Operators(graph.OperatorsLength() - 1)
    if model.OperatorCodes(last.OpcodeIndex()).BuiltinCode() != tflite.BuiltinOperator.SOFTMAX:
        return out, None
    index = int(last.Inputs(0))
    quant = graph.Tensors(index).Quantization()
    data = it.GetTensor(index, 0)["tensor_data"].astype(np.float32)
    return out, (data - quant.ZeroPointAsNumpy()[0]) * quant.ScaleAsNumpy()[0]


def to_nhwc(x: torch.Tensor) -> np.ndarray:
    return x.permute(0, 2, 3, 1).numpy() if x.dim() == 4 else x.numpy()


@pytest.mark.parametrize("name, out", [("ds_cnn_kws", 12), ("mobilenet_v1_vww", 2), ("resnet8", 10),
                                       ("fc_autoencoder", 640), ("ds_cnn_sww", 3)])
def test_output_shape(name, out):
    model = build(name).eval()
    x = example_input(model, batch=2)
    assert tuple(x.shape[1:]) == model.input_shape[1:]
    assert model(x).shape == (2, out)


@pytest.mark.parametrize("width, resolution, classes, last",
                         [(1.0, 224, 1000, 1280), (0.35, 96, 2, 1280), (1.4, 64, 10, 1792)])
def test_mobilenet_v2_shapes(width, resolution, classes, last):
    model = mobilenet_v2(width=width, resolution=resolution, num_classes=classes).eval()
    assert model.input_shape == (1, 3, resolution, resolution)
    assert model.last_channels == last
    assert model(example_input(model)).shape == (1, classes)
    assert all(m.out_channels % 8 == 0 for m in model.modules() if isinstance(m, nn.Conv2d))


def test_mobilenet_v2_standard_size():
    assert sum(p.numel() for p in mobilenet_v2().parameters()) == 3_504_872
    assert make_divisible(32 * 0.35) == 16 and make_divisible(16 * 0.35) == 8


def test_same_padding_matches_tensorflow():
    assert same_padding(49, 10, 2) == (4, 5)  # KWS first conv: asymmetric in H
    assert same_padding(10, 4, 2) == (1, 1)
    assert same_padding(32, 3, 2) == (0, 1)  # stride 2 on even size: bottom/right only
    assert same_padding(32, 1, 2) == (0, 0)


def test_no_inplace_ops():
    for name in REFERENCE_TFLITE:
        for m in build(name).modules():
            assert not getattr(m, "inplace", False), (name, m)


@pytest.mark.parametrize("name", list(REFERENCE_TFLITE))
def test_weights_load(name, shared):
    model = loaded(name, shared)
    assert not model.training
    weights = [m for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    assert sum(p.numel() for m in weights for p in m.parameters()) == REFERENCE_PARAMS[name]
    refs = read_tflite_layers(shared / REFERENCE_TFLITE[name])
    assert torch.equal(weights[0].weight, torch.from_numpy(refs[0].weight))
    for bn in model.modules():
        if isinstance(bn, nn.modules.batchnorm._BatchNorm):
            x = torch.randn(3, bn.num_features)
            x = x if isinstance(bn, nn.BatchNorm1d) else x[..., None, None]
            assert torch.equal(bn(x), x)


def test_load_mismatch_names_layer(shared):
    with pytest.raises(McutorchError, match=r"weight shape mismatch: layer 'stem\.0'"):
        load_tflite_weights(resnet8(), shared / REFERENCE_TFLITE["ds_cnn_kws"])
    with pytest.raises(McutorchError, match="1 Conv2d/Linear layers but .* has 10"):
        load_tflite_weights(nn.Sequential(nn.Linear(640, 128)),
                            shared / REFERENCE_TFLITE["fc_autoencoder"])
    with pytest.raises(McutorchError, match="layer type mismatch"):
        load_tflite_weights(fc_autoencoder(), shared / REFERENCE_TFLITE["ds_cnn_kws"])
    with pytest.raises(McutorchError, match="cannot read"):
        load_tflite_weights(ds_cnn_kws(), shared / "missing.tflite")


def test_dense_columns_reordered_for_nchw_flatten():
    x = torch.randn(1, 5, 3, 2)  # N,C,H,W
    weight = np.random.default_rng(0).standard_normal((4, 3 * 2 * 5)).astype(np.float32)
    expected = torch.flatten(x.permute(0, 2, 3, 1), 1) @ torch.from_numpy(weight).T
    ours = torch.flatten(x, 1) @ torch.from_numpy(nhwc_to_nchw_columns(weight, 3, 2, 5)).T
    torch.testing.assert_close(ours, expected)


def test_kws_sample_is_class_5(shared):
    q = np.load(shared / "kws_sample_input.npy")
    x = torch.from_numpy((q.astype(np.float32) - 83) * 0.5847029).permute(0, 3, 1, 2)
    with torch.no_grad():
        assert loaded("ds_cnn_kws", shared)(x).argmax().item() == 5


def test_sww_calibration_accuracy(shared):
    data = np.load(shared / "sww_calibration_samples.npz")
    x = torch.from_numpy(data["specs"].astype(np.float32)).permute(0, 3, 1, 2)
    with torch.no_grad():
        pred = loaded("ds_cnn_sww", shared)(x).argmax(1).numpy()
    correct = int((pred == data["labels"].ravel()).sum())
    print(f"SWW float model: {correct}/45 correct")
    assert correct >= 40


def reference_inputs(name: str, shared: Path) -> torch.Tensor:
    """Real samples where the repository has them, otherwise fixed-seed random ones."""
    if name == "ds_cnn_kws":
        q = np.load(shared / "kws_sample_input.npy").astype(np.float32)
        return torch.from_numpy((q - 83) * 0.5847029).permute(0, 3, 1, 2)
    if name == "fc_autoencoder":
        rows = np.fromfile(shared / "normal_id_01_00000000_hist_librosa.bin", np.float32)
        rows = rows.reshape(40, 640)
        return torch.from_numpy(rows[[0, 13, 26, 39]])
    if name == "ds_cnn_sww":
        specs = np.load(shared / "sww_calibration_samples.npz")["specs"][::9].astype(np.float32)
        return torch.from_numpy(specs).permute(0, 3, 1, 2)
    gen = torch.Generator().manual_seed(0)
    if name == "resnet8":  # raw 0..255 pixels
        return torch.randint(0, 256, (3, 3, 32, 32), generator=gen).float()
    return torch.rand((3, 3, 96, 96), generator=gen)  # VWW: 0..1 pixels


@pytest.mark.parametrize("name", list(REFERENCE_TFLITE))
def test_float_model_matches_int8_reference(name, shared):
    """Per input: cosine of the float model's output (and of its logits, for models ending in
    softmax) against the int8 reference; same predicted class. Softmax outputs of near-tie
    inputs magnify int8 noise, so the output cosine is checked on the mean over inputs."""
    model = loaded(name, shared)
    softmax_inputs: list[torch.Tensor] = []
    if hasattr(model, "softmax"):
        model.softmax.register_forward_hook(lambda m, args, out: softmax_inputs.append(args[0]))
    outputs, logits = [], []
    for x in reference_inputs(name, shared):
        with torch.no_grad():
            ours = model(x[None]).numpy()
        ref, ref_logits = run_tflite(shared / REFERENCE_TFLITE[name], to_nhwc(x[None]))
        outputs.append(cosine(ours, ref))
        assert (ref_logits is None) == (not hasattr(model, "softmax"))
        if ref_logits is not None:
            logits.append(cosine(softmax_inputs[-1].numpy(), ref_logits))
            assert ours.argmax() == ref.argmax()
    print(f"\n{name}: output cosine {np.round(outputs, 5).tolist()}"
          + (f", logits cosine {np.round(logits, 5).tolist()}" if logits else ""))
    assert np.mean(outputs) >= 0.98
    assert min(logits or outputs) >= 0.98


def test_sww_input_layout_is_features_as_channels():
    model = ds_cnn_sww().eval()
    assert model.input_shape == (1, 40, 30, 1)
    assert model.features[0].kernel_size == (3, 1) and model.features[0].groups == 40
