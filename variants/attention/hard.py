"""Hard attention: each query reads exactly one key.

The forward weights are always one-hot. Training differs by ``estimator``:
- ``straight_through``: one-hot of the argmax forward, the softmax's gradient backward;
- ``gumbel``: Gumbel-softmax with ``temperature``; the hard sample forward, the
  relaxed sample's gradient backward;
- ``reinforce``: sample a key from the softmax; no gradient flows through the
  choice, and ``log_probs`` holds log p(choice) (and ``entropy`` the entropy of
  the softmax) for a score-function loss that the training loop adds (see
  ``reinforce_terms`` and ``experiments/model/reinforce.py``). With ``expected_mix``
  = p, each training example reads the expected context (the softmax weights)
  instead of a sample with probability p, as Xu et al. 2015 do with p = 0.5; its
  queries then carry no score-function term.
In eval mode every estimator takes the argmax.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from variants.attention.layer import AttentionLayer
from variants.attention.scores import SCORES
from variants.checks import one_of, positive, probability
from variants.masking import Masking
from variants.position.base import PositionEncoding
from variants.registries import ATTENTION

ESTIMATORS = ("straight_through", "gumbel", "reinforce")


@ATTENTION.register(
    "hard", references=("xu2015show", "bengio2013estimating", "jang2017categorical", "williams1992simple")
)
class HardAttention(AttentionLayer):
    default_heads = 1
    backends = ("auto", "math")
    kind = "hard"
    options: dict[str, tuple] = {"score": SCORES, "estimator": ESTIMATORS}

    def __init__(
        self,
        d_model: int,
        num_heads: int | None = None,
        *,
        dropout: float = 0.0,
        bias: bool = True,
        score: str = "scaled_dot",
        backend: str = "auto",
        estimator: str = "straight_through",
        temperature: float = 1.0,
        expected_mix: float = 0.0,
    ) -> None:
        super().__init__(d_model, num_heads, dropout=dropout, bias=bias, score=score, backend=backend)
        self.estimator = one_of("estimator", estimator, ESTIMATORS)
        self.temperature = float(positive("temperature", temperature))
        self.expected_mix = probability("expected_mix", expected_mix)
        #: (B, H, Tq) log-probabilities of the sampled keys, set by the last training call
        #: with ``estimator='reinforce'`` (0 where a query read the expected context or had
        #: no key); None otherwise.
        self.log_probs: Tensor | None = None
        #: (B, H, Tq) entropy of each query's distribution over keys, set with ``log_probs``.
        self.entropy: Tensor | None = None
        #: (B, Tq, d_model) the projected queries, detached, set with ``log_probs``: what a learned
        #: baseline may look at (they do not depend on this layer's choices).
        self.query_features: Tensor | None = None

    def batched_members_problem(self) -> str | None:
        """Why seeds of this layer cannot train as one batched model (``experiments.ensemble``), or None."""
        if self.estimator == "reinforce":
            return (
                "estimator='reinforce' keeps each step's sampled choices on the layer for a REINFORCE "
                "baseline that the run trains, state the batched step does not keep per member"
            )
        return None

    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        masking: Masking,
        position: PositionEncoding | None,
        need_weights: bool,
    ) -> tuple[Tensor, Tensor | None]:
        scores = self.logits(q, k, masking.q_pos, masking.k_pos, position)  # (B, H, Tq, Tk)
        allowed = masking.dense()
        if allowed is not None:
            scores = scores.masked_fill(~allowed, float("-inf"))
        any_key = torch.isfinite(scores).any(-1, keepdim=True)  # (B, H, Tq, 1)
        # A query with no allowed key reads nothing; keep its scores finite so nothing is NaN.
        scores = torch.where(any_key, scores, torch.zeros_like(scores))
        self.log_probs = self.entropy = self.query_features = None

        if not self.training:
            weights = _one_hot(scores.argmax(-1), scores)
        elif self.estimator == "straight_through":
            soft = scores.softmax(-1)
            weights = _one_hot(scores.argmax(-1), scores) + _gradient_only(soft)
        elif self.estimator == "gumbel":
            soft = F.gumbel_softmax(scores, tau=self.temperature, hard=False, dim=-1)
            weights = _one_hot(soft.argmax(-1), scores) + _gradient_only(soft)
        else:  # reinforce
            dist = torch.distributions.Categorical(logits=scores)
            choice = dist.sample()  # (B, H, Tq)
            sampled = any_key.squeeze(-1)  # (B, H, Tq)
            weights = _one_hot(choice, scores)
            if self.expected_mix > 0:
                # Per example: read the softmax weights (a deterministic, differentiable context).
                expected = torch.rand(scores.shape[0], 1, 1, device=scores.device) < self.expected_mix  # (B, 1, 1)
                weights = torch.where(expected.unsqueeze(-1), dist.probs, weights)
                sampled = sampled & ~expected
            self.log_probs = dist.log_prob(choice) * sampled
            self.entropy = dist.entropy() * any_key.squeeze(-1)
            self.query_features = q.detach().transpose(1, 2).flatten(2)  # (B, Tq, H * D)
        weights = weights * any_key
        out = self.mix(self.weight_dropout(weights), v, masking.q_pos, masking.k_pos, position)
        return out, weights


def _one_hot(index: Tensor, like: Tensor) -> Tensor:
    return F.one_hot(index, like.shape[-1]).to(like.dtype)  # (B, H, Tq, Tk)


def _gradient_only(x: Tensor) -> Tensor:
    """Exactly zero forward, ``x``'s gradient backward.

    Added to a one-hot it keeps the forward weights exactly 0 and 1; the usual
    ``hard + soft - soft.detach()`` rounds 1 + s - s to a value off by an ulp.
    """
    return x - x.detach()


def reinforce_terms(module: torch.nn.Module) -> list[Tensor]:
    """The (B, H, Tq) log-probabilities of every REINFORCE hard layer inside ``module``."""
    return [m.log_probs for m in module.modules() if isinstance(m, HardAttention) and m.log_probs is not None]


def reinforce_layers(module: torch.nn.Module) -> list[HardAttention]:
    """The hard layers inside ``module`` that sampled in their last call, in forward order within a stack."""
    return [m for m in module.modules() if isinstance(m, HardAttention) and m.log_probs is not None]


def reinforce_entropies(module: torch.nn.Module) -> list[Tensor]:
    """The (B, H, Tq) entropies of every REINFORCE hard layer inside ``module``, in ``reinforce_terms``' order."""
    return [m.entropy for m in reinforce_layers(module) if m.entropy is not None]
