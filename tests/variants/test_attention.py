"""Invariants of every attention type under every position encoding.

Parametrised over the registries (and each entry's declared options), so a
newly registered variant is tested with no edit here. Tensors are tiny: the
point is the masking and the arithmetic, not the speed.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.helpers.cases import cases, one_thread, skip_if_incompatible  # noqa: F401 (one_thread is an autouse fixture)
from variants import ATTENTION, POSITION, reinforce_terms
from variants.attention.hard import ESTIMATORS
from variants.attention.local import MODES
from variants.attention.scores import SCORES

B, T, S, D_MODEL, HEADS = 2, 9, 6, 16, 2
#: small settings for any variant that takes them, so windows and blocks are exercised at T <= 12
SMALL = {"window": 2, "block_size": 4, "chunk_size": 4}
CALLS = ("self", "causal", "cross")


ATTENTION_CASES = cases(ATTENTION)
POSITION_CASES = cases(POSITION)
pairs = pytest.mark.parametrize("attention, a_params", ATTENTION_CASES)
positions = pytest.mark.parametrize("position, p_params", POSITION_CASES)
calls = pytest.mark.parametrize("call", CALLS)


def build(attention: str, a_params: dict, position: str, p_params: dict, **extra):
    skip_if_incompatible(attention, position, p_params)
    torch.manual_seed(0)
    accepted = ATTENTION.accepted_params(attention)
    params = {k: v for k, v in SMALL.items() if k in accepted} | a_params | extra
    layer = ATTENTION.build(attention, d_model=D_MODEL, num_heads=HEADS, **params)
    return layer, POSITION.build(position, d_model=D_MODEL, num_heads=HEADS, **p_params)


def inputs(call: str, batch: int = B, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Tokens, memory (cross only) and a key padding mask: the last 3 keys of element 1 are padding,
    and with ``batch=3`` every key of element 2, so its queries have nothing to read."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, T, D_MODEL, generator=gen)
    memory = torch.randn(batch, S, D_MODEL, generator=gen) if call == "cross" else None
    pad = torch.zeros(batch, S if call == "cross" else T, dtype=torch.bool)
    pad[1, -3:] = True
    pad[2:] = True
    return x, memory, pad


def run(layer, pos, x, memory, pad, call, **kwargs):
    """The layer as a model calls it: absolute encodings are added to the embeddings first."""
    x = pos.embed(x, torch.arange(x.shape[1]))
    if memory is not None:
        memory = pos.embed(memory, torch.arange(memory.shape[1]))
    return layer(x, memory, causal=call == "causal", key_padding_mask=pad, position=pos, **kwargs)


def allowed_keys(call: str, pad: torch.Tensor) -> torch.Tensor:
    """(B, 1, Tq, Tk) True where the query may see the key."""
    allowed = ~pad[:, None, None, :].expand(-1, 1, T, -1)
    if call == "causal":
        allowed = allowed & torch.ones(T, T, dtype=torch.bool).tril()
    return allowed


# -- every pair runs, forward and backward ----------------------------------------------------------------
@pairs
@positions
@calls
def test_forward_backward_finite(attention, a_params, position, p_params, call):
    """Every pair runs forward and backward with padding; a query with no key at all (element 2)
    reads nothing, so its output is W_o applied to zero, and nothing is NaN."""
    layer, pos = build(attention, a_params, position, p_params)
    layer.train()
    x, memory, pad = inputs(call, batch=3)
    leaves = [t.requires_grad_(True) for t in (x, memory) if t is not None]
    out, weights = run(layer, pos, x, memory, pad, call, need_weights=True)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    fast, _ = run(layer, pos, x, memory, pad, call)
    torch.testing.assert_close(fast[2], layer.w_o(torch.zeros(T, D_MODEL)))
    loss = (out * torch.randn_like(out)).sum() + fast.square().mean()
    loss = loss + sum(term.sum() for term in reinforce_terms(layer))
    loss.backward()
    for leaf in leaves:
        assert torch.isfinite(leaf.grad).all() and leaf.grad[:2].abs().sum() > 0
    for name, param in [*layer.named_parameters(), *pos.named_parameters()]:
        if param.grad is not None:
            assert torch.isfinite(param.grad).all(), name


# -- masking ------------------------------------------------------------------------------------------
@pairs
@positions
def test_causal_future_does_not_change_the_past(attention, a_params, position, p_params):
    layer, pos = build(attention, a_params, position, p_params)
    layer.eval()
    x, _, pad = inputs("causal")
    pad[:] = False
    out, _ = run(layer, pos, x, None, pad, "causal")
    for t in (0, 3, T - 2):
        changed = x.clone()
        changed[:, t + 1 :] = torch.randn_like(changed[:, t + 1 :])
        out_changed, _ = run(layer, pos, changed, None, pad, "causal")
        torch.testing.assert_close(out_changed[:, : t + 1], out[:, : t + 1], atol=1e-6, rtol=0)


@pairs
@positions
@calls
def test_padded_keys_have_no_influence(attention, a_params, position, p_params, call):
    layer, pos = build(attention, a_params, position, p_params)
    layer.eval()
    x, memory, pad = inputs(call)
    out, _ = run(layer, pos, x, memory, pad, call)
    noise = torch.randn(B, pad.shape[1], D_MODEL) * 3 * pad[..., None]  # only padded tokens change
    if call == "cross":
        changed, _ = run(layer, pos, x, memory + noise, pad, call)
        torch.testing.assert_close(changed, out, atol=1e-6, rtol=0)
    else:
        changed, _ = run(layer, pos, x + noise, None, pad, call)
        real = ~pad  # a padded query's own output may change; real queries' must not
        torch.testing.assert_close(changed[real], out[real], atol=1e-6, rtol=0)


# -- soft attention: a distribution over the allowed keys -------------------------------------------------
@pytest.mark.parametrize("attention, a_params", [c for c in ATTENTION_CASES if c.values[0] in ("soft", "multihead")])
@positions
@calls
def test_soft_weights_sum_to_one_over_allowed_keys(attention, a_params, position, p_params, call):
    layer, pos = build(attention, a_params, position, p_params)
    x, memory, pad = inputs(call)
    _, weights = run(layer, pos, x, memory, pad, call, need_weights=True)  # (B, H, Tq, Tk)
    allowed = allowed_keys(call, pad).expand_as(weights)
    assert (weights[~allowed] == 0).all()
    assert (weights[allowed] > 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, HEADS, T))


# -- hard attention -------------------------------------------------------------------------------------
@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@positions
@calls
def test_hard_weights_are_exactly_one_hot(estimator, training, position, p_params, call):
    layer, pos = build("hard", {"estimator": estimator}, position, p_params)
    layer.train(training)
    x, memory, pad = inputs(call, batch=3)
    _, weights = run(layer, pos, x, memory, pad, call, need_weights=True)  # (B, H, Tq, Tk)
    allowed = allowed_keys(call, pad).expand_as(weights)
    has_key = allowed.any(-1)  # (B, H, Tq)
    assert ((weights == 0) | (weights == 1)).all()
    assert (weights.sum(-1)[has_key] == 1).all()
    assert (weights[~has_key] == 0).all()
    assert (weights[~allowed] == 0).all()  # the chosen key is always an allowed one


@pytest.mark.parametrize("estimator", ["straight_through", "gumbel"])
@pytest.mark.parametrize("score", SCORES)
def test_hard_surrogate_gradients_reach_query_and_key_projections(estimator, score):
    layer, pos = build("hard", {"estimator": estimator, "score": score}, "none", {})
    layer.train()
    x, _, pad = inputs("causal")
    out, _ = run(layer, pos, x, None, pad, "causal")
    (out * torch.randn_like(out)).sum().backward()
    assert layer.w_q.weight.grad.abs().sum() > 0
    assert layer.w_k.weight.grad.abs().sum() > 0


@positions
@calls
def test_reinforce_exposes_log_probabilities(position, p_params, call):
    layer, pos = build("hard", {"estimator": "reinforce"}, position, p_params)
    model = nn.ModuleList([layer, ATTENTION.build("soft", d_model=D_MODEL)])
    layer.train()
    x, memory, pad = inputs(call, batch=3)
    _, weights = run(layer, pos, x, memory, pad, call, need_weights=True)
    terms = reinforce_terms(model)
    assert len(terms) == 1 and terms[0] is layer.log_probs
    log_probs = layer.log_probs
    assert log_probs.shape == (3, HEADS, T) and torch.isfinite(log_probs).all()
    assert (log_probs[2] == 0).all()  # no key, no choice, no term
    assert (log_probs[:2] <= 0).all()
    log_probs.sum().backward()  # the score-function gradient reaches the scores
    assert layer.w_q.weight.grad.abs().sum() > 0

    layer.eval()
    run(layer, pos, x, memory, pad, call)
    assert layer.log_probs is None and reinforce_terms(model) == []


# -- local attention: the window is exact ------------------------------------------------------------------
LOCAL_CALLS = [("self", 1.0), ("causal", 1.0), ("cross", 1.0), ("cross", 0.5), ("cross", 1.7)]


def expected_centre(call: str, ratio: float, i: int, real_keys: int) -> int:
    """Monotonic alignment: p_i = i in self attention, round(ratio * i) clamped to the last real key in cross."""
    if call == "causal":
        return i
    return min(round(ratio * i), real_keys - 1)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("call, ratio", LOCAL_CALLS, ids=[f"{c}-ratio={r}" for c, r in LOCAL_CALLS])
@positions
def test_local_keys_outside_the_window_get_zero_weight_and_no_influence(mode, call, ratio, position, p_params):
    window = 2
    layer, pos = build("local", {"mode": mode}, position, p_params, window=window, ratio=ratio, block_size=3)
    layer.eval()
    x, memory, pad = inputs(call)
    _, weights = run(layer, pos, x, memory, pad, call, need_weights=True)  # (B, H, Tq, Tk)
    allowed = allowed_keys(call, pad).expand_as(weights)
    assert (weights[~allowed] == 0).all()
    support = weights != 0
    for b in range(B):
        real = int((~pad[b]).sum())
        for i in range(T):
            for h in range(HEADS):
                keys = support[b, h, i].nonzero().flatten().tolist()
                if mode == "monotonic":
                    c = expected_centre(call, ratio, i, real)
                    inside = [j for j in range(pad.shape[1]) if abs(j - c) <= window and allowed[b, h, i, j]]
                    assert keys == inside, (b, h, i)
                elif keys:
                    assert keys[-1] - keys[0] <= 2 * window, (b, h, i, keys)

    out, _ = run(layer, pos, x, memory, pad, call)  # the banded path where there is one
    for i in (0, T // 2, T - 1):
        outside = [j for j in range(pad.shape[1]) if not support[:, :, i, j].any() and not (call != "cross" and j == i)]
        noise = torch.zeros(B, pad.shape[1], D_MODEL)
        noise[:, outside] = 3 * torch.randn(B, len(outside), D_MODEL)
        if call == "cross":
            changed, _ = run(layer, pos, x, memory + noise, pad, call)
        else:
            changed, _ = run(layer, pos, x + noise, None, pad, call)
        torch.testing.assert_close(changed[:, i], out[:, i], atol=1e-6, rtol=0)
