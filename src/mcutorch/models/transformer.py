"""A keyword-transformer-style (KWT, Berg et al., Interspeech 2021) model of scikit-learn's 8x8
digits read row by row (`digits_split("rows")`: [N, 8, 8], 8 steps of one 8-pixel row):

    rows [N, 8, 8] -> transpose to [N, T=8, 8] -> patch embedding Linear(8, dim) per row
    -> prepend a learned class token, add a learned positional embedding ([N, 9, dim])
    -> `depth` x nn.TransformerEncoderLayer(dim, heads, mlp, batch_first, norm_first)
    -> LayerNorm of the class token -> Linear(dim, 10)

Small on purpose (dim 32, 2 heads, mlp 64: ~20 k parameters at depth 2) so that it trains in
seconds on a CPU. Every piece compiles to mcutorch's int8 ops (the attention as matmul, scale,
softmax, matmul: frontend/builders/attention.py).

>>> xtr, ytr, xte, yte = digits_split("rows", seed=0)
>>> kwt_digits()(xte[:2]).shape
torch.Size([2, 10])
"""
from __future__ import annotations

import torch
from torch import nn

from mcutorch.models.digits import digits_split

__all__ = ["KWTDigits", "kwt_digits", "digits_split"]


class KWTDigits(nn.Module):
    """Patch embedding of each row, class token, positional embedding, encoder layers, head."""

    def __init__(self, rows: int = 8, width: int = 8, dim: int = 32, depth: int = 2,
                 heads: int = 2, mlp: int = 64, norm_first: bool = True,
                 activation: str = "gelu"):
        super().__init__()
        if not 1 <= depth <= 8:
            raise ValueError(f"depth {depth}: expected 1..8 encoder layers")
        self.embed = nn.Linear(width, dim)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(0.02 * torch.randn(1, rows + 1, dim))
        self.encoder = nn.ModuleList(
            nn.TransformerEncoderLayer(dim, heads, mlp, dropout=0.0, activation=activation,
                                       batch_first=True, norm_first=norm_first)
            for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        x = self.embed(x.transpose(1, 2))  # [N, C=columns, T=rows] -> one token per row
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        for layer in self.encoder:
            x = layer(x)
        return self.head(self.norm(x[:, 0]))


def kwt_digits(depth: int = 2, dim: int = 32, heads: int = 2, mlp: int = 64,
               norm_first: bool = True, activation: str = "gelu", seed: int = 0) -> KWTDigits:
    """A KWTDigits with `depth` encoder layers (2..4 in the zoo), seeded initial weights."""
    torch.manual_seed(seed)
    return KWTDigits(dim=dim, depth=depth, heads=heads, mlp=mlp, norm_first=norm_first,
                     activation=activation)
