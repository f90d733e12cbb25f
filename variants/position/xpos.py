"""xPos (Sun et al. 2023): rotary angles plus an exponential decay with relative distance.

Pair d of the head dimension (d = 0 .. D/2 - 1, paired as in ``rope``: x_d with x_(d+D/2)) turns
by p * theta_d, theta_d = base^(-2d/D), as in rotary embeddings, and is scaled by

    zeta_d = (2d / D + gamma) / (1 + gamma),  gamma = 0.4,

raised to p / B (B = ``scale_base``, 512 in the paper): the query at position n by zeta_d^(n/B), the
key at m by zeta_d^(-m/B). The logit of the pair then carries zeta_d^((n - m)/B): it depends on
n - m alone and, since zeta_d < 1, decays with the distance to an earlier key, fastest in the
high-frequency pairs (small d), whose rotation is least stable over long distances.

Positions are absolute, so the factors grow as e^(|ln zeta_0| p / B): the hook refuses positions
where either factor would use more than half of the dtype's exponent range (float32 and bfloat16:
p up to about 35 B, 17,800 at B = 512; float16: about 3.9 B), leaving the other half to q and k. The reference
implementation centres positions per call instead, which a cache holding scaled keys cannot do.

The paper's model is causal. In a non-causal layer a key after the query (m > n) is weighed by
zeta_d^(-(m - n)/B) > 1: no factor of the form f(n) g(m) decays in both directions.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from variants.checks import VariantConfigError, even_head_dim, positive
from variants.position.base import PositionEncoding
from variants.position.rope import rope_frequencies, rotate_pairs
from variants.registries import POSITION

#: the paper's gamma: zeta_d runs from gamma / (1 + gamma) = 0.29 to almost 1
GAMMA = 0.4


def xpos_decay(head_dim: int, gamma: float = GAMMA) -> Tensor:
    """zeta_d = (2d / D + gamma) / (1 + gamma) for d = 0 .. D/2 - 1: (D/2,)."""
    return (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim + gamma) / (1 + gamma)


@POSITION.register("xpos", references="sun2023length")
class XPos(PositionEncoding):
    inv_freq: Tensor  # buffer (D/2,)
    log_zeta: Tensor  # buffer (D,)

    def __init__(self, d_model: int, num_heads: int = 1, base: float = 10000.0, scale_base: float = 512.0) -> None:
        super().__init__(d_model, num_heads)
        even_head_dim("xpos", d_model, num_heads)
        self.base = positive("base", base)
        self.scale_base = float(positive("scale_base", scale_base))
        self.register_buffer("inv_freq", rope_frequencies(self.head_dim, base), persistent=False)  # (D/2,)
        log_zeta = xpos_decay(self.head_dim).log()
        self.register_buffer("log_zeta", torch.cat((log_zeta, log_zeta)), persistent=False)  # (D,), < 0
        # the fastest decay, kept on the host: the range check then reads nothing from the device
        self.steepest = -float(log_zeta[0])

    def _check_range(self, pos: Tensor, dtype: torch.dtype) -> None:
        info = torch.finfo(dtype)
        limit = min(math.log(info.max), -math.log(info.tiny)) / 2
        # The length the model declares from shapes bounds the positions without a read from the device;
        # past the limit, the positions themselves decide (generation declares one more than it feeds back).
        last = self.declared_length - 1 if self.declared_length is not None else None
        if last is None or self.steepest * last / self.scale_base > limit:
            last = int(pos.abs().max()) if pos.numel() else 0
        exponent = self.steepest * last / self.scale_base
        if exponent > limit:
            raise VariantConfigError(
                f"position=xpos: position {last} with scale_base={self.scale_base:g} needs the factor "
                f"e^{exponent:.1f}, beyond e^{limit:.1f} for {dtype}; raise scale_base above "
                f"{self.steepest * last / limit:.0f} or shorten the sequence"
            )

    def _scale(self, pos: Tensor, sign: float) -> Tensor:
        """zeta^(sign * p / B) per position and dimension: (T, D) float32."""
        return torch.exp(sign * pos.float()[:, None] / self.scale_base * self.log_zeta[None, :])

    def rotate(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor) -> tuple[Tensor, Tensor]:
        self._check_range(torch.cat((q_pos, k_pos)), q.dtype)
        q_out = rotate_pairs(q, q_pos, self.inv_freq) * self._scale(q_pos, 1.0)  # query at n: zeta^(n/B)
        k_out = rotate_pairs(k, k_pos, self.inv_freq) * self._scale(k_pos, -1.0)  # key at m: zeta^(-m/B)
        return q_out.to(q.dtype), k_out.to(k.dtype)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, base={self.base}, scale_base={self.scale_base:g}"
