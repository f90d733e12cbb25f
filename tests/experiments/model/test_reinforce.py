"""REINFORCE hard attention: the log-probabilities, the surrogate's sign and baseline, and unbiasedness.

The references are independent of the code under test: scores and softmaxes written out
with torch ops, the exact gradient of the expected loss by enumerating every choice, and
hand-computed surrogates and moving averages.
"""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from experiments.model.reinforce import Baseline, ReinforceSpec, leave_one_out, returns, stack_log_probs, surrogate
from tests.helpers.cases import one_thread  # noqa: F401 (autouse)
from variants import ATTENTION, VariantConfigError
from variants.attention.hard import reinforce_layers

D_MODEL, T, S = 4, 2, 3


def hard_layer(seed: int = 0, **params) -> torch.nn.Module:
    torch.manual_seed(seed)
    layer = ATTENTION.build("hard", d_model=D_MODEL, num_heads=1, estimator="reinforce", **params)
    return layer.train()


def reference_log_softmax(layer, x: torch.Tensor, memory: torch.Tensor, pad: torch.Tensor | None) -> torch.Tensor:
    """log softmax over keys of q.k / sqrt(D), padded keys excluded: (B, Tq, Tk), one head."""
    q = x @ layer.w_q.weight.T + layer.w_q.bias
    k = memory @ layer.w_k.weight.T + layer.w_k.bias
    scores = q @ k.transpose(1, 2) / math.sqrt(D_MODEL)
    if pad is not None:
        scores = scores.masked_fill(pad[:, None, :], float("-inf"))
    return scores.log_softmax(-1)


def test_log_probs_are_log_softmax_of_the_scores_at_the_chosen_key():
    layer = hard_layer()
    gen = torch.Generator().manual_seed(3)
    x, memory = torch.randn(4, 5, D_MODEL, generator=gen), torch.randn(4, 6, D_MODEL, generator=gen)
    pad = torch.zeros(4, 6, dtype=torch.bool)
    pad[1, -2:] = True
    _, weights = layer(x, memory, key_padding_mask=pad, need_weights=True)
    chosen = weights[:, 0].argmax(-1)  # (B, Tq): the one-hot the forward used
    assert torch.equal(weights[:, 0].sum(-1), torch.ones(4, 5)) and not pad.gather(1, chosen.view(4, -1)).any()
    expected = reference_log_softmax(layer, x, memory, pad).gather(-1, chosen[..., None]).squeeze(-1)
    torch.testing.assert_close(layer.log_probs[:, 0], expected, rtol=1e-5, atol=1e-6)
    # the entropy beside them is the softmax's
    logp = reference_log_softmax(layer, x, memory, pad)
    entropy = -(logp.exp() * logp.nan_to_num(neginf=0.0)).sum(-1)
    torch.testing.assert_close(layer.entropy[:, 0], entropy, rtol=1e-5, atol=1e-6)


def test_expected_mix_reads_the_softmax_and_drops_the_score_term():
    layer = hard_layer(expected_mix=0.5)
    gen = torch.Generator().manual_seed(4)
    x, memory = torch.randn(64, T, D_MODEL, generator=gen), torch.randn(64, S, D_MODEL, generator=gen)
    _, weights = layer(x, memory, need_weights=True)
    probs = reference_log_softmax(layer, x, memory, None).exp()
    expected_rows = ~torch.isclose(weights[:, 0].amax(-1), torch.ones(())).all(-1)  # (B,) not one-hot
    assert 10 < int(expected_rows.sum()) < 54  # about half the examples, p = 0.5
    torch.testing.assert_close(weights[expected_rows, 0], probs[expected_rows], rtol=1e-5, atol=1e-6)
    assert (layer.log_probs[expected_rows] == 0).all() and (layer.log_probs[~expected_rows] < 0).all()


# -- the surrogate: sign, baseline, update ---------------------------------------------------------------------
def test_surrogate_equals_the_hand_formula_and_descends_on_costly_choices():
    G = torch.tensor([[3.0, 1.0], [0.5, 0.0]])
    beta = torch.tensor([[1.0, 2.0], [1.0, 2.0]])
    logp = torch.tensor([[-0.5, -1.0], [-2.0, -0.1]], requires_grad=True)
    valid = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    value = surrogate(G, beta, logp, valid, norm=3.0)
    # (3-1)(-0.5) + (1-2)(-1) + (0.5-1)(-2) + 0 = -1 + 1 + 1 = 1, over N = 3
    assert value.item() == pytest.approx(1.0 / 3.0)
    value.backward()
    # Gradient descent moves log p against (G - beta): a choice that cost more than its baseline
    # becomes less likely, one that cost less becomes more likely.
    torch.testing.assert_close(logp.grad, torch.tensor([[2.0, -1.0], [-0.5, 0.0]]) / 3.0)


def test_returns_credit_a_position_with_its_loss_and_the_later_ones():
    costs = torch.tensor([[1.0, 2.0, 4.0], [8.0, 0.0, 0.0]])
    torch.testing.assert_close(returns(costs, "position"), torch.tensor([[7.0, 6.0, 4.0], [8.0, 0.0, 0.0]]))
    torch.testing.assert_close(returns(costs, "sequence"), torch.tensor([[7.0, 7.0, 7.0], [8.0, 8.0, 8.0]]))
    # discount 0.5: 1 + 0.5 * 2 + 0.25 * 4 = 3, 2 + 0.5 * 4 = 4, 4
    torch.testing.assert_close(returns(costs, "position", 0.5), torch.tensor([[3.0, 4.0, 4.0], [8.0, 0.0, 0.0]]))
    torch.testing.assert_close(returns(costs, "position", 0.0), costs)


def test_moving_average_baseline_is_kept_per_token_ahead():
    """With ``tokens`` the average is of G per token, and beta scales back by each query's own count."""
    base = Baseline("moving_average", decay=0.9)
    G = torch.tensor([[9.0, 4.0], [2.0, 1.0]])
    tokens = torch.tensor([[3.0, 2.0], [1.0, 1.0]])
    base.update(G, torch.ones(2, 2), tokens=tokens)
    # per position: (9 + 2) / (3 + 1) = 2.75 and (4 + 1) / (2 + 1) = 5 / 3
    torch.testing.assert_close(base(G, tokens=tokens), torch.tensor([[8.25, 10 / 3], [2.75, 5 / 3]]))


def test_leave_one_out_is_the_mean_of_the_other_samples():
    G = torch.tensor([[1.0], [2.0], [6.0], [10.0], [20.0], [30.0]])  # two examples, k = 3
    torch.testing.assert_close(leave_one_out(G, 3), torch.tensor([[4.0], [3.5], [1.5], [25.0], [20.0], [15.0]]))


def test_moving_average_baseline_is_read_before_it_is_updated():
    base = Baseline("moving_average", decay=0.9)
    G1 = torch.tensor([[4.0, 2.0], [2.0, 0.0]])
    valid = torch.tensor([[1.0, 1.0], [1.0, 0.0]])  # position 1 of example 1 is padding
    assert torch.equal(base(G1), torch.zeros(2, 2))  # nothing seen yet
    base.update(G1, valid)
    G2 = torch.tensor([[10.0, 10.0], [0.0, 0.0]])
    # step 2 reads step 1's means (3 and 2), never its own G
    torch.testing.assert_close(base(G2), torch.tensor([[3.0, 2.0], [3.0, 2.0]]))
    base.update(G2, torch.ones(2, 2))
    torch.testing.assert_close(base(G2)[0], torch.tensor([0.9 * 3 + 0.1 * 5, 0.9 * 2 + 0.1 * 5]))


def test_module_adds_the_surrogate_with_its_baseline_and_updates_it():
    """Through TransformerModule: the term added to the loss is sum (G - beta) log p / N with the baseline
    of the steps before, and the baseline then moves by its decay."""
    from experiments.training.module import TransformerModule

    torch.manual_seed(0)
    model = {
        "arch": "seq2seq",
        "vocab_size": 9,
        "d_model": 8,
        "encoder_layers": 1,
        "decoder_layers": 1,
        "ffn_dim": 16,
        "dropout": 0.0,
        "attention": {"name": "multihead", "params": {"num_heads": 2}},
        "position": {"name": "sinusoidal", "params": {}},
        "cross_attention": {"name": "hard", "params": {"estimator": "reinforce"}},
    }
    module = TransformerModule(
        model,
        {
            "reinforce_reward": "position",
            "reinforce_discount": 1.0,
            "reinforce_baseline": "moving_average",
            "reinforce_baseline_decay": 0.5,
        },
        task_kind="seq2seq",
        max_steps=10,
    )
    module.train()
    base = module.baselines["decoder"]
    base.value[:3] = torch.tensor([1.0, -2.0, 0.5])
    base.seen[:3] = True
    src = torch.tensor([[4, 5, 6], [7, 8, 0]])
    tgt = torch.tensor([[5, 6, 2], [8, 2, 0]])
    from experiments.tasks.batches import seq2seq_io

    tgt_in, targets = seq2seq_io(tgt, 1, 0)
    logits = module.model(src, tgt_in)
    costs = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100, reduction="none").detach()
    (layer,) = reinforce_layers(module.model.decoder)
    logp = layer.log_probs.sum(1)  # (B, T), one layer
    term = module._reinforce(costs, targets, src)
    # by hand: reward-to-go; the old per-token baseline times the scored tokens from each position on
    # (example 0 scores 3 tokens, example 1 two); queries up to the last scored position; N = 5 tokens
    G = torch.stack([costs[:, t:].sum(1) for t in range(3)], 1)
    tokens = torch.tensor([[3.0, 2.0, 1.0], [2.0, 1.0, 0.0]])
    valid = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    rate = torch.tensor([1.0, -2.0, 0.5])
    expected = ((G - rate * tokens) * logp * valid).sum() / 5
    torch.testing.assert_close(term, expected)
    per_token = (G * valid).sum(0) / (tokens * valid).sum(0)
    torch.testing.assert_close(base.value[:3], 0.5 * rate + 0.5 * per_token)


def test_reinforce_options_refuse_bad_values_in_one_line():
    with pytest.raises(VariantConfigError, match="optim.reinforce_samples >= 2"):
        ReinforceSpec(baseline="leave_one_out", samples=1).validate()
    with pytest.raises(VariantConfigError, match="optim.reinforce_reward='token'.*sequence"):
        ReinforceSpec(reward="token").validate()
    with pytest.raises(VariantConfigError, match=r"optim.reinforce_discount=1.5 .* \[0, 1\]"):
        ReinforceSpec(discount=1.5).validate()
    with pytest.raises(VariantConfigError, match="expected_mix=1.5"):
        hard_layer(expected_mix=1.5)


# -- unbiasedness: the estimator's mean gradient equals the exact gradient of the expected loss ---------------------
TARGETS = torch.tensor([[0.5, -1.0, 0.3, 0.8], [1.0, 0.2, -0.7, 0.1]])


def costs_of(out: torch.Tensor) -> torch.Tensor:
    """A causal per-position loss, like a decoder's: c_0 sees output 0, c_1 outputs 0 and 1. (B, T, d) -> (B, T)."""
    c0 = ((out[:, 0] - TARGETS[0]) ** 2).sum(-1)
    c1 = ((3 * out[:, 0] + out[:, 1] - TARGETS[1]) ** 2).sum(-1)
    return torch.stack((c0, c1), 1)


def exact_gradient(layer, x: torch.Tensor, memory: torch.Tensor) -> list[torch.Tensor]:
    """grad of E_a[(c_0 + c_1) / T] by enumerating the S^T joint choices, written out from the layer's weights."""
    params = list(layer.parameters())
    q = x @ layer.w_q.weight.T + layer.w_q.bias  # (T, d)
    k = memory @ layer.w_k.weight.T + layer.w_k.bias  # (S, d)
    v = memory @ layer.w_v.weight.T + layer.w_v.bias
    p = (q @ k.T / math.sqrt(D_MODEL)).softmax(-1)  # (T, S)
    expected = 0.0
    for a in itertools.product(range(S), repeat=T):
        out = (v[list(a)] @ layer.w_o.weight.T + layer.w_o.bias)[None]  # (1, T, d): each query reads its key
        prob = p[0, a[0]] * p[1, a[1]]
        expected = expected + prob * costs_of(out).sum() / T
    return torch.autograd.grad(expected, params)


def estimator_gradients(
    layer,
    x,
    memory,
    *,
    reward: str,
    baseline: Baseline,
    samples: int = 1,
    chunks: int = 30,
    per_chunk: int = 600,
    sign: float = 1.0,
    credit=returns,
) -> torch.Tensor:
    """One gradient estimate per chunk of ``per_chunk`` samples, as the training step composes them:
    (chunks, n_params) flattened."""
    params = list(layer.parameters())
    estimates = []
    for _ in range(chunks):
        out, _ = layer(x.expand(per_chunk, -1, -1), memory.expand(per_chunk, -1, -1))
        costs = costs_of(out)  # (M, T)
        loss = costs.sum() / costs.numel()
        G = credit(costs.detach(), reward)
        valid = torch.ones_like(G)
        features = layer.query_features
        beta = baseline(G, features)
        term = surrogate(G, beta, stack_log_probs([layer.log_probs]), valid, costs.numel())
        baseline.update(G, valid, features)
        grads = torch.autograd.grad(loss + sign * term, params)
        estimates.append(torch.cat([g.flatten() for g in grads]))
    return torch.stack(estimates)


BASELINE_CASES = [
    ("sequence", "none", 1),
    ("position", "none", 1),
    ("position", "moving_average", 1),
    ("sequence", "moving_average", 1),
    ("position", "learned", 1),
    ("position", "leave_one_out", 4),
]


@pytest.mark.parametrize("reward, kind, samples", BASELINE_CASES)
def test_reinforce_gradient_is_unbiased(reward, kind, samples):
    """Mean of 30 chunk estimates (18,000 samples) within 4.5 standard errors (+ 1e-6 of float error) of
    the exact gradient, coordinate by coordinate (two-sided p ~ 7e-6 each, ~5e-4 over the 76 coordinates
    if unbiased), with seeds fixed. The 1e-6 covers the key bias, whose exact gradient is 0 (a shift of
    every key's score by the same amount) and whose estimates are float noise of ~1e-8. The
    score-function part is large here: leaving it out, or flipping its sign, misses the exact gradient by
    dozens of standard errors (checked below)."""
    layer = hard_layer(seed=1)
    gen = torch.Generator().manual_seed(2)
    x, memory = torch.randn(1, T, D_MODEL, generator=gen), torch.randn(1, S, D_MODEL, generator=gen)
    exact = torch.cat([g.flatten() for g in exact_gradient(layer, x[0], memory[0])])
    base = Baseline(kind, decay=0.9, samples=samples, features=D_MODEL, lr=0.05)
    if kind in ("moving_average", "learned"):
        base.value[:T] = torch.tensor([6.0, -4.0])  # deliberately off: a baseline may be wrong, never biased
        base.seen[:T] = True
    torch.manual_seed(5)
    est = estimator_gradients(layer, x, memory, reward=reward, baseline=base, samples=samples)
    assert max_z(est, exact) < 4.5


def max_z(estimates: torch.Tensor, exact: torch.Tensor) -> float:
    mean, se = estimates.mean(0), estimates.std(0) / math.sqrt(estimates.shape[0])
    return float((((mean - exact).abs() - 1e-6).clamp(min=0) / se.clamp(min=1e-12)).max())


PLANTED = {
    "sign flipped": {"sign": -1.0},
    "score term left out": {"sign": 0.0},
    "credit from the start to the position": {"credit": lambda costs, reward: costs.cumsum(1)},
}


@pytest.mark.parametrize("bug", list(PLANTED))
def test_unbiasedness_check_catches_planted_bugs(bug):
    """The check above is far from its threshold on a wrong estimator (max |z| 28 to 35 where
    4.5 is allowed), so it fails on these bugs rather than passing by luck."""
    layer = hard_layer(seed=1)
    gen = torch.Generator().manual_seed(2)
    x, memory = torch.randn(1, T, D_MODEL, generator=gen), torch.randn(1, S, D_MODEL, generator=gen)
    exact = torch.cat([g.flatten() for g in exact_gradient(layer, x[0], memory[0])])
    torch.manual_seed(5)
    est = estimator_gradients(layer, x, memory, reward="position", baseline=Baseline("none"), **PLANTED[bug])
    assert max_z(est, exact) > 10
