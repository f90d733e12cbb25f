"""RoPE scaling beyond the training length: none, linear (position interpolation), ntk (base change)
and yarn, each checked against its formula written out here with complex numbers.

Up to ``train_length`` = L a scaled rope is plain rope, bit for bit; beyond it the stretch is
s = min(T / L, factor) for a sequence of T positions. Cached decoding declares its final length,
so it equals recomputation even when it crosses L."""

from __future__ import annotations

import math
from unittest import mock

import pytest
import torch

from experiments.model.transformer import ModelSpec, Transformer, VariantSpec
from tests.helpers.cases import one_thread  # noqa: F401 (one_thread is an autouse fixture)
from variants import ATTENTION, POSITION, KVCache
from variants.checks import VariantConfigError

B, T, D_MODEL, HEADS = 2, 12, 32, 2
D = D_MODEL // HEADS  # 16: pairs d = 0 .. 7
BASE, L = 10000.0, 256  # L: the fastest pair turns > 32 times in L, the slowest < once
SCALINGS = ("linear", "ntk", "yarn")


def rope(**params):
    return POSITION.build("rope", d_model=D_MODEL, num_heads=HEADS, base=BASE, **params).eval()


def reference(x: torch.Tensor, pos: torch.Tensor, theta: list[float], magnitude: float = 1.0) -> torch.Tensor:
    """Rotate pair (x_d, x_{d+D/2}) as the complex number x_d + i x_{d+D/2} times e^{i p theta_d}."""
    half = D // 2
    z = torch.complex(x[..., :half].double(), x[..., half:].double())  # (B, H, T, D/2)
    angle = pos.double()[:, None] * torch.tensor(theta, dtype=torch.float64)[None, :]  # (T, D/2)
    z = z * torch.polar(torch.ones_like(angle), angle)
    return (torch.cat((z.real, z.imag), dim=-1) * magnitude).float()


def plain_theta(base: float = BASE) -> list[float]:
    return [base ** (-2 * d / D) for d in range(D // 2)]


def yarn_theta(s: float) -> list[float]:
    """Peng et al. 2023, eq. for h(theta_d) with r_d = L / lambda_d and ramp bounds alpha = 1, beta = 32."""
    out = []
    for theta in plain_theta():
        r = L / (2 * math.pi / theta)
        gamma = 0.0 if r < 1 else 1.0 if r > 32 else (r - 1) / (32 - 1)
        out.append((1 - gamma) * theta / s + gamma * theta)
    return out


def expected(scaling: str, s: float) -> tuple[list[float], float]:
    """The frequencies and the q/k magnitude of each scaling at stretch s, from the papers' formulas."""
    if scaling == "linear":
        return [t / s for t in plain_theta()], 1.0
    if scaling == "ntk":
        return plain_theta(BASE * s ** (D / (D - 2))), 1.0
    return yarn_theta(s), 0.1 * math.log(s) + 1


def qk(seed: int = 0, length: int = T) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(B, HEADS, length, D, generator=gen), torch.randn(B, HEADS, length, D, generator=gen)


POS = torch.arange(300, 300 + T)  # beyond L: T = 312 positions, s = 312 / 256 for factor >= 1.22


@pytest.mark.parametrize("scaling", SCALINGS)
def test_factor_one_is_plain_rope(scaling):
    q, k = qk()
    plain = rope()
    scaled = rope(scaling=scaling, factor=1.0, train_length=L)
    for got, want in zip(scaled.rotate(q, k, POS, POS), plain.rotate(q, k, POS, POS)):
        torch.testing.assert_close(got, want, atol=0, rtol=0)


def test_plain_rope_matches_the_complex_formula():  # anchors the reference itself
    q, k = qk()
    torch.testing.assert_close(rope().rotate(q, k, POS, POS)[0], reference(q, POS, plain_theta()), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("scaling", SCALINGS)
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
def test_up_to_the_training_length_is_plain_rope(scaling, training):
    """Validation at the training length sees the model as it was trained: T <= L is plain rope exactly."""
    scaled, plain = rope(scaling=scaling, factor=8.0, train_length=L).train(training), rope()
    # the whole training length, its last chunk, shorter spans
    for positions in (torch.arange(L), torch.arange(L - T, L), torch.arange(L // 2 + 3), torch.arange(5)):
        q, k = qk(length=len(positions))
        for got, want in zip(scaled.rotate(q, k, positions, positions), plain.rotate(q, k, positions, positions)):
            torch.testing.assert_close(got, want, atol=0, rtol=0)


# (factor, last position + 1): the stretch follows the length below the factor and stops at it
STRETCHES = [(4.0, 312), (4.0, 3 * L), (2.0, 3 * L), (8.0, L + 1)]


@pytest.mark.parametrize("scaling", SCALINGS)
@pytest.mark.parametrize("factor, length", STRETCHES, ids=[f"factor={f}-T={n}" for f, n in STRETCHES])
def test_beyond_the_training_length_applies_the_formula_at_the_stretch_of_the_length(scaling, factor, length):
    s = min(length / L, factor)
    theta, magnitude = expected(scaling, s)
    positions = torch.arange(length - T, length)
    q, k = qk()
    got_q, got_k = rope(scaling=scaling, factor=factor, train_length=L).rotate(q, k, positions, positions)
    torch.testing.assert_close(got_q, reference(q, positions, theta, magnitude), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(got_k, reference(k, positions, theta, magnitude), atol=1e-4, rtol=1e-4)
    assert not torch.allclose(got_q, reference(q, positions, plain_theta()), atol=1e-3)  # the scaling did act


@pytest.mark.parametrize("factor", (2.0, 8.0))
def test_what_each_scaling_is_for(factor):
    """At the full stretch: ntk interpolates the lowest frequency by exactly s and keeps the highest;
    yarn reaches both ends of its ramp; linear is plain rope at positions divided by s."""
    ntk, _ = expected("ntk", factor)
    assert ntk[-1] == pytest.approx(plain_theta()[-1] / factor, rel=1e-12) and ntk[0] == plain_theta()[0]
    yarn, _ = expected("yarn", factor)
    assert yarn[0] == plain_theta()[0] and yarn[-1] == plain_theta()[-1] / factor
    q, k = qk()
    positions = torch.arange(int(factor * L) - T, int(factor * L))
    scaled_q, _ = rope(scaling="linear", factor=factor, train_length=L).rotate(q, k, positions, positions)
    plain_q, _ = rope().rotate(q, k, positions / factor, positions / factor)
    torch.testing.assert_close(scaled_q, plain_q, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("scaling", SCALINGS)
def test_a_declared_length_sets_the_stretch_and_keeps_the_logits_relative(scaling):
    pos = rope(scaling=scaling, factor=4.0, train_length=L)
    q, k = qk()
    short = torch.arange(T)
    theta, magnitude = expected(scaling, 2.0)
    with pos.sequence_length(2 * L):  # early positions of a sequence that will be 2L long
        torch.testing.assert_close(
            pos.rotate(q, k, short, short)[0], reference(q, short, theta, magnitude), atol=1e-4, rtol=1e-4
        )

        def logits(shift: int) -> torch.Tensor:
            sq, sk = pos.rotate(q, k, short + shift, short + shift)
            return sq @ sk.transpose(-2, -1)

        torch.testing.assert_close(logits(37), logits(0), atol=1e-3, rtol=1e-4)
    assert pos.declared_length is None
    torch.testing.assert_close(pos.rotate(q, k, short, short)[0], rope().rotate(q, k, short, short)[0], atol=0, rtol=0)


SMALL_L = 8  # decoding T = 12 positions crosses it


@pytest.mark.parametrize("scaling", SCALINGS)
def test_cached_decoding_across_the_training_length_equals_recomputation(scaling):
    torch.manual_seed(0)
    layer = ATTENTION.build("multihead", d_model=D_MODEL, num_heads=HEADS).eval()
    pos = POSITION.build("rope", d_model=D_MODEL, num_heads=HEADS, scaling=scaling, factor=4.0, train_length=SMALL_L)
    x = torch.randn(B, T, D_MODEL)

    def step_by_step() -> torch.Tensor:
        cache = KVCache()
        return torch.cat([layer(x[:, t : t + 1], causal=True, position=pos, cache=cache)[0] for t in range(T)], 1)

    with pos.sequence_length(T):
        torch.testing.assert_close(step_by_step(), layer(x, causal=True, position=pos)[0], atol=1e-5, rtol=1e-5)
    # Undeclared, each step rotates its key for the length so far: the keys cached before L stay plain.
    assert not torch.allclose(step_by_step(), layer(x, causal=True, position=pos)[0], atol=1e-3)


def generate_with_logits(
    model: Transformer, prompt: torch.Tensor, steps: int, use_cache: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """The generated tokens and the logits each step chose from: (B, steps), (B, steps', V)."""
    seen, decode = [], model.decode

    def recording(*args, **kwargs):
        logits = decode(*args, **kwargs)
        seen.append(logits[:, -1])
        return logits

    with mock.patch.object(model, "decode", recording):
        tokens = model.generate(prompt, steps, use_cache=use_cache)
    return tokens, torch.stack(seen, dim=1)


@pytest.mark.parametrize("scaling", SCALINGS)
def test_generation_across_the_training_length_is_the_same_with_and_without_the_cache(scaling):
    torch.manual_seed(0)
    rope_spec = VariantSpec("rope", {"scaling": scaling, "factor": 4.0, "train_length": SMALL_L})
    spec = ModelSpec(
        arch="decoder",
        vocab_size=40,
        attention=VariantSpec("multihead", {"num_heads": 2}),
        position=rope_spec,
        d_model=D_MODEL,
        ffn_dim=64,
        decoder_layers=2,
        dropout=0.0,
    )
    model = Transformer(spec).eval()
    prompt = torch.randint(4, 40, (4, 5), generator=torch.Generator().manual_seed(1))
    # 5 + 20 = 25 positions: every step, cached or recomputing the prefix, uses s = 25 / 8
    cached, cached_logits = generate_with_logits(model, prompt, 20, use_cache=True)
    recomputed, recomputed_logits = generate_with_logits(model, prompt, 20, use_cache=False)
    assert torch.equal(cached, recomputed)
    torch.testing.assert_close(cached_logits, recomputed_logits, atol=1e-5, rtol=1e-5)
    assert model.decoder.position.declared_length is None  # the declaration ends with the generation


@pytest.mark.parametrize(
    "params, key",
    [
        ({"scaling": "cubic"}, "scaling="),
        ({"scaling": "linear", "factor": 0.5, "train_length": L}, "factor="),
        ({"scaling": "ntk", "factor": 0, "train_length": L}, "factor="),
        ({"scaling": "linear", "factor": "2", "train_length": L}, "factor="),
        ({"scaling": "yarn", "factor": 2.0}, "train_length="),
        ({"scaling": "linear", "factor": 2.0}, "train_length="),
        ({"scaling": "yarn", "factor": 2.0, "train_length": 0}, "train_length="),
        ({"scaling": "yarn", "factor": 2.0, "train_length": 64.5}, "train_length="),
    ],
)
def test_bad_scaling_values_are_one_line_errors(params, key):
    with pytest.raises(VariantConfigError, match=key) as err:
        rope(**params)
    assert "\n" not in str(err.value)
