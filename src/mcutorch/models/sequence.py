"""Recurrent classifiers of scikit-learn's digits read as sequences (models/digits.py): an LSTM
and a GRU over the 8 rows ([N, 8, 8]: 8 steps of 8 values), and a CRNN (two strided conv1d
layers over the 64 pixels, then a GRU over the 16 steps they leave). Each takes [N, C, T] as
`digits_split` gives it and classifies from the last hidden state; `token_gru_digits` is a GRU
over token embeddings (the rows as int32 token ids, `digits_tokens`). `train_digits` fits one in
a few seconds on the CPU.

>>> model = lstm_digits()
>>> xtr, ytr, xte, yte = digits_split("rows", seed=0)
>>> model(xte[:2]).shape
torch.Size([2, 10])
"""
from __future__ import annotations

import torch
from torch import nn

from mcutorch.models.digits import READINGS, digits_split, digits_tokens, train_epoch


class RecurrentDigits(nn.Module):
    """`front` (optional conv1d layers) -> LSTM or GRU over time -> linear on the last state."""

    def __init__(self, kind: type, channels: int, hidden: int, front: nn.Module | None = None):
        super().__init__()
        self.front = front or nn.Identity()
        self.rnn = kind(channels, hidden, batch_first=True)
        self.classifier = nn.Linear(hidden, 10)

    def forward(self, x):  # x: [N, C, T]
        seq, _ = self.rnn(self.front(x).transpose(1, 2))
        return self.classifier(seq[:, -1])


def lstm_digits(hidden: int = 32, seed: int = 0) -> RecurrentDigits:
    """An LSTM over the rows of the digits (reading "rows"), seeded initial weights."""
    torch.manual_seed(seed)
    return RecurrentDigits(nn.LSTM, READINGS["rows"][0], hidden)


def gru_digits(hidden: int = 32, seed: int = 0) -> RecurrentDigits:
    """A GRU over the rows of the digits (reading "rows"), seeded initial weights."""
    torch.manual_seed(seed)
    return RecurrentDigits(nn.GRU, READINGS["rows"][0], hidden)


def crnn_digits(width: int = 16, hidden: int = 32, seed: int = 0) -> RecurrentDigits:
    """Conv front end (two conv1d, stride 2, ReLU) over the 64 pixels, then a GRU over the 16
    steps (reading "pixels"), seeded initial weights."""
    torch.manual_seed(seed)
    front = nn.Sequential(nn.Conv1d(READINGS["pixels"][0], width, 5, 2, 2), nn.ReLU(),
                          nn.Conv1d(width, width, 3, 2, 1), nn.ReLU())
    return RecurrentDigits(nn.GRU, width, hidden, front)


class TokenGRU(nn.Module):
    """nn.Embedding of the row tokens -> GRU over the 8 rows -> linear on the last state."""

    def __init__(self, width: int = 16, hidden: int = 32):
        super().__init__()
        self.emb = nn.Embedding(256, width)
        self.rnn = nn.GRU(width, hidden, batch_first=True)
        self.classifier = nn.Linear(hidden, 10)

    def forward(self, ids):  # ids: [N, 8] int64 token ids in [0, 256)
        seq, _ = self.rnn(self.emb(ids))
        return self.classifier(seq[:, -1])


def token_gru_digits(width: int = 16, hidden: int = 32, seed: int = 0) -> TokenGRU:
    """A GRU over token embeddings of the digits' rows (reading "tokens": `digits_tokens`, each
    row's 8 thresholded pixels as one id in [0, 256)), seeded initial weights."""
    torch.manual_seed(seed)
    return TokenGRU(width, hidden)


SEQUENCE_MODELS = {"lstm_digits": (lstm_digits, "rows"), "gru_digits": (gru_digits, "rows"),
                   "crnn_digits": (crnn_digits, "pixels"),
                   "token_gru_digits": (token_gru_digits, "tokens")}


def train_digits(name: str, seed: int = 0, epochs: int = 25, lr: float = 1e-2):
    """(trained model in eval mode, digits_split of its reading): Adam, batch 64, `epochs`
    epochs on the training split; model and data both from `seed`."""
    make, reading = SEQUENCE_MODELS[name]
    split = digits_tokens(seed) if reading == "tokens" else digits_split(reading, seed)
    x, y = split[0], split[1]
    model = make(seed=seed)
    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    for _ in range(epochs):
        model.train()
        train_epoch(model, x, y, opt)
        sched.step()
    return model.eval(), split
