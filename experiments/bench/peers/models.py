"""What ``peers`` compares: the suite's models and their peers (torch.nn.Transformer, x-transformers)
at one ``Size``, and the batches they all train on."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from experiments.model.transformer import ModelSpec, Transformer, VariantSpec
from experiments.tasks.base import BOS_ID, FIRST_SYMBOL_ID, PAD_ID
from experiments.tasks.batches import lm_io, seq2seq_io
from variants import POSITION


@dataclass(frozen=True)
class Size:
    batch: int
    length: int
    vocab: int
    d_model: int
    heads: int
    layers: int
    ffn: int


# -- the models ----------------------------------------------------------------------------------------------
def attnlab_seq2seq(size: Size, dropout: float) -> Transformer:
    return Transformer(
        ModelSpec(
            arch="seq2seq",
            vocab_size=size.vocab,
            attention=VariantSpec("multihead", {"num_heads": size.heads}),
            position=VariantSpec("sinusoidal"),
            d_model=size.d_model,
            encoder_layers=size.layers,
            decoder_layers=size.layers,
            ffn_dim=size.ffn,
            dropout=dropout,
        )
    )


class TorchSeq2Seq(nn.Module):
    """``torch.nn.Transformer`` inside the suite's own embedding, sinusoidal encoding and tied output
    projection, so the two models differ only in the encoder-decoder stack."""

    def __init__(self, size: Size, dropout: float) -> None:
        super().__init__()
        d = size.d_model
        self.embedding = nn.Embedding(size.vocab, d, padding_idx=PAD_ID)
        nn.init.normal_(self.embedding.weight, std=d**-0.5)
        self.scale = math.sqrt(d)
        self.position = POSITION.build("sinusoidal", d_model=d)
        self.drop = nn.Dropout(dropout)
        self.transformer = nn.Transformer(
            d_model=d,
            nhead=size.heads,
            num_encoder_layers=size.layers,
            num_decoder_layers=size.layers,
            dim_feedforward=size.ffn,
            dropout=dropout,
            batch_first=True,
        )
        self.lm_head = nn.Linear(d, size.vocab, bias=False)
        self.lm_head.weight = self.embedding.weight
        self._causal: dict[tuple[int, str], Tensor] = {}

    def embed(self, tokens: Tensor) -> Tensor:
        x = self.embedding(tokens) * self.scale  # (B, T, d)
        return self.drop(self.position.embed(x, torch.arange(tokens.shape[1], device=tokens.device)))

    def causal_mask(self, length: int, device: torch.device) -> Tensor:
        # Built once per length, as a user of nn.Transformer would keep it.
        key = (length, str(device))
        if key not in self._causal:
            self._causal[key] = nn.Transformer.generate_square_subsequent_mask(length, device=device)  # (T, T)
        return self._causal[key]

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        src_pad = src.eq(PAD_ID)  # (B, S); decoder inputs are right-padded, so causality alone suffices
        h = self.transformer(
            self.embed(src),
            self.embed(tgt_in),
            tgt_mask=self.causal_mask(tgt_in.shape[1], tgt_in.device),
            tgt_is_causal=True,
            src_key_padding_mask=src_pad,
            memory_key_padding_mask=src_pad,
        )  # (B, T, d)
        return self.lm_head(h)  # (B, T, V)


def attnlab_decoder(size: Size) -> Transformer:
    # Pre-norm and no dropout: the suite's decoder LM recipe (experiment=shakespeare_char), and
    # x-transformers' defaults.
    return Transformer(
        ModelSpec(
            arch="decoder",
            vocab_size=size.vocab,
            attention=VariantSpec("multihead", {"num_heads": size.heads}),
            position=VariantSpec("learned", {"max_len": size.length}),
            d_model=size.d_model,
            decoder_layers=size.layers,
            ffn_dim=size.ffn,
            dropout=0.0,
            norm="pre",
        )
    )


def xtransformers_decoder(size: Size) -> nn.Module:
    from x_transformers import Decoder, TransformerWrapper  # optional: the ``bench`` extra

    # dim_head = d / heads keeps the attention width at d (x-transformers' default head is 64 wide);
    # flash routes attention through scaled_dot_product_attention, the kernel the suite uses.
    return TransformerWrapper(
        num_tokens=size.vocab,
        max_seq_len=size.length,
        tie_embedding=True,
        attn_layers=Decoder(
            dim=size.d_model,
            depth=size.layers,
            heads=size.heads,
            attn_dim_head=size.d_model // size.heads,
            ff_mult=size.ffn / size.d_model,
            attn_flash=True,
        ),
    )


# -- batches -------------------------------------------------------------------------------------------------
Batch = tuple[tuple[Tensor, ...], Tensor]  # (model inputs, targets)


def seq2seq_batches(size: Size, count: int, generator: torch.Generator) -> list[Batch]:
    """Random sentence pairs, right-padded to ``length``, each side 1/2 to all of it long."""

    def side() -> Tensor:
        tokens = torch.randint(FIRST_SYMBOL_ID, size.vocab, (size.batch, size.length), generator=generator)
        lengths = torch.randint(max(1, size.length // 2), size.length + 1, (size.batch, 1), generator=generator)
        return tokens.masked_fill(torch.arange(size.length)[None] >= lengths, PAD_ID)  # (B, T)

    batches = []
    for _ in range(count):
        src, tgt = side(), side()
        tgt_in, targets = seq2seq_io(tgt, BOS_ID, PAD_ID)
        batches.append(((src, tgt_in), targets))
    return batches


def lm_batches(size: Size, count: int, generator: torch.Generator) -> list[Batch]:
    batches = []
    for _ in range(count):
        tokens = torch.randint(FIRST_SYMBOL_ID, size.vocab, (size.batch, size.length + 1), generator=generator)
        inputs, targets = lm_io(tokens)  # (B, T), (B, T)
        batches.append(((inputs,), targets))
    return batches


def to_device(batches: list[Batch], device: torch.device) -> list[Batch]:
    return [(tuple(t.to(device) for t in inputs), targets.to(device)) for inputs, targets in batches]
