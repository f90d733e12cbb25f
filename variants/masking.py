"""What each query may attend to, kept as ingredients rather than a T x T matrix.

Banded kernels ask for the mask of one block of queries against one slice of
keys, so the full (Tq, Tk) boolean matrix is never built unless a dense path
needs it.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass
class Masking:
    q_pos: Tensor  # (Tq,) absolute query positions
    k_pos: Tensor  # (Tk,) absolute key positions
    causal: bool = False
    key_padding_mask: Tensor | None = None  # (B, Tk), True where the key is padding

    def block(self, q_slice: slice, k_slice: slice) -> Tensor | None:
        """Allowed pairs for a block: (B|1, 1, tq, tk) bool, or None when all are allowed."""
        allowed = None
        if self.causal:
            allowed = (self.q_pos[q_slice, None] >= self.k_pos[None, k_slice])[None, None]  # (1, 1, tq, tk)
        if self.key_padding_mask is not None:
            keep = ~self.key_padding_mask[:, None, None, k_slice]  # (B, 1, 1, tk)
            allowed = keep if allowed is None else allowed & keep
        return allowed

    def dense(self) -> Tensor | None:
        return self.block(slice(None), slice(None))

    def key_lengths(self, batch: int) -> Tensor:
        """Number of real keys per batch element: (B,)."""
        if self.key_padding_mask is None:
            return torch.full((batch,), self.k_pos.numel(), device=self.k_pos.device)
        return (~self.key_padding_mask).sum(-1)


def masked_softmax(scores: Tensor, allowed: Tensor | None) -> Tensor:
    """Softmax over keys; a query with no allowed key gets all-zero weights, not NaN."""
    if allowed is None:
        return scores.softmax(-1)
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = scores.softmax(-1)
    return weights.masked_fill(~allowed.any(-1, keepdim=True), 0.0)
