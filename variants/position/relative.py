"""Shaw et al. 2018 relative positions: learned a_ij for clip(j - i, -k, k).

The score becomes q_i . (k_j + a^K_ij) / sqrt(D); with ``values=True`` the output
becomes sum_j w_ij (v_j + a^V_ij). Tables are shared across heads, as in the paper.
"""

import math

import torch
from torch import Tensor, nn

from variants.checks import non_negative_int
from variants.flex import ScoreMod
from variants.position.base import PositionEncoding, relative_distance
from variants.registries import POSITION


@POSITION.register("relative", references="shaw2018self")
class ShawRelative(PositionEncoding):
    has_score_bias = True
    #: the key term; the value term (``values=True``) needs the weights, so such an encoding is not flex-ready
    has_score_mod = True
    options = {"values": (False, True)}

    def __init__(self, d_model: int, num_heads: int = 1, max_distance: int = 16, values: bool = False) -> None:
        super().__init__(d_model, num_heads)
        self.max_distance = non_negative_int("max_distance", max_distance)
        span = 2 * max_distance + 1
        self.keys = nn.Parameter(torch.randn(span, self.head_dim) * 0.02)  # a^K: (2k+1, D)
        self.values = nn.Parameter(torch.randn(span, self.head_dim) * 0.02) if values else None
        self.needs_weights_for_values = bool(values)

    def _bucket(self, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        k = self.max_distance
        return relative_distance(q_pos, k_pos).clamp(-k, k) + k  # (Tq, Tk) in [0, 2k]

    def score_bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        # q . a_r for every distance bucket r, then pick the bucket of each (i, j):
        # (B, H, Tq, 2k+1) instead of a (Tq, Tk, D) gather.
        per_bucket = q @ self.keys.to(q.dtype).t() / math.sqrt(self.head_dim)  # (B, H, Tq, 2k+1)
        idx = self._bucket(q_pos, k_pos).expand(*q.shape[:2], -1, -1)  # (B, H, Tq, Tk)
        return per_bucket.gather(-1, idx)

    def score_mod(self, q: Tensor, q_pos: Tensor, k_pos: Tensor) -> ScoreMod:
        # q . a_r for the 2k+1 distances only: (B, H, Tq, 2k+1), then each (i, j) picks its clipped distance.
        per_bucket = q @ self.keys.to(q.dtype).t() / math.sqrt(self.head_dim)
        k = self.max_distance

        def shaw(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            r = (k_pos[kv_idx] - q_pos[q_idx]).clamp(-k, k) + k  # clip(j - i) as an index in [0, 2k]
            return score + per_bucket[b, h, q_idx, r].to(score.dtype)

        return shaw

    def value_term(self, weights: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor | None:
        if self.values is None:
            return None
        # Sum the weights falling in each distance bucket, then mix the bucket vectors.
        idx = self._bucket(q_pos, k_pos).expand_as(weights)  # (B, H, Tq, Tk)
        per_bucket = weights.new_zeros(*weights.shape[:-1], self.values.shape[0])
        per_bucket = per_bucket.scatter_add(-1, idx, weights)  # (B, H, Tq, 2k+1)
        return per_bucket @ self.values.to(weights.dtype)  # (B, H, Tq, D)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, max_distance={self.max_distance}, values={self.values is not None}"
