"""``auto`` runs flex only where the cost table expects it to pay, and says why elsewhere.

CUDA is mocked (plans only, nothing runs on a device). The thresholds come from a table patched in
for the test (``FLEX_PAYS`` rows of 300 keys and head dim 32), not from the project's figures, so
each expectation is this file's own: flex at and above the row, the compile-free kernel below it.
"""

from __future__ import annotations

from unittest import mock

import pytest
import torch

import variants.flex_cost as flex_cost
from variants import ATTENTION, POSITION

D_MODEL = 64
ROW = flex_cost.Crossover(min_keys=300, min_head_dim=32)


@pytest.fixture
def table():
    rows = {family: {dtype: ROW for dtype in ("bfloat16", "float16", "float32")} for family in flex_cost.FAMILIES}
    with mock.patch.dict(flex_cost.FLEX_PAYS, rows):
        yield


def cuda_layer(attention: str, heads: int, **params):
    with mock.patch.object(torch.cuda, "is_available", return_value=True):
        return ATTENTION.build(attention, d_model=D_MODEL, num_heads=heads, **params).train()


@pytest.mark.parametrize(
    "attention, position, below",
    [("soft", "alibi", "sdpa"), ("multihead", "t5", "sdpa"), ("soft", "relative", "sdpa"), ("local", "none", "banded")],
)
def test_flex_from_the_threshold_the_compile_free_kernel_below(table, attention, position, below):
    layer = cuda_layer(attention, heads=1)  # head dim 64 >= the row's 32
    pos = POSITION.build(position, d_model=D_MODEL, num_heads=1)
    for dtype in (torch.bfloat16, torch.float32):
        assert layer.plan(pos, cuda=True, keys=300, dtype=dtype) == "flex"
        assert layer.plan(pos, cuda=True, keys=5000, dtype=dtype) == "flex"
        backend, why = layer.explain(pos, cuda=True, keys=299, dtype=dtype)
        assert backend == below
        assert "299 keys < 300" in why and "FLEX_PAYS" in why, why
    # a plan for a whole run (no length known) keeps flex where the head width allows it
    assert layer.plan(pos, cuda=True) == "flex"


def test_a_narrow_head_below_the_rows_width_keeps_the_compile_free_kernel(table):
    layer = cuda_layer("multihead", heads=4)  # head dim 16: flex builds, but the row asks for 32
    pos = POSITION.build("alibi", d_model=D_MODEL, num_heads=4)
    backend, why = layer.explain(pos, cuda=True, keys=4096)
    assert backend == "sdpa" and "head dim 16 < 32" in why


def test_a_backend_asked_for_by_name_is_not_second_guessed(table):
    layer = cuda_layer("soft", heads=1, backend="flex")
    assert layer.plan(POSITION.build("alibi", d_model=D_MODEL), cuda=True, keys=8) == "flex"
    local = cuda_layer("local", heads=1, backend="flex")
    assert local.plan(None, cuda=True, keys=8) == "flex"


def test_cpu_plans_do_not_change(table):
    layer = ATTENTION.build("soft", d_model=D_MODEL).train()
    assert layer.plan(POSITION.build("alibi", d_model=D_MODEL), cuda=False, keys=4096) == "sdpa"


def test_a_call_plans_with_its_own_length_and_dtype(table):
    """attend passes the call's longer length and its tensors' dtype to the plan."""
    layer = ATTENTION.build("soft", d_model=D_MODEL).eval()
    pos = POSITION.build("alibi", d_model=D_MODEL)
    seen = []
    real = layer.explain

    def spy(*args, **kwargs):
        seen.append((kwargs.get("keys"), kwargs.get("dtype")))
        return real(*args, **kwargs)

    with mock.patch.object(layer, "explain", side_effect=spy), torch.no_grad():
        layer(torch.randn(2, 7, D_MODEL), torch.randn(2, 19, D_MODEL), position=pos)
    assert seen == [(19, torch.float32)]


def test_fire_follows_grad_mode_not_the_module_mode(table):
    """eval() with a backward (a gradient check) must not put FIRE's score_mod on flex, which has no backward
    for it; without grad, evaluation keeps flex."""
    layer = cuda_layer("soft", heads=1).eval()
    pos = POSITION.build("fire", d_model=D_MODEL, num_heads=1)
    with torch.enable_grad():
        backend, why = layer.explain(pos, cuda=True, keys=4096)
    assert backend == "sdpa" and "backward" in why
    with torch.no_grad():
        assert layer.plan(pos, cuda=True, keys=4096) == "flex"
    layer.train()
    with torch.no_grad():  # training mode under no_grad (a forward that is not differentiated)
        assert layer.plan(pos, cuda=True, keys=4096) == "flex"


def test_a_models_plan_records_the_length_and_the_reason(table):
    from experiments.model.transformer import ModelSpec, Transformer, VariantSpec

    spec = ModelSpec(
        arch="decoder",
        vocab_size=20,
        attention=VariantSpec("local", {"window": 4}),
        position=VariantSpec("none"),
        d_model=D_MODEL,
        ffn_dim=32,
        decoder_layers=1,
        dropout=0.0,
    )
    with mock.patch.object(torch.cuda, "is_available", return_value=True):
        model = Transformer(spec)
    short = model.kernel_plan(cuda=True, keys=25)
    assert list(short.values()) == ["banded (25 keys < 300: " + ROW.describe("window", "bfloat16") + ")"]
    assert list(model.kernel_plan(cuda=True, keys=300).values()) == ["flex"]
    assert model.flex_head_dims(cuda=True, keys=25) == set()  # nothing to probe options for
    assert model.flex_head_dims(cuda=True, keys=300) == {D_MODEL}


def test_an_unknown_family_or_dtype_is_refused_by_name():
    with pytest.raises(ValueError, match="family='dense' is unknown; choose one of"):
        flex_cost.crossover("dense", torch.float32)
    with pytest.raises(ValueError, match="no flex cost row for dtype='float64'"):
        flex_cost.crossover("window", torch.float64)
