"""The position-encoding interface: three hooks, each a no-op by default.

An attention layer calls every hook of whatever encoding it is given; it never
asks which encoding that is. Positions are absolute integer indices, so the same
hooks serve full sequences, chunks of a sequence (banded kernels) and one step
of incremental decoding (``q_pos = [t]``, ``k_pos = [0..t]``).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from variants.checks import heads_divide


class PositionEncoding(nn.Module):
    #: True when ``value_term`` contributes; fused kernels that never expose the
    #: weights then fall back to the reference path.
    needs_weights_for_values: bool = False
    #: True when ``score_bias`` returns a term; lets kernels skip building a mask.
    has_score_bias: bool = False
    #: discrete constructor choices, for sweeps and tests (see ``Registry.variations``)
    options: dict[str, tuple] = {}
    #: True when ``embed`` adds a term to the token embeddings (an absolute encoding)
    adds_to_embeddings: bool = False

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        heads_divide(d_model, num_heads)
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads

    def embed(self, x: Tensor, positions: Tensor, scale: float | None = None) -> Tensor:
        """Absolute encodings: ``x`` (B, T, d_model), ``positions`` (T,) -> (B, T, d_model).

        ``scale`` is the RMS of one element of the token term ``x`` at initialisation
        (the model passes it: 1 for sqrt(d)-scaled embeddings, 0.02 for GPT-2's). An
        absolute term starts at that scale, so neither term swamps the other whatever the
        embedding convention. ``None`` (an encoding used on its own) keeps the encoding's
        natural scale: the paper's sinusoid of amplitude 1, a learned table as initialised.
        """
        return x

    def rotate(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor) -> tuple[Tensor, Tensor]:
        """Rotary encodings: ``q`` (B, H, Tq, D), ``k`` (B, H, Tk, D)."""
        return q, k

    def score_bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor | None:
        """Relative encodings: an additive term on the attention logits, (B|1, H, Tq, Tk).

        The term is on the same scale as the logits the attention type computes
        (for scaled dot-product scores, already divided by sqrt(D)).
        """
        return None

    def value_term(self, weights: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor | None:
        """Relative value term: ``weights`` (B, H, Tq, Tk) -> addition to the output (B, H, Tq, D)."""
        return None

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, num_heads={self.num_heads}"


def relative_distance(q_pos: Tensor, k_pos: Tensor) -> Tensor:
    """j - i for every query i and key j: (Tq, Tk) long."""
    return k_pos[None, :] - q_pos[:, None]


def positions_like(length: int, device: torch.device, offset: int = 0) -> Tensor:
    return torch.arange(offset, offset + length, device=device)
