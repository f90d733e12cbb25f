"""``model.compile=true``: the compiled model computes what the eager one does.

The compiled forms of ReLU and dropout (``experiments.model.elementwise``) differ from
the eager ones only in what autograd saves; these tests hold them to the same
function and gradient, and the compiled Transformer to the eager one.
"""

from __future__ import annotations

import copy
import shutil

import pytest
import torch
import torch.nn.functional as F

from experiments.model.compiling import compile_model
from experiments.model.elementwise import _ReLUSavingOutput, dropout
from experiments.model.transformer import ModelSpec, Transformer, VariantSpec
from variants import ATTENTION, POSITION

needs_compiler = pytest.mark.skipif(
    not any(shutil.which(c) for c in ("g++", "c++", "clang++")),
    reason="torch.compile on CPU needs a C++ compiler",
)


def test_relu_saving_output_has_relus_value_and_gradient() -> None:
    x = torch.tensor([-2.0, -0.0, 0.0, 1e-30, 3.0, -1e-30], dtype=torch.float64, requires_grad=True)
    grad = torch.arange(1.0, 7.0, dtype=torch.float64)
    ours = _ReLUSavingOutput.apply(x)
    (ours_grad,) = torch.autograd.grad(ours, x, grad)
    ref = F.relu(x)
    (ref_grad,) = torch.autograd.grad(ref, x, grad)
    assert torch.equal(ours, ref)
    assert torch.equal(ours_grad, ref_grad)  # 0 at x == 0, as for F.relu
    assert torch.autograd.gradcheck(
        _ReLUSavingOutput.apply, (torch.randn(20, dtype=torch.float64, requires_grad=True),)
    )


@needs_compiler
def test_compiled_dropout_keeps_1_minus_p_and_rescales() -> None:
    p, n = 0.25, 200_000
    step = torch.compile(lambda x: dropout(x, p, True))
    x = torch.ones(n, requires_grad=True)
    torch.manual_seed(0)
    out = step(x)
    out.sum().backward()
    kept = out != 0
    assert torch.allclose(out[kept], torch.full_like(out[kept], 1 / (1 - p)))
    dropped = 1 - kept.float().mean().item()
    assert abs(dropped - p) < 4 * (p * (1 - p) / n) ** 0.5  # four standard deviations of a binomial share
    assert torch.equal(x.grad, out.detach())  # d(out)/dx is the same mask times 1/(1-p)
    torch.manual_seed(1)
    assert not torch.equal(step(x), out)  # a fresh mask per call
    assert torch.equal(dropout(x, p, False), x) and torch.equal(dropout(x, 0.0, True), x)


def compiled_cases() -> list[tuple[str, str, str]]:
    """Every attention type (with a relative encoding, which adds score and value terms) and every
    encoding (with multihead), in the encoder-decoder; and the decoder-only model once."""
    # a type that forms no score matrix (variants.pairs) takes the rotary encoding, which acts before it
    pairs = [(a, "relative" if ATTENTION.get(a).supports_score_bias else "rope") for a in ATTENTION.names()]
    pairs += [("multihead", p) for p in POSITION.names()]
    return [("seq2seq", a, p) for a, p in dict.fromkeys(pairs)] + [("decoder", "multihead", "sinusoidal")]


@pytest.mark.slow
@needs_compiler
@pytest.mark.parametrize("arch, attention, position", compiled_cases())
def test_compiled_model_equals_eager(arch: str, attention: str, position: str) -> None:
    torch.manual_seed(0)
    params = {"num_heads": 2, **({"window": 3} if attention == "local" else {})}
    spec = ModelSpec(
        arch=arch,
        vocab_size=20,
        attention=VariantSpec(attention, params),
        position=VariantSpec(position),
        d_model=16,
        ffn_dim=32,
        # one layer of each: compiled and eager must agree layer by layer, and a second layer only
        # doubles the graph Inductor compiles (the slowest part of this suite)
        encoder_layers=1,
        decoder_layers=1,
        dropout=0.0,
    )
    eager = Transformer(spec).train()
    compiled = copy.deepcopy(eager)
    compile_model(compiled, "cpu")
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, 20, (3, 7), generator=g) if arch == "seq2seq" else None
    if src is not None:
        src[1, 5:] = 0  # padding reaches the encoder mask and cross attention
    tgt = torch.randint(4, 20, (3, 6), generator=g)
    outputs = []
    for model in (eager, compiled):
        torch.manual_seed(2)  # the same draws for stochastic attention (fallback_random: ATen's generator)
        logits = model(src, tgt)  # (B, T, V)
        logits.square().mean().backward()
        outputs.append((logits.detach(), {n: p.grad for n, p in model.named_parameters()}))
    (ref, ref_grads), (got, got_grads) = outputs
    assert torch.allclose(got, ref, atol=1e-5)
    for name, grad in ref_grads.items():
        if grad is None:
            assert got_grads[name] is None, name
        else:
            assert torch.allclose(got_grads[name], grad, atol=1e-5), name


@pytest.mark.slow
@needs_compiler
def test_training_app_runs_with_model_compile(tmp_path) -> None:
    from experiments.training.single_run import train
    from tests.helpers.config import TINY, compose

    overrides = [*TINY, "model.compile=true", "model.dropout=0.1", "trainer.max_steps=3"]
    result = train(compose(overrides), tmp_path, overrides)
    assert result["status"] == "completed", result["error"]
    assert result["config"]["model.compile"] is True
    # compiling is a part of the fit's time, not of the steady steps'
    assert 0 < result["cost"]["compile_seconds"] < result["cost"]["train_seconds"]
    assert result["cost"]["compile_mode"] == "default"
    assert all(v == v for v in result["metrics"].values())  # no NaN
