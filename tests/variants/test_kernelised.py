"""Kernelised attention (``linear``, ``performer``) against formulas written out here.

The references are independent of the code under test: the quadratic forms are built from the
layer's projections with ``F.elu`` and explicit masks, and the softmax Performer estimates is
``torch.softmax`` of q k^T / sqrt(D).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from experiments.model.transformer import ModelSpec, Transformer, VariantSpec
from tests.helpers.cases import one_thread  # noqa: F401 (one_thread is an autouse fixture)
from variants import ATTENTION, POSITION, KVCache
from variants.checks import VariantConfigError
from variants.pairs import pair_problem

B, T, D_MODEL, HEADS = 2, 11, 16, 4
HEAD_DIM = D_MODEL // HEADS
KERNELISED = [n for n in ATTENTION.names() if not ATTENTION.get(n).supports_score_bias]


def tokens(seed: int = 1, length: int = T, d_model: int = D_MODEL) -> torch.Tensor:
    return torch.randn(B, length, d_model, generator=torch.Generator().manual_seed(seed))


def heads(t: torch.Tensor, dim: int = HEAD_DIM) -> torch.Tensor:
    return t.view(t.shape[0], t.shape[1], -1, dim).transpose(1, 2)  # (B, H, T, D)


def quadratic_linear(layer, x: torch.Tensor, *, causal: bool, pad: torch.Tensor | None) -> torch.Tensor:
    """Katharopoulos et al. eq. 4 written out: sum_j phi(q_i).phi(k_j) v_j / sum_j phi(q_i).phi(k_j),
    phi = elu + 1, over the allowed keys, through the layer's own projections."""
    q, k, v = heads(layer.w_q(x)), heads(layer.w_k(x)), heads(layer.w_v(x))
    group = layer.num_heads // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    sim = (F.elu(q) + 1) @ (F.elu(k) + 1).transpose(-2, -1)  # (B, H, T, T)
    allowed = torch.ones(B, 1, T, T, dtype=torch.bool)
    if causal:
        allowed = allowed & torch.ones(T, T, dtype=torch.bool).tril()
    if pad is not None:
        allowed = allowed & ~pad[:, None, None, :]
    sim = sim * allowed
    out = (sim @ v) / sim.sum(-1, keepdim=True)
    return layer.w_o(out.transpose(1, 2).reshape(B, T, D_MODEL))


# -- linear: the running sums are the quadratic form --------------------------------------------------
@pytest.mark.parametrize("causal", (False, True), ids=("full", "causal"))
@pytest.mark.parametrize("chunk_size", (1, 3, 64))
@pytest.mark.parametrize("num_kv_heads", (None, 2, 1))
def test_linear_running_sums_equal_the_quadratic_form(causal, chunk_size, num_kv_heads):
    torch.manual_seed(0)
    layer = ATTENTION.build(
        "linear", d_model=D_MODEL, num_heads=HEADS, num_kv_heads=num_kv_heads, chunk_size=chunk_size
    ).eval()
    assert layer.backend == "running_sum"
    x = tokens()
    pad = torch.zeros(B, T, dtype=torch.bool)
    pad[1, -4:] = True
    for mask in (None, pad):
        got, _ = layer(x, causal=causal, key_padding_mask=mask)
        want = quadratic_linear(layer, x, causal=causal, pad=mask)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_linear_with_as_many_kv_heads_as_heads_is_ungrouped_exactly():
    torch.manual_seed(0)
    plain = ATTENTION.build("linear", d_model=D_MODEL, num_heads=HEADS, chunk_size=4).eval()
    grouped = ATTENTION.build("linear", d_model=D_MODEL, num_heads=HEADS, num_kv_heads=HEADS, chunk_size=4).eval()
    grouped.load_state_dict(plain.state_dict())
    x = tokens()
    for causal in (False, True):
        torch.testing.assert_close(grouped(x, causal=causal)[0], plain(x, causal=causal)[0], atol=0, rtol=0)


@pytest.mark.parametrize("name", KERNELISED)
@pytest.mark.parametrize("num_kv_heads", (None, 1))
def test_future_tokens_get_exactly_zero_gradient(name, num_kv_heads):
    """d out_t / d x_s = 0 for s > t, across chunk boundaries (chunks of 4 in T = 11)."""
    torch.manual_seed(0)
    layer = ATTENTION.build(name, d_model=D_MODEL, num_heads=HEADS, num_kv_heads=num_kv_heads, chunk_size=4).eval()
    x = tokens().requires_grad_(True)
    out, _ = layer(x, causal=True)
    for t in (0, 3, 4, 6, T - 2):
        (grad,) = torch.autograd.grad(out[:, t].sum(), x, retain_graph=True)
        assert (grad[:, t + 1 :] == 0).all(), t
        assert grad[:, t].abs().sum() > 0 and grad[:, 0].abs().sum() > 0  # not vacuous: the past does count


@pytest.mark.parametrize("name", KERNELISED)
def test_decoding_state_does_not_grow_and_equals_recomputation(name):
    torch.manual_seed(0)
    layer = ATTENTION.build(name, d_model=D_MODEL, num_heads=HEADS, num_kv_heads=2, chunk_size=4).eval()
    x = tokens(length=T)
    full, _ = layer(x, causal=True)
    cache = KVCache()
    prefix, _ = layer(x[:, :5], causal=True, cache=cache)  # a prompt in one call, then one token at a time
    shapes = {(tuple(cache.state.kv.shape), tuple(cache.state.k_sum.shape))}
    steps = [prefix]
    for t in range(5, T):
        steps.append(layer(x[:, t : t + 1], causal=True, cache=cache)[0])
        shapes.add((tuple(cache.state.kv.shape), tuple(cache.state.k_sum.shape)))
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    m = layer.num_features
    assert shapes == {((B, 2, m, HEAD_DIM), (B, 2, m))} and cache.k is None and cache.state.keys == T
    with pytest.raises(ValueError, match="need_weights=True"):
        layer(x[:, :1], causal=True, cache=cache, need_weights=True)


# -- performer: the estimate converges to softmax attention -------------------------------------------
def softmax_attention(layer, x: torch.Tensor, causal: bool) -> torch.Tensor:
    q, k, v = heads(layer.w_q(x)), heads(layer.w_k(x)), heads(layer.w_v(x))
    scores = q @ k.transpose(-2, -1) / math.sqrt(HEAD_DIM)
    if causal:
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v  # (B, H, T, D)
    return layer.w_o(out.transpose(1, 2).reshape(B, T, D_MODEL))


@pytest.mark.parametrize("causal", (False, True), ids=("full", "causal"))
def test_performer_converges_to_softmax_attention_as_features_grow(causal):
    """Mean |estimate - softmax| over 4 feature draws each: a Monte Carlo error, so it falls like
    1/sqrt(m); from 16 to 4096 features (x256) it must fall well over 4-fold, and keep falling."""
    x = tokens(seed=3)
    errors = {}
    for m in (16, 256, 4096):
        per_draw = []
        for draw in range(4):
            torch.manual_seed(0)  # the same projections for every m and draw ...
            layer = ATTENTION.build("performer", d_model=D_MODEL, num_heads=HEADS, num_features=m).eval()
            with torch.no_grad():
                layer.feature_seed.fill_(1000 * draw + 7)  # ... and a different feature draw
                layer.projection.copy_(layer.draw(0))
                want = softmax_attention(layer, x, causal)
                got, _ = layer(x, causal=causal)
            per_draw.append((got - want).abs().mean().item())
        errors[m] = sum(per_draw) / len(per_draw)
    assert errors[256] < errors[16] and errors[4096] < errors[256], errors
    assert errors[4096] < errors[16] / 4, errors


def test_performer_features_are_orthogonal_within_a_block():
    torch.manual_seed(0)
    layer = ATTENTION.build("performer", d_model=D_MODEL, num_heads=HEADS, num_features=10)
    w = layer.projection  # (10, D): blocks of D = 4 rows
    assert w.shape == (10, HEAD_DIM)
    for block in (w[0:4], w[4:8]):
        gram = block @ block.t()
        torch.testing.assert_close(gram - torch.diag(gram.diagonal()), torch.zeros(4, 4), atol=1e-5, rtol=0)


def test_performer_redraws_on_schedule_only_in_training_and_reproducibly():
    torch.manual_seed(0)
    layer = ATTENTION.build("performer", d_model=D_MODEL, num_heads=HEADS, redraw_every=2)
    torch.manual_seed(0)
    twin = ATTENTION.build("performer", d_model=D_MODEL, num_heads=HEADS, redraw_every=2)
    x = tokens()
    first = layer.projection.clone()
    layer.eval()
    for _ in range(3):
        layer(x)
    assert torch.equal(layer.projection, first), "evaluation never redraws"
    layer.train()
    layer(x)
    assert torch.equal(layer.projection, first)
    layer(x)  # the second training call: a new draw
    assert not torch.equal(layer.projection, first)
    twin.train()
    twin(x), twin(x)
    assert torch.equal(twin.projection, layer.projection), "the same seed redraws the same features"
    resumed = ATTENTION.build("performer", d_model=D_MODEL, num_heads=HEADS, redraw_every=2)
    resumed.load_state_dict(layer.state_dict())  # a checkpoint carries the features and the count
    assert torch.equal(resumed.projection, layer.projection) and int(resumed.calls) == 2

    torch.manual_seed(0)
    fixed = ATTENTION.build("performer", d_model=D_MODEL, num_heads=HEADS, redraw_every=0).train()
    before = fixed.projection.clone()
    for _ in range(3):
        fixed(x)
    assert torch.equal(fixed.projection, before)


# -- which encodings compose, and the one-line refusal ----------------------------------------------------
def test_declarations_place_score_biases_out_of_kernelised_attention():
    """Not vacuous: the capability says what the literature does (no score bias in phi(q) . phi(k);
    rotary applied to q and k before the feature map)."""
    linear = ATTENTION.get("linear")
    assert pair_problem(linear, POSITION.build("alibi", d_model=D_MODEL, num_heads=HEADS)) is not None
    assert pair_problem(linear, POSITION.build("rope", d_model=D_MODEL, num_heads=HEADS)) is None
    assert pair_problem(ATTENTION.get("multihead"), POSITION.build("alibi", d_model=D_MODEL, num_heads=HEADS)) is None


def every_pair() -> list:
    return [pytest.param(a, p, id=f"{a}-{p}") for a in ATTENTION.names() for p in POSITION.names()]


@pytest.mark.parametrize("attention, position", every_pair())
def test_a_pair_that_cannot_compose_is_refused_at_build_time_in_one_line(attention, position):
    encoding = POSITION.build(position, d_model=D_MODEL, num_heads=2)
    spec = ModelSpec(
        arch="decoder",
        vocab_size=12,
        attention=VariantSpec(attention, {"num_heads": 2}),
        position=VariantSpec(position),
        d_model=D_MODEL,
        ffn_dim=32,
        decoder_layers=1,
        dropout=0.0,
    )
    if pair_problem(ATTENTION.get(attention), encoding) is None:
        Transformer(spec)  # builds
        return
    with pytest.raises(VariantConfigError) as err:
        Transformer(spec)
    message = str(err.value)
    assert f"attention={attention!r}" in message and f"position={position!r}" in message and "\n" not in message


def test_preflight_refuses_an_incompatible_pair_in_one_line():
    from experiments.app.preflight import preflight

    with pytest.raises(VariantConfigError) as err:
        preflight(["attention=performer", "position=t5"])
    assert "attention='performer'" in str(err.value) and "position='t5'" in str(err.value)
    assert "\n" not in str(err.value)


def test_preflight_refuses_an_incompatible_pair_set_through_a_self_attention_role():
    from experiments.app.preflight import PreflightError, preflight

    with pytest.raises(PreflightError) as err:
        preflight(["attention@model.encoder_attention=linear", "position=alibi"])
    message = str(err.value)
    assert message.startswith("model.encoder_attention:") and "attention='linear'" in message
    assert "position='alibi'" in message and "\n" not in message
    # cross attention takes no position hooks, and a decoder-only model builds no encoder: both compose
    preflight(["attention@model.cross_attention=linear", "position=alibi"])
    preflight(["model.arch=decoder", "attention@model.encoder_attention=linear", "position=alibi"])


@pytest.mark.parametrize("name", KERNELISED)
def test_attention_dropout_is_refused_in_one_line(name):
    with pytest.raises(VariantConfigError, match="dropout=0.1") as err:
        ATTENTION.build(name, d_model=D_MODEL, num_heads=HEADS, dropout=0.1)
    assert "\n" not in str(err.value)


# -- decoding cost: the bench's cache accounting and its command -------------------------------------------
def test_a_recurrent_cache_holds_the_same_bytes_after_any_prompt(tmp_path):
    """What the decode bench reports: linear's cache is the same size after 8 and 64 prompt tokens;
    multihead's keys and values grow 8-fold; and the command decodes the same tokens either way."""
    import json

    from experiments.bench import main
    from experiments.bench.decode import cache_bytes
    from experiments.bench.generation import generation_model

    sizes = {}
    for name in ("linear", "multihead"):
        torch.manual_seed(0)
        model = generation_model(
            vocab=20, d_model=16, heads=2, layers=2, ffn=32, max_len=64, device=torch.device("cpu"), attention=name
        )
        for prompt in (8, 64):
            caches = model.new_caches()
            with torch.no_grad():
                model.decode(torch.randint(4, 20, (1, prompt)), caches=caches)
            sizes[name, prompt] = cache_bytes(caches)
    assert sizes["linear", 8] == sizes["linear", 64] > 0
    assert sizes["multihead", 64] == 8 * sizes["multihead", 8]

    out = tmp_path / "decode.json"
    assert (
        main(
            [
                "decode",
                "--variant",
                "linear",
                "multihead:num_kv_heads=1",
                "--prompts",
                "4",
                "--tokens",
                "3",
                "--d-model",
                "16",
                "--layers",
                "1",
                "--rounds",
                "1",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    rows = json.loads(out.read_text())["rows"]
    assert [r["variant"] for r in rows] == ["linear", "multihead:num_kv_heads=1"]
    assert all(r["same_tokens"] == 1.0 and r["speedup"] > 0 for r in rows)
