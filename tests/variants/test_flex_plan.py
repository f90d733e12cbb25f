"""Every layer's plan names a path that runs, and trains, on the device it is planned for.

CUDA is mocked: each registered attention type (every declared variation) × encoding × head width
{8, 16, 64} × role (self attention with the encoding, cross attention without) is planned, in
training and in evaluation. The head width flex's CUDA kernel needs is read from torch's own source,
not from the code under test.
"""

from __future__ import annotations

import inspect
import re
from unittest import mock

import pytest
import torch
import torch._inductor.kernel.flex.flex_attention as inductor_flex

from variants import ATTENTION, POSITION
from variants.checks import VariantConfigError
from variants.pairs import pair_problem

D_MODEL = 64
HEAD_DIMS = (8, 16, 64)
ROLES = ("self", "cross")


def inductor_min_head_dim() -> int:
    """The narrowest head Inductor's CUDA flex lowering accepts: its ``sympy.Lt(query..., N)`` check."""
    found = re.search(r"sympy\.Lt\(query\.get_size\(\)\[-1\], (\d+)\)", inspect.getsource(inductor_flex))
    assert found, "torch's flex lowering no longer states its head-width check; read it again"
    return int(found.group(1))


def plans(attention: str, a_params: dict, head_dim: int, position: str, p_params: dict, training: bool):
    """(role, plan, reason) of every role of the pair, or [] where the pair cannot be built."""
    heads = D_MODEL // head_dim
    try:
        with mock.patch.object(torch.cuda, "is_available", return_value=True):
            layer = ATTENTION.build(attention, d_model=D_MODEL, num_heads=heads, **a_params).train(training)
        encoding = POSITION.build(position, d_model=D_MODEL, num_heads=heads, **p_params)
    except VariantConfigError:
        return []  # e.g. rotary encodings at an odd head width
    if pair_problem(layer, encoding) is not None:
        return []
    out = []
    for role in ROLES:
        given = encoding if role == "self" else None
        backend, reason = layer.explain(given, cuda=True)
        assert layer.plan(given, cuda=True) == backend
        out.append((role, backend, reason, given))
    return out


GRID = [
    pytest.param(a, ap, p, pp, id="-".join([a, *map(str, ap.values()), p, *map(str, pp.values())]))
    for a in ATTENTION.names()
    for ap in ATTENTION.variations(a)
    for p in POSITION.names()
    for pp in POSITION.variations(p)
]


@pytest.mark.parametrize("attention, a_params, position, p_params", GRID)
def test_no_cuda_plan_names_flex_where_it_cannot_run_or_train(attention, a_params, position, p_params):
    minimum = inductor_min_head_dim()
    for head_dim in HEAD_DIMS:
        for training in (True, False):
            for role, backend, reason, given in plans(attention, a_params, head_dim, position, p_params, training):
                where = f"{attention} {a_params} + {position} {p_params}, head dim {head_dim}, {role}, train={training}"
                if backend == "flex":
                    assert head_dim >= minimum, f"flex planned below head dim {minimum}: {where}"
                    if training and given is not None and given.has_score_mod:
                        assert given.flex_trains, f"flex planned to train a score_mod it has no backward for: {where}"
                if head_dim < minimum and backend != "flex" and reason is not None:
                    assert "head dim" in reason or "weights" in reason or "score" in reason, where


def test_the_fallback_is_visible_and_flex_stays_where_it_runs():
    """The narrow-head fallback says why; wide heads and FIRE without grad keep flex."""
    rows = plans("multihead", {}, 8, "alibi", {}, True)
    assert [(r[1], "head dim 8 < 16" in (r[2] or "")) for r in rows if r[0] == "self"] == [("sdpa", True)]
    assert [r[1] for r in plans("multihead", {}, 64, "alibi", {}, True) if r[0] == "self"] == ["flex"]
    assert [r[1] for r in plans("local", {}, 8, "none", {}, True)] == ["banded", "banded"]
    fire_train = [r for r in plans("soft", {}, 64, "fire", {}, True) if r[0] == "self"]
    assert fire_train[0][1] == "sdpa" and "backward" in fire_train[0][2]
    with torch.no_grad():  # FIRE's flex follows grad mode: evaluation without a backward keeps flex
        assert [r[1] for r in plans("soft", {}, 64, "fire", {}, False) if r[0] == "self"] == ["flex"]


def test_every_layer_of_a_model_records_its_kernel_and_why():
    """A model of narrow heads on CUDA plans SDPA for its biased self attention and says why, layer by layer."""
    from experiments.model.transformer import ModelSpec, Transformer, VariantSpec

    spec = ModelSpec(
        arch="seq2seq",
        vocab_size=20,
        attention=VariantSpec("multihead", {"num_heads": 8}),
        position=VariantSpec("t5"),
        d_model=64,
        ffn_dim=32,
        encoder_layers=1,
        decoder_layers=2,
        dropout=0.0,
    )
    with mock.patch.object(torch.cuda, "is_available", return_value=True):
        model = Transformer(spec).eval()
    plan = model.kernel_plan(cuda=True)
    layers = {f"encoder.layers.{i}.self_attn" for i in range(1)} | {
        f"decoder.layers.{i}.{role}" for i in range(2) for role in ("self_attn", "cross_attn")
    }
    assert set(plan) == layers
    for name, kernel in plan.items():
        # cross attention carries no bias: SDPA's flash kernel is its first pick, no fallback to explain
        want = "sdpa" if name.endswith("cross_attn") else f"sdpa (head dim 8 < {inductor_min_head_dim()}"
        assert kernel.startswith(want), (name, kernel)
    assert not model.training  # planning leaves the model's mode as it was
    assert model.kernel_plan(cuda=False) == {name: "sdpa" for name in layers}


def test_a_mask_cached_in_validation_never_reaches_a_training_call():
    """Lightning validates under inference_mode; the same mask key asked for afterwards with gradients on
    gets tensors a backward may save (no inference tensors), and validation gets its own cached mask."""
    from variants.flex import BLOCK_MASKS, cached_block_mask, prefix_intervals

    BLOCK_MASKS.clear()
    positions = torch.arange(300)
    key = ("prefix", 300, 300, True, "cpu", "inference-mask-test")

    def build():
        return prefix_intervals(positions, positions, causal=True)

    def tensors(mask):
        return [mask.kv_num_blocks, mask.kv_indices, mask.full_kv_num_blocks, mask.full_kv_indices]

    with torch.inference_mode():
        validating = cached_block_mask(key, build, None)
    assert all(t.is_inference() for t in tensors(validating))  # the mode this test is about
    training = cached_block_mask(key, build, None)
    assert not any(t.is_inference() for t in tensors(training))
    assert all(torch.equal(a, b) for a, b in zip(tensors(training), tensors(validating)))
    with torch.inference_mode():
        assert cached_block_mask(key, build, None) is validating  # each mode still reuses its own
    assert cached_block_mask(key, build, None) is training


def dense_score_mod(score_mod, heads: int, Tq: int, Tk: int) -> torch.Tensor:
    """The score_mod on every (head, query, key) at once, on zero scores: its bias, (1, H, Tq, Tk)."""
    h = torch.arange(heads)[:, None, None]
    q_idx, kv_idx = torch.arange(Tq)[None, :, None], torch.arange(Tk)[None, None, :]
    return score_mod(torch.zeros(heads, Tq, Tk), torch.tensor(0), h, q_idx, kv_idx)[None]


SCORE_MOD_ENCODINGS = [n for n in POSITION.names() if getattr(POSITION.get(n), "has_score_mod", False)]


@pytest.mark.parametrize("position", SCORE_MOD_ENCODINGS)
@pytest.mark.parametrize("offset, Tq, Tk", [(0, 150, 150), (40, 1, 41), (37, 20, 20), (0, 9, 300)])
def test_score_mod_bias_and_gradients_equal_the_dense_reference(position, offset, Tq, Tk):
    """Each score_mod (T5's per-distance vector included) gives the dense score_bias's values and the same
    gradients in every parameter and in q, at distances past T5's max_distance and at shifted positions."""
    heads = 2
    torch.manual_seed(0)
    encoding = POSITION.build(position, d_model=32, num_heads=heads)
    for p in encoding.parameters():
        p.data.normal_()  # away from an initialisation that could hide a swapped index
    q = torch.randn(1, heads, Tq, 16, requires_grad=True)
    q_pos = torch.arange(offset + Tk - Tq, offset + Tk)  # the last query sees the last key
    k_pos = torch.arange(offset, offset + Tk)
    weight = torch.randn(1, heads, Tq, Tk)

    inputs = [q, *encoding.parameters()]

    def grads(bias):
        # a term that needs no gradient (ALiBi's fixed slopes) has zero gradient everywhere
        if not bias.requires_grad:
            return [torch.zeros_like(x) for x in inputs]
        found = torch.autograd.grad((bias * weight).sum(), inputs, allow_unused=True)
        return [torch.zeros_like(x) if g is None else g for x, g in zip(inputs, found)]

    want = encoding.score_bias(q, q_pos, k_pos).expand(1, heads, Tq, Tk)
    got = dense_score_mod(encoding.score_mod(q, q_pos, k_pos), heads, Tq, Tk)
    assert torch.allclose(got, want, atol=1e-5)
    for g, w in zip(grads(got), grads(want)):
        assert torch.allclose(g, w, atol=1e-4, rtol=1e-4)


def test_kernel_options_are_chosen_at_build_time_and_a_compiled_model_reads_them(tmp_path, monkeypatch):
    """choose_kernel_options probes each head width forward and backward before anything traces flex; the
    path a compiled model takes (no probe while tracing) then finds the options chosen, not the defaults."""
    import variants.flex as flex
    from variants.flex_options import BACKWARD_CANDIDATES

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))  # the probes' choices are remembered there
    device, dtype, tried = torch.device("cuda", 0), torch.bfloat16, []

    def probe(options, device, dtype, head_dim, backward):
        tried.append((head_dim, backward, options))
        if backward and head_dim == 64 and options == BACKWARD_CANDIDATES[0]:
            raise RuntimeError("out of resource: shared memory, Required: 245760, Hardware limit: 232448")

    with mock.patch.object(flex, "shared_memory", return_value=232448), mock.patch.dict(flex._OPTIONS, clear=True):
        chosen = flex.choose_kernel_options(device, dtype, {64, 32}, probe=probe)
        assert chosen["shared_memory_per_block_optin"] == 232448
        assert chosen[f"{dtype} head dim 64 backward"] == BACKWARD_CANDIDATES[1]
        assert chosen[f"{dtype} head dim 64 forward"] == "defaults"
        assert chosen[f"{dtype} head dim 32 backward"] == BACKWARD_CANDIDATES[0]
        assert {(d, b) for d, b, _ in tried} == {(d, b) for d in (32, 64) for b in (True, False)}
        # the key flex_attend's compiled branch reads: (str(q.device), q.dtype, head dim, backward)
        assert flex._OPTIONS[(str(device), dtype, 64, True)] == BACKWARD_CANDIDATES[1]
        assert flex._OPTIONS[(str(device), dtype, 64, False)] is None


def test_the_report_reads_each_runs_kernels_once_per_kind():
    """collect keeps result.json's per-layer kernels as one cell per run: each distinct kernel once, sorted."""
    from analysis.data.rows import result_rows

    base = {"schema": 1, "run_id": "r", "status": "completed", "task": "reverse", "attention": "multihead"}
    base |= {"position": "t5", "seed": 0}
    narrow = "sdpa (head dim 8 < 16, the narrowest flex's CUDA kernel builds)"
    kernels = {"encoder.layers.0.self_attn": narrow, "decoder.layers.0.cross_attn": "sdpa"}
    kernels |= {"decoder.layers.0.self_attn": narrow}
    row, _ = result_rows({**base, "kernels": kernels}, None, "result.json")
    assert row["kernels"] == f"sdpa; {narrow}"
    assert result_rows(base, None, "result.json")[0]["kernels"] is None  # a run from before kernels were recorded
