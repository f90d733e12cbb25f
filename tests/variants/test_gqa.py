"""Grouped key/value heads on ``multihead``: equal to the original at one KV head per query head,
equal to an independent reference when grouped, causal, and cached with only the KV heads."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.helpers.cases import one_thread  # noqa: F401 (one_thread is an autouse fixture)
from variants import ATTENTION, KVCache
from variants.checks import VariantConfigError

B, T, D_MODEL, HEADS = 2, 7, 16, 4
HEAD_DIM = D_MODEL // HEADS


def build(num_kv_heads: int | None, seed: int = 0):
    torch.manual_seed(seed)
    return ATTENTION.build("multihead", d_model=D_MODEL, num_heads=HEADS, num_kv_heads=num_kv_heads).eval()


def tokens(seed: int = 1) -> torch.Tensor:
    return torch.randn(B, T, D_MODEL, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("causal", (False, True))
@pytest.mark.parametrize("backend", ("math", "auto"))
def test_as_many_kv_heads_as_query_heads_is_multihead_exactly(causal, backend):
    plain = ATTENTION.build("multihead", d_model=D_MODEL, num_heads=HEADS, backend=backend).eval()
    grouped = ATTENTION.build("multihead", d_model=D_MODEL, num_heads=HEADS, num_kv_heads=HEADS, backend=backend).eval()
    grouped.load_state_dict(plain.state_dict())  # same shapes, same weights
    x = tokens()
    torch.testing.assert_close(grouped(x, causal=causal)[0], plain(x, causal=causal)[0], atol=0, rtol=0)


@pytest.mark.parametrize("num_kv_heads", (1, 2))
@pytest.mark.parametrize("causal", (False, True))
def test_grouped_equals_repeated_kv_heads_through_torch_sdpa(num_kv_heads, causal):
    layer = build(num_kv_heads)
    x = tokens()
    out, _ = layer(x, causal=causal)

    # Reference: project by hand, repeat each KV head for its group, torch's own attention.
    def heads(t: torch.Tensor) -> torch.Tensor:
        return t.view(B, T, -1, HEAD_DIM).transpose(1, 2)

    q, k, v = heads(layer.w_q(x)), heads(layer.w_k(x)), heads(layer.w_v(x))
    assert k.shape[1] == num_kv_heads
    group = HEADS // num_kv_heads
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # (B, H, T, D)
    ref = layer.w_o(ref.transpose(1, 2).reshape(B, T, D_MODEL))
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


def test_multi_query_projects_one_kv_head():
    layer = build(1)
    assert layer.w_k.weight.shape == (HEAD_DIM, D_MODEL) and layer.w_v.weight.shape == (HEAD_DIM, D_MODEL)
    assert layer.w_q.weight.shape == (D_MODEL, D_MODEL)


@pytest.mark.parametrize("num_kv_heads", (1, 2))
def test_cache_holds_only_kv_heads_and_equals_recomputation(num_kv_heads):
    layer = build(num_kv_heads)
    x = tokens()
    full, _ = layer(x, causal=True)
    cache = KVCache()
    steps = [layer(x[:, t : t + 1], causal=True, cache=cache)[0] for t in range(T)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.k.shape == (B, num_kv_heads, T, HEAD_DIM) and cache.v.shape == (B, num_kv_heads, T, HEAD_DIM)


@pytest.mark.parametrize("num_kv_heads", (1, 2))
def test_grouped_is_causal(num_kv_heads):
    layer = build(num_kv_heads)
    x = tokens()
    changed = x.clone()
    changed[:, 4:] = torch.randn(B, T - 4, D_MODEL)
    before, after = layer(x, causal=True)[0], layer(changed, causal=True)[0]
    torch.testing.assert_close(after[:, :4], before[:, :4], atol=0, rtol=0)
    assert not torch.allclose(after[:, 4:], before[:, 4:])


@pytest.mark.parametrize("bad", (3, 0, 8, 1.0))
def test_kv_heads_not_dividing_is_a_one_line_error(bad):
    with pytest.raises(VariantConfigError, match="num_kv_heads=") as err:
        build(bad)
    assert "\n" not in str(err.value)
