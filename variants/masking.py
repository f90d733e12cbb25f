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


# floats per CPU vector register: below it, torch's softmax kernel is scalar (see masked_softmax)
_VECTOR_FLOATS = {"AVX512": 16, "AVX2": 8}.get(torch.backends.cpu.get_cpu_capability(), 4)


def masked_softmax(scores: Tensor, allowed: Tensor | None) -> Tensor:
    """Softmax over keys; a query with no allowed key gets all-zero weights, not NaN.

    On CPU, rows shorter than one vector register (16 floats with AVX-512, 8 with AVX2) are written
    out (shift by the row's maximum, exp, divide by the sum): torch's CPU softmax kernel takes a
    scalar path there and is 2-3x slower forward and backward (``python -m experiments.bench
    softmax``); from one register up its kernel is faster. Subtracting the maximum without its
    gradient is exact: softmax is shift-invariant.
    """
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    if scores.is_cuda or scores.shape[-1] >= _VECTOR_FLOATS:
        weights = scores.softmax(-1)
        return weights if allowed is None else weights.masked_fill(~allowed.any(-1, keepdim=True), 0.0)
    top = scores.detach().amax(-1, keepdim=True)  # (..., 1)
    top = top.masked_fill(top == float("-inf"), 0.0)  # a row with no allowed key: exp(-inf) = 0 below
    e = (scores - top).exp()
    total = e.sum(-1, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))  # that row: 0 / 1, and no NaN gradient
