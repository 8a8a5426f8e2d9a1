"""Sequence models of scikit-learn's 8x8 handwritten digits (1,797 real images shipped inside
scikit-learn), read as a sequence so that small models are hard for 8 bits: `pixels` reads the
64 pixels one at a time ([N, 1, 64]: 64 steps of one value), `rows` one row at a time ([N, 8, 8]:
8 steps of 8 values). The models are temporal conv nets (dilated conv1d stacks, no
recurrence): `digits_tcn(reading, width, depth)`.

>>> xtr, ytr, xte, yte = digits_split("pixels", seed=0)
>>> digits_tcn("pixels")(xte[:2]).shape
torch.Size([2, 10])
"""
from __future__ import annotations

import torch
from torch import nn

READINGS = {"pixels": (1, 64), "rows": (8, 8)}  # (channels, steps)


def digits_split(reading: str = "pixels", seed: int = 0, train: float = 0.8):
    """(x_train, y_train, x_test, y_test): the digits in `reading` form ([N, C, T], values in
    [0, 1]), shuffled with `seed`, split train / held out."""
    from sklearn.datasets import load_digits

    if reading not in READINGS:
        raise ValueError(f"reading {reading!r}: expected one of {sorted(READINGS)}")
    digits = load_digits()
    x = torch.tensor(digits.images, dtype=torch.float32) / 16.0  # [N, 8, 8]
    x = x.reshape(-1, 1, 64) if reading == "pixels" else x.transpose(1, 2)  # rows: C = columns
    y = torch.tensor(digits.target)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    cut = int(train * len(x))
    return x[order[:cut]], y[order[:cut]], x[order[cut:]], y[order[cut:]]


def train_epoch(model: nn.Module, x, y, opt, batch: int = 64, sched=None) -> None:
    """One epoch of cross-entropy minibatches of `batch` in a random order (torch's global
    generator); `sched`, when given, steps after every batch. The caller sets train mode."""
    for idx in torch.randperm(len(x)).split(batch):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
        opt.step()
        if sched is not None:
            sched.step()


class DigitsTCN(nn.Module):
    """conv1d + BatchNorm (`norm`) + ReLU blocks with dilations 1, 2, 4, ... over the sequence,
    then a global average and a linear classifier."""

    def __init__(self, channels: int, width: int = 16, depth: int = 4, kernel: int = 3,
                 norm: bool = True):
        super().__init__()
        layers, cin = [], channels
        for i in range(depth):
            d = 2 ** i
            layers += [nn.Conv1d(cin, width, kernel, padding=d * (kernel - 1) // 2, dilation=d),
                       *([nn.BatchNorm1d(width)] if norm else []), nn.ReLU()]
            cin = width
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(width, 10)

    def forward(self, x):
        return self.classifier(self.features(x).mean(2))


def digits_tcn(reading: str = "pixels", width: int = 16, depth: int = 4, norm: bool = True,
               seed: int = 0) -> DigitsTCN:
    """A DigitsTCN for a reading of the digits (`digits_split`), seeded initial weights."""
    torch.manual_seed(seed)
    return DigitsTCN(READINGS[reading][0], width, depth, norm=norm)


def digits_tokens(seed: int = 0, train: float = 0.8, threshold: int = 8):
    """(ids_train, y_train, ids_test, y_test): each digit as 8 int64 token ids, one per pixel row,
    the row's 8 pixels thresholded at `threshold` (of 16) and read as the bits of an id in
    [0, 256); shuffled and split as `digits_split`."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    bits = torch.tensor(digits.images >= threshold, dtype=torch.int64)  # [N, 8 rows, 8 pixels]
    ids = (bits * (2 ** torch.arange(8))).sum(-1)  # [N, 8] in [0, 256)
    y = torch.tensor(digits.target)
    order = torch.randperm(len(ids), generator=torch.Generator().manual_seed(seed))
    cut = int(train * len(ids))
    return ids[order[:cut]], y[order[:cut]], ids[order[cut:]], y[order[cut:]]


class TokenDigits(nn.Module):
    """Embedding of the row tokens -> conv1d over the 8 rows -> ReLU -> mean -> Linear."""

    def __init__(self, width: int = 16, hidden: int = 32):
        super().__init__()
        self.emb = nn.Embedding(256, width)
        self.conv = nn.Conv1d(width, hidden, 3, padding=1)
        self.classifier = nn.Linear(hidden, 10)

    def forward(self, ids):
        h = torch.relu(self.conv(self.emb(ids).transpose(1, 2)))
        return self.classifier(h.mean(2))


def token_digits(width: int = 16, hidden: int = 32, seed: int = 0) -> TokenDigits:
    """A TokenDigits for `digits_tokens` ids, seeded initial weights.

    >>> ids, y, _, _ = digits_tokens()
    >>> token_digits()(ids[:2]).shape
    torch.Size([2, 10])
    """
    torch.manual_seed(seed)
    return TokenDigits(width, hidden)
