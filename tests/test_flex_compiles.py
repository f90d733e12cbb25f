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
from experiments.model import ModelSpec, Transformer, VariantSpec
from tests.cases import one_thread  # noqa: F401 (autouse fixture)

#: one compile per (mask_mod, score_mod) pair the model calls flex with, at one batch size and grad mode
SIGNATURES = 3


@pytest.fixture
def compiled_on_cpu():
    torch._dynamo.reset()
    flex.SETTINGS.compile_on_cpu = True
    yield
    flex.SETTINGS.compile_on_cpu = False
    torch._dynamo.reset()


def test_evaluation_at_several_lengths_and_generation_compile_a_bounded_number_of_times(compiled_on_cpu):
    spec = ModelSpec(
        arch="seq2seq",
        vocab_size=20,
        attention=VariantSpec("multihead", {"num_heads": 2}),
        position=VariantSpec("t5"),
        d_model=32,
        ffn_dim=32,
        encoder_layers=1,
        decoder_layers=1,
        dropout=0.0,
        backend="flex",
    )
    torch.manual_seed(0)
    model = Transformer(spec).eval()
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


def test_a_call_past_the_recompile_limit_is_an_error_naming_the_cause(compiled_on_cpu):
    q = torch.randn(1, 1, 16, 16)
    mask = flex.block_mask_from_intervals(flex.prefix_intervals(torch.arange(16), torch.arange(16), causal=True))
    with torch._dynamo.config.patch(recompile_limit=1), torch.no_grad():
        flex.flex_attend(q, q, q, block_mask=mask, score_mod=None, scale=0.25)
        with pytest.raises(RuntimeError, match="recompile_limit"):
            flex.flex_attend(q.double(), q.double(), q.double(), block_mask=mask, score_mod=None, scale=0.25)
