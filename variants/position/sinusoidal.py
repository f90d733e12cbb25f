"""Fixed sin/cos encoding of "Attention Is All You Need", added to the embeddings.

PE(pos, 2i) = sin(pos / 10000^(2i / d)),  PE(pos, 2i + 1) = cos(pos / 10000^(2i / d)).
Computed from the positions on every call, so any length works. The table has
amplitude 1 (RMS 1/sqrt(2)), matched in the paper to token embeddings multiplied by
sqrt(d); under another embedding convention it is scaled to the token term (see ``embed``).
"""

import math

import torch
from torch import Tensor

from variants.checks import positive
from variants.position.base import PositionEncoding
from variants.registries import POSITION


def sinusoid_table(positions: Tensor, d_model: int, base: float = 10000.0) -> Tensor:
    """(T,) positions -> (T, d_model) float32 table."""
    half = torch.arange(0, d_model, 2, device=positions.device, dtype=torch.float32)
    inv_freq = torch.exp(-math.log(base) * half / d_model)  # (ceil(d/2),)
    angles = positions.float()[:, None] * inv_freq[None, :]  # (T, ceil(d/2))
    table = torch.zeros(positions.numel(), d_model, device=positions.device)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return table


@POSITION.register("sinusoidal", references="vaswani2017attention")
class Sinusoidal(PositionEncoding):
    adds_to_embeddings = True

    def __init__(self, d_model: int, num_heads: int = 1, base: float = 10000.0) -> None:
        super().__init__(d_model, num_heads)
        self.base = positive("base", base)

    def embed(self, x: Tensor, positions: Tensor, scale: float | None = None) -> Tensor:
        # x: (B, T, d_model); the table is shared over the batch. Amplitude = the token term's
        # RMS: 1 as in the paper under sqrt(d)-scaled embeddings; at amplitude 1 over GPT-2's
        # 0.02-scale embeddings the fixed table would be 35x the tokens and swamp them.
        amplitude = 1.0 if scale is None else scale
        return x + amplitude * sinusoid_table(positions, self.d_model, self.base).to(x.dtype)[None]
