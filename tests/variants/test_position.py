"""Position encodings: relative ones see only j - i, absolute ones match their definitions."""

from __future__ import annotations

import math

import pytest
import torch

from tests.helpers.cases import SMALL, cases, one_thread, positions, skip_if_incompatible  # noqa: F401 (one_thread is an autouse fixture)
from variants import ATTENTION, POSITION, KVCache, PositionEncoding
from variants.position.alibi import alibi_slopes
from variants.position.learned import SequenceTooLongError
from variants.position.t5 import t5_bucket

B, T, D_MODEL, HEADS = 2, 9, 16, 2
HEAD_DIM = D_MODEL // HEADS


def build_position(position: str, p_params: dict) -> PositionEncoding:
    torch.manual_seed(0)
    pos = POSITION.build(position, d_model=D_MODEL, num_heads=HEADS, **p_params)
    for param in pos.parameters():  # learned tables start near zero; make differences visible
        torch.nn.init.normal_(param)
    return pos


def hook_logits(pos: PositionEncoding, q: torch.Tensor, k: torch.Tensor, q_pos, k_pos) -> torch.Tensor:
    """What a scaled dot-product layer computes from the hooks: (B, H, Tq, Tk)."""
    q, k = pos.rotate(q, k, q_pos, k_pos)
    scores = q @ k.transpose(-2, -1) / math.sqrt(HEAD_DIM)
    bias = pos.score_bias(q, q_pos, k_pos)
    return scores if bias is None else scores + bias


def is_relative(pos: PositionEncoding) -> bool:
    """Does the encoding act inside attention at all (rather than on the embeddings)?"""
    cls = type(pos)
    return any(
        getattr(cls, hook) is not getattr(PositionEncoding, hook) for hook in ("rotate", "score_bias", "value_term")
    )


# -- translation invariance ------------------------------------------------------------------------------
@positions
@pytest.mark.parametrize("shift", [1, 7, 40])
def test_hooks_depend_on_relative_position_only(position, p_params, shift):
    pos = build_position(position, p_params)
    if not pos.translation_invariant:
        pytest.skip(f"{position} declares translation_invariant=False (its terms read absolute positions)")
    q, k = torch.randn(B, HEADS, 5, HEAD_DIM), torch.randn(B, HEADS, 8, HEAD_DIM)
    q_pos, k_pos = torch.arange(3, 8), torch.arange(8)  # queries not aligned with keys, as in a cached step
    logits = hook_logits(pos, q, k, q_pos, k_pos)
    torch.testing.assert_close(hook_logits(pos, q, k, q_pos + shift, k_pos + shift), logits, atol=1e-5, rtol=1e-5)
    weights = torch.rand(B, HEADS, 5, 8).softmax(-1)
    values = pos.value_term(weights, q_pos, k_pos)
    if values is not None:
        torch.testing.assert_close(pos.value_term(weights, q_pos + shift, k_pos + shift), values)
    if is_relative(pos):  # not vacuous: moving the keys alone does change the scores
        assert not torch.allclose(hook_logits(pos, q, k, q_pos, k_pos + shift), logits, atol=1e-4)


@pytest.mark.parametrize("attention, a_params", cases(ATTENTION))
@positions
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_layer_is_translation_invariant(attention, a_params, position, p_params, causal):
    """The same sequence placed at positions 0.. and at 23.. (via a fresh ``KVCache(offset=23)``)."""
    skip_if_incompatible(attention, position, p_params)
    torch.manual_seed(0)
    accepted = ATTENTION.accepted_params(attention)
    layer = ATTENTION.build(
        attention, d_model=D_MODEL, num_heads=HEADS, **({k: v for k, v in SMALL.items() if k in accepted} | a_params)
    ).eval()
    pos = build_position(position, p_params)
    if not pos.translation_invariant:
        pytest.skip(f"{position} declares translation_invariant=False (its terms read absolute positions)")
    rotary = type(pos).rotate is not PositionEncoding.rotate
    if rotary and not layer.rotary_relative:
        # R_i q . R_j k = q . R_(j-i) k holds for a dot product only; tanh(R_i q + R_j k), q R_i W R_j k,
        # a window predictor reading R_i q and a feature map phi(R_i q) all see absolute positions.
        pytest.skip("rotary encodings are relative under dot-product scores only (layer.rotary_relative)")
    x = torch.randn(B, T, D_MODEL)
    for need_weights in (True, False):  # the reference path, then the fast one
        at_zero = layer(x, causal=causal, position=pos, need_weights=need_weights)
        shifted = layer(x, causal=causal, position=pos, need_weights=need_weights, cache=KVCache(offset=23))
        for want, got in zip(at_zero, shifted):
            if want is not None:
                torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


# -- absolute encodings ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("d_model", [16, 15])
def test_sinusoidal_matches_its_formula(d_model):
    pos = POSITION.build("sinusoidal", d_model=d_model, num_heads=1)
    positions = torch.arange(0, 64, 3)
    table = pos.embed(torch.zeros(1, len(positions), d_model), positions)[0]  # (T, d)
    for row, p in enumerate(positions.tolist()):
        for col in range(d_model):
            angle = p / 10000 ** (2 * (col // 2) / d_model)
            want = math.sin(angle) if col % 2 == 0 else math.cos(angle)
            assert abs(float(table[row, col]) - want) < 1e-5, (p, col)


def test_learned_adds_one_row_per_position_and_refuses_longer_inputs():
    pos = POSITION.build("learned", d_model=D_MODEL, num_heads=HEADS, max_len=8)
    x = torch.randn(B, 8, D_MODEL)
    out = pos.embed(x, torch.arange(8))
    torch.testing.assert_close(out - x, pos.table.weight[None].expand(B, -1, -1))
    with pytest.raises(SequenceTooLongError) as info:
        pos.embed(torch.randn(B, 9, D_MODEL), torch.arange(9))
    message = str(info.value)
    assert "max_len=8" in message and "length 9" in message and "\n" not in message
    assert isinstance(info.value, ValueError)
    with pytest.raises(SequenceTooLongError, match="length 12"):  # a cached step past the table
        pos.embed(torch.randn(B, 1, D_MODEL), torch.tensor([11]))


def test_a_table_as_long_as_the_target_generates_it_and_refuses_one_token_more():
    """The model declares each forward's length from its shapes, so the table's check reads nothing from
    the device; generation declares prompt + new tokens, one more than it feeds back, and still fits."""
    from experiments.model.transformer import ModelSpec, Transformer, VariantSpec

    T = 6
    spec = ModelSpec(
        arch="seq2seq",
        vocab_size=20,
        attention=VariantSpec("multihead", {"num_heads": 2}),
        position=VariantSpec("learned", {"max_len": T}),
        d_model=16,
        ffn_dim=32,
        encoder_layers=1,
        decoder_layers=1,
    )
    model = Transformer(spec).eval()
    src = torch.randint(4, 20, (2, T))
    assert model(src, torch.randint(4, 20, (2, T))).shape == (2, T, 20)  # training at the table's length
    for use_cache in (True, False):  # positions 0 .. T-1 fed back: the whole table, never past it
        assert model.generate(torch.ones(2, 1, dtype=torch.long), T, src=src, use_cache=use_cache).shape == (2, T)
    with pytest.raises(SequenceTooLongError, match=f"max_len={T} but saw a sequence of length {T + 1}"):
        model(src, torch.randint(4, 20, (2, T + 1)))


# -- the relative encodings' own definitions -------------------------------------------------------------------
def test_alibi_slopes_follow_the_paper():
    assert alibi_slopes(8).tolist() == [2.0**-i for i in range(1, 9)]
    # 6 heads: the 4-head slopes, then every other one of the 8-head slopes
    assert alibi_slopes(6).tolist() == [2.0**-i for i in (2, 4, 6, 8)] + [2.0**-1, 2.0**-3]
    pos = POSITION.build("alibi", d_model=D_MODEL, num_heads=HEADS)
    bias = pos.score_bias(torch.zeros(1, HEADS, 4, HEAD_DIM), torch.arange(4), torch.arange(6))[0]  # (H, Tq, Tk)
    distance = (torch.arange(6)[None, :] - torch.arange(4)[:, None]).abs().float()
    torch.testing.assert_close(bias, -alibi_slopes(HEADS)[:, None, None] * distance)


def test_relative_distances_are_clipped_at_max_distance():
    pos = build_position("relative", {"max_distance": 2, "values": True})
    q = torch.randn(1, HEADS, 1, HEAD_DIM)
    bias = pos.score_bias(q, torch.tensor([10]), torch.arange(21))[0, :, 0]  # (H, 21): distances -10..10
    assert (bias[:, :9] == bias[:, :1]).all() and (bias[:, 12:] == bias[:, -1:]).all()  # beyond +-2: one bucket
    assert len({round(v, 6) for v in bias[0, 8:13].tolist()}) == 5  # -2..2: a vector each
    one_hot = torch.zeros(1, HEADS, 1, 21)
    one_hot[..., 0] = 1.0  # all weight on the key 10 positions back
    torch.testing.assert_close(pos.value_term(one_hot, torch.tensor([10]), torch.arange(21))[0, 0, 0], pos.values[0])


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_buckets_are_exact_when_near_and_logarithmic_when_far(bidirectional):
    num_buckets, max_distance = 32, 128
    distance = torch.arange(-300, 301)[None, :]  # j - i
    bucket = t5_bucket(distance, num_buckets, max_distance, bidirectional)[0]
    assert bucket.min() >= 0 and bucket.max() < num_buckets
    past = bucket[distance[0] <= 0].flip(0)  # distance 0, -1, -2, ...
    assert (past[1:] >= past[:-1]).all()  # farther never maps to a nearer bucket
    exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
    assert past[:exact].tolist() == list(range(exact))
    assert past[max_distance:].unique().numel() == 1  # everything beyond max_distance shares the last bucket
    future = bucket[distance[0] > 0]
    if bidirectional:
        assert set(future.tolist()).isdisjoint(past.tolist())
    else:
        assert (future == 0).all()  # a causal model never sees the future; it shares the "here" bucket


@pytest.mark.parametrize("base", [10000.0, 100.0])
def test_rope_matches_its_formula(base):
    """Su et al.: the pair (x_i, x_(i+D/2)) at position p turns by the angle p * theta_i,
    theta_i = base^(-2i/D), i < D/2 (the half-split pairing of GPT-NeoX and Llama)."""
    kwargs = {} if base == 10000.0 else {"base": base}
    pos = POSITION.build("rope", d_model=D_MODEL, num_heads=HEADS, **kwargs)
    positions = torch.tensor([0, 1, 2, 5, 17, 63])
    q = torch.randn(1, HEADS, len(positions), HEAD_DIM)
    q_rot, _ = pos.rotate(q, q, positions, positions)
    half = HEAD_DIM // 2
    theta = torch.tensor([base ** (-2 * i / HEAD_DIM) for i in range(half)], dtype=torch.float64)  # (D/2,)
    turn = torch.polar(
        torch.ones(len(positions), half, dtype=torch.float64), positions.double()[:, None] * theta[None, :]
    )  # (T, D/2): e^(i p theta)
    z = torch.complex(q[..., :half].double(), q[..., half:].double()) * turn
    torch.testing.assert_close(q_rot.double(), torch.cat((z.real, z.imag), dim=-1), atol=1e-5, rtol=1e-5)


def test_rope_rotates_without_changing_lengths():
    pos = POSITION.build("rope", d_model=D_MODEL, num_heads=HEADS)
    q, k = torch.randn(B, HEADS, 5, HEAD_DIM), torch.randn(B, HEADS, 5, HEAD_DIM)
    q_rot, k_rot = pos.rotate(q, k, torch.arange(5), torch.arange(5))
    torch.testing.assert_close(q_rot.norm(dim=-1), q.norm(dim=-1))
    torch.testing.assert_close(q_rot[:, :, 0], q[:, :, 0])  # position 0 is the identity
    assert not torch.allclose(k_rot[:, :, 1:], k[:, :, 1:])
