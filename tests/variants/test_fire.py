"""FIRE (Li et al. 2024): the bias is the paper's formula, computed here in float64 from the module's
parameters; relative below the threshold L, progressively interpolated beyond it."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab.bibliography import BIBLIOGRAPHY
from tests.helpers.cases import one_thread  # noqa: F401 (one_thread is an autouse fixture)
from variants import POSITION
from variants.checks import VariantConfigError

D_MODEL, HEADS, HIDDEN = 16, 2, 8
C, THRESHOLD = 0.3, 6.0


def fire(**params):
    torch.manual_seed(0)
    params = {"hidden": HIDDEN, "init_c": C, "threshold": THRESHOLD} | params
    pos = POSITION.build("fire", d_model=D_MODEL, num_heads=HEADS, **params)
    for param in pos.mlp.parameters():  # a trained-looking MLP: every term visible, so a dropped one shows
        torch.nn.init.normal_(param)
    return pos


def expected_bias(pos, i: int, j: int) -> list[float]:
    """b_h(i, j) = f(psi(i - j) / psi(max(L, i))), psi(x) = log(c x + 1), for j <= i (the paper);
    for j > i the module's bidirectional choice, -psi(j - i) / psi(max(L, j))."""
    c, threshold = pos.c.item(), pos.threshold.item()

    def psi(x: float) -> float:
        return math.log(c * x + 1)

    if j <= i:
        x = psi(i - j) / (psi(max(threshold, i)) + 1e-6)
    else:
        x = -psi(j - i) / (psi(max(threshold, j)) + 1e-6)
    w1, b1 = pos.mlp[0].weight.detach().double()[:, 0].tolist(), pos.mlp[0].bias.detach().double().tolist()
    w2, b2 = pos.mlp[2].weight.detach().double().tolist(), pos.mlp[2].bias.detach().double().tolist()
    hidden = [max(0.0, w * x + b) for w, b in zip(w1, b1)]  # ReLU(W1 x + b1)
    return [sum(w * h for w, h in zip(row, hidden)) + b for row, b in zip(w2, b2)]


def bias(pos, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    return pos.score_bias(torch.zeros(1, HEADS, len(q_pos), D_MODEL // HEADS), q_pos, k_pos)[0]  # (H, Tq, Tk)


def test_bias_is_the_papers_formula_with_the_threshold_crossed():
    pos = fire()
    q_pos, k_pos = torch.arange(3, 15), torch.arange(15)  # queries below and beyond L = 6, keys on both sides
    got = bias(pos, q_pos, k_pos)
    for a, i in enumerate(q_pos.tolist()):
        for b, j in enumerate(k_pos.tolist()):
            expected = torch.tensor(expected_bias(pos, i, j), dtype=torch.float64)
            torch.testing.assert_close(got[:, a, b].double(), expected, atol=1e-5, rtol=1e-5)


def test_every_parameter_learns():
    pos = fire()
    q_pos = torch.arange(12)  # straddles L, so both the threshold and c shape the normaliser
    (bias(pos, q_pos, q_pos).tril() * torch.randn(HEADS, 12, 12)).sum().backward()
    for name, param in pos.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name


def test_relative_below_the_threshold_and_interpolated_beyond_it():
    pos = fire(threshold=64.0)
    q_pos, k_pos = torch.arange(5, 12), torch.arange(12)
    below = bias(pos, q_pos, k_pos)
    torch.testing.assert_close(bias(pos, q_pos + 40, k_pos + 40), below)  # max(L, i) = L: a function of i - j
    past = bias(pos, q_pos + 100, k_pos + 100)
    assert not torch.allclose(past, below, atol=1e-4)  # the normaliser now reads i: not translation invariant
    assert not pos.translation_invariant
    # Progressive interpolation: the first key is at normalised distance 1 from every query past L.
    first = bias(pos, torch.tensor([64, 100, 1000, 10**5]), torch.tensor([0]))[:, :, 0]  # (H, 4)
    torch.testing.assert_close(first, first[:, :1].expand(-1, 4), atol=1e-5, rtol=1e-5)
    x = pos.normalised_distance(torch.arange(10**4, 10**4 + 50), torch.arange(10**4 + 50))
    assert x.min() >= -1 and x.max() <= 1  # every distance, either direction, maps into [-1, 1]


@pytest.mark.parametrize(
    "params, key",
    [
        ({"hidden": 0}, "hidden=0"),
        ({"hidden": 2.5}, "hidden=2.5"),
        ({"init_c": 0}, "init_c=0"),
        ({"threshold": -1.0}, "threshold=-1.0"),
    ],
)
def test_bad_values_are_one_line_errors(params, key):
    with pytest.raises(VariantConfigError, match=key) as err:
        POSITION.build("fire", d_model=D_MODEL, num_heads=HEADS, **params)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "name, titles",
    [
        ("fire", ["Functional Interpolation for Relative Positions Improves Long Context Transformers"]),
        ("xpos", ["A Length-Extrapolatable Transformer"]),
        ("rope", ["RoFormer", "Positional Interpolation", "YaRN"]),
    ],
)
def test_encodings_cite_their_papers(name, titles):
    entries = [BIBLIOGRAPHY[key] for key in POSITION.references(name)]
    assert len(entries) == len(titles)
    for entry, title in zip(entries, titles):
        assert entry.lstrip().startswith("@") and title in entry
