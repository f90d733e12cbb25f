"""Hard attention sees relative positions: the Shaw bias reaches its scores, its choice and
every gradient estimator (docs/hard_relative.md: why hard + relative still fails on reverse).

References are independent of the hard layer: the choice is the argmax of a bias written
out in the test; the straight-through gradient of a loss linear in the output equals soft
attention's gradient (the estimator's backward is the softmax's); REINFORCE's gradient is
that of log softmax(scores)[choice] with the scores computed by hand.
"""

from __future__ import annotations

import math

import pytest
import torch

from variants import ATTENTION, POSITION
from variants.attention.hard import ESTIMATORS

D, K, B, T = 8, 4, 2, 7
TARGET = -2  # the distance j - i the planted bias prefers


def layers(estimator: str = "straight_through"):
    torch.manual_seed(0)
    hard = ATTENTION.build("hard", d_model=D, num_heads=1, estimator=estimator)
    pos = POSITION.build("relative", d_model=D, num_heads=1, max_distance=K)
    return hard, pos


def plant_position_only_scores(hard, pos) -> torch.Tensor:
    """Keys carry nothing (W_k = 0), every query is the same vector u, and the relative table
    a_r = u * s_r with s_r largest at r = TARGET: the score of (i, j) is |u|^2 s_(j-i) / sqrt(D)."""
    u = torch.ones(D)
    s = torch.tensor([-abs(r - TARGET) * 3.0 for r in range(-K, K + 1)])  # (2K+1,)
    with torch.no_grad():
        hard.w_q.weight.zero_()
        hard.w_q.bias.copy_(u)
        hard.w_k.weight.zero_()
        hard.w_k.bias.zero_()
        pos.keys.copy_(s[:, None] * u[None])
    return s


@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize("training", [True, False])
def test_the_relative_bias_decides_which_key_hard_attention_reads(estimator, training):
    hard, pos = layers(estimator)
    plant_position_only_scores(hard, pos)
    hard.train(training)
    x = torch.randn(B, T, D)
    _, weights = hard(x, causal=True, position=pos, need_weights=True)  # (B, 1, T, T)
    chosen = weights[:, 0].argmax(-1)  # (B, T)
    # causal: query i reads i - 2 when it exists, else the farthest key back it may read (0)
    want = torch.tensor([max(i + TARGET, 0) for i in range(T)]).expand(B, T)
    if estimator == "straight_through" or not training:
        assert torch.equal(chosen, want)
    else:  # sampled: the planted margin (3 per step of distance, x |u|^2 / sqrt(D) = 8.5) makes a miss ~1e-4
        assert (chosen == want).float().mean() > 0.9


@pytest.mark.parametrize("estimator", ["straight_through", "gumbel"])
def test_gradients_reach_the_relative_table(estimator):
    hard, pos = layers(estimator)
    x = torch.randn(B, T, D)
    out, _ = hard(x, causal=True, position=pos)
    (out * torch.randn_like(out)).sum().backward()
    assert pos.keys.grad is not None and pos.keys.grad.abs().sum() > 0 and torch.isfinite(pos.keys.grad).all()


def test_straight_through_gives_the_relative_table_soft_attentions_gradient():
    hard, pos = layers("straight_through")
    soft = ATTENTION.build("soft", d_model=D, num_heads=1, backend="math")
    soft.load_state_dict(hard.state_dict())
    x, c = torch.randn(B, T, D), torch.randn(B, T, D)
    grads = []
    for layer in (hard, soft):
        pos.keys.grad = None
        out, _ = layer(x, causal=True, position=pos)
        (out * c).sum().backward()  # linear in the output: the same upstream gradient for both
        grads.append(pos.keys.grad.clone())
    torch.testing.assert_close(grads[0], grads[1])


def test_reinforce_log_probabilities_carry_the_relative_score_to_the_table():
    hard, pos = layers("reinforce")
    hard.train()
    x = torch.randn(B, T, D)
    _, weights = hard(x, causal=True, position=pos, need_weights=True)
    chosen = weights[:, 0].argmax(-1)  # (B, T): the sampled keys
    hard.log_probs.sum().backward()
    # the same log-probabilities from scores written out: (q.k + q.a_clip(j-i)) / sqrt(D)
    keys = pos.keys.detach().clone().requires_grad_(True)
    with torch.no_grad():
        q, k = hard.w_q(x), hard.w_k(x)  # (B, T, D), one head
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    bucket = (j - i).clamp(-K, K) + K  # (T, T)
    scores = (q @ k.transpose(1, 2) + torch.einsum("bid,ijd->bij", q, keys[bucket])) / math.sqrt(D)
    log_p = scores.masked_fill(j > i, float("-inf")).log_softmax(-1)  # (B, T, T)
    picked = log_p.gather(-1, chosen[..., None])[..., 0]  # (B, T)
    torch.testing.assert_close(hard.log_probs[:, 0].detach(), picked.detach())
    picked.sum().backward()
    assert keys.grad.abs().sum() > 0
    torch.testing.assert_close(pos.keys.grad, keys.grad)
