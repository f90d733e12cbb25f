"""The betting confidence sequence (attnlab/betting.py): coverage uniform over n for any bounded law, the width's
shrinkage, the capital's martingale property, agreement of its scalar and vectorised paths, and its decisions
recomputed by hand from the paper's formulas."""

from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pytest

from analysis.stats import anytime
from attnlab import betting
from attnlab.sequential import replay

ALPHA = 0.05
PATHS, LOOKS = 1000, 200


def _two_point(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    return np.where(rng.random(shape) < 0.1, 1.0, 0.0)  # a rare success: the most skewed law on [0, 1]


def _beta(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    return rng.beta(2.0, 5.0, shape)


def _u_shaped(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    return rng.beta(0.5, 0.5, shape)  # mass at both ends: the largest variance a continuous law on [0, 1] nearly has


def _near_ceiling(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    return np.where(rng.random(shape) < 0.05, 0.01, rng.beta(95.0, 5.0, shape))  # an accuracy that sometimes diverges


LAWS = {"two_point": (_two_point, 0.1), "beta": (_beta, 2 / 7), "u_shaped": (_u_shaped, 0.5)}
LAWS["near_ceiling"] = (_near_ceiling, 0.95 * 0.95 + 0.05 * 0.01)


def _miscovered(y: np.ndarray, mean: float) -> np.ndarray:
    """Per path: whether the running CS ever excluded the true mean (its interval left it, above or below)."""
    above, below = anytime.betting_passes(y, ALPHA, (0.0, 1.0), mean)
    return above[:, -1] | below[:, -1]


@pytest.mark.parametrize("law", LAWS)
def test_the_cs_covers_the_true_mean_at_every_n_on_at_least_one_minus_alpha_of_paths(law):
    sample, mean = LAWS[law]
    y = sample(np.random.default_rng(3), (PATHS, LOOKS))
    rate = float(_miscovered(y, mean).mean())
    assert rate <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / PATHS)


def test_the_scalar_intervals_and_the_vectorised_capital_agree_on_each_look():
    # the scalar CS (the sweep's) excludes m at n exactly when the simulation's capital at m has reached its threshold
    rng = np.random.default_rng(4)
    y = rng.beta(2.0, 5.0, (4, 60))
    for m in (0.2, 2 / 7, 0.4):
        above, below = anytime.betting_passes(y, ALPHA, (0.0, 1.0), m)
        for row in range(y.shape[0]):
            seq = betting.intervals(list(y[row]), ALPHA, 0.0, 1.0)
            assert [low > m for low, _ in seq] == list(above[row])
            assert [high < m for _, high in seq] == list(below[row])


def test_the_width_shrinks_like_sqrt_log_n_over_n():
    # On a law of large variance (U-shaped Beta) the plug-in bet, truncated only per candidate (c/m), follows the
    # paper's sqrt(log n / n) rate from 25 looks to 400; 1/n would shrink it to a quarter from 100 to 400.
    rng = np.random.default_rng(5)
    seq = betting.intervals(list(rng.beta(0.5, 0.5, 400)), ALPHA, 0.0, 1.0)
    width = {n: seq[n - 1][1] - seq[n - 1][0] for n in (25, 100, 400)}
    for early in (25, 100):
        rate = math.sqrt(math.log(400) / 400) / math.sqrt(math.log(early) / early)  # 0.34 from 25, 0.57 from 100
        assert 0.7 * rate < width[400] / width[early] < 1.3 * rate


def test_the_capital_at_the_true_mean_is_a_martingale_over_every_path_of_a_two_point_law():
    # Exact, by enumerating all 2^n paths: E[K_n^+(m)] = E[K_n^-(m)] = 1 when each bet is fixed before its observation.
    # At alpha 0.9 the plug-in bet falls below its truncation from the tenth look on, so it depends on the data.
    n, p, alpha = 14, 0.5, 0.9
    for m in (p,):
        total = {+1: 0.0, -1: 0.0}
        for path in itertools.product((0.0, 1.0), repeat=n):
            weight = p ** sum(path) * (1 - p) ** (n - sum(path))
            lambdas = betting.bets(path, alpha)
            for side in (+1, -1):
                total[side] += weight * math.exp(betting.log_capital(path, lambdas, m, side))
        assert total[+1] == pytest.approx(1.0, abs=1e-9) and total[-1] == pytest.approx(1.0, abs=1e-9)


def _by_hand(ys: list[float], alpha: float, m: float) -> list[float]:
    """K_n^+(m) from the paper's formulas, written out afresh: mu_t, sigma2_t, the plug-in bet, its truncation."""
    capital, out = 1.0, []
    for t in range(1, len(ys) + 1):
        seen = ys[: t - 1]
        mus = [(0.5 + sum(ys[:i])) / (i + 1) for i in range(1, t)]  # mu_1 .. mu_{t-1}
        sigma2 = (0.25 + sum((x - mu) ** 2 for x, mu in zip(seen, mus))) / t
        lam = min(math.sqrt(2 * math.log(2 / alpha) / (sigma2 * t * math.log(1 + t))), 0.5 / m)  # c/m, c = 1/2, only
        capital *= 1 + lam * (ys[t - 1] - m)
        out.append(capital)
    return out


def test_a_decision_on_a_few_values_is_the_one_the_capital_computed_by_hand_gives():
    # paired accuracy differences in [-1, 1]; the claim a − b > 0 is supported once the upward capital at 0 (on the
    # [0, 1] scale: 1/2) reaches 1 / (theta alpha)
    diffs, alpha = [0.9, 0.7, 0.95, 0.8, 0.85, 0.9, 0.75, 0.9, 0.8, 0.9], 0.5
    capital = _by_hand([(d + 1) / 2 for d in diffs], alpha, 0.5)
    first = next(n for n, k in enumerate(capital, start=1) if 0.5 * k >= 1 / alpha)
    decision = replay(diffs, "greater", 0.0, None, alpha, boundary="betting", support=(-1.0, 1.0))
    assert (decision.verdict, decision.n) == ("supported", first)
    assert 2 < first < len(diffs)  # the hand computation is not trivially at the first or the last look


@pytest.mark.parametrize(
    "values,lo,hi,said",
    [
        ([0.5], 1.0, 0.0, "bounds=[1.0, 0.0] are not allowed"),
        ([0.5], 0.0, math.inf, "bounds=[0.0, inf] are not allowed"),
        ([0.5, 1.2], 0.0, 1.0, "observation 2 is 1.2, outside the bounds [0, 1]"),
        ([math.nan], 0.0, 1.0, "observation 1 is nan"),
    ],
)
def test_bad_input_is_refused_naming_it(values, lo, hi, said):
    with pytest.raises(ValueError, match=re.escape(said)):
        betting.intervals(values, ALPHA, lo, hi)


def test_the_betting_boundary_without_bounds_is_refused():
    with pytest.raises(ValueError, match="boundary=betting needs the observations' bounds"):
        replay([0.1, 0.2], "greater", 0.0, None, ALPHA, boundary="betting")


@pytest.mark.parametrize("family", sorted(anytime.SUPPORT))
def test_the_betting_rule_keeps_alpha_on_the_bounded_families_where_the_t_mixture_may_not(family):
    rate, se = anytime.type_one_error("betting", ALPHA, 500, 200, family=family)
    assert rate <= ALPHA + 3 * se
    if family == "diverging_accuracy":
        mixture, mixture_se = anytime.type_one_error("anytime", ALPHA, 2000, 30, family=family)
        assert mixture > ALPHA + 3 * mixture_se  # the same null breaks the Gaussian rule (docs/adaptive_seeds.md)


def test_a_large_accuracy_effect_is_decided_by_the_betting_rule_within_its_budget():
    # not only valid by deciding nothing: 20 points of accuracy are decided, the right way, well before 400 seeds
    found = anytime.bounded_savings("betting", 5.0, ALPHA, 300, anytime.BETTING_BUDGET, seed=1)
    assert found.adaptive.power > 0.9 and found.adaptive.wrong == 0.0
    assert found.adaptive.mean_seeds < anytime.BETTING_BUDGET / 2
