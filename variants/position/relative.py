"""Shaw et al. 2018 relative positions: learned a_ij for clip(j - i, -k, k).

The score becomes q_i . (k_j + a^K_ij) / sqrt(D); with ``values=True`` the output
becomes sum_j w_ij (v_j + a^V_ij). Tables are shared across heads, as in the paper.
"""

import math

import torch
from torch import Tensor, nn

from variants.checks import non_negative_int
from variants.flex import ScoreMod, pad_rows
from variants.position.base import PositionEncoding, relative_distance
from variants.registries import POSITION

#: copies of each clipped end slot a flex score_mod reads: every key farther than max_distance on one side of
#: a query shares one bucket, so flex's backward sent all of their gradients to one address per row (atomic
#: adds in series); spread over this many copies, which autograd sums back into the one bucket
SPREAD = 32


def shaw_slot(distance: Tensor, max_distance: int) -> Tensor:
    """The column of ``spread_table``'s (.., 2k+1 + 2 SPREAD) rows that distance j - i reads: clip(j - i, -k, k)
    + k within the clip, else one of SPREAD copies of the end bucket, chosen by how far past it the key lies."""
    k = max_distance
    beyond = (distance.abs() - k - 1).clamp(min=0) % SPREAD  # 0 for the first key past the clip, 1, 2, ...
    left = 2 * k + 1 + beyond  # copies of bucket 0 (j - i < -k)
    right = 2 * k + 1 + SPREAD + beyond  # copies of bucket 2k (j - i > k)
    return torch.where(distance < -k, left, torch.where(distance > k, right, distance.clamp(-k, k) + k))


def spread_table(per_bucket: Tensor) -> Tensor:
    """(..., 2k+1) -> (..., 2k+1 + 2 SPREAD): the buckets, SPREAD copies of the first, SPREAD of the last."""
    first, last = per_bucket[..., :1], per_bucket[..., -1:]
    shape = (*per_bucket.shape[:-1], SPREAD)
    return torch.cat((per_bucket, first.expand(shape), last.expand(shape)), dim=-1)


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
        # q . a_r for the 2k+1 distances only, (B, H, Tq, 2k+1), then each (i, j) picks its clipped distance.
        # Captured in fp32 whatever q's dtype: flex's backward accumulates the table's gradient with atomic
        # adds into a buffer of the captured tensor's dtype, and bf16 sums lose the small terms.
        per_bucket = q @ self.keys.to(q.dtype).t() / math.sqrt(self.head_dim)
        per_bucket = per_bucket.to(torch.promote_types(per_bucket.dtype, torch.float32))
        # The caller may pad the queries (q_pos longer than q): padded rows see no key, read zeros.
        per_bucket = pad_rows(per_bucket, q_pos.numel())
        table = spread_table(per_bucket)  # (B, H, Tq, 2k+1 + 2 SPREAD)
        k = self.max_distance

        def shaw(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            slot = shaw_slot(k_pos[kv_idx] - q_pos[q_idx], k)  # clip(j - i), far keys spread over copies
            return score + table[b, h, q_idx, slot].to(score.dtype)

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
