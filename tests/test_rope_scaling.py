"""RoPE scaling for evaluation beyond the training length: none, linear (position interpolation),
ntk (base change) and yarn, each checked against its formula written out here with complex numbers."""
from __future__ import annotations

import math

import pytest
import torch

from variants import ATTENTION, POSITION, KVCache
from variants.checks import VariantConfigError
from tests.cases import one_thread  # noqa: F401 (one_thread is an autouse fixture)

B, T, D_MODEL, HEADS = 2, 12, 32, 2
D = D_MODEL // HEADS  # 16: pairs d = 0 .. 7
BASE, L = 10000.0, 256  # L: the fastest pair turns > 32 times in L, the slowest < once


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


def qk(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(B, HEADS, T, D, generator=gen), torch.randn(B, HEADS, T, D, generator=gen)


POS = torch.arange(300, 300 + T)  # beyond L, where the scaling matters


@pytest.mark.parametrize("scaling", ("linear", "ntk", "yarn"))
def test_factor_one_is_plain_rope(scaling):
    q, k = qk()
    plain = rope()
    scaled = rope(scaling=scaling, factor=1.0, train_length=L)
    for got, want in zip(scaled.rotate(q, k, POS, POS), plain.rotate(q, k, POS, POS)):
        torch.testing.assert_close(got, want)  # float32 rounding of yarn's (1 - gamma) + gamma only


def test_plain_rope_matches_the_complex_formula():  # anchors the reference itself
    q, k = qk()
    torch.testing.assert_close(rope().rotate(q, k, POS, POS)[0], reference(q, POS, plain_theta()),
                               atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("factor", (2.0, 4.0))
def test_linear_is_plain_rope_at_positions_divided_by_factor(factor):
    q, k = qk()
    scaled_q, scaled_k = rope(scaling="linear", factor=factor).rotate(q, k, POS, POS)
    plain_q, plain_k = rope().rotate(q, k, POS / factor, POS / factor)
    torch.testing.assert_close(scaled_q, plain_q, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(scaled_k, plain_k, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("factor", (2.0, 8.0))
def test_ntk_is_rope_with_base_times_factor_to_the_d_over_d_minus_2(factor):
    q, k = qk()
    theta = plain_theta(BASE * factor ** (D / (D - 2)))
    torch.testing.assert_close(rope(scaling="ntk", factor=factor).rotate(q, k, POS, POS)[0],
                               reference(q, POS, theta), atol=1e-4, rtol=1e-4)
    # what the base change is for: the lowest frequency interpolated by exactly s, the highest kept
    assert theta[-1] == pytest.approx(plain_theta()[-1] / factor, rel=1e-12)
    assert theta[0] == plain_theta()[0]


@pytest.mark.parametrize("factor", (2.0, 8.0))
def test_yarn_matches_its_formula_with_the_temperature_on_q_and_k(factor):
    q, k = qk()
    theta = yarn_theta(factor)
    magnitude = 0.1 * math.log(factor) + 1
    assert theta[0] == plain_theta()[0] and theta[-1] == plain_theta()[-1] / factor  # both ramp ends reached
    got_q, got_k = rope(scaling="yarn", factor=factor, train_length=L).rotate(q, k, POS, POS)
    torch.testing.assert_close(got_q, reference(q, POS, theta, magnitude), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(got_k, reference(k, POS, theta, magnitude), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("scaling", ("linear", "ntk", "yarn"))
def test_scaling_applies_at_evaluation_only_and_stays_relative(scaling):
    q, k = qk()
    scaled, plain = rope(scaling=scaling, factor=4.0, train_length=L), rope()
    assert not torch.allclose(scaled.rotate(q, k, POS, POS)[0], plain.rotate(q, k, POS, POS)[0])
    scaled.train()  # training at the training length: plain rotary angles
    torch.testing.assert_close(scaled.rotate(q, k, POS, POS)[0], plain.rotate(q, k, POS, POS)[0], atol=0, rtol=0)
    scaled.eval()

    def logits(shift: int) -> torch.Tensor:
        sq, sk = scaled.rotate(q, k, POS + shift, POS + shift)
        return sq @ sk.transpose(-2, -1)
    torch.testing.assert_close(logits(37), logits(0), atol=1e-3, rtol=1e-4)


@pytest.mark.parametrize("scaling", ("linear", "ntk", "yarn"))
def test_scaled_cached_decoding_equals_recomputation(scaling):
    torch.manual_seed(0)
    layer = ATTENTION.build("multihead", d_model=D_MODEL, num_heads=HEADS).eval()
    pos = rope(scaling=scaling, factor=4.0, train_length=L)
    x = torch.randn(B, T, D_MODEL)
    full, _ = layer(x, causal=True, position=pos)
    cache = KVCache(offset=300)  # the sequence sits past the training length
    shifted, _ = layer(x, causal=True, position=pos, cache=KVCache(offset=300))
    steps = [layer(x[:, t: t + 1], causal=True, position=pos, cache=cache)[0] for t in range(T)]
    torch.testing.assert_close(torch.cat(steps, dim=1), shifted, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(shifted, full, atol=1e-4, rtol=1e-4)  # relative: the offset changes nothing


@pytest.mark.parametrize("params, key", [
    ({"scaling": "cubic"}, "scaling="),
    ({"scaling": "linear", "factor": 0.5}, "factor="),
    ({"scaling": "ntk", "factor": 0}, "factor="),
    ({"scaling": "linear", "factor": "2"}, "factor="),
    ({"scaling": "yarn", "factor": 2.0}, "train_length="),
    ({"scaling": "yarn", "factor": 2.0, "train_length": 0}, "train_length="),
    ({"scaling": "yarn", "factor": 2.0, "train_length": 64.5}, "train_length="),
])
def test_bad_scaling_values_are_one_line_errors(params, key):
    with pytest.raises(VariantConfigError, match=key) as err:
        rope(**params)
    assert "\n" not in str(err.value)
