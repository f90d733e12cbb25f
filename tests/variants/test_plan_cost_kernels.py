"""The flex call's own costs: padding only where a length is short of its bucket, an analytic causal
window, bias tables captured in fp32, Shaw's clipped keys spread over copies of their bucket.

CPU only: eager flex's forward against the math path (flex has no backward on CPU); gradients through
each score_mod evaluated densely (every (head, query, key) at once, as the kernel would) against the
math path's ``score_bias``. References are the definitions: the window |i - j| <= w inside the causal
prefix, clip(j - i, -k, k), and sums in float64.
"""

from __future__ import annotations

from unittest import mock

import pytest
import torch
import torch.nn.functional as F

from tests.helpers.cases import one_thread  # noqa: F401 (autouse fixture)
from variants import ATTENTION, POSITION, KVCache
from variants.flex import band_rule
from variants.position.relative import SPREAD, shaw_slot, spread_table

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
D_MODEL, HEADS = 32, 2


def allowed_by_definition(Tq: int, Tk: int, padded_q: int, padded_k: int, causal: bool, window: int | None):
    """(padded_q, padded_k) bool: query i at position Tk - Tq + i (self attention's keys end at the last
    query), key j at position j; padded rows and columns see and are seen by nothing."""
    out = torch.zeros(padded_q, padded_k, dtype=torch.bool)
    for i in range(Tq):
        p = Tk - Tq + i
        for j in range(Tk):
            if causal and j > p:
                continue
            if window is not None and p - j > window:
                continue
            out[i, j] = True
    return out


@pytest.mark.parametrize("Tq, Tk", [(5, 5), (1, 9), (3, 12), (17, 17)])
@pytest.mark.parametrize("causal, window", [(True, None), (True, 3), (False, None)])
def test_band_rule_is_the_window_inside_the_causal_prefix(Tq, Tk, causal, window):
    padded_q, padded_k = Tq + 4, Tk + 6
    rule = band_rule(Tq, Tk, causal=causal, shift=Tk - Tq, window=window, device=torch.device("cpu"))
    q_idx, kv_idx = torch.arange(padded_q)[:, None], torch.arange(padded_k)[None, :]
    got = rule(torch.tensor(0), torch.tensor(0), q_idx, kv_idx)
    assert torch.equal(got, allowed_by_definition(Tq, Tk, padded_q, padded_k, causal, window))


def twins(attention: str, **params):
    torch.manual_seed(0)
    math = ATTENTION.build(attention, d_model=D_MODEL, num_heads=HEADS, backend="math", **params).eval()
    flex = ATTENTION.build(attention, d_model=D_MODEL, num_heads=HEADS, backend="flex", **params).eval()
    flex.load_state_dict(math.state_dict())
    return math, flex


@pytest.mark.parametrize("position", ["none", "relative", "t5"])
def test_causal_local_flex_with_the_analytic_mask_equals_math(position):
    """Past one 128-row block, so partial blocks (where the mask_mod runs) and skipped ones both occur; and
    a cached step, whose one query sits at the last of 150 keys."""
    math, flex = twins("local", window=24)
    pos = POSITION.build(position, d_model=D_MODEL, num_heads=HEADS)
    x = torch.randn(2, 150, D_MODEL)
    with torch.no_grad():
        want, _ = math(x, causal=True, position=pos)
        got, _ = flex(x, causal=True, position=pos)
        assert torch.allclose(got, want, atol=1e-5)
        caches = [KVCache(), KVCache()]
        outs = [layer(x[:, :149], causal=True, position=pos, cache=c)[0] for layer, c in zip((math, flex), caches)]
        steps = [layer(x[:, 149:], causal=True, position=pos, cache=c)[0] for layer, c in zip((math, flex), caches)]
    assert torch.allclose(outs[1], outs[0], atol=1e-5) and torch.allclose(steps[1], steps[0], atol=1e-5)


def padded_rows(attention: str, T: int, **params) -> int:
    """How many (B, H, T, D) tensors one flex call pads."""
    _, flex = twins(attention, **params)
    calls = []
    real = F.pad

    def spy(x, pad, *args, **kwargs):
        if x.dim() == 4 and x.shape[-1] == D_MODEL // HEADS:
            calls.append(tuple(x.shape))
        return real(x, pad, *args, **kwargs)

    with mock.patch.object(F, "pad", side_effect=spy), torch.no_grad():
        flex(torch.randn(2, T, D_MODEL), causal=True)
    return len(calls)


@pytest.mark.parametrize("attention, params", [("soft", {}), ("local", {"window": 8})])
def test_a_call_pads_q_k_v_once_each_and_only_when_short_of_its_bucket(attention, params):
    assert padded_rows(attention, 100, **params) == 3  # the scaled queries, the keys, the values
    assert padded_rows(attention, 128, **params) == 0  # 128 is a bucket length already


def test_shaw_slots_clip_within_the_distance_and_spread_past_it():
    k = 3
    distance = torch.arange(-(k + 2 * SPREAD + 5), k + 2 * SPREAD + 6)
    slot = shaw_slot(distance, k)
    inside = distance.abs() <= k
    assert torch.equal(slot[inside], distance[inside] + k)
    for side in (distance < -k, distance > k):
        far = slot[side]
        assert far.unique().numel() == SPREAD  # every copy used, none shared with the clipped range
        assert bool((far > 2 * k).all())
    per_bucket = torch.randn(2, 2 * k + 1)
    table = spread_table(per_bucket)
    clipped = distance.clamp(-k, k) + k  # the definition: the end bucket for every far key
    assert torch.equal(table[:, slot], per_bucket[:, clipped])


def dense(score_mod, Tq: int, Tk: int) -> torch.Tensor:
    h = torch.arange(HEADS)[:, None, None]
    q_idx, kv_idx = torch.arange(Tq)[None, :, None], torch.arange(Tk)[None, None, :]
    return score_mod(torch.zeros(HEADS, Tq, Tk), torch.tensor(0), h, q_idx, kv_idx)


def captured_with_grad(score_mod) -> list[torch.Tensor]:
    cells = [c.cell_contents for c in score_mod.__closure__ or ()]
    return [t for t in cells if isinstance(t, torch.Tensor) and t.requires_grad]


@pytest.mark.parametrize("position", ["t5", "relative"])
def test_bias_tables_are_captured_in_fp32_under_bf16(position):
    encoding = POSITION.build(position, d_model=D_MODEL, num_heads=HEADS)
    q = torch.randn(1, HEADS, 40, D_MODEL // HEADS, dtype=torch.bfloat16)
    positions = torch.arange(40)
    tables = captured_with_grad(encoding.score_mod(q, positions, positions))
    assert tables and all(t.dtype == torch.float32 for t in tables)


def test_t5_table_gradient_under_bf16_matches_a_float64_sum():
    """Hundreds of (query, key) pairs share each far bucket: their gradients, summed in the captured table's
    dtype, stay within float32's error of the float64 sum (bf16 sums are off by about 1e-2)."""
    torch.manual_seed(0)
    encoding = POSITION.build("t5", d_model=D_MODEL, num_heads=HEADS)
    T = 300
    positions = torch.arange(T)
    weight = torch.rand(HEADS, T, T, dtype=torch.float64)
    q = torch.zeros(1, HEADS, T, D_MODEL // HEADS, dtype=torch.bfloat16)
    got = torch.autograd.grad(
        (dense(encoding.score_mod(q, positions, positions), T, T) * weight).sum(), encoding.bias.weight
    )[0]
    reference = POSITION.build("t5", d_model=D_MODEL, num_heads=HEADS).double()
    reference.load_state_dict(encoding.state_dict())
    bias = reference.score_bias(q.double(), positions, positions)[0]  # (H, T, T)
    want = torch.autograd.grad((bias * weight).sum(), reference.bias.weight)[0]
    assert torch.allclose(got.double(), want, rtol=1e-5, atol=1e-5)


def test_relative_gradients_with_spread_slots_equal_the_math_path():
    """Keys up to 250 past the clip of 4: every far slot copy is read, and the gradients in the table and in
    q add up to the math path's (``score_bias``) in float64."""
    torch.manual_seed(0)
    encoding = POSITION.build("relative", d_model=D_MODEL, num_heads=HEADS, max_distance=4).double()
    Tq, Tk = 20, 270
    q = torch.randn(1, HEADS, Tq, D_MODEL // HEADS, dtype=torch.float64, requires_grad=True)
    q_pos, k_pos = torch.arange(Tk - Tq, Tk), torch.arange(Tk)
    weight = torch.randn(HEADS, Tq, Tk, dtype=torch.float64)
    inputs = [q, encoding.keys]
    got = torch.autograd.grad((dense(encoding.score_mod(q, q_pos, k_pos), Tq, Tk) * weight).sum(), inputs)
    want = torch.autograd.grad((encoding.score_bias(q, q_pos, k_pos)[0] * weight).sum(), inputs)
    for g, w in zip(got, want):
        assert torch.allclose(g, w, rtol=1e-6, atol=1e-6)


def test_lengths_inside_one_bucket_give_the_compiled_kernel_nothing_new_to_guard():
    """Dynamo guards a mask_mod's non-tensor closure values as constants: were the lengths ints, every length
    in one bucket would compile again (quick's evaluation lengths 12, 16 and 24 did, 8 graphs instead of 6
    in ``python -m experiments.diagnostics.compile_cells``). Tensors are inputs: their values may differ."""

    def constants(rule) -> list:
        return [c.cell_contents for c in rule.__closure__ if not isinstance(c.cell_contents, torch.Tensor)]

    cpu = torch.device("cpu")
    for causal, window in ((True, None), (True, 8), (False, None)):
        short = band_rule(12, 12, causal=causal, shift=0, window=window, device=cpu)
        long = band_rule(24, 30, causal=causal, shift=6, window=window, device=cpu)
        assert constants(short) == constants(long)
