"""PyTorch definitions of the MLPerf Tiny networks, MobileNetV2 and the model zoo (models/zoo.py:
MobileNetV3-Small, MBConv, ShuffleNetV2, SqueezeNet, TC-ResNet8, a HAR 1-D CNN, U-Net, a
YOLO-style and a BlazeFace-style detector, a conv autoencoder), temporal conv nets, recurrent
models (models/sequence.py: LSTM, GRU, CRNN), a keyword-transformer-style model and a token
model of the digits read as sequences (`token_digits`: each row an int32 token id through an
nn.Embedding; models/digits.py, models/transformer.py), their parameter and MAC counts, and a
loader for the trained weights of the MLPerf Tiny int8 reference `.tflite` files.

>>> from mcutorch.models import ds_cnn_kws, example_input, load_tflite_weights
>>> model = ds_cnn_kws()
>>> model(example_input(model)).shape
torch.Size([1, 12])
"""

from mcutorch.models.catalog import MODELS, REFERENCE_TFLITE, build, example_input
from mcutorch.models.counting import Cost, Published, cost
from mcutorch.models.digits import (DigitsTCN, TokenDigits, digits_split, digits_tcn,
                                    digits_tokens, token_digits)
from mcutorch.models.mlperf_tiny import (
    DSCNNKWS, DSCNNSWW, DSCNNSWWStreaming, FCAutoencoder, MobileNetV1VWW, ResNet8, ds_cnn_kws,
    ds_cnn_sww, ds_cnn_sww_streaming, fc_autoencoder, mobilenet_v1_vww, resnet8, same_padding,
)
from mcutorch.models.mobilenet_v2 import MobileNetV2, make_divisible, mobilenet_v2
from mcutorch.models.transformer import KWTDigits, kwt_digits
from mcutorch.models.sequence import (
    SEQUENCE_MODELS, RecurrentDigits, TokenGRU, crnn_digits, gru_digits, lstm_digits,
    token_gru_digits, train_digits,
)
from mcutorch.models.tflite_weights import TfliteLayer, load_tflite_weights, read_tflite_layers
from mcutorch.models.zoo import ZOO, ZooEntry, published_check, zoo_cost

__all__ = [
    "MODELS", "REFERENCE_TFLITE", "build", "example_input",
    "DSCNNKWS", "DSCNNSWW", "FCAutoencoder", "MobileNetV1VWW", "ResNet8", "MobileNetV2",
    "DSCNNSWWStreaming", "ds_cnn_kws", "ds_cnn_sww", "ds_cnn_sww_streaming", "fc_autoencoder",
    "mobilenet_v1_vww", "resnet8", "mobilenet_v2",
    "same_padding", "make_divisible", "TfliteLayer", "load_tflite_weights", "read_tflite_layers",
    "Cost", "Published", "cost", "ZOO", "ZooEntry", "published_check", "zoo_cost",
    "DigitsTCN", "digits_split", "digits_tcn", "TokenDigits", "digits_tokens", "token_digits",
    "KWTDigits", "kwt_digits",
    "SEQUENCE_MODELS", "RecurrentDigits", "lstm_digits", "gru_digits", "crnn_digits",
    "TokenGRU", "token_gru_digits",
    "train_digits",
]
