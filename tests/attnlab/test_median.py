"""The confidence sequence for the median paired difference (attnlab/median.py): its mixture against a numerical
integral, the martingale property, the interval against the test inverted over every candidate value (ties
included), its scalar and vectorised paths, and the type-I simulations: Gaussian, diverging seeds and ties, at
several alpha, looked at after every seed."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from scipy import integrate, stats

from analysis.stats import anytime
from attnlab import median
from attnlab.sequential import replay


@functools.lru_cache(maxsize=None)
def _mixture_by_quadrature(successes: int, trials: int, a: float) -> float:
    """M_t(S) = E_q[(2q)^S (2(1 - q))^(t - S)], q ~ Beta(a, a), integrated numerically."""
    prior = stats.beta(a, a)
    value, _ = integrate.quad(
        lambda q: (2 * q) ** successes * (2 * (1 - q)) ** (trials - successes) * prior.pdf(q), 0, 1, limit=200
    )
    return value


@pytest.mark.parametrize("a", [median.PRIOR, 1.0])
def test_the_closed_form_mixture_is_the_integral_over_the_beta_prior(a):
    for trials, successes in [(1, 0), (5, 2), (12, 0), (12, 3), (30, 7), (30, 15)]:
        expected = _mixture_by_quadrature(successes, trials, a)
        assert math.exp(median.log_mixture(successes, trials, a)) == pytest.approx(expected, rel=1e-6)


def test_the_mixture_is_a_martingale_under_a_fair_coin():
    # E[M_{t+1} | S_t] = M_t when the indicators are Bernoulli(1/2): the fact Ville's inequality needs
    for trials in range(0, 40):
        for successes in range(trials + 1):
            now = median.log_mixture(successes, trials)
            ahead = (
                math.exp(median.log_mixture(successes + 1, trials + 1) - now)
                + math.exp(median.log_mixture(successes, trials + 1) - now)
            ) / 2
            assert ahead == pytest.approx(1.0, abs=1e-9), (trials, successes)


def _inverted(values: list[float], alpha: float) -> tuple[float, float]:
    """The CS after all ``values``, by testing every candidate v: v is left out as too small when the indicators
    1{d <= v} are mostly 0 and their mixture (integrated numerically) reaches 1/alpha, as too large when the
    indicators 1{d < v} are mostly 1 and theirs does. Candidates: every value, the midpoints, and beyond both ends."""
    t = len(values)
    ordered = sorted(set(values))
    candidates = [ordered[0] - 1, *ordered, *((x + y) / 2 for x, y in zip(ordered, ordered[1:])), ordered[-1] + 1]

    def rejects(count: int) -> bool:
        return _mixture_by_quadrature(count, t, median.PRIOR) >= 1 / alpha

    kept = []
    for v in candidates:
        at_or_below, below = sum(d <= v for d in values), sum(d < v for d in values)
        too_small = 2 * at_or_below < t and rejects(at_or_below)
        too_large = 2 * below > t and rejects(below)
        if not (too_small or too_large):
            kept.append(v)
    low = -math.inf if candidates[0] in kept else min(kept)  # nothing below the values is left out: unbounded
    high = math.inf if candidates[-1] in kept else max(kept)
    return low, high


@pytest.mark.parametrize(
    "values",
    [
        [0.3, -0.1, 0.0, 0.0, 0.5, 0.2, 0.0, 0.4, 0.1, 0.0, 0.6, 0.2],  # ties at 0, the typical paired accuracy
        [0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2],  # all tied
        [-0.4, -0.5, -0.3, -0.6, -0.45, -0.5, 38.0, -0.55, -0.35, -0.4],  # one diverged seed
    ],
    ids=["ties-at-zero", "all-tied", "diverged-seed"],
)
def test_the_interval_is_the_test_inverted_over_every_candidate(values):
    alpha = 0.1
    seq = median.intervals(values, alpha)
    low, high = -math.inf, math.inf
    for t in range(1, len(values) + 1):
        lo_t, hi_t = _inverted(values[:t], alpha)
        low, high = max(low, lo_t), min(high, hi_t)
        assert seq[t - 1] == (low, high), t
    assert math.isfinite(seq[-1][0])  # the inversion is exercised, not only the unbounded start


def test_the_scalar_intervals_and_the_vectorised_counts_agree_on_each_look():
    rng = np.random.default_rng(3)
    d = np.round(rng.normal(0.2, 1.0, (40, 60)), 1)  # rounded: ties, some on the edges tested
    for edge in (-0.5, 0.0, 0.2, 1.0):
        above, below = anytime.median_passes(d, 0.05, edge)
        for row in range(d.shape[0]):
            seq = median.intervals(list(d[row]), 0.05)
            assert [low > edge for low, _ in seq] == list(above[row])
            assert [high < edge for _, high in seq] == list(below[row])


# -- type-I error, looked at after every seed -----------------------------------------------------------
REPS, LOOKS = 4000, 30


@pytest.mark.parametrize("alpha", anytime.ALPHAS)
@pytest.mark.parametrize("family", ["gaussian", "diverging", "diverging_accuracy"])
def test_the_median_rule_keeps_alpha_at_every_look(family, alpha):
    rate, se = anytime.type_one_error("median", alpha, REPS, LOOKS, family=family)
    assert rate <= alpha + 3 * se


def test_the_median_rule_keeps_alpha_over_400_looks_when_seeds_diverge():
    rate, se = anytime.type_one_error("median", 0.05, 2000, anytime.BETTING_BUDGET, family="diverging_accuracy")
    assert rate <= 0.05 + 3 * se


def test_the_true_median_of_a_diverging_cell_is_not_its_mean():
    # the simulation's null for the median rule is the family's median difference, which here is not the means' 0
    found = anytime.true_median("diverging_accuracy", 1.0, 1.5)
    a, b = anytime.draw(1, 400_000, 0.0, 1.0, 1.5, seed=99, family="diverging_accuracy")
    assert found == pytest.approx(float(np.median(a - b)), abs=0.02) and found > 0.5


def test_a_sign_test_re_run_after_every_seed_fails_the_same_simulation():
    # the negative control: the fixed-n two-sided sign test (scipy's binomial law) re-tested at every look exceeds
    # alpha on the same Gaussian nulls, so the simulation can fail a rule
    a, b = anytime.draw(REPS, LOOKS, 0.0, 1.0, 1.5, seed=0)
    d = a - b - anytime.true_median("gaussian", 1.0, 1.5)
    t = np.arange(1, LOOKS + 1)
    low = np.minimum(np.cumsum(d <= 0, axis=1), np.cumsum(d >= 0, axis=1))
    p = np.minimum(1.0, 2 * stats.binom.cdf(low, t, 0.5))
    rate = float((p[:, 1:] < 0.05).any(axis=1).mean())
    assert rate > 0.05 + 3 * math.sqrt(0.05 * 0.95 / REPS)


# Paired differences with an atom at the median: 0 (both cells at the same accuracy) 30% of the time, +1 45%, -1 25%.
# P(d < 0) = 0.25 <= 1/2 <= P(d <= 0) = 0.55, so 0 is the median; yet among the differences that are not 0, +1
# outnumbers -1, which a sign test that drops ties takes for a median above 0.
TIES = ((-1.0, 0.25), (0.0, 0.30), (1.0, 0.45))


def _tied(reps: int, looks: int, seed: int = 0) -> np.ndarray:
    values, chances = zip(*TIES)
    return np.random.default_rng(seed).choice(values, size=(reps, looks), p=chances)


def test_ties_on_the_median_keep_alpha_in_the_vectorised_and_the_scalar_rule():
    alpha, d = 0.05, _tied(REPS, 200)
    above, below = anytime.median_passes(d, alpha, 0.0)
    rate, se = float((above | below).any(axis=1).mean()), math.sqrt(alpha * (1 - alpha) / REPS)
    assert rate <= alpha + 3 * se
    few = _tied(300, 60, seed=1)  # the scalar path, through the claim replay the sweep uses
    decided = [replay(list(row), "greater", 0.0, None, alpha, boundary="median").verdict for row in few]
    assert sum(v is not None for v in decided) / len(decided) <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / 300)


def test_dropping_the_ties_would_decide_a_median_that_is_not_there():
    # the textbook sign test drops zero differences: on the tie-heavy null the same CS on the rest leaves 0 out
    # far more often than alpha, which is why ties count (closed order statistics, <= on the lower side)
    alpha, d = 0.05, _tied(1000, 200)
    out = 0
    for row in d:
        kept = sorted(x for x in row if x != 0.0)
        low = kept[median.depth(len(kept), alpha) - 1]  # the last look alone: [d_(k), d_(t+1-k)] of what is left
        out += low > 0.0
    assert out / len(d) > 5 * alpha  # at the last look alone; looking at every one only adds to it


# -- power: the seeds it takes --------------------------------------------------------------------------
def test_a_40_point_accuracy_gap_is_decided_in_a_few_seeds_where_betting_needs_twice_as_many():
    median_rule = anytime.bounded_savings("median", 10.0, 0.05, 1000, 30)
    betting = anytime.bounded_savings("betting", 10.0, 0.05, 300, 30)
    assert median_rule.adaptive.power == 1.0 and median_rule.adaptive.mean_seeds <= 8
    assert betting.adaptive.mean_seeds > 2 * median_rule.adaptive.mean_seeds  # its width is set by the range [0, 1]
    assert median.depth(int(median_rule.adaptive.mean_seeds), 0.05) >= 1  # decided at the first look it can be


def test_a_4_point_gap_is_decided_within_30_seeds_more_often_than_not_and_never_the_wrong_way():
    found = anytime.bounded_savings("median", 1.0, 0.05, 2000, 30)
    assert found.adaptive.power > 0.5 and found.adaptive.wrong <= 0.005


@pytest.mark.parametrize("alpha,a,said", [(0.0, median.PRIOR, "alpha=0.0"), (0.05, 0.0, "prior a=0.0")])
def test_bad_parameters_are_refused_naming_them(alpha, a, said):
    with pytest.raises(ValueError, match=said):
        median.depth(5, alpha, a)


def test_a_non_finite_difference_is_refused_naming_its_position():
    with pytest.raises(ValueError, match="observation 2 is nan"):
        median.intervals([0.1, math.nan], 0.05)
