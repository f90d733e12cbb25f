"""The REINFORCE training term of hard attention (Williams 1992), with the literature's variance reductions.

A hard layer trained with ``estimator=reinforce`` samples one key per query and records
log p(choice). The training loss L = sum_{b,s} c_bs / N (c: per-token cross-entropy, N: scored
tokens) gets the surrogate

    S = sum_{b,t} (G_bt - beta_bt) * log p_bt / N

(log p_bt summed over the heads and layers of one stack), whose gradient added to L's is an
unbiased estimate of grad E[L] whenever beta_bt does not depend on the samples it multiplies:

- ``reward``: ``sequence`` credits every query with its sequence's loss, G_bt = sum_s c_bs;
  ``position`` credits a decoder query with the loss of its position and those after it,
  G_bt = sum_{s>=t} c_bs. A causal decoder's choice at t cannot change the loss before t, so
  those terms carry only noise. Encoder queries are not causal: they always get the sequence loss.
  ``discount`` < 1 weighs position s by discount^(s - t): biased, lower variance (0: the
  position's own loss only).
- ``baseline``: ``none``; ``moving_average``, one exponential moving average per query position
  over past steps of G per scored token ahead, times the query's own count of tokens ahead (a
  long example's G is much larger than a short one's; the count is known before any sample);
  ``learned``, that average plus a linear function of the query
  (the stack's first REINFORCE layer's projected queries, which no choice at or after the
  position can change), regressed on G - average by squared error with an Adam of its own
  (Mnih & Gregor 2014 centre with both); its updates never enter the model's gradient or its
  clipping. ``leave_one_out``: with ``samples`` = k >= 2 copies of every example, the mean G
  of the other k - 1 copies (Kool et al. 2019, "Buy 4 REINFORCE samples, get a baseline for free").
- ``samples``: each example is trained k times per step with independent choices (k times the
  compute of a step); the cross-entropy averages over the copies.
- ``entropy``: weight of a bonus, -entropy * (mean entropy of the choice distributions), as in
  Xu et al. 2015. It changes the objective (towards spread-out attention), as does the hard
  layer's ``expected_mix``; the other options leave the gradient's expectation unchanged.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from experiments.config.reinforce_options import BASELINES, REWARDS, ReinforceSpec

#: query positions with a baseline of their own; later positions share the last one
MAX_POSITIONS = 1024


def returns(costs: Tensor, reward: str, discount: float = 1.0) -> Tensor:
    """Per-query credit G from per-position costs: costs (B, T) -> (B, T).

    ``position``: G_t = c_t + discount * G_{t+1} (discount 1: the loss from t on, unbiased;
    below 1 later positions count less, trading bias for variance); ``sequence``: sum_s c_s.
    """
    if reward == "sequence":
        return costs.sum(1, keepdim=True).expand_as(costs)
    if discount == 1.0:
        return costs.flip(1).cumsum(1).flip(1)  # sum_{s >= t} c_s
    out, running = torch.empty_like(costs), torch.zeros_like(costs[:, 0])
    for t in range(costs.shape[1] - 1, -1, -1):
        running = costs[:, t] + discount * running
        out[:, t] = running
    return out


def leave_one_out(G: Tensor, samples: int) -> Tensor:
    """(B * k, T) in groups of k consecutive copies -> each row's mean over the other k - 1 rows."""
    grouped = G.reshape(-1, samples, *G.shape[1:])  # (B, k, T)
    return ((grouped.sum(1, keepdim=True) - grouped) / (samples - 1)).reshape(G.shape)


def surrogate(G: Tensor, beta: Tensor, log_probs: Tensor, valid: Tensor, norm: Tensor | float) -> Tensor:
    """sum (G - beta) * log p over the queries that can affect the loss, / N. All (B, T)."""
    advantage = (G - beta).detach()
    return (advantage * log_probs * valid).sum() / norm


class Baseline(nn.Module):
    """beta per query position for one stack: ``none``, ``moving_average``, ``learned`` or ``leave_one_out``."""

    def __init__(self, kind: str, decay: float = 0.9, samples: int = 1, features: int = 0, lr: float = 1e-3) -> None:
        super().__init__()
        self.kind, self.decay, self.samples = kind, decay, samples
        if kind in ("moving_average", "learned"):
            self.register_buffer("value", torch.zeros(MAX_POSITIONS))
            self.register_buffer("seen", torch.zeros(MAX_POSITIONS, dtype=torch.bool))
        self.head: nn.Linear | None = None
        if kind == "learned":
            self.head = nn.Linear(features, 1)
            nn.init.zeros_(self.head.weight)
            nn.init.zeros_(self.head.bias)
            self.optimizer = torch.optim.Adam(self.head.parameters(), lr=lr)

    def _index(self, T: int, device: torch.device) -> Tensor:
        return torch.arange(T, device=device).clamp(max=MAX_POSITIONS - 1)

    def _average(self, G: Tensor, tokens: Tensor | None) -> Tensor:
        rate = self.value[self._index(G.shape[1], G.device)].expand_as(G)
        return rate if tokens is None else rate * tokens

    def forward(self, G: Tensor, features: Tensor | None = None, tokens: Tensor | None = None) -> Tensor:
        """The baseline for each query, (B, T); it never depends on the samples it is compared with.

        ``tokens`` (B, T): how many scored positions each G sums (``returns`` of the scored mask),
        known before any sample; the average is kept per token, so a long example's G is not
        compared with a short one's. ``features`` (B, T, F): what the learned baseline reads.
        """
        if self.kind == "none":
            return torch.zeros_like(G)
        if self.kind == "leave_one_out":
            return leave_one_out(G, self.samples)
        beta = self._average(G, tokens)
        if self.head is not None:
            with torch.no_grad():
                beta = beta + self.head(features.to(G.dtype)).squeeze(-1)
        return beta.detach()

    def update(self, G: Tensor, valid: Tensor, features: Tensor | None = None, tokens: Tensor | None = None) -> None:
        """Move the baseline towards this step's G; call after ``forward``, so beta never saw this step."""
        G = G.detach()
        tokens = torch.ones_like(G) if tokens is None else tokens
        if self.head is not None:
            # Its own optimiser and graph: the regression neither enters the model's gradient nor its clipping.
            with torch.enable_grad():
                residual = G - self._average(G, tokens)
                pred = self.head(features.detach().to(G.dtype)).squeeze(-1)
                loss = ((pred - residual) ** 2 * valid).sum() / valid.sum().clamp(min=1)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
        if self.kind in ("moving_average", "learned"):
            idx = self._index(G.shape[1], G.device)
            with torch.no_grad():
                # per position: sum of G over sum of tokens, the average loss per scored token ahead
                sums = torch.zeros_like(self.value).index_add_(0, idx, (G * valid).sum(0))
                counts = torch.zeros_like(self.value).index_add_(0, idx, (tokens * valid).sum(0))
                has = counts > 0
                mean = sums / counts.clamp(min=1e-12)
                # The first observation of a position sets it: no pull towards an arbitrary 0.
                moved = torch.where(self.seen, self.decay * self.value + (1 - self.decay) * mean, mean)
                self.value.copy_(torch.where(has, moved, self.value))
                self.seen |= has


def stack_log_probs(log_probs: list[Tensor]) -> Tensor:
    """Every layer's and head's (B, H, T) log-probabilities -> the joint log p of each query position, (B, T)."""
    return torch.stack([lp.sum(1) for lp in log_probs]).sum(0)


def mean_entropy(entropies: list[Tensor], valid: Tensor) -> Tensor:
    """Mean entropy over layers, heads and the valid queries; entropies (B, H, T), valid (B, T)."""
    per = [(e * valid[:, None]).sum() / (valid.sum() * e.shape[1]).clamp(min=1) for e in entropies]
    return torch.stack(per).mean()


def repeat_batch(batch: dict, samples: int) -> dict:
    """Each example ``samples`` times in a row (the groups ``leave_one_out`` expects)."""
    if samples == 1:
        return batch
    size = next(v.shape[0] for v in batch.values() if isinstance(v, Tensor) and v.dim() > 0)
    return {
        k: v.repeat_interleave(samples, 0) if isinstance(v, Tensor) and v.dim() > 0 and v.shape[0] == size else v
        for k, v in batch.items()
    }


__all__ = [
    "BASELINES",
    "Baseline",
    "MAX_POSITIONS",
    "REWARDS",
    "ReinforceSpec",
    "leave_one_out",
    "mean_entropy",
    "repeat_batch",
    "returns",
    "stack_log_probs",
    "surrogate",
]
