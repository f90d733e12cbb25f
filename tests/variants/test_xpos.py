"""xPos (Sun et al. 2023): rotary angles times zeta_d^((n - m)/B); the logits follow the paper's formula,
written here with complex numbers in float64, depend on n - m alone and decay with the distance."""

from __future__ import annotations

import math

import pytest
import torch

from tests.helpers.cases import one_thread  # noqa: F401 (one_thread is an autouse fixture)
from variants import POSITION
from variants.checks import VariantConfigError

B, D_MODEL, HEADS = 2, 32, 2
D = D_MODEL // HEADS  # 16: pairs d = 0 .. 7
BASE, SCALE_BASE = 10000.0, 16.0  # a small B, so the decay is large over a few positions


def xpos(**params):
    return POSITION.build("xpos", d_model=D_MODEL, num_heads=HEADS, base=BASE, scale_base=SCALE_BASE, **params)


def logits(pos, q, k, q_pos, k_pos) -> torch.Tensor:
    q, k = pos.rotate(q, k, q_pos, k_pos)
    return q @ k.transpose(-2, -1)  # (B, H, Tq, Tk)


def paper_logits(q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    """sum_d Re(q_d conj(k_d) e^{i (n - m) theta_d}) zeta_d^((n - m)/B), q_d = q[d] + i q[d + D/2],
    theta_d = base^(-2d/D), zeta_d = (2d/D + 0.4) / 1.4."""
    half = D // 2
    zq = torch.complex(q[..., :half].double(), q[..., half:].double())  # (B, H, Tq, D/2)
    zk = torch.complex(k[..., :half].double(), k[..., half:].double())  # (B, H, Tk, D/2)
    theta = torch.tensor([BASE ** (-2 * d / D) for d in range(half)], dtype=torch.float64)
    zeta = torch.tensor([(2 * d / D + 0.4) / 1.4 for d in range(half)], dtype=torch.float64)
    r = (q_pos[:, None] - k_pos[None, :]).double()[..., None]  # (Tq, Tk, 1): n - m
    turn = torch.polar(zeta ** (r / SCALE_BASE), r * theta)  # (Tq, Tk, D/2)
    return (zq[..., :, None, :] * zk.conj()[..., None, :, :] * turn).real.sum(-1)  # (B, H, Tq, Tk)


def qk(tq: int, tk: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(B, HEADS, tq, D, generator=gen), torch.randn(B, HEADS, tk, D, generator=gen)


def test_logits_follow_the_papers_formula():
    q, k = qk(6, 20)
    q_pos, k_pos = torch.arange(14, 20), torch.arange(20)  # keys before and after each query
    torch.testing.assert_close(
        logits(xpos(), q, k, q_pos, k_pos).double(), paper_logits(q, k, q_pos, k_pos), atol=1e-4, rtol=1e-4
    )


@pytest.mark.parametrize("shift", [1, 100, 400])
def test_logits_depend_on_relative_position_only(shift):
    pos = xpos()
    q, k = qk(6, 20)
    q_pos, k_pos = torch.arange(14, 20), torch.arange(20)
    torch.testing.assert_close(
        logits(pos, q, k, q_pos + shift, k_pos + shift), logits(pos, q, k, q_pos, k_pos), atol=1e-4, rtol=1e-4
    )


def test_the_logit_decays_as_zeta_to_the_distance_over_scale_base():
    """One pair carries all of q and k (q_d = k_d = 1): the logit at distance r is cos(r theta_d) zeta_d^(r/B)."""
    pos = xpos()
    d = D // 2 - 1  # the slowest pair: theta_d r stays small over these distances
    q = torch.zeros(1, HEADS, 1, D)
    q[..., d] = 1.0
    distances = torch.arange(0, 40)
    got = logits(pos, q, q.expand(-1, -1, len(distances), -1), torch.tensor([60]), 60 - distances)[0, 0, 0]  # (40,)
    theta, zeta = BASE ** (-2 * d / D), (2 * d / D + 0.4) / 1.4
    want = torch.tensor([math.cos(r * theta) * zeta ** (r / SCALE_BASE) for r in distances.tolist()])
    torch.testing.assert_close(got, want.float(), atol=1e-5, rtol=1e-5)
    assert (got[1:] < got[:-1]).all()  # farther keys weigh less


def test_positions_beyond_the_dtypes_range_are_a_one_line_error():
    pos = xpos()  # B = 16: |ln zeta_0| p / B reaches half of float32's exponent range near p = 560
    q, k = qk(1, 1)
    logits(pos, q, k, torch.tensor([500]), torch.tensor([500]))
    with pytest.raises(VariantConfigError, match="position 600") as err:
        logits(pos, q, k, torch.tensor([600]), torch.tensor([600]))
    assert "scale_base" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "params, key",
    [
        ({"scale_base": 0}, "scale_base=0"),
        ({"base": -1.0}, "base=-1.0"),
    ],
)
def test_bad_values_are_one_line_errors(params, key):
    with pytest.raises(VariantConfigError, match=key) as err:
        POSITION.build("xpos", d_model=D_MODEL, num_heads=HEADS, **params)
    assert "\n" not in str(err.value)


def test_needs_an_even_head_dimension():
    with pytest.raises(VariantConfigError, match="d_model=6"):
        POSITION.build("xpos", d_model=6, num_heads=2)
