"""ALiBi (Press et al. 2022): a fixed linear penalty -m_h |j - i| per head, no learned parameters.

Head slopes form the geometric sequence 2^(-8/n), 2^(-16/n), ... for n heads; for
a head count that is not a power of two, the slopes of the next lower power are
interleaved with every other slope of the next higher one, as in the paper.
"""

import math

import torch
from torch import Tensor

from variants.flex import ScoreMod
from variants.position.base import PositionEncoding, relative_distance
from variants.registries import POSITION


def alibi_slopes(num_heads: int) -> Tensor:
    def power_of_two(n: int) -> list[float]:
        start = 2 ** (-8 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(num_heads).is_integer():
        return torch.tensor(power_of_two(num_heads))
    lower = 2 ** math.floor(math.log2(num_heads))
    extra = power_of_two(2 * lower)[0::2][: num_heads - lower]
    return torch.tensor(power_of_two(lower) + extra)


@POSITION.register("alibi", references="press2022train")
class ALiBi(PositionEncoding):
    has_score_bias = True
    has_score_mod = True
    slopes: Tensor  # buffer (H,)

    def __init__(self, d_model: int, num_heads: int = 1) -> None:
        super().__init__(d_model, num_heads)
        self.register_buffer("slopes", alibi_slopes(num_heads), persistent=False)  # (H,)

    def score_bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        # Symmetric distance, so the encoder can use it too; in causal mode the
        # future half is masked anyway.
        distance = relative_distance(q_pos, k_pos).abs().to(q.dtype)  # (Tq, Tk)
        return -self.slopes.to(q.dtype)[None, :, None, None] * distance[None, None]  # (1, H, Tq, Tk)

    def score_mod(self, q: Tensor, q_pos: Tensor, k_pos: Tensor) -> ScoreMod:
        slopes = self.slopes.to(q.dtype)  # (H,)

        def alibi(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            distance = (k_pos[kv_idx] - q_pos[q_idx]).abs().to(score.dtype)  # |j - i|
            return score - slopes[h] * distance

        return alibi
