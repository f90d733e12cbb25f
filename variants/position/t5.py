"""T5 relative bias (Raffel et al. 2020): one learned scalar per head and distance bucket.

Distances below ``num_buckets / 4`` (bidirectional) get a bucket each; longer
ones share logarithmically wider buckets up to ``max_distance``.
"""

import math

import torch
from torch import Tensor, nn

from variants.checks import VariantConfigError, positive
from variants.flex import ScoreMod
from variants.position.base import PositionEncoding, relative_distance
from variants.registries import POSITION


def t5_bucket(distance: Tensor, num_buckets: int, max_distance: int, bidirectional: bool) -> Tensor:
    """(Tq, Tk) signed j - i -> bucket index in [0, num_buckets)."""
    bucket = torch.zeros_like(distance)
    n = -distance  # > 0 when the key is in the past
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (n < 0).long() * num_buckets
        n = n.abs()
    else:
        n = n.clamp(min=0)
    exact = num_buckets // 2
    is_small = n < exact
    log_ratio = torch.log(n.float().clamp(min=1) / exact) / math.log(max_distance / exact)
    large = (exact + (log_ratio * (num_buckets - exact)).long()).clamp(max=num_buckets - 1)
    return bucket + torch.where(is_small, n, large)


@POSITION.register("t5", references="raffel2020exploring")
class T5Bias(PositionEncoding):
    has_score_bias = True
    has_score_mod = True
    options = {"bidirectional": (True, False)}

    def __init__(
        self,
        d_model: int,
        num_heads: int = 1,
        num_buckets: int = 32,
        max_distance: int = 128,
        bidirectional: bool = True,
    ) -> None:
        super().__init__(d_model, num_heads)
        positive("num_buckets", num_buckets, integer=True)
        positive("max_distance", max_distance, integer=True)
        if num_buckets < 4:
            raise VariantConfigError(f"num_buckets={num_buckets} is not allowed; it must be >= 4")
        if max_distance <= num_buckets // 4:
            raise VariantConfigError(
                f"max_distance={max_distance} is not allowed; it must exceed num_buckets/4={num_buckets // 4}"
            )
        self.num_buckets, self.max_distance, self.bidirectional = num_buckets, max_distance, bidirectional
        self.bias = nn.Embedding(num_buckets, num_heads)
        nn.init.normal_(self.bias.weight, std=0.02)

    def score_bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        buckets = t5_bucket(relative_distance(q_pos, k_pos), self.num_buckets, self.max_distance, self.bidirectional)
        return self.bias(buckets).permute(2, 0, 1)[None].to(q.dtype)  # (1, H, Tq, Tk)

    def score_mod(self, q: Tensor, q_pos: Tensor, k_pos: Tensor) -> ScoreMod:
        # The table looked up once per distance j - i outside the kernel: (H, Tq + Tk - 1). Inside, each
        # (i, j) reads its distance's slot, so flex's backward spreads its atomic adds over Tq + Tk - 1
        # slots per head instead of num_buckets (every pair of a bucket hitting one), and autograd
        # carries the gradient from the distances into the table densely. Positions are consecutive
        # (the layer's aranges), so the distance of (q_idx, kv_idx) sits at kv_idx - q_idx + Tq - 1.
        Tq, Tk = q_pos.numel(), k_pos.numel()
        distances = torch.arange(max(Tq + Tk - 1, 0), device=k_pos.device)
        if Tq and Tk:
            distances = distances + (k_pos[0] - q_pos[-1])  # the first is the most negative j - i
        buckets = t5_bucket(distances, self.num_buckets, self.max_distance, self.bidirectional)
        # fp32 whatever q's dtype: flex's backward accumulates this tensor's gradient with atomic adds in its
        # own dtype, and bf16 sums lose the small terms (the kernel adds the bias in fp32 anyway)
        per_distance = self.bias(buckets).t()  # (H, Tq + Tk - 1)
        per_distance = per_distance.to(torch.promote_types(per_distance.dtype, torch.float32))
        # The shift is a Python int, not a captured 0-d tensor: eager flex reads a captured scalar
        # index with .item() (a device sync per call). The compiled kernel guards on the int, but Tq
        # is already part of the shapes it specialises on (flex callers pad it to a length bucket),
        # so the int adds no compile.
        last_query = Tq - 1

        def t5(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            return score + per_distance[h, kv_idx - q_idx + last_query].to(score.dtype)

        return t5
