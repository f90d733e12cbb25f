"""The Transformer: generation with the cache, pooling, per-role attention, causality at model level."""

from __future__ import annotations

import pytest
import torch

from experiments.model.transformer import ModelSpec, Transformer, VariantSpec
from experiments.tasks.batches import IGNORE, concat_io, lm_io, seq2seq_io
from tests.helpers.cases import skip_if_incompatible
from variants import ATTENTION, POSITION

VOCAB, PAD, BOS, EOS = 12, 0, 1, 2


def tiny(arch: str, attention: str = "multihead", position: str = "sinusoidal", **kw) -> Transformer:
    torch.manual_seed(0)
    spec = ModelSpec(
        arch=arch,
        vocab_size=VOCAB,
        attention=VariantSpec(attention, {"num_heads": 2}),
        position=VariantSpec(position),
        d_model=16,
        ffn_dim=32,
        encoder_layers=2,
        decoder_layers=2,
        dropout=0.0,
        num_classes=3 if arch == "encoder" else 0,
        **kw,
    )
    return Transformer(spec).eval()


def tokens(*shape: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, VOCAB, shape, generator=g)


@pytest.mark.parametrize("position", POSITION.names())
@pytest.mark.parametrize("attention", ATTENTION.names())
@pytest.mark.parametrize("arch", ["seq2seq", "decoder"])
def test_cached_generation_equals_recomputation(arch: str, attention: str, position: str) -> None:
    skip_if_incompatible(attention, position)
    model = tiny(arch, attention, position)
    src = tokens(3, 7)
    src[1, 5:] = PAD  # a padded source
    if arch == "seq2seq":
        prompt = torch.full((3, 1), BOS)
        kwargs = {"src": src}
    else:
        prompt, kwargs = tokens(3, 5, seed=2), {}
    with_cache = model.generate(prompt, 9, use_cache=True, **kwargs)
    without = model.generate(prompt, 9, use_cache=False, **kwargs)
    assert torch.equal(with_cache, without)


@pytest.mark.parametrize("position", POSITION.names())
@pytest.mark.parametrize("attention", ATTENTION.names())
def test_decoder_is_causal_at_model_level(attention: str, position: str) -> None:
    skip_if_incompatible(attention, position)
    model = tiny("decoder", attention, position)
    x = tokens(2, 10)
    y = x.clone()
    y[:, 6:] = tokens(2, 4, seed=9)
    assert torch.allclose(model.decode(x)[:, :6], model.decode(y)[:, :6], atol=1e-5)


@pytest.mark.parametrize("pooling", ["mean", "cls"])
@pytest.mark.parametrize("attention", ATTENTION.names())
def test_encoder_pooling_ignores_padding(attention: str, pooling: str) -> None:
    model = tiny("encoder", attention, "sinusoidal", pooling=pooling)
    src = tokens(2, 9)
    src[0, 6:] = PAD
    src[1, 4:] = PAD
    logits = model.classify(src)
    # Padded positions hold PAD, so change what else could leak: the padded tail of a
    # longer batch must not change the short rows' outputs either.
    longer = torch.cat((src, torch.full((2, 5), PAD)), dim=1)
    assert torch.allclose(model.classify(longer), logits, atol=1e-5)
    # and the pooled vector must not depend on the embedding of PAD
    with torch.no_grad():
        model.embedding.weight[PAD].normal_()
    assert torch.allclose(model.classify(src), logits, atol=1e-5)


def test_per_role_attention_is_built_by_name() -> None:
    torch.manual_seed(0)
    spec = ModelSpec(
        arch="seq2seq",
        vocab_size=VOCAB,
        attention=VariantSpec("multihead", {"num_heads": 2}),
        position=VariantSpec("rope"),
        d_model=16,
        ffn_dim=32,
        cross_attention=VariantSpec("local", {"window": 2}),
        decoder_attention=VariantSpec("hard"),
    )
    model = Transformer(spec)
    layer = model.decoder.layers[0]
    assert type(layer.cross_attn).__name__ == "LocalAttention" and layer.cross_attn.window == 2
    assert type(layer.self_attn).__name__ == "HardAttention"
    assert type(model.encoder.layers[0].self_attn).__name__ == "MultiHeadAttention"


def test_post_and_pre_norm_differ_and_both_run() -> None:
    src, tgt = tokens(2, 6), tokens(2, 5)
    outs = [tiny("seq2seq", norm=norm)(src, tgt) for norm in ("post", "pre")]
    assert all(torch.isfinite(o).all() for o in outs)
    assert not torch.allclose(outs[0], outs[1])


def test_tied_embeddings_share_storage() -> None:
    model = tiny("decoder")
    assert model.lm_head.weight.data_ptr() == model.embedding.weight.data_ptr()
    untied = tiny("decoder", tie_embeddings=False)
    assert untied.lm_head.weight.data_ptr() != untied.embedding.weight.data_ptr()


def test_concat_io_scores_only_the_target() -> None:
    src = torch.tensor([[5, 6, 7], [8, 9, PAD]])
    tgt = torch.tensor([[7, 6, 5, EOS], [9, 8, EOS, PAD]])
    inputs, targets = concat_io(src, tgt, PAD, sep_id=3)
    assert inputs[0].tolist() == [5, 6, 7, 3, 7, 6, 5]
    assert targets[0].tolist() == [IGNORE, IGNORE, IGNORE, 7, 6, 5, EOS]
    assert targets[1].tolist() == [IGNORE, IGNORE, 9, 8, EOS, IGNORE, IGNORE]


def test_seq2seq_io_shifts_right_with_bos() -> None:
    tgt = torch.tensor([[5, 6, EOS, PAD]])
    tgt_in, targets = seq2seq_io(tgt, BOS, PAD)
    assert tgt_in.tolist() == [[BOS, 5, 6, EOS]]
    assert targets.tolist() == [[5, 6, EOS, IGNORE]]


def test_lm_io_predicts_the_next_token() -> None:
    tokens = torch.tensor([[10, 11, 12, 13, 14], [20, 21, 22, 23, 24]])  # (B, C + 1)
    inputs, targets = lm_io(tokens)
    assert inputs.tolist() == [[10, 11, 12, 13], [20, 21, 22, 23]]
    assert targets.tolist() == [[11, 12, 13, 14], [21, 22, 23, 24]]


def test_attention_maps_cover_every_layer() -> None:
    model = tiny("seq2seq")
    maps = model.attention_maps(src=tokens(1, 6), tgt_in=tokens(1, 4))
    assert set(maps) == {"encoder_self/0", "encoder_self/1", "decoder_self/0", "decoder_self/1", "cross/0", "cross/1"}
    assert maps["cross/0"].shape == (2, 4, 6)
    assert torch.allclose(maps["encoder_self/0"].sum(-1), torch.ones(2, 6), atol=1e-5)
