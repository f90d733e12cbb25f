"""FIRE (Li et al. 2024): a learned function of the progressively normalised relative distance.

Every head h adds to the logit of query i and key j

    b_h(i, j) = f_theta(psi(i - j) / psi(max(L, i)))_h,    psi(x) = log(c x + 1),

with f_theta a two-layer MLP (1 -> ``hidden`` -> ReLU -> H heads, shared by the heads, one output
each), c > 0 and the threshold L learned. The paper's choices: ``hidden = 32``, c starts at 0.1,
L starts at 512 and is learned as |m| * 512 with the multiplier m starting at 1 (a parameter of
order 1 moves at the optimiser's pace, one of order 512 would not), and |c x| inside the log so a
negative c cannot take the log of a negative number. Dividing by psi(max(L, i)) maps every
distance a query can see into [0, 1] ("progressive interpolation"): a query past the training
length sees distances in the range it was trained on, and the log keeps nearby distances apart.

Not translation invariant: the normaliser reads the query position i once i > L, so shifting
every position changes the bias (below L, where the normaliser is the constant psi(L), it is a
function of i - j alone); the encoding declares ``translation_invariant = False``.

The paper's model is causal (j <= i). For a non-causal layer (an encoder) this module keeps the
direction and normalises by the later of the two positions:

    x(i, j) = sign(i - j) * psi(|i - j|) / psi(max(L, i, j))

which is the paper's input wherever j <= i (causal attention is unchanged) and lies in [-1, 1]
everywhere, so the MLP can tell a key on the left from one on the right at the same distance.
The bias is a function of (i, j) only, so a cached decoding step and a banded block see the
same term as a full call.

The MLP runs on every (query, key) pair: Tq * Tk * ``hidden`` activations per call, the cost of
a learned function of position pairs.
"""

from __future__ import annotations

from typing import cast

import torch
from torch import Tensor, nn

from variants.checks import positive
from variants.flex import ScoreMod
from variants.position.base import PositionEncoding
from variants.registries import POSITION

#: keeps the normaliser away from 0 when c * max(L, i) is tiny
EPS = 1e-6


@POSITION.register("fire", references="li2024functional")
class FunctionalInterpolation(PositionEncoding):
    has_score_bias = True
    #: the MLP runs per (i, j) inside the kernel, unrolled over its hidden units
    has_score_mod = True
    #: the unrolled MLP indexes its weights once per hidden unit, and c and L are captured 0-d tensors
    #: with gradients: Inductor's flex backward rejects both ("multiple indexing operations on the same
    #: tensor that requires gradients"), so training runs the dense bias and inference runs flex
    flex_trains = False
    translation_invariant = False
    threshold_init: Tensor  # buffer (), the L the learned scale multiplies

    def __init__(
        self, d_model: int, num_heads: int = 1, hidden: int = 32, init_c: float = 0.1, threshold: float = 512.0
    ) -> None:
        super().__init__(d_model, num_heads)
        self.hidden = positive("hidden", hidden, integer=True)
        positive("init_c", init_c)
        positive("threshold", threshold)
        self.mlp = nn.Sequential(nn.Linear(1, hidden), nn.ReLU(), nn.Linear(hidden, num_heads))
        self.c = nn.Parameter(torch.tensor(float(init_c)))
        self.register_buffer("threshold_init", torch.tensor(float(threshold)), persistent=False)
        self.threshold_scale = nn.Parameter(torch.tensor(1.0))  # L = |m| * threshold

    @property
    def threshold(self) -> Tensor:
        """The learned L (a 0-d tensor)."""
        return (self.threshold_scale * self.threshold_init).abs()

    def psi(self, x: Tensor) -> Tensor:
        return torch.log((self.c * x).abs() + 1)

    def normalised_distance(self, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        """The MLP's input for every query and key: (Tq, Tk) in [-1, 1]."""
        i, j = q_pos.float()[:, None], k_pos.float()[None, :]  # (Tq, 1), (1, Tk)
        later = torch.maximum(torch.maximum(i, j), self.threshold)  # (Tq, Tk): max(L, i, j)
        return torch.sign(i - j) * self.psi(i - j) / (self.psi(later) + EPS)

    def score_bias(self, q: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        x = self.normalised_distance(q_pos, k_pos)  # (Tq, Tk)
        bias = self.mlp(x[..., None])  # (Tq, Tk, H)
        return bias.permute(2, 0, 1)[None].to(q.dtype)  # (1, H, Tq, Tk)

    def score_mod(self, q: Tensor, q_pos: Tensor, k_pos: Tensor) -> ScoreMod:
        first, second = cast(nn.Linear, self.mlp[0]), cast(nn.Linear, self.mlp[2])  # the MLP's two layers
        w1, b1 = first.weight[:, 0], first.bias  # (hidden,), (hidden,)
        w2, b2 = second.weight, second.bias  # (H, hidden), (H,)
        threshold = self.threshold

        def fire(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            i, j = q_pos[q_idx].float(), k_pos[kv_idx].float()
            later = torch.maximum(torch.maximum(i, j), threshold)
            x = torch.sign(i - j) * self.psi(i - j) / (self.psi(later) + EPS)
            # The MLP on one scalar, one hidden unit at a time: a kernel's score_mod is elementwise.
            out = b2[h]
            for u in range(self.hidden):
                out = out + w2[h, u] * torch.relu(w1[u] * x + b1[u])
            return score + out.to(score.dtype)

        return fire

    def extra_repr(self) -> str:
        return (
            f"{super().extra_repr()}, hidden={self.hidden}, c={float(self.c.detach()):.4g}, "
            f"threshold={float(self.threshold.detach()):.4g}"
        )
