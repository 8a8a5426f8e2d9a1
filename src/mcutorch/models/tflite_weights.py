"""Load the weights of an int8 `.tflite` model into the matching PyTorch module.

The tflite operators that carry weights (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED), in
operator order, are paired with the module's `nn.Conv2d` / `nn.Linear` layers in module order.
Weights and biases are dequantized ((q - zero_point) * scale, per channel where quantized per
channel) and converted from tflite layouts to PyTorch's. The tflite graph has every BatchNorm
folded into the preceding layer's bias, so each BatchNorm of the module becomes an exact
identity in eval mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from mcutorch.errors import McutorchError

_CONV, _DEPTHWISE, _DENSE, _RESHAPE = 3, 4, 9, 22  # tflite BuiltinOperator codes
_KINDS = {_CONV: "CONV_2D", _DEPTHWISE: "DEPTHWISE_CONV_2D", _DENSE: "FULLY_CONNECTED"}
_DTYPES = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64, 7: np.int16,
           9: np.int8}


@dataclass
class TfliteLayer:
    """One weight-carrying tflite operator, with weights already in PyTorch layout (float32)."""

    op_index: int
    kind: str  # "CONV_2D", "DEPTHWISE_CONV_2D" or "FULLY_CONNECTED"
    name: str  # the weight tensor's name
    weight: np.ndarray  # OIHW, (C*M,1,KH,KW) or [out,in] (in features in NCHW flatten order)
    bias: np.ndarray | None
    stride: tuple[int, int] | None  # convolutions only


def _tensor_array(model, graph, index: int) -> np.ndarray:
    """A constant tensor's values, dequantized to float32 if it is quantized."""
    tensor = graph.Tensors(index)
    dtype = _DTYPES.get(tensor.Type())
    data = model.Buffers(tensor.Buffer()).DataAsNumpy()
    if dtype is None or not isinstance(data, np.ndarray):
        raise McutorchError(f"tflite tensor {tensor.Name().decode()!r} is not a supported constant")
    values = data.view(dtype).reshape(tensor.ShapeAsNumpy()).astype(np.float32)
    quant = tensor.Quantization()
    if quant is None or quant.ScaleLength() == 0:
        if dtype not in (np.float32, np.float16):
            raise McutorchError(f"tflite tensor {tensor.Name().decode()!r} has no quantization")
        return values
    shape = [1] * values.ndim
    if quant.ScaleLength() > 1:
        shape[quant.QuantizedDimension()] = -1
    scale = quant.ScaleAsNumpy().astype(np.float32).reshape(shape)
    zero = quant.ZeroPointAsNumpy().astype(np.float32) if quant.ZeroPointLength() else np.zeros(1)
    return (values - (zero.reshape(shape) if zero.size > 1 else zero[0])) * scale


def nhwc_to_nchw_columns(weight: np.ndarray, h: int, w: int, c: int) -> np.ndarray:
    """Reorder dense weights [out, H*W*C] (NHWC flatten) to [out, C*H*W] (NCHW flatten).

    >>> nhwc_to_nchw_columns(np.arange(4.0)[None], 1, 2, 2).tolist()  # (w,c): 00 01 10 11
    [[0.0, 2.0, 1.0, 3.0]]
    """
    return weight.reshape(-1, h, w, c).transpose(0, 3, 1, 2).reshape(weight.shape[0], -1)


def _flatten_source(graph, tensor: int, producers: dict[int, object]) -> list[int]:
    """Shape of the tensor a FULLY_CONNECTED input was reshaped from (follows RESHAPE ops)."""
    shape = graph.Tensors(tensor).ShapeAsNumpy().tolist()
    while len(shape) != 4 and tensor in producers:
        op, code = producers[tensor]
        if code != _RESHAPE:
            break
        tensor = int(op.Inputs(0))
        shape = graph.Tensors(tensor).ShapeAsNumpy().tolist()
    return shape


def read_tflite_layers(path: str | Path) -> list[TfliteLayer]:
    """The weight-carrying operators of a `.tflite` file, in operator order.

    >>> layers = read_tflite_layers("kws_ref_model.tflite")  # doctest: +SKIP
    >>> layers[0].kind, layers[0].weight.shape  # doctest: +SKIP
    ('CONV_2D', (64, 1, 10, 4))
    """
    import tflite  # flatbuffer schema reader

    try:
        model = tflite.Model.GetRootAsModel(Path(path).read_bytes(), 0)
        graph = model.Subgraphs(0)
    except OSError as exc:
        raise McutorchError(f"cannot read tflite file {path}: {exc}") from exc
    except Exception as exc:
        raise McutorchError(f"{path} is not a valid tflite file: {exc}") from exc
    producers: dict[int, object] = {}
    layers = []
    for i in range(graph.OperatorsLength()):
        op = graph.Operators(i)
        opcode = model.OperatorCodes(op.OpcodeIndex())
        code = max(opcode.BuiltinCode(), opcode.DeprecatedBuiltinCode())
        for t in op.OutputsAsNumpy():
            producers[int(t)] = (op, code)
        if code not in _KINDS:
            continue
        inputs = op.InputsAsNumpy()
        name = graph.Tensors(int(inputs[1])).Name().decode()
        weight = _tensor_array(model, graph, int(inputs[1]))
        has_bias = len(inputs) > 2 and inputs[2] >= 0
        bias = _tensor_array(model, graph, int(inputs[2])) if has_bias else None
        stride = None
        if code == _CONV:  # OHWI -> OIHW
            weight = weight.transpose(0, 3, 1, 2)
        elif code == _DEPTHWISE:  # 1,H,W,C*M -> C*M,1,H,W
            weight = weight.transpose(3, 0, 1, 2)
        else:
            src = _flatten_source(graph, int(inputs[0]), producers)
            if (len(src) == 4 and src[1] * src[2] > 1
                    and src[1] * src[2] * src[3] == weight.shape[1]):
                weight = nhwc_to_nchw_columns(weight, *src[1:])
        if code in (_CONV, _DEPTHWISE):
            options = (tflite.Conv2DOptions() if code == _CONV
                       else tflite.DepthwiseConv2DOptions())
            table = op.BuiltinOptions()
            options.Init(table.Bytes, table.Pos)
            stride = (options.StrideH(), options.StrideW())
        layers.append(TfliteLayer(i, _KINDS[code], name, np.ascontiguousarray(weight), bias,
                                  stride))
    return layers


def _check(name: str, layer: nn.Module, ref: TfliteLayer, path) -> None:
    where = (f"layer {name!r} ({type(layer).__name__}) vs {Path(path).name} "
             f"operator {ref.op_index} {ref.kind} {ref.name!r}")
    if isinstance(layer, nn.Linear) != (ref.kind == "FULLY_CONNECTED"):
        raise McutorchError(f"layer type mismatch: {where}")
    if tuple(layer.weight.shape) != ref.weight.shape:
        raise McutorchError(f"weight shape mismatch: {where}: model {tuple(layer.weight.shape)}, "
                            f"tflite {ref.weight.shape} (in PyTorch layout)")
    if isinstance(layer, nn.Conv2d):
        if ref.kind == "DEPTHWISE_CONV_2D" and layer.groups != layer.in_channels:
            raise McutorchError(f"{where}: a depthwise tflite conv needs groups=in_channels")
        if tuple(layer.stride) != ref.stride:
            raise McutorchError(f"stride mismatch: {where}: model {tuple(layer.stride)}, "
                                f"tflite {ref.stride}")
    if layer.bias is None and ref.bias is not None and np.any(ref.bias):
        raise McutorchError(f"{where}: the tflite layer has a non-zero bias but the model layer "
                            "has none")
    if (layer.bias is not None and ref.bias is not None
            and tuple(layer.bias.shape) != ref.bias.shape):
        raise McutorchError(f"bias shape mismatch: {where}: model {tuple(layer.bias.shape)}, "
                            f"tflite {ref.bias.shape}")


def load_tflite_weights(model: nn.Module, path: str | Path) -> nn.Module:
    """Give `model` the dequantized weights of the int8 `.tflite` at `path`; returns the model in
    eval mode.

    The tflite CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED operators, in order, must match the
    model's `nn.Conv2d` / `nn.Linear` layers in module order (count, type, shape, stride);
    otherwise `McutorchError` names the first layer that differs and nothing is changed. Every
    BatchNorm is set to an exact identity in eval mode (the tflite biases already hold it); call
    `model.train()` to fine-tune from there.

    >>> from mcutorch.models import ds_cnn_kws
    >>> model = load_tflite_weights(ds_cnn_kws(), "kws_ref_model.tflite")  # doctest: +SKIP
    """
    refs = read_tflite_layers(path)
    layers = [(n, m) for n, m in model.named_modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    for (name, layer), ref in zip(layers, refs):
        _check(name, layer, ref, path)
    if len(layers) != len(refs):
        if len(layers) > len(refs):
            first = f"model layer {layers[len(refs)][0]!r}"
        else:
            ref = refs[len(layers)]
            first = f"tflite operator {ref.op_index} {ref.kind} {ref.name!r}"
        raise McutorchError(
            f"{type(model).__name__} has {len(layers)} Conv2d/Linear layers but "
            f"{Path(path).name} has {len(refs)} weight operators "
            f"(CONV_2D/DEPTHWISE_CONV_2D/FULLY_CONNECTED); first unmatched: {first}")
    with torch.no_grad():
        for (_, layer), ref in zip(layers, refs):
            layer.weight.copy_(torch.from_numpy(ref.weight))
            if layer.bias is not None and ref.bias is not None:
                layer.bias.copy_(torch.from_numpy(ref.bias))
            elif layer.bias is not None:
                layer.bias.zero_()
        for bn in model.modules():
            if isinstance(bn, nn.modules.batchnorm._BatchNorm):
                if bn.affine:
                    bn.weight.fill_(1.0)
                    bn.bias.zero_()
                if bn.track_running_stats:
                    bn.running_mean.zero_()
                    bn.running_var.fill_(1.0 - bn.eps)
    return model.eval()
