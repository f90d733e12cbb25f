"""Absolute position terms enter the residual stream at the token embeddings' scale.

Under every ``model.embedding`` convention, at initialisation, the RMS of the term an
encoding adds to the embeddings lies within BAND of the RMS of the token term; an encoding
that adds nothing adds exactly nothing. Parametrised over the POSITION registry, so a new
absolute encoding is held to the rule the moment it is registered.
"""

from __future__ import annotations

import math

import pytest
import torch

from experiments.config.schema import EMBEDDINGS
from experiments.model.transformer import ModelSpec, Transformer, VariantSpec
from variants import POSITION

D_MODEL, VOCAB, T, PAD = 64, 97, 64, 0
# The paper's sinusoid has RMS 1/sqrt(2) against unit-RMS tokens (0.71); a learned table starts
# at the tokens' RMS (1.0). A factor of two either way is a handicap in the making: the old
# sinusoid over GPT-2's 0.02 embeddings was 35x, a 0.02 learned table over scaled ones 0.02x.
BAND = (0.5, 1.5)
# The token table's input factor per convention, from its definition (not from the model)
INPUT_FACTOR = {"scaled": math.sqrt(D_MODEL), "gpt2": 1.0}


def rms(x: torch.Tensor) -> float:
    return float(x.detach().double().pow(2).mean().sqrt())


def stacks(position: str, embedding: str, arch: str = "seq2seq") -> list:
    torch.manual_seed(0)
    spec = ModelSpec(
        arch=arch,
        vocab_size=VOCAB,
        attention=VariantSpec("multihead", {"num_heads": 4}),
        position=VariantSpec(position),
        d_model=D_MODEL,
        embedding=embedding,
        pad_id=PAD,
    )
    model = Transformer(spec).eval()  # no dropout: the embedding is exactly token + position
    return [s for s in (model.encoder, model.decoder) if s is not None]


def terms(stack, embedding: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(token term, position term) of the stack's input for every non-pad token at positions 0..T-1."""
    tokens = torch.arange(1, T + 1)[None]  # (1, T), no pad (T < VOCAB)
    with torch.no_grad():
        token = stack.embedding.weight[tokens] * INPUT_FACTOR[embedding]  # (1, T, d)
        return token, stack.embed(tokens) - token


@pytest.mark.parametrize("embedding", EMBEDDINGS)
@pytest.mark.parametrize("position", POSITION.names())
def test_position_term_starts_at_the_token_scale(position, embedding):
    for stack in stacks(position, embedding):
        token, term = terms(stack, embedding)
        if not type(stack.position).adds_to_embeddings:
            assert not term.any(), f"{position} adds to the embeddings but does not declare adds_to_embeddings"
            continue
        ratio = rms(term) / rms(token)
        assert BAND[0] <= ratio <= BAND[1], (position, embedding, ratio)


def test_the_token_term_has_the_conventions_scale():
    """The reference the band is measured against: unit RMS under "scaled", 0.02 under "gpt2"."""
    for embedding, want in (("scaled", 1.0), ("gpt2", 0.02)):
        table = stacks("none", embedding, "decoder")[0].embedding.weight[1:]  # the pad row is zero
        assert rms(table * INPUT_FACTOR[embedding]) == pytest.approx(want, rel=0.05)


def test_gpt2_keeps_nanogpts_learned_table():
    """Under "gpt2" the learned term is the table itself (std 0.02, factor 1), as in nanoGPT."""
    stack = stacks("learned", "gpt2", "decoder")[0]
    token, term = terms(stack, "gpt2")
    torch.testing.assert_close(term[0], stack.position.table.weight[:T], rtol=0, atol=1e-7)
    assert rms(stack.position.table.weight) == pytest.approx(0.02, rel=0.05)


def test_sinusoid_keeps_the_papers_amplitude_under_scaled_embeddings():
    """Under "scaled" the sinusoid is added at amplitude 1, as in "Attention Is All You Need"."""
    stack = stacks("sinusoidal", "scaled", "decoder")[0]
    _, term = terms(stack, "scaled")
    pos = torch.arange(T, dtype=torch.float64)[:, None]
    i = torch.arange(0, D_MODEL, 2, dtype=torch.float64)[None]
    want = torch.stack((torch.sin(pos / 10000 ** (i / D_MODEL)), torch.cos(pos / 10000 ** (i / D_MODEL))), -1)
    torch.testing.assert_close(term[0].double(), want.reshape(T, D_MODEL), rtol=0, atol=1e-5)
