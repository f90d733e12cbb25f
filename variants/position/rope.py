"""Rotary position embedding (Su et al. 2021): rotate q and k by position-dependent angles.

q_i . k_j then depends on positions only through j - i.

Scaling for evaluation beyond the training length ``L = train_length``, by ``s = factor``
(the angle of pair d at position p is p * theta_d, theta_d = base^(-2d/D), D the head dimension):

- ``none``: theta_d as above.
- ``linear`` (position interpolation, Chen et al. 2023): theta_d / s, i.e. position p is read as p / s,
  so s * L positions fall inside the range trained on.
- ``ntk`` (NTK-aware base change): base' = base * s^(D / (D - 2)); the lowest frequency is interpolated
  by s, the highest are left almost unchanged.
- ``yarn`` (Peng et al. 2023, "NTK-by-parts" plus a temperature): with wavelength lambda_d = 2 pi / theta_d,
  r_d = L / lambda_d and ramp gamma_d = clamp((r_d - alpha) / (beta - alpha), 0, 1) (alpha = 1, beta = 32),
  theta'_d = (1 - gamma_d) * theta_d / s + gamma_d * theta_d; q and k are both multiplied by
  0.1 ln(s) + 1, so the logits are by its square.

The scaled angles apply in eval mode only (validation, test lengths, generation): training at L keeps
plain rotary angles, and the same model is then evaluated at longer lengths with the scaling. Every
scaling is still a function of j - i alone.
"""
import math

import torch
from torch import Tensor

from variants.checks import VariantConfigError, one_of, positive
from variants.position.base import PositionEncoding
from variants.papers import SU_2021
from variants.registries import POSITION

SCALINGS = ("none", "linear", "ntk", "yarn")
#: YaRN's ramp bounds in rotations per training length (Peng et al. 2023, their LLaMA values)
YARN_ALPHA, YARN_BETA = 1.0, 32.0


def _rotate_half(x: Tensor) -> Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rope_frequencies(head_dim: int, base: float) -> Tensor:
    """theta_d = base^(-2d/D) for d = 0 .. D/2 - 1: (D/2,)."""
    return base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)


def scaled_frequencies(head_dim: int, base: float, scaling: str, factor: float,
                       train_length: int | None) -> tuple[Tensor, float]:
    """The evaluation frequencies (D/2,) and the factor q and k are multiplied by (see the module doc)."""
    theta = rope_frequencies(head_dim, base)
    if scaling == "linear":
        return theta / factor, 1.0
    if scaling == "ntk":
        return rope_frequencies(head_dim, base * factor ** (head_dim / (head_dim - 2))), 1.0
    if scaling == "yarn":
        rotations = train_length * theta / (2 * math.pi)  # r_d = L / lambda_d
        ramp = ((rotations - YARN_ALPHA) / (YARN_BETA - YARN_ALPHA)).clamp(0.0, 1.0)
        return (1 - ramp) * theta / factor + ramp * theta, 0.1 * math.log(factor) + 1.0
    return theta, 1.0


@POSITION.register("rope", references=SU_2021)
class Rotary(PositionEncoding):
    options: dict[str, tuple] = {}  # scaling needs a factor and a training length; tested on its own

    def __init__(self, d_model: int, num_heads: int = 1, base: float = 10000.0, scaling: str = "none",
                 factor: float = 1.0, train_length: int | None = None) -> None:
        super().__init__(d_model, num_heads)
        if self.head_dim % 2:
            raise VariantConfigError(
                f"position=rope needs an even head dimension; d_model={d_model} / num_heads={num_heads} "
                f"= {self.head_dim}"
            )
        self.base = positive("base", base)
        self.scaling = one_of("scaling", scaling, SCALINGS)
        if positive("factor", factor) < 1:
            raise VariantConfigError(f"factor={factor!r} is not allowed; it must be >= 1 (the length multiple)")
        self.factor = float(factor)
        if train_length is not None:
            positive("train_length", train_length, integer=True)
        elif scaling == "yarn":
            raise VariantConfigError("train_length=None is not allowed with scaling=yarn; give the training length")
        if scaling == "ntk" and self.head_dim == 2:
            raise VariantConfigError("scaling=ntk is not allowed with head dimension 2; its exponent D/(D-2) is undefined")
        self.train_length = train_length
        self.register_buffer("inv_freq", rope_frequencies(self.head_dim, base), persistent=False)  # (D/2,)
        eval_freq, self.magnitude = scaled_frequencies(self.head_dim, base, scaling, self.factor, train_length)
        self.register_buffer("eval_freq", eval_freq, persistent=False)  # (D/2,)

    def _scaled(self) -> bool:
        return self.scaling != "none" and not self.training

    def _rotate_by(self, x: Tensor, pos: Tensor) -> Tensor:
        freq = self.eval_freq if self._scaled() else self.inv_freq
        angles = pos.float()[:, None] * freq[None, :]  # (T, D/2)
        angles = torch.cat((angles, angles), dim=-1)  # (T, D)
        out = x.float() * angles.cos() + _rotate_half(x.float()) * angles.sin()
        if self._scaled() and self.magnitude != 1.0:
            out = out * self.magnitude
        return out.to(x.dtype)

    def rotate(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor) -> tuple[Tensor, Tensor]:
        return self._rotate_by(q, q_pos), self._rotate_by(k, k_pos)

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, base={self.base}, scaling={self.scaling}, factor={self.factor}, "
                f"train_length={self.train_length}")
