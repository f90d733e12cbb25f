"""Score functions: how a query and a key become one logit.

Each returns (B, H, Tq, Tk). Those that are a dot product after a transform of
the query also say how to feed a fused kernel (``fused_query``), which is then
allowed to run them.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from variants.checks import one_of

SCORES = ("scaled_dot", "dot", "additive", "general")


class Score(nn.Module):
    def __init__(self, num_heads: int, head_dim: int) -> None:
        super().__init__()
        self.num_heads, self.head_dim = num_heads, head_dim

    def forward(self, q: Tensor, k: Tensor) -> Tensor:
        raise NotImplementedError

    def fused_query(self, q: Tensor) -> tuple[Tensor, float] | None:
        """(q', scale) such that the score is scale * q' . k, or None if no such form exists."""
        return None

    def fused(self, q: Tensor) -> tuple[Tensor, float]:
        """``fused_query``'s (q', scale), for a fused path, which a plan picks only when ``has_fused_form``."""
        form = self.fused_query(q)
        if form is None:
            raise RuntimeError(f"the {type(self).__name__} score has no fused form; only the math path runs it")
        return form

    @property
    def has_fused_form(self) -> bool:
        """Whether ``fused_query`` gives a form: a subclass that defines it has one."""
        return type(self).fused_query is not Score.fused_query


class ScaledDot(Score):
    """q . k / sqrt(D): scaled so the softmax does not saturate as D grows."""

    def forward(self, q: Tensor, k: Tensor) -> Tensor:
        return q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)

    def fused_query(self, q: Tensor) -> tuple[Tensor, float]:
        return q, 1.0 / math.sqrt(self.head_dim)


class Dot(Score):
    """Luong's dot score: q . k, unscaled."""

    def forward(self, q: Tensor, k: Tensor) -> Tensor:
        return q @ k.transpose(-2, -1)

    def fused_query(self, q: Tensor) -> tuple[Tensor, float]:
        return q, 1.0


class General(Score):
    """Luong's general score: q^T W k with a learned W per head."""

    def __init__(self, num_heads: int, head_dim: int) -> None:
        super().__init__(num_heads, head_dim)
        eye = torch.eye(head_dim).expand(num_heads, head_dim, head_dim)
        self.weight = nn.Parameter(eye + 0.02 * torch.randn(num_heads, head_dim, head_dim))  # (H, D, D)

    def forward(self, q: Tensor, k: Tensor) -> Tensor:
        return (q @ self.weight.to(q.dtype)) @ k.transpose(-2, -1)

    def fused_query(self, q: Tensor) -> tuple[Tensor, float]:
        return q @ self.weight.to(q.dtype), 1.0


class Additive(Score):
    """Bahdanau's score v . tanh(W_q q + W_k k); W_q and W_k are the layer's projections."""

    def __init__(self, num_heads: int, head_dim: int) -> None:
        super().__init__(num_heads, head_dim)
        self.v = nn.Parameter(torch.randn(num_heads, head_dim) / math.sqrt(head_dim))  # (H, D)

    def forward(self, q: Tensor, k: Tensor) -> Tensor:
        hidden = torch.tanh(q.unsqueeze(-2) + k.unsqueeze(-3))  # (B, H, Tq, Tk, D)
        return torch.einsum("bhqkd,hd->bhqk", hidden, self.v.to(q.dtype))


_SCORE_CLASSES = {"scaled_dot": ScaledDot, "dot": Dot, "additive": Additive, "general": General}


def build_score(name: str, num_heads: int, head_dim: int) -> Score:
    one_of("score", name, SCORES)
    return _SCORE_CLASSES[name](num_heads, head_dim)
