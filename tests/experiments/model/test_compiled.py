"""``model.compile=true``: the compiled model computes what the eager one does.

The compiled forms of ReLU and dropout (``experiments.model.elementwise``) differ from
the eager ones only in what autograd saves; these tests hold them to the same
function and gradient, and the compiled Transformer to the eager one.
"""

from __future__ import annotations

import copy
import shutil
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F

from attnlab.roles import CROSS, DECODER, ENCODER, ROLES
from experiments.config.spec import build_spec
from experiments.model.compiling import compile_model
from experiments.model.elementwise import _ReLUSavingOutput, dropout
from experiments.model.transformer import ModelSpec, Transformer, VariantSpec
from variants import ATTENTION, POSITION
from variants.pairs import encodings_for

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


@dataclass(frozen=True)
class Case:
    """A model to compile: its architecture, its one encoding, the type in each attention role and the backend."""

    arch: str
    position: str
    roles: dict[str, str]  # role -> attention type
    # "inductor" (what model.compile=true runs) or "aot_eager_decomp_partition" (the graphs Inductor is given, run
    # by ATen)
    backend: str

    @property
    def id(self) -> str:
        return "-".join([self.backend.split("_")[0], self.arch, self.position, *self.roles.values()])


def _self_roles_ok(position: str, types: tuple[str, ...]) -> bool:
    return all(position in encodings_for(ATTENTION.get(t)) for t in types)


def _rotated(items: list[str], by: int) -> list[str]:
    return items[by % len(items) :] + items[: by % len(items)]


def compiled_cases() -> list[Case]:
    """Every attention type in every role and every encoding, packed three types to a seq2seq model.

    Inductor compiles what carries the most terms: each score-forming type under the relative encoding (score
    bias and value term) and each kernelised type under rotary, in the encoder's and the decoder's self
    attention, the same types in cross attention too, and the decoder-only model once. Every other encoding
    and every (type, role) left runs through ``aot_eager_decomp_partition``: Dynamo's capture, AOT autograd's
    joint graph, Inductor's decompositions and partitioner, so the forward and backward graphs Inductor would
    be given, executed by ATen instead of compiled to C++. (Plain ``aot_eager`` skips the decompositions, and
    its backward fails on a view of a non-contiguous gradient that Inductor's graphs never hold.) An Inductor
    graph costs 25-80 s of C++ compiling on 2 cores here; one of these 5-15 s.
    """
    types = ATTENTION.names()
    scoring = [t for t in types if ATTENTION.get(t).supports_score_bias]
    kernelised = [t for t in types if t not in scoring]
    cases: list[Case] = []
    for position, group in (("relative", scoring), ("rope", kernelised)):
        for i in range(0, len(group), 2):  # two types per model: the encoder's and the decoder's self attention
            enc, dec = group[i], group[min(i + 1, len(group) - 1)]
            cross = group[(i + 2) % len(group)]
            cases.append(Case("seq2seq", position, {ENCODER: enc, DECODER: dec, CROSS: cross}, "inductor"))
    covered = {(t, r) for c in cases for r, t in c.roles.items()}
    for position in POSITION.names():
        usable = [t for t in types if _self_roles_ok(position, (t,))]
        want = {r: [t for t in (usable if r != CROSS else types) if (t, r) not in covered] for r in ROLES}
        # what is still wanted first, else a different type per case and role, so no type stands in for all
        turn = len(cases)
        pick = {r: (want[r] or _rotated(usable if r != CROSS else types, turn + k))[0] for k, r in enumerate(ROLES)}
        if position in ("relative", "rope") and not any(want.values()):
            continue  # the Inductor cases above already run it
        cases.append(Case("seq2seq", position, pick, "aot_eager_decomp_partition"))
        covered |= {(t, r) for r, t in pick.items()}
    while left := sorted({(t, r) for t in types for r in ROLES} - covered):
        roles = {r: next((t for t, rr in left if rr == r), types[0]) for r in ROLES}
        cases.append(Case("seq2seq", "none", roles, "aot_eager_decomp_partition"))
        covered |= {(t, r) for r, t in roles.items()}
    cases.append(Case("decoder", "sinusoidal", {DECODER: "multihead"}, "inductor"))
    return cases


def test_the_cases_cover_every_type_in_every_role_and_every_encoding() -> None:
    cases = compiled_cases()
    seq2seq = [c for c in cases if c.arch == "seq2seq"]
    assert {(t, r) for c in seq2seq for r, t in c.roles.items()} == {(t, r) for t in ATTENTION.names() for r in ROLES}
    assert {c.position for c in cases} == set(POSITION.names())
    for c in cases:  # every case builds: the encoding composes with both self-attention types
        assert _self_roles_ok(c.position, tuple(t for r, t in c.roles.items() if r != CROSS)), c.id
    # Inductor runs each type under the encoding with the most terms it can take
    for t in ATTENTION.names():
        heaviest = "relative" if ATTENTION.get(t).supports_score_bias else "rope"
        assert any(
            c.backend == "inductor" and c.position == heaviest and t in (c.roles[ENCODER], c.roles[DECODER])
            for c in seq2seq
        ), t
    assert len(cases) < len(ATTENTION.names()) + len(POSITION.names())  # fewer graphs than one per type and encoding


def _variant(attention: str) -> VariantSpec:
    return VariantSpec(attention, {"num_heads": 2, **({"window": 3} if attention == "local" else {})})


@pytest.mark.slow
@needs_compiler
@pytest.mark.parametrize("case", compiled_cases(), ids=lambda c: c.id)
def test_compiled_model_equals_eager(case: Case) -> None:
    torch.manual_seed(0)
    spec = ModelSpec(
        arch=case.arch,
        vocab_size=20,
        attention=_variant(next(iter(case.roles.values()))),
        position=VariantSpec(case.position),
        **{role: _variant(t) for role, t in case.roles.items()},
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
    # Dynamo keys its cache on Transformer.forward's code, shared by every case in this process: past its
    # recompile limit it would run the later cases eagerly, silently, so each case starts from an empty cache
    torch._dynamo.reset()
    if case.backend == "inductor":
        compile_model(compiled, "cpu")
    else:
        compiled.compile(backend=case.backend)
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, 20, (3, 7), generator=g) if case.arch == "seq2seq" else None
    if src is not None:
        src[1, 5:] = 0  # padding reaches the encoder mask and cross attention
    tgt = torch.randint(4, 20, (3, 6), generator=g)
    outputs = []
    for model in (eager, compiled):
        torch.manual_seed(2)  # the same draws for stochastic attention (fallback_random: ATen's generator)
        logits = model(src, tgt)  # (B, T, V)
        logits.square().mean().backward()
        outputs.append((logits.detach(), {n: p.grad for n, p in model.named_parameters()}))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1, "nothing was compiled"
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
    result = train(build_spec(compose(overrides)), tmp_path, overrides)
    assert result["status"] == "completed", result["error"]
    assert result["config"]["model.compile"] is True
    # compiling is a part of the fit's time, not of the steady steps'
    assert 0 < result["cost"]["compile_seconds"] < result["cost"]["train_seconds"]
    assert result["cost"]["compile_mode"] == "default"
    assert all(v == v for v in result["metrics"].values())  # no NaN
