"""Every fast path equals the readable reference path, and multihead equals torch's own.

fp32, eval mode, atol 1e-5. Outputs and input gradients are compared, so a
kernel that masks differently, or drops a position term, fails here.
"""

from __future__ import annotations

from contextlib import contextmanager
from unittest import mock

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.helpers.cases import one_thread, positions, skip_if_incompatible  # noqa: F401 (one_thread is an autouse fixture)
from variants import ATTENTION, POSITION, KVCache
from variants.kernels import xformers_available

B, T, S, D_MODEL, HEADS = 3, 11, 7, 16, 2
CALLS = ("self", "causal", "cross", "causal_chunk")


def cases(registry, names: list[str] | None = None) -> list:
    return [
        pytest.param(name, params, id="-".join([name] + [f"{k}={v}" for k, v in params.items()]))
        for name in (registry.names() if names is None else names)
        for params in registry.variations(name)
    ]


FUSED = [n for n in ATTENTION.names() if {"sdpa", "xformers"} & set(ATTENTION.get(n).backends)]
BANDED = [n for n in ATTENTION.names() if "block_size" in ATTENTION.accepted_params(n)]
RUNNING_SUM = [n for n in ATTENTION.names() if "running_sum" in ATTENTION.get(n).backends]


def twin_layers(attention: str, a_params: dict, fast: str, **extra) -> tuple[nn.Module, nn.Module]:
    """A reference (``backend='math'``) layer and a fast one holding the same weights, in eval mode."""
    torch.manual_seed(0)
    reference = ATTENTION.build(attention, d_model=D_MODEL, num_heads=HEADS, backend="math", **a_params, **extra)
    quick = ATTENTION.build(attention, d_model=D_MODEL, num_heads=HEADS, backend=fast, **a_params, **extra)
    quick.load_state_dict(reference.state_dict())
    return reference.eval(), quick.eval()


def outputs_and_gradients(layer, pos, call: str, *, seed: int = 1) -> list[torch.Tensor]:
    """Run one call pattern with padding (element 1: last 3 keys; element 2: every key)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, D_MODEL, generator=gen).requires_grad_(True)
    memory = torch.randn(B, S, D_MODEL, generator=gen).requires_grad_(True)
    pad = torch.zeros(B, S if call == "cross" else T, dtype=torch.bool)
    pad[1, -3:] = True
    pad[2] = True
    if call == "cross":
        out, _ = layer(x, memory, key_padding_mask=pad, position=pos)
    elif call == "causal_chunk":  # a cached prefix, then a chunk: queries no longer start at key 0
        cache = KVCache()
        first, _ = layer(x[:, :4], causal=True, key_padding_mask=pad[:, :4], position=pos, cache=cache)
        rest, _ = layer(x[:, 4:], causal=True, key_padding_mask=pad, position=pos, cache=cache)
        out = torch.cat((first, rest), dim=1)
    else:
        out, _ = layer(x, causal=call == "causal", key_padding_mask=pad, position=pos)
    (out * torch.randn(out.shape, generator=gen)).sum().backward()
    grads = [x.grad] + ([memory.grad] if call == "cross" else [])
    return [out.detach(), *grads]


def assert_same(reference: list[torch.Tensor], fast: list[torch.Tensor]) -> None:
    for ref, got in zip(reference, fast, strict=True):
        torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)


# -- fused kernels (SDPA, xformers) vs the math path ------------------------------------------------------
def no_fused_form(a_params: dict, p_params: dict) -> str | None:
    """Why a (type, encoding) pair has no fused form, or None when a fused kernel must run.

    Written out here rather than asked of the layer, so a layer that stops using its kernel fails below.
    """
    if a_params.get("score") == "additive":
        return "score=additive, v.tanh(W_q q + W_k k), is not a dot product a fused kernel can take"
    if p_params.get("values"):
        return "relative values=True adds a_ij to the values, which needs the weights"
    return None


def fused_grid(*, fused: bool) -> list:
    """(attention, a_params, position, p_params) for the fused types, keeping pairs with or without a fused form."""
    return [
        pytest.param(*a.values, *p.values, id=f"{a.id}-{p.id}")
        for a in cases(ATTENTION, FUSED)
        for p in cases(POSITION)
        if (no_fused_form(a.values[1], p.values[1]) is None) == fused
    ]


BACKENDS = pytest.mark.parametrize("backend", ["sdpa", "xformers"])


def backend_here(attention: str, backend: str) -> None:
    if backend not in ATTENTION.get(attention).backends:
        pytest.skip(f"{attention} has no {backend} kernel")
    if backend == "xformers" and not xformers_available():
        pytest.skip("xformers runs on CUDA only (and needs the xformers package)")


@contextmanager
def kernel_calls(backend: str):
    """Count the calls reaching the fused kernel itself (the wrapped function still computes)."""
    if backend == "xformers":
        import xformers.ops as target  # optional dependency, CUDA only

        name = "memory_efficient_attention"
    else:
        target, name = F, "scaled_dot_product_attention"
    with mock.patch.object(target, name, wraps=getattr(target, name)) as spy:
        yield spy


def layer_calls(call: str) -> int:
    return 2 if call == "causal_chunk" else 1  # the cached chunk calls the layer twice


@BACKENDS
@pytest.mark.parametrize("attention, a_params, position, p_params", fused_grid(fused=True))
@pytest.mark.parametrize("call", CALLS)
def test_fused_backend_equals_math(backend, attention, a_params, position, p_params, call):
    backend_here(attention, backend)
    reference, fast = twin_layers(attention, a_params, backend)
    pos = POSITION.build(position, d_model=D_MODEL, num_heads=HEADS, **p_params)
    with kernel_calls(backend) as spy:
        want = outputs_and_gradients(reference, pos, call)
    assert spy.call_count == 0, "the math reference reached the fused kernel"
    with kernel_calls(backend) as spy:
        got = outputs_and_gradients(fast, pos, call)
    # every layer call ran the kernel, or this would compare the math path with itself
    assert spy.call_count == layer_calls(call)
    assert_same(want, got)


@BACKENDS
@pytest.mark.parametrize("attention, a_params, position, p_params", fused_grid(fused=False))
@pytest.mark.parametrize("call", CALLS)
def test_no_fused_form_falls_back_to_math(backend, attention, a_params, position, p_params, call):
    """A pair with no fused form, asked for a fused backend, computes the reference without the kernel."""
    backend_here(attention, backend)
    reference, fast = twin_layers(attention, a_params, backend)
    pos = POSITION.build(position, d_model=D_MODEL, num_heads=HEADS, **p_params)
    with kernel_calls(backend) as spy:
        got = outputs_and_gradients(fast, pos, call)
    assert spy.call_count == 0
    assert_same(outputs_and_gradients(reference, pos, call), got)


# -- the banded local kernel vs the dense reference --------------------------------------------------------
LOCAL_CALLS = [("self", 1.0), ("causal", 1.0), ("causal_chunk", 1.0), ("cross", 1.0), ("cross", 0.5), ("cross", 1.7)]


@pytest.mark.parametrize("attention, a_params", cases(ATTENTION, BANDED))
@positions
@pytest.mark.parametrize("call, ratio", LOCAL_CALLS, ids=[f"{c}-ratio={r}" for c, r in LOCAL_CALLS])
def test_blocked_local_equals_dense(attention, a_params, position, p_params, call, ratio):
    """Window 2 and T = 11: blocks of 3 and of 5 (the last ones short, windows straddling every edge)."""
    pos = POSITION.build(position, d_model=D_MODEL, num_heads=HEADS, **p_params)
    for block_size in (3, 5):
        reference, fast = twin_layers(attention, a_params, "auto", window=2, ratio=ratio, block_size=block_size)
        assert fast.backend != "math"  # auto must pick the banded kernel, or this compares math with itself
        assert_same(outputs_and_gradients(reference, pos, call), outputs_and_gradients(fast, pos, call))


# -- kernelised attention: running sums vs the quadratic form ---------------------------------------------
@pytest.mark.parametrize("attention, a_params", cases(ATTENTION, RUNNING_SUM))
@positions
@pytest.mark.parametrize("call", CALLS)
def test_running_sums_equal_the_quadratic_form(attention, a_params, position, p_params, call):
    """Chunks of 3 and of 4 in T = 11 (the last short); ``causal_chunk`` continues from a running state,
    while the math path's cache keeps the keys."""
    skip_if_incompatible(attention, position, p_params)
    pos = POSITION.build(position, d_model=D_MODEL, num_heads=HEADS, **p_params)
    for chunk_size in (3, 4):
        reference, fast = twin_layers(attention, a_params, "auto", chunk_size=chunk_size)
        assert fast.backend == "running_sum" and fast.recurrent  # or this compares math with itself
        assert_same(outputs_and_gradients(reference, pos, call), outputs_and_gradients(fast, pos, call))


# -- multihead vs torch.nn.MultiheadAttention ---------------------------------------------------------------
MHA_CALLS = [("self", False), ("self", True), ("cross", False)]


@pytest.mark.parametrize("backend", ["math", "sdpa"])
@pytest.mark.parametrize("call, causal", MHA_CALLS, ids=["self", "causal", "cross"])
@pytest.mark.parametrize("padded", [False, True], ids=["dense", "padded"])
def test_multihead_equals_torch_multihead_attention(backend, call, causal, padded):
    cross = call == "cross"
    heads = 4
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(D_MODEL, heads, batch_first=True).eval()
    nn.init.normal_(theirs.in_proj_bias)  # torch starts biases at zero; make them count
    nn.init.normal_(theirs.out_proj.bias)
    ours = ATTENTION.build("multihead", d_model=D_MODEL, num_heads=heads, backend=backend).eval()
    with torch.no_grad():
        for proj, weight, bias in zip(
            (ours.w_q, ours.w_k, ours.w_v), theirs.in_proj_weight.chunk(3), theirs.in_proj_bias.chunk(3)
        ):
            proj.weight.copy_(weight)
            proj.bias.copy_(bias)
        ours.w_o.weight.copy_(theirs.out_proj.weight)
        ours.w_o.bias.copy_(theirs.out_proj.bias)

    x = torch.randn(2, T, D_MODEL)
    memory = torch.randn(2, S, D_MODEL) if cross else x
    pad = torch.zeros(2, memory.shape[1], dtype=torch.bool)
    if padded:
        pad[1, -3:] = True
    future = torch.ones(T, T, dtype=torch.bool).triu(1) if causal else None  # True = may not attend

    want, want_weights = theirs(
        x,
        memory,
        memory,
        key_padding_mask=pad if padded else None,
        attn_mask=future,
        need_weights=True,
        average_attn_weights=True,
    )
    got, got_weights = ours(
        x, memory if cross else None, causal=causal, key_padding_mask=pad if padded else None, need_weights=True
    )
    fast, _ = ours(x, memory if cross else None, causal=causal, key_padding_mask=pad if padded else None)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got_weights.mean(1), want_weights, atol=1e-6, rtol=1e-5)  # (B, Tq, Tk)
