"""Rotary position embedding (Su et al. 2021): rotate q and k by position-dependent angles.

q_i . k_j then depends on positions only through j - i.

Scaling for sequences longer than the training length ``L = train_length`` (the angle of pair d
at position p is p * theta_d, theta_d = base^(-2d/D), D the head dimension). It is a function of
the sequence length T alone, in training and evaluation alike:

- T <= L: plain rotary angles, exactly (a model is validated at its training length as trained).
- T > L: the chosen scaling with s = min(T / L, factor), ``factor`` >= 1. The stretch follows the
  length (dynamic scaling): s grows from 1 at T = L to ``factor`` at T = factor * L and stays
  there, so ``factor`` is the longest length multiple the scaling reaches and ``factor=1`` is
  plain rope at every length.

  - ``none``: theta_d as above.
  - ``linear`` (position interpolation, Chen et al. 2023): theta_d / s, i.e. position p is read
    as p / s, so s * L positions fall inside the range trained on.
  - ``ntk`` (NTK-aware base change): base' = base * s^(D / (D - 2)); the lowest frequency is
    interpolated by s, the highest are left almost unchanged.
  - ``yarn`` (Peng et al. 2023, "NTK-by-parts" plus a temperature): with wavelength
    lambda_d = 2 pi / theta_d, r_d = L / lambda_d and ramp gamma_d = clamp((r_d - alpha) / (beta - alpha), 0, 1)
    (alpha = 1, beta = 32), theta'_d = (1 - gamma_d) * theta_d / s + gamma_d * theta_d; q and k are
    both multiplied by 0.1 ln(s) + 1, so the logits are by its square.

T is each call's last position + 1 unless a caller declares it with ``sequence_length`` (the
Transformer declares each forward's length from its shapes, so no call reads a position back from
the device). Keys are
cached after rotation, and a key rotated for length t cannot be re-rotated for t + 1, so cached
decoding that crosses L must declare its final length: ``Transformer.generate`` declares prompt +
new tokens, and every step, cached or recomputing the prefix, then uses the same s. Within one
length every scaling is a function of j - i alone; across lengths it is not, so a scaled rope
declares itself not translation invariant.
"""

import math

import torch
from torch import Tensor

from variants.checks import VariantConfigError, even_head_dim, one_of, positive
from variants.position.base import PositionEncoding
from variants.registries import POSITION

SCALINGS = ("none", "linear", "ntk", "yarn")
#: YaRN's ramp bounds in rotations per training length (Peng et al. 2023, their LLaMA values)
YARN_ALPHA, YARN_BETA = 1.0, 32.0


def rotate_half(x: Tensor) -> Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rotate_pairs(x: Tensor, pos: Tensor, freq: Tensor) -> Tensor:
    """Turn pair (x_d, x_(d+D/2)) by pos * freq_d, in float32: x (B, H, T, D), pos (T,), freq (D/2,)."""
    angles = pos.float()[:, None] * freq[None, :]  # (T, D/2)
    angles = torch.cat((angles, angles), dim=-1)  # (T, D)
    return x.float() * angles.cos() + rotate_half(x.float()) * angles.sin()


def rope_frequencies(head_dim: int, base: float) -> Tensor:
    """theta_d = base^(-2d/D) for d = 0 .. D/2 - 1: (D/2,)."""
    return base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)


def yarn_ramp(theta: Tensor, train_length: int) -> Tensor:
    """gamma_d = clamp((L / lambda_d - alpha) / (beta - alpha), 0, 1): 1 keeps theta_d, 0 interpolates it."""
    rotations = train_length * theta / (2 * math.pi)  # r_d = L / lambda_d
    return ((rotations - YARN_ALPHA) / (YARN_BETA - YARN_ALPHA)).clamp(0.0, 1.0)


def scaled_frequencies(theta: Tensor, scaling: str, s: float, ramp: Tensor | None = None) -> tuple[Tensor, float]:
    """The frequencies (D/2,) at stretch s and the factor q and k are multiplied by (see the module doc)."""
    if scaling == "linear":
        return theta / s, 1.0
    if scaling == "ntk":
        # (base * s^(D/(D-2)))^(-2d/D) = theta_d * s^(-2d/(D-2))
        half = theta.numel()
        d = torch.arange(half, dtype=theta.dtype, device=theta.device)
        return theta * s ** (-2 * d / (2 * half - 2)), 1.0
    if scaling == "yarn":
        if ramp is None:
            raise ValueError("scaling='yarn' needs the ramp: yarn_ramp(theta, train_length)")
        return (1 - ramp) * theta / s + ramp * theta, 0.1 * math.log(s) + 1.0
    return theta, 1.0


@POSITION.register("rope", references=("su2024roformer", "chen2023extending", "peng2023yarn"))
class Rotary(PositionEncoding):
    options: dict[str, tuple] = {}  # scaling needs a factor and a training length; tested on its own
    inv_freq: Tensor  # buffer (D/2,)
    ramp: Tensor | None  # buffer (D/2,) under yarn scaling

    def __init__(
        self,
        d_model: int,
        num_heads: int = 1,
        base: float = 10000.0,
        scaling: str = "none",
        factor: float = 1.0,
        train_length: int | None = None,
    ) -> None:
        super().__init__(d_model, num_heads)
        even_head_dim("rope", d_model, num_heads)
        self.base = positive("base", base)
        self.scaling = one_of("scaling", scaling, SCALINGS)
        if positive("factor", factor) < 1:
            raise VariantConfigError(f"factor={factor!r} is not allowed; it must be >= 1 (the length multiple)")
        self.factor = float(factor)
        if train_length is not None:
            positive("train_length", train_length, integer=True)
        elif scaling != "none":
            raise VariantConfigError(
                f"train_length=None is not allowed with scaling={scaling}; give the training length it scales beyond"
            )
        if scaling == "ntk" and self.head_dim == 2:
            raise VariantConfigError(
                "scaling=ntk is not allowed with head dimension 2; its exponent D/(D-2) is undefined"
            )
        self.train_length = train_length
        # Within one length a scaled rope is relative; across lengths its angles change.
        self.translation_invariant = scaling == "none" or self.factor == 1.0
        self.register_buffer("inv_freq", rope_frequencies(self.head_dim, base), persistent=False)  # (D/2,)
        ramp = yarn_ramp(self.inv_freq, train_length) if scaling == "yarn" and train_length is not None else None
        self.register_buffer("ramp", ramp, persistent=False)  # (D/2,) or None

    def stretch(self, length: int) -> float:
        """s for a sequence of ``length`` positions: 1 up to ``train_length``, then min(length / L, factor)."""
        if self.translation_invariant or self.train_length is None or length <= self.train_length:
            return 1.0
        return min(length / self.train_length, self.factor)

    def rotate(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor) -> tuple[Tensor, Tensor]:
        # One stretch for q and k, so their product stays a function of j - i.
        s = 1.0 if self.translation_invariant else self.stretch(self.length_of(q_pos, k_pos))
        freq, magnitude = (
            (self.inv_freq, 1.0) if s == 1.0 else scaled_frequencies(self.inv_freq, self.scaling, s, self.ramp)
        )
        q_rot, k_rot = rotate_pairs(q, q_pos, freq), rotate_pairs(k, k_pos, freq)
        if magnitude != 1.0:
            q_rot, k_rot = q_rot * magnitude, k_rot * magnitude
        return q_rot.to(q.dtype), k_rot.to(k.dtype)

    def extra_repr(self) -> str:
        return (
            f"{super().extra_repr()}, base={self.base}, scaling={self.scaling}, factor={self.factor}, "
            f"train_length={self.train_length}"
        )
