"""Dodge et al.'s expected best score after n trials (analysis/stats/expected_max.py) against its closed form
by hand and against every draw of n trials enumerated."""

from __future__ import annotations

import itertools
import math

import pytest

from analysis.stats.expected_max import expected_best, expected_best_curve


def test_expected_best_of_two_among_three_scores_by_hand() -> None:
    # best of 2 draws from {1, 2, 3}: P(3) = 5/9, P(2) = 3/9, P(1) = 1/9
    mean, sd = expected_best([3.0, 1.0, 2.0], 2)
    assert mean == pytest.approx(22 / 9)
    assert sd == pytest.approx(math.sqrt(58 / 9 - (22 / 9) ** 2))  # E[X^2] = (1 + 12 + 45) / 9
    # a loss: the best is the lowest, P(1) = 5/9, P(2) = 3/9, P(3) = 1/9
    assert expected_best([3.0, 1.0, 2.0], 2, maximize=False)[0] == pytest.approx(14 / 9)


@pytest.mark.parametrize("maximize", [True, False])
def test_expected_best_equals_the_mean_over_every_draw(maximize: bool) -> None:
    scores = [0.62, 0.1, 0.5, 0.5, 0.93]  # unequal gaps and a tie
    pick = max if maximize else min
    for n, mean, sd in expected_best_curve(scores, maximize=maximize):
        bests = [pick(draw) for draw in itertools.product(scores, repeat=n)]
        exact = sum(bests) / len(bests)
        assert mean == pytest.approx(exact), n
        assert sd == pytest.approx(math.sqrt(sum((b - exact) ** 2 for b in bests) / len(bests)), abs=1e-9), n
    assert expected_best(scores, 1, maximize=maximize)[0] == pytest.approx(sum(scores) / len(scores))


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")]])
def test_no_estimate_without_finite_scores(bad: list[float]) -> None:
    with pytest.raises(ValueError, match="scores"):
        expected_best(bad, 1)
