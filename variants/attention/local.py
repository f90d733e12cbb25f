"""Luong et al. 2015 local attention: soft attention inside a window [p_i - w, p_i + w].

``mode``:
- ``monotonic`` (local-m): in self attention p_i = i (causal looks back only); in
  cross attention p_i = round(ratio * i), clamped to the last real source position.
  The alignment uses the query position and the source length only, never the
  target length, so a query gets the same window in training and in step-by-step
  generation. Computed block by block (``backend='auto'``), so memory grows as
  T * (block + 2w), not T^2; ``backend='math'`` is the dense reference.
- ``predictive`` (local-p): p_i = S_i * sigmoid(v . tanh(W q_i)), with S_i the last
  visible source position; the window's softmax weights are multiplied by
  exp(-(j - p_i)^2 / (2 sigma^2)), sigma = w / 2 (so they no longer sum to 1, as in the paper).
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from variants.attention.layer import AttentionLayer
from variants.checks import one_of, positive
from variants.masking import Masking, masked_softmax
from variants.position.base import PositionEncoding
from variants.registries import ATTENTION

MODES = ("monotonic", "predictive")


@ATTENTION.register("local")
class LocalAttention(AttentionLayer):
    default_heads = 1
    backends = ("auto", "math")
    kind = "local"

    def __init__(self, d_model: int, num_heads: int | None = None, *, dropout: float = 0.0, bias: bool = True,
                 score: str = "scaled_dot", backend: str = "auto", window: int = 8, mode: str = "monotonic",
                 ratio: float = 1.0, block_size: int = 64) -> None:
        super().__init__(d_model, num_heads, dropout=dropout, bias=bias, score=score, backend=backend)
        self.window = positive("window", window, integer=True)
        self.mode = one_of("mode", mode, MODES)
        self.ratio = float(positive("ratio", ratio))
        self.block_size = positive("block_size", block_size, integer=True)
        if mode == "predictive":
            # p_i = S * sigmoid(v_p . tanh(W_p q_i)), one predictor per head.
            self.w_p = nn.Parameter(torch.randn(self.num_heads, self.head_dim, self.head_dim) / math.sqrt(self.head_dim))
            self.v_p = nn.Parameter(torch.randn(self.num_heads, self.head_dim) / math.sqrt(self.head_dim))

    # -- window centres -----------------------------------------------------------------------
    def centres(self, q: Tensor, masking: Masking) -> Tensor:
        """Window centre of every query: (B, H, Tq) float."""
        B, H, Tq, _ = q.shape
        last = (masking.key_lengths(B) - 1).clamp(min=0).to(q.dtype)[:, None, None]  # (B, 1, 1)
        q_pos = masking.q_pos.to(q.dtype)[None, None, :]  # (1, 1, Tq)
        if self.mode == "monotonic":
            if masking.causal:
                return q_pos.expand(B, H, Tq)
            return torch.minimum(torch.round(q_pos * self.ratio), last).expand(B, H, Tq)
        gate = _predictor(q, self.w_p, self.v_p)  # (B, H, Tq) in (0, 1)
        span = q_pos if masking.causal else last
        return span * gate  # (B, H, Tq)

    def _window(self, centre: Tensor, k_pos: Tensor) -> Tensor:
        """|j - p_i| <= w: (B, H, tq, tk) bool from centres (B, H, tq)."""
        return (k_pos.to(centre.dtype)[None, None, None, :] - centre[..., None]).abs() <= self.window

    # -- the two paths ---------------------------------------------------------------------------
    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, *, masking: Masking, position: PositionEncoding | None,
        need_weights: bool,
    ) -> tuple[Tensor, Tensor | None]:
        centre = self.centres(q, masking)  # (B, H, Tq)
        if self.mode == "monotonic" and self.backend != "math" and not need_weights:
            return self._blocked(q, k, v, centre, masking, position), None
        return self._block(q, k, v, centre, masking, position, slice(None), slice(None))

    def _block(self, q: Tensor, k: Tensor, v: Tensor, centre: Tensor, masking: Masking,
               position: PositionEncoding | None, qs: slice, ks: slice) -> tuple[Tensor, Tensor]:
        """Reference computation for queries ``qs`` against keys ``ks``."""
        q_pos, k_pos = masking.q_pos[qs], masking.k_pos[ks]
        q_b, k_b, v_b, c_b = q[:, :, qs], k[:, :, ks], v[:, :, ks], centre[:, :, qs]
        allowed = self._window(c_b, k_pos)  # (B, H, tq, tk)
        base = masking.block(qs, ks)
        if base is not None:
            allowed = allowed & base
        scores = self.logits(q_b, k_b, q_pos, k_pos, position)
        weights = masked_softmax(scores, allowed)
        if self.mode == "predictive":
            sigma = self.window / 2
            gauss = torch.exp(-(k_pos.to(q.dtype)[None, None, None, :] - c_b[..., None]) ** 2 / (2 * sigma**2))
            weights = weights * gauss
        out = self.mix(self.weight_dropout(weights), v_b, q_pos, k_pos, position)
        return out, weights

    def _blocked(self, q: Tensor, k: Tensor, v: Tensor, centre: Tensor, masking: Masking,
                 position: PositionEncoding | None) -> Tensor:
        """Blocks of queries against the slice of keys their windows can reach: linear memory."""
        Tq, Tk = q.shape[2], k.shape[2]
        outs = []
        for start in range(0, Tq, self.block_size):
            qs = slice(start, min(start + self.block_size, Tq))
            c = centre[:, :, qs]
            lo = max(int(math.floor(float(c.min()))) - self.window, 0)
            hi = min(int(math.ceil(float(c.max()))) + self.window + 1, Tk)
            if masking.causal:
                hi = min(hi, int(masking.q_pos[qs.stop - 1]) + 1)
            hi = max(hi, lo + 1)
            out, _ = self._block(q, k, v, centre, masking, position, qs, slice(lo, hi))
            outs.append(out)
        return torch.cat(outs, dim=2)  # (B, H, Tq, D)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, window={self.window}, mode={self.mode}, ratio={self.ratio}"


def _predictor(q: Tensor, w_p: Tensor, v_p: Tensor) -> Tensor:
    """sigmoid(v_p . tanh(W_p q)) per head: (B, H, Tq)."""
    hidden = torch.tanh(torch.einsum("bhqd,hde->bhqe", q, w_p.to(q.dtype)))  # (B, H, Tq, D)
    return torch.sigmoid(torch.einsum("bhqe,he->bhq", hidden, v_p.to(q.dtype)))
