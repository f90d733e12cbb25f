"""The compiled flex kernel compiles a bounded number of times over a run's calls, and never runs eager.

A seq2seq model on flex (T5 bias, padded sources) is evaluated at several lengths and generates step
by step, with the flex forward compiled on CPU. Lengths pad to ``bucket_length``, so the compiles are
one per signature of the model's calls (encoder self attention with padding, causal decoder self
attention, cross attention): the bound, 3, is counted from the model's structure, not from a run.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from torch._dynamo.utils import counters

import variants.flex as flex
from experiments.model.transformer import ModelSpec, Transformer, VariantSpec
from tests.helpers.cases import one_thread  # noqa: F401 (autouse fixture)

#: one compile per (mask_mod, score_mod) pair the model calls flex with, at one batch size and grad mode
SIGNATURES = 3


@pytest.fixture
def compiled_on_cpu():
    torch._dynamo.reset()
    flex.SETTINGS.compile_on_cpu = True
    yield
    flex.SETTINGS.compile_on_cpu = False
    torch._dynamo.reset()


def tiny_flex_seq2seq(attention: str, a_params: dict, position: str, p_params: dict) -> Transformer:
    """A one-layer seq2seq model on flex, seeded: what every compile count here is taken over."""
    spec = ModelSpec(
        arch="seq2seq",
        vocab_size=20,
        attention=VariantSpec(attention, a_params),
        position=VariantSpec(position, p_params),
        d_model=32,
        ffn_dim=32,
        encoder_layers=1,
        decoder_layers=1,
        dropout=0.0,
        backend="flex",
    )
    torch.manual_seed(0)
    return Transformer(spec)


@pytest.mark.slow  # an Inductor compile (10-25 s on 2 cores): the slow tier's, with the other compiles
def test_evaluation_at_several_lengths_and_generation_compile_a_bounded_number_of_times(compiled_on_cpu):
    model = tiny_flex_seq2seq("multihead", {"num_heads": 2}, "t5", {}).eval()
    spec = model.spec
    before = counters["stats"]["unique_graphs"]
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        for T in (5, 9, 17, 30):
            src = torch.randint(4, 20, (3, T))
            src[1, T // 2 :] = spec.pad_id  # padding reaches the encoder and cross attention masks
            model(src, torch.randint(4, 20, (3, T + 1)))
        model.generate(torch.full((3, 1), spec.bos_id), 4, src=torch.randint(4, 20, (3, 7)))
    compiles = counters["stats"]["unique_graphs"] - before
    assert not [w for w in caught if "without torch.compile" in str(w.message)], "a flex call ran eager"
    assert 1 <= compiles <= SIGNATURES, f"{compiles} compiles over 4 lengths and a generation; bound {SIGNATURES}"


FIT_CELLS = [
    ("soft", {}, "relative", {}),
    ("multihead", {"num_heads": 2}, "t5", {}),
    ("local", {"window": 2}, "sinusoidal", {}),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "attention, a_params, position, p_params", FIT_CELLS, ids=[f"{a}-{p}" for a, _, p, _ in FIT_CELLS]
)
def test_a_fit_alternating_grad_modes_compiles_within_the_stated_bound(
    compiled_on_cpu, attention, a_params, position, p_params
):
    """What Lightning does: training steps with grad enabled, validation under inference_mode, generation
    under no_grad, at the lengths of several batches. Each grad mode is a new signature to Dynamo
    (GLOBAL_STATE guard), so this fit's calls take up to GRAD_MODES x call kinds x length buckets compiles
    of the one flex code object: past Dynamo's default recompile_limit (8), which must not decide.
    Parameters are frozen: flex has no CPU backward, and the grad mode, not a backward, is what Dynamo
    guards on."""
    model = tiny_flex_seq2seq(attention, a_params, position, p_params).requires_grad_(False)
    spec = model.spec
    before = counters["stats"]["unique_graphs"]
    lengths = (5, 9, 130, 140)  # two length buckets (128, 256)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for T in lengths:
            src = torch.randint(4, 20, (3, T))
            src[1, T // 2 :] = spec.pad_id
            tgt = torch.randint(4, 20, (3, T + 1))
            with torch.enable_grad():
                model.train()(src, tgt)
            with torch.inference_mode():
                model.eval()(src, tgt)
        with torch.no_grad():
            model.generate(torch.full((3, 1), spec.bos_id), 3, src=torch.randint(4, 20, (3, 7)))
    compiles = counters["stats"]["unique_graphs"] - before
    assert not [w for w in caught if "without torch.compile" in str(w.message)], "a flex call ran eager"
    # Training and validation: three call kinds (encoder self and cross attention with padding, causal
    # decoder self attention) x grad modes (on, off) x two buckets. Generation (grad off, one bucket):
    # encoder self and cross attention without padding and the decoding step over its cache, three more.
    bound = SIGNATURES * flex.GRAD_MODES * 2 + 3
    assert 1 <= compiles <= min(bound, flex.RECOMPILE_BUDGET), f"{compiles} compiles; bound {bound}"


@pytest.mark.slow  # an Inductor compile (10-25 s on 2 cores): the slow tier's, with the other compiles
def test_a_call_past_the_recompile_limit_is_an_error_naming_the_cause(compiled_on_cpu, monkeypatch):
    q = torch.randn(1, 1, 16, 16)
    mask = flex.block_mask_from_intervals(flex.prefix_intervals(torch.arange(16), torch.arange(16), causal=True))
    monkeypatch.setattr(flex, "RECOMPILE_BUDGET", 1)
    with torch.no_grad():
        flex.flex_attend(q, q, q, block_mask=mask, score_mod=None, scale=0.25)
        with pytest.raises(RuntimeError, match="compiled 1 times .*RECOMPILE_BUDGET"):
            flex.flex_attend(q.double(), q.double(), q.double(), block_mask=mask, score_mod=None, scale=0.25)
