"""The FlexAttention backend equals the math path, its block masks equal the dense masks, and ``auto``
sends biased and windowed calls to it on CUDA only.

CPU, eager flex, forward only (flex has no backward on CPU): eval mode under no_grad, fp32,
atol 1e-5. Every (type, encoding) pair is tested; which ones must reach the flex kernel follows from
what the type and the encoding declare, never from their names.
"""

from __future__ import annotations

from unittest import mock

import pytest
import torch
import torch.nn.attention.flex_attention as torch_flex

from tests.helpers.cases import one_thread  # noqa: F401 (autouse fixture)
from variants import ATTENTION, POSITION, KVCache
from variants.checks import VariantConfigError
from variants.flex import (
    BLOCK,
    BLOCK_MASKS,
    block_mask_from_intervals,
    kernel_options,
    prefix_intervals,
    window_intervals,
)
from variants.flex_options import BACKWARD_CANDIDATES, FORWARD_CANDIDATES
from variants.kernels import auto_backend

B, T, S, D_MODEL, HEADS = 3, 11, 7, 16, 2
CALLS = ("self", "causal", "cross", "causal_chunk")
FLEX_TYPES = [n for n in ATTENTION.names() if "flex" in ATTENTION.get(n).backends]

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")


def cases(registry, names=None) -> list:
    return [
        pytest.param(name, params, id="-".join([name] + [f"{k}={v}" for k, v in params.items()]))
        for name in (registry.names() if names is None else names)
        for params in registry.variations(name)
    ]


def takes_flex(attention: str, a_params: dict) -> bool:
    """Whether this variation accepts backend='flex' (predictive local refuses it, by its own check)."""
    try:
        ATTENTION.build(attention, d_model=D_MODEL, num_heads=HEADS, backend="flex", **a_params)
    except VariantConfigError:
        return False
    return True


def flex_grid() -> list:
    extra = {"local": {"window": 2}}
    return [
        pytest.param(a.values[0], {**a.values[1], **extra.get(a.values[0], {})}, *p.values, id=f"{a.id}-{p.id}")
        for a in cases(ATTENTION, FLEX_TYPES)
        if takes_flex(*a.values)
        for p in cases(POSITION)
    ]


def twins(attention: str, a_params: dict, **extra):
    torch.manual_seed(0)
    reference = ATTENTION.build(attention, d_model=D_MODEL, num_heads=HEADS, backend="math", **a_params, **extra)
    fast = ATTENTION.build(attention, d_model=D_MODEL, num_heads=HEADS, backend="flex", **a_params, **extra)
    fast.load_state_dict(reference.state_dict())
    return reference.eval(), fast.eval()


@torch.no_grad()
def outputs(layer, pos, call: str, *, t: int = T, s: int = S, seed: int = 1) -> torch.Tensor:
    """One call pattern with padding (element 1: its last 3 keys; element 2: every key)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(B, t, D_MODEL, generator=gen)
    memory = torch.randn(B, s, D_MODEL, generator=gen)
    pad = torch.zeros(B, s if call == "cross" else t, dtype=torch.bool)
    pad[1, -3:] = True
    pad[2] = True
    if call == "cross":
        return layer(x, memory, key_padding_mask=pad, position=pos)[0]
    if call == "causal_chunk":  # a cached prefix, then a chunk: queries no longer start at key 0
        cache = KVCache()
        first, _ = layer(x[:, :4], causal=True, key_padding_mask=pad[:, :4], position=pos, cache=cache)
        rest, _ = layer(x[:, 4:], causal=True, key_padding_mask=pad, position=pos, cache=cache)
        return torch.cat((first, rest), dim=1)
    return layer(x, causal=call == "causal", key_padding_mask=pad, position=pos)[0]


def has_flex_form(layer, pos) -> bool:
    """What the two declare: a dot-product score, an encoding whose every term is flex-ready."""
    q = torch.zeros(1, HEADS, 1, D_MODEL // HEADS)
    return layer.score.fused_query(q) is not None and pos.flex_ready


def flex_calls():
    return mock.patch.object(torch_flex, "flex_attention", wraps=torch_flex.flex_attention)


@pytest.mark.parametrize("attention, a_params, position, p_params", flex_grid())
@pytest.mark.parametrize("call", CALLS)
def test_flex_equals_math(attention, a_params, position, p_params, call):
    reference, fast = twins(attention, a_params)
    pos = POSITION.build(position, d_model=D_MODEL, num_heads=HEADS, **p_params)
    with flex_calls() as spy:
        want = outputs(reference, pos, call)
    assert spy.call_count == 0, "the math reference reached the flex kernel"
    with flex_calls() as spy:
        got = outputs(fast, pos, call)
    # a pair with a flex form ran the kernel on every layer call; one without fell back to an exact path
    expected = (2 if call == "causal_chunk" else 1) if has_flex_form(fast, pos) else 0
    assert spy.call_count == expected
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


# -- past one block: the block-sparse structure itself ------------------------------------------------------
LONG_CALLS = [("self", 1.0), ("causal", 1.0), ("causal_chunk", 1.0), ("cross", 0.6), ("cross", 1.7)]


@pytest.mark.parametrize("attention", FLEX_TYPES)
@pytest.mark.parametrize("position", ["none", "alibi"])
@pytest.mark.parametrize("call, ratio", LONG_CALLS, ids=[f"{c}-{r}" for c, r in LONG_CALLS])
def test_flex_equals_math_over_many_blocks(attention, position, call, ratio):
    """T = 300 and memory 290: three blocks of 128, windows of 2 * 20 + 1 crossing block edges."""
    extra = {"window": 20, "ratio": ratio} if "window" in ATTENTION.accepted_params(attention) else {}
    reference, fast = twins(attention, {}, **extra)
    pos = POSITION.build(position, d_model=D_MODEL, num_heads=HEADS)
    torch.testing.assert_close(
        outputs(fast, pos, call, t=300, s=290), outputs(reference, pos, call, t=300, s=290), atol=1e-5, rtol=1e-5
    )


# Eager flex on CPU applies mask_mod to every score and ignores the block structure, so the equality
# tests above cannot see a wrong block list: this test compares it with the dense mask, tile by tile.
def dense_blocks(allowed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(Tq, Tk) bool -> which (query block, key block) pairs hold any / only allowed pairs."""
    Tq, Tk = allowed.shape
    nq, nk = -(-Tq // BLOCK), -(-Tk // BLOCK)
    touched = torch.zeros(nq, nk, dtype=torch.bool)
    full = torch.zeros(nq, nk, dtype=torch.bool)
    for i in range(nq):
        for j in range(nk):
            tile = allowed[i * BLOCK : (i + 1) * BLOCK, j * BLOCK : (j + 1) * BLOCK]
            touched[i, j], full[i, j] = tile.any(), tile.all()
    return touched, full


@pytest.mark.parametrize(
    "Tq, Tk, causal, window",
    [(300, 300, True, None), (300, 300, False, 40), (300, 300, True, 150), (200, 520, False, None)],
)
def test_block_mask_equals_the_dense_mask(Tq, Tk, causal, window):
    q_pos, k_pos = torch.arange(Tk - Tq, Tk), torch.arange(Tk)
    i, j = q_pos[:, None], k_pos[None, :]
    allowed = (j <= i) if causal else torch.ones(Tq, Tk, dtype=torch.bool)
    if window is not None:
        allowed = allowed & ((j - i).abs() <= window)
        intervals = window_intervals(q_pos[None].float(), k_pos, window, causal_q_pos=q_pos if causal else None)
    else:
        intervals = prefix_intervals(q_pos, k_pos, causal=causal)
    mask = block_mask_from_intervals(intervals)
    touched, full = dense_blocks(allowed)
    got = mask.to_dense()[0, 0].bool()  # (nq, nk): partial or full blocks
    assert torch.equal(got, touched)
    full_mask = torch.zeros_like(full)
    for row in range(full.shape[0]):
        full_mask[row, mask.full_kv_indices[0, 0, row, : mask.full_kv_num_blocks[0, 0, row]].long()] = True
    assert torch.equal(full_mask, full)
    assert torch.equal(torch_flex.create_mask(mask.mask_mod, None, None, Tq, Tk, "cpu")[0, 0], allowed)
    # padded calls keep every touched block partial, so mask_mod sees the padding everywhere
    padded = block_mask_from_intervals(intervals, full_blocks=False)
    assert padded.full_kv_num_blocks is None and torch.equal(padded.to_dense()[0, 0].bool(), touched)


# -- the block-mask cache ---------------------------------------------------------------------------------------
def test_block_masks_are_reused_per_shape_and_rebuilt_for_a_new_window_or_length():
    BLOCK_MASKS.clear()
    torch.manual_seed(0)
    local = ATTENTION.build("local", d_model=D_MODEL, num_heads=HEADS, backend="flex", window=4).eval()
    wider = ATTENTION.build("local", d_model=D_MODEL, num_heads=HEADS, backend="flex", window=5).eval()
    x = torch.randn(2, 40, D_MODEL)
    with torch.no_grad():
        local(x, causal=True)
        built = BLOCK_MASKS.builds
        first = next(reversed(BLOCK_MASKS.entries.values()))
        local(x, causal=True)
        local(x + 1, causal=True)  # same shape, other values
        assert BLOCK_MASKS.builds == built and next(reversed(BLOCK_MASKS.entries.values())) is first
        wider(x, causal=True)
        assert BLOCK_MASKS.builds == built + 1
        local(x[:, :39], causal=True)
        assert BLOCK_MASKS.builds == built + 2
        local(x[:, :39], causal=True)
        assert BLOCK_MASKS.builds == built + 2


# -- the planted bugs these tests exist for ------------------------------------------------------------------
def test_window_off_by_one_is_caught():
    """A window one key short on the right (hi = c + w) must not pass for the real one."""
    q_pos = k_pos = torch.arange(20)
    good = window_intervals(q_pos[None].float(), k_pos, 3, causal_q_pos=None)
    i, j = q_pos[:, None], k_pos[None, :]
    dense = torch_flex.create_mask(good.mask_mod, None, None, 20, 20, "cpu")[0, 0]
    assert torch.equal(dense, (j - i).abs() <= 3)  # the independent statement of the window


def test_alibi_penalises_distance():
    """ALiBi's score_mod lowers a far key's score by slope * distance, in both directions."""
    pos = POSITION.build("alibi", d_model=D_MODEL, num_heads=HEADS)
    mod = pos.score_mod(torch.zeros(1, HEADS, 1, D_MODEL // HEADS), torch.arange(10), torch.arange(10))
    zero = torch.tensor(0.0)
    for h in range(HEADS):
        for i, j in ((5, 2), (2, 5), (4, 4)):
            got = mod(zero, torch.tensor(0), torch.tensor(h), torch.tensor(i), torch.tensor(j))
            assert got.item() == pytest.approx(-float(pos.slopes[h]) * abs(i - j))


def test_shaw_key_term_reads_the_clipped_distance_j_minus_i():
    """q_i . a_{clip(j - i)} / sqrt(D), written out from the paper's definition for one (i, j)."""
    pos = POSITION.build("relative", d_model=D_MODEL, num_heads=HEADS, max_distance=3)
    D = D_MODEL // HEADS
    q = torch.randn(1, HEADS, 10, D)
    mod = pos.score_mod(q, torch.arange(10), torch.arange(10))
    for i, j in ((2, 4), (4, 2), (0, 9), (9, 0)):
        r = max(-3, min(3, j - i)) + 3
        want = (q[0, 1, i] @ pos.keys[r]).item() / D**0.5
        got = mod(torch.tensor(0.0), torch.tensor(0), torch.tensor(1), torch.tensor(i), torch.tensor(j))
        assert got.item() == pytest.approx(want, abs=1e-6)


# -- auto: flex for biases and windows on CUDA, never on CPU --------------------------------------------------
def test_auto_picks_flex_on_cuda_for_a_bias_or_a_window():
    for name in FLEX_TYPES:
        supported = ATTENTION.get(name).backends
        assert auto_backend(supported, cuda=True, biased=True) == "flex"
        assert auto_backend(supported, cuda=False, biased=True) != "flex"
        assert auto_backend(supported, cuda=False, biased=False) != "flex"
    with mock.patch.object(torch.cuda, "is_available", return_value=True):
        assert ATTENTION.build("local", d_model=D_MODEL, window=4).backend == "flex"
        assert ATTENTION.build("local", d_model=D_MODEL, window=4, mode="predictive").backend == "banded"
        assert ATTENTION.build("multihead", d_model=D_MODEL).backend == "sdpa"  # no bias: flash
    with mock.patch.object(torch.cuda, "is_available", return_value=False):
        assert ATTENTION.build("local", d_model=D_MODEL, window=4).backend == "banded"


@pytest.mark.parametrize("attention", FLEX_TYPES)
@pytest.mark.parametrize("position", ["alibi", "t5"])
def test_auto_never_runs_flex_on_cpu_in_training(attention, position):
    """A CPU training step with a bias or a window (CUDA reported or not) trains without flex."""
    for cuda in (True, False):
        with mock.patch.object(torch.cuda, "is_available", return_value=cuda), flex_calls() as spy:
            layer = ATTENTION.build(attention, d_model=D_MODEL, num_heads=HEADS).train()
            pos = POSITION.build(position, d_model=D_MODEL, num_heads=HEADS)
            x = torch.randn(2, T, D_MODEL, requires_grad=True)
            out, _ = layer(x, causal=True, position=pos)
            out.sum().backward()
        assert spy.call_count == 0 and x.grad is not None


def test_flex_training_on_cpu_is_refused_by_name():
    layer = ATTENTION.build("soft", d_model=D_MODEL, backend="flex")
    with pytest.raises(VariantConfigError, match="backend='flex' has no backward on CPU"):
        layer(torch.randn(1, T, D_MODEL, requires_grad=True), position=POSITION.build("alibi", d_model=D_MODEL))


def test_predictive_local_refuses_flex():
    with pytest.raises(VariantConfigError, match="backend='flex' needs mode='monotonic'"):
        ATTENTION.build("local", d_model=D_MODEL, backend="flex", mode="predictive")


# -- kernel options that build on the device ---------------------------------------------------------------
def test_kernel_options_fall_back_until_one_builds(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))  # the probes' choices are remembered there
    tried = []

    def probe(options, device, dtype, head_dim, backward):
        tried.append(options)
        if backward and options.get("bwd_BLOCK_M1") != 32:
            raise RuntimeError("out of resource: shared memory, Required: 245760 Hardware limit: 232448")

    device = torch.device("cuda", 7)  # a key no real run uses; the probe never touches the device
    got = kernel_options(device, torch.bfloat16, 64, True, probe=probe)
    assert got == BACKWARD_CANDIDATES[1] and tried == [FORWARD_CANDIDATES[0], *BACKWARD_CANDIDATES[:2]]
    assert kernel_options(device, torch.bfloat16, 64, True, probe=probe) == got and len(tried) == 3  # remembered

    def never(*args):
        raise RuntimeError("out of resource")

    with pytest.raises(RuntimeError, match="no FlexAttention kernel builds"):
        kernel_options(torch.device("cuda", 7), torch.float32, 48, False, probe=never)
    assert kernel_options(torch.device("cpu"), torch.float32, 64, True, probe=never) is None


@pytest.mark.slow  # an Inductor compile (10-25 s on 2 cores): the slow tier's, with the other compiles
def test_flex_inside_a_compiled_layer_equals_math():
    """``model.compile=true`` traces the layer: the block mask is built outside the graph, the kernel inside."""
    torch._dynamo.reset()
    reference, fast = twins("multihead", {})
    pos = POSITION.build("alibi", d_model=D_MODEL, num_heads=HEADS)
    x = torch.randn(2, 150, D_MODEL)
    pad = torch.zeros(2, 150, dtype=torch.bool)
    pad[1, -7:] = True
    with torch.no_grad():
        want = reference(x, causal=True, key_padding_mask=pad, position=pos)[0]
        got = torch.compile(fast)(x, causal=True, key_padding_mask=pad, position=pos)[0]
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
