"""Rotary position embedding (Su et al. 2021): rotate q and k by position-dependent angles.

q_i . k_j then depends on positions only through j - i.
"""
import torch
from torch import Tensor

from variants.checks import VariantConfigError, positive
from variants.position.base import PositionEncoding
from variants.registries import POSITION


def _rotate_half(x: Tensor) -> Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


@POSITION.register("rope")
class Rotary(PositionEncoding):
    def __init__(self, d_model: int, num_heads: int = 1, base: float = 10000.0) -> None:
        super().__init__(d_model, num_heads)
        if self.head_dim % 2:
            raise VariantConfigError(
                f"position=rope needs an even head dimension; d_model={d_model} / num_heads={num_heads} "
                f"= {self.head_dim}"
            )
        self.base = positive("base", base)
        inv_freq = base ** (-torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # (D/2,)

    def _rotate_by(self, x: Tensor, pos: Tensor) -> Tensor:
        angles = pos.float()[:, None] * self.inv_freq[None, :]  # (T, D/2)
        angles = torch.cat((angles, angles), dim=-1)  # (T, D)
        return (x.float() * angles.cos() + _rotate_half(x.float()) * angles.sin()).to(x.dtype)

    def rotate(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor) -> tuple[Tensor, Tensor]:
        return self._rotate_by(q, q_pos), self._rotate_by(k, k_pos)
