"""Greedy generation with the key/value cache against recomputing the whole prefix at every step.

Both cases run ``Transformer.generate`` on the same decoder-only model and prompt;
only ``use_cache`` differs. With the cache a step runs the new token through the
layers against stored keys and values (O(t) per step); without it every step
re-encodes all t tokens so far (O(t^2) per step), so the gap grows with length.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch
from torch import Tensor

from experiments.model.transformer import ModelSpec, Transformer, VariantSpec
from experiments.tasks.base import FIRST_SYMBOL_ID


def generation_model(
    *,
    vocab: int,
    d_model: int,
    heads: int,
    layers: int,
    ffn: int,
    max_len: int,
    device: torch.device,
    attention: str = "multihead",
    attention_params: dict[str, Any] | None = None,
) -> Transformer:
    """The suite's ``decoder <attention> learned`` model in eval mode, sized to hold ``max_len`` positions."""
    spec = ModelSpec(
        arch="decoder",
        vocab_size=vocab,
        attention=VariantSpec(attention, {"num_heads": heads, **(attention_params or {})}),
        position=VariantSpec("learned", {"max_len": max_len}),
        d_model=d_model,
        decoder_layers=layers,
        ffn_dim=ffn,
        dropout=0.0,
        norm="pre",
        # An id no logit can pick: no row ever stops early, so both cases decode every step.
        eos_id=vocab,
    )
    return Transformer(spec).to(device).eval()


def random_prompt(batch: int, length: int, vocab: int, generator: torch.Generator, device: torch.device) -> Tensor:
    """(B, P) random real-symbol ids (no specials)."""
    return torch.randint(FIRST_SYMBOL_ID, vocab, (batch, length), generator=generator).to(device)


def generation_cases(
    model: Transformer, prompt: Tensor, tokens: int, autocast: Callable[[], contextlib.AbstractContextManager]
) -> dict[str, Callable[[], Tensor]]:
    """{"cached": .., "recomputed": ..}: each call decodes ``tokens`` tokens after ``prompt``."""

    def run(use_cache: bool) -> Callable[[], Tensor]:
        def call() -> Tensor:
            with autocast():
                return model.generate(prompt, tokens, use_cache=use_cache)  # (B, tokens)

        return call

    return {"cached": run(True), "recomputed": run(False)}


def agreement(cases: dict[str, Callable[[], Tensor]]) -> float:
    """Fraction of generated tokens on which the two cases agree (1.0: the cache changes nothing)."""
    cached, recomputed = cases["cached"](), cases["recomputed"]()
    return float(cached.eq(recomputed).float().mean())
