"""Incremental decoding with ``KVCache`` gives the same outputs as one full call, for every pair."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.cases import SMALL, cases, one_thread, positions, skip_if_incompatible  # noqa: F401 (one_thread is an autouse fixture)
from variants import ATTENTION, POSITION, KVCache

B, T, S, D_MODEL, HEADS = 2, 10, 7, 16, 2


pairs = pytest.mark.parametrize("attention, a_params", cases(ATTENTION))


def build(attention: str, a_params: dict, position: str, p_params: dict):
    skip_if_incompatible(attention, position, p_params)
    torch.manual_seed(0)
    accepted = ATTENTION.accepted_params(attention)
    params = {k: v for k, v in SMALL.items() if k in accepted} | a_params
    layer = ATTENTION.build(attention, d_model=D_MODEL, num_heads=HEADS, **params).eval()
    return layer, POSITION.build(position, d_model=D_MODEL, num_heads=HEADS, **p_params)


@pairs
@positions
def test_token_by_token_equals_full_causal(attention, a_params, position, p_params):
    layer, pos = build(attention, a_params, position, p_params)
    x = pos.embed(torch.randn(B, T, D_MODEL), torch.arange(T))  # each token embedded at its own position
    pad = torch.zeros(B, T, dtype=torch.bool)
    pad[1, :2] = True  # left padding, as in batched generation
    full, _ = layer(x, causal=True, key_padding_mask=pad, position=pos)

    cache = KVCache()
    steps = [
        layer(x[:, t : t + 1], causal=True, key_padding_mask=pad[:, : t + 1], position=pos, cache=cache)[0]
        for t in range(T)
    ]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.offset == T
    if layer.recurrent:  # running sums over the KV heads, whose size does not grow with T
        assert cache.k is None and cache.state.keys == T
        assert cache.state.kv.shape[:2] == cache.state.k_sum.shape[:2] == (B, layer.num_kv_heads)
    else:
        assert cache.k.shape[2] == T


@pairs
@positions
def test_cross_attention_with_cache_equals_without(attention, a_params, position, p_params):
    layer, pos = build(attention, a_params, position, p_params)
    x = pos.embed(torch.randn(B, T, D_MODEL), torch.arange(T))
    memory = pos.embed(torch.randn(B, S, D_MODEL), torch.arange(S))
    pad = torch.zeros(B, S, dtype=torch.bool)
    pad[1, -2:] = True
    full, _ = layer(x, memory, key_padding_mask=pad, position=pos)

    cache = KVCache()
    first, _ = layer(x[:, :1], memory, key_padding_mask=pad, position=pos, cache=cache)
    projected = cache.k
    rest = [layer(x[:, t : t + 1], memory, key_padding_mask=pad, position=pos, cache=cache)[0] for t in range(1, T)]
    torch.testing.assert_close(torch.cat([first, *rest], dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.k is projected  # the memory was projected once, not once per step
    assert cache.offset == T
