"""Anytime-valid claim decisions (attnlab.sequential) and their simulations (analysis.stats.anytime).

The closed-form interval is checked against the mixture martingale integrated numerically; the error rate
against thousands of simulated null comparisons looked at after every seed, with the fixed-n Welch test
re-run after every seed as the negative control that shows the simulation can fail.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats
from statsmodels.stats.power import TTestIndPower, TTestPower
from statsmodels.stats.weightstats import ttest_ind

from analysis.stats import anytime, equal_power
from attnlab.sequential import intervals, radius_factor, replay, verdict

REPS, BUDGET = 4000, 30


def _mixture_martingale(x: np.ndarray, m: float, c: float) -> float:
    """Lai's M_n(m) from its definition, on a quadrature grid: the likelihood of the data under mean
    m + delta*sigma, delta ~ N(0, 1/c), over that under mean m, each integrated over the scale with the
    invariant prior d(sigma)/sigma (here d(log sigma))."""
    y = x - m
    n = len(y)
    scale = float(np.sqrt(np.mean(y * y)))
    log_s = np.linspace(-6, 6, 2401)
    delta = np.linspace(-10, 10, 2001) / math.sqrt(c)
    s = scale * np.exp(log_s)[:, None]  # (S, 1)
    # sum over seeds of (y_i - delta s)^2 / (2 s^2), written out per seed so no sufficient-statistic shortcut is used
    exponent = -sum((yi - delta[None, :] * s) ** 2 for yi in y) / (2 * s * s) - n * np.log(s / scale)
    top = np.exp(exponent + n / 2) * stats.norm(0, 1 / math.sqrt(c)).pdf(delta)[None, :]
    numerator = integrate.trapezoid(integrate.trapezoid(top, delta, axis=1), log_s)
    bottom = np.exp(exponent[:, delta.size // 2] + n / 2)  # delta = 0
    return float(numerator / integrate.trapezoid(bottom, log_s))


@pytest.mark.parametrize("alpha,c", [(0.05, 1.0), (0.1, 0.5)])
def test_interval_edges_are_where_the_mixture_martingale_reaches_one_over_alpha(alpha, c):
    x = np.array([0.31, 0.12, 0.55, 0.40, 0.07, 0.62, 0.29])  # unequal spacing: a wrong spread formula shows
    n, mean, sd_biased = len(x), x.mean(), x.std()
    half = sd_biased * radius_factor(n, alpha, c)
    for edge in (mean - half, mean + half):
        assert _mixture_martingale(x, edge, c) == pytest.approx(1 / alpha, rel=1e-3)
    assert _mixture_martingale(x, mean, c) < 1 / alpha


def test_scalar_and_vectorised_intervals_agree():
    rng = np.random.default_rng(3)
    d = rng.normal(0.2, 1.3, (5, 12))
    low, high = anytime.anytime_bounds(d, 0.05)
    for row in range(5):
        seq = intervals(list(d[row]), 0.05)
        np.testing.assert_allclose([s[0] for s in seq], low[row])
        np.testing.assert_allclose([s[1] for s in seq], high[row])


def test_verdicts_by_expectation():
    assert verdict(0.2, 0.4, "greater", 0.1) == "supported"
    assert verdict(-0.4, 0.05, "greater", 0.1) == "contradicted"
    assert verdict(0.05, 0.4, "greater", 0.1) is None
    assert verdict(-0.4, -0.2, "less", 0.1) == "supported"
    assert verdict(-0.05, 0.3, "less", 0.1) == "contradicted"
    assert verdict(-0.04, 0.03, "equivalent", 0.05) == "supported"
    assert verdict(0.06, 0.3, "equivalent", 0.05) == "contradicted"
    assert verdict(0.0, 0.3, "equivalent", 0.05) is None
    assert verdict(0.95, 1.02, "ratio", bounds=(0.9, None)) == "supported"
    assert verdict(0.5, 0.8, "ratio", bounds=(0.9, 1.1)) == "contradicted"


def test_replay_keeps_the_first_decision_and_its_interval():
    values = [0.5, 0.52, 0.49, 0.51, 0.50, 0.48, 0.53, -3.0, 4.0]  # a wild tail after the decision
    decision = replay(values, "greater", 0.0, None, 0.05)
    assert decision.verdict == "supported"
    seq = intervals(values, 0.05)
    first = next(i for i, (lo, _) in enumerate(seq) if lo > 0)
    assert decision.n == first + 1 and (decision.low, decision.high) == seq[first]
    undecided = replay([0.1, -0.1, 0.2], "greater", 0.0, None, 0.05)
    assert undecided.verdict is None and undecided.n == 3


@pytest.mark.parametrize("alpha", [0.01, 0.05, 0.1])
def test_type_one_error_of_the_anytime_rule_stays_at_alpha_and_naive_retesting_exceeds_it(alpha):
    rate, se = anytime.type_one_error("anytime", alpha, REPS, BUDGET)
    assert rate <= alpha + 3 * se
    naive, naive_se = anytime.type_one_error("naive", alpha, REPS, BUDGET)
    assert naive > alpha + 3 * naive_se  # the negative control: the simulation can fail a rule


# Families whose type-I error docs/adaptive_seeds.md reports at or below alpha, and the one it reports above.
KEPT = ("gaussian", "lognormal", "t3", "accuracy")
EXCEEDED = ("diverging", "diverging_accuracy")


def test_every_family_is_either_kept_or_reported_exceeded():
    assert sorted(KEPT + EXCEEDED) == sorted(anytime.FAMILIES)


@pytest.mark.parametrize("family", anytime.FAMILIES)
def test_each_family_has_the_mean_and_spreads_the_null_needs(family):
    # the null compares equal means; checked on many draws against the standard error of the mean
    a, b = anytime.draw(200_000, 1, 0.0, 1.0, 1.5, seed=5, family=family)
    for cell in (a, b):
        assert abs(cell.mean()) < 5 * cell.std() / math.sqrt(cell.size)
    if family not in EXCEEDED:  # a diverging cell's sd counts the seeds that did not diverge only
        assert a.std() == pytest.approx(1.0, rel=0.1) and b.std() == pytest.approx(1.5, rel=0.1)


@pytest.mark.parametrize("family", KEPT)
def test_non_gaussian_families_keep_alpha_and_naive_retesting_exceeds_it(family):
    rate, se = anytime.type_one_error("anytime", 0.05, REPS, BUDGET, family=family)
    assert rate <= 0.05 + 3 * se
    naive, naive_se = anytime.type_one_error("naive", 0.05, REPS, BUDGET, family=family)
    assert naive > 0.05 + 3 * naive_se


@pytest.mark.parametrize("family", EXCEEDED)
def test_a_cell_whose_seeds_sometimes_diverge_breaks_the_rule_as_the_docs_say(family):
    # The rule's Gaussian assumption fails here: its first seeds rarely include a divergence, so its interval
    # excludes the mean the divergences pull. docs/adaptive_seeds.md reports it; this keeps that sentence true.
    rate, se = anytime.type_one_error("anytime", 0.05, REPS, BUDGET, family=family)
    assert rate > 0.05 + 3 * se


def _fixed_n_factor(n: int, alpha: float, c: float = 1.0) -> float:
    # the (1 − alpha) t-interval's half-width in units of the biased sd: t * s_unbiased / sqrt(n)
    return math.inf if n < 2 else stats.t.ppf(1 - alpha / 2, n - 1) / math.sqrt(n - 1)


@pytest.mark.parametrize("family", anytime.FAMILIES)
def test_fixed_n_interval_in_place_of_the_confidence_sequence_fails_the_type_one_simulation(monkeypatch, family):
    """The bug of testing after every seed with the fixed-n t-interval, planted in the anytime rule's own path."""
    monkeypatch.setattr(anytime, "radius_factor", _fixed_n_factor)
    rate, se = anytime.type_one_error("anytime", 0.05, REPS, BUDGET, family=family)
    assert rate > 0.05 + 3 * se


@pytest.mark.parametrize(
    "expect,margin,mean",
    [("greater", 0.0, 0.4), ("less", 0.2, -0.1), ("equivalent", 0.6, 0.2), ("equivalent", 0.3, 0.45)],
)
def test_the_vectorised_share_decided_agrees_with_replaying_each_sequence(expect, margin, mean):
    edges = equal_power.region(expect, margin)
    found = anytime.decided_share(mean, 1.0, edges, 12, 0.05, reps=300, seed=4)
    d = np.random.default_rng(4).normal(mean, 1.0, (300, 12))  # the same draws, replayed one sequence at a time
    said = [replay(list(row), expect, margin, None, 0.05) for row in d]
    holds = edges[0] < mean < edges[1]
    right = "supported" if holds else "contradicted"
    assert found.power == pytest.approx(np.mean([x.verdict == right for x in said]))
    assert found.wrong == pytest.approx(np.mean([x.verdict not in (None, right) for x in said]))
    assert found.mean_seeds == pytest.approx(np.mean([x.n for x in said]))


def _welch_decisions(a: np.ndarray, b: np.ndarray, edges, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """The suite's fixed tests rebuilt from scipy's Welch test, row by row: (supported, contradicted)."""
    low, high = edges
    supported = np.ones(a.shape[0], bool)
    contradicted = np.zeros(a.shape[0], bool)
    if math.isfinite(low):
        supported &= stats.ttest_ind(a - low, b, axis=1, equal_var=False, alternative="greater")[1] < alpha
        contradicted |= stats.ttest_ind(a - low, b, axis=1, equal_var=False, alternative="less")[1] < alpha
    if math.isfinite(high):
        supported &= stats.ttest_ind(a - high, b, axis=1, equal_var=False, alternative="less")[1] < alpha
        contradicted |= stats.ttest_ind(a - high, b, axis=1, equal_var=False, alternative="greater")[1] < alpha
    return supported, contradicted


@pytest.mark.parametrize(
    "expect,margin,mean,n",
    [
        ("greater", 0.0, 0.5, 9),
        ("less", 0.3, 0.2, 6),  # contradicted: the true a − b is above −margin
        ("equivalent", 0.8, 0.2, 40),  # TOST
        ("equivalent", 1.5, 0.2, 6),  # TOST where the sum of the two tails minus one is 0.06 below the power
        ("equivalent", 0.5, 0.9, 11),  # contradicted at the high edge
    ],
)
def test_fixed_power_matches_monte_carlo_welch_tests_at_unequal_spreads(expect, margin, mean, n):
    edges = equal_power.region(expect, margin)
    power = equal_power.fixed_power(n, mean, edges, 1.0, 1.5, 0.05)
    a, b = anytime.draw(REPS, n, mean, 1.0, 1.5, seed=9)
    supported, contradicted = _welch_decisions(a, b, edges, 0.05)
    simulated = float((supported if edges[0] < mean < edges[1] else contradicted).mean())
    assert simulated == pytest.approx(power, abs=3 * math.sqrt(power * (1 - power) / REPS) + 0.01)


def test_standard_error_and_degrees_of_freedom_are_welchs():
    # samples whose sample sds are exactly 1 and 3: statsmodels' Welch test reports the same se and df
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=5), rng.normal(size=5)
    a = 0.7 + (a - a.mean()) / a.std(ddof=1)
    b = 3.0 * (b - b.mean()) / b.std(ddof=1)
    t, _, df = ttest_ind(a, b, usevar="unequal")
    se, mine = equal_power.standard_error(5, 1.0, 3.0)
    assert mine == pytest.approx(df) and se == pytest.approx(0.7 / t)
    assert equal_power.standard_error(5, 2.0, None) == pytest.approx((2.0 / math.sqrt(5), 4.0))


def test_one_edge_power_equals_statsmodels_power_functions():
    # equal spreads: Welch's degrees of freedom are 2n − 2, the two-sample t of TTestIndPower
    for n, effect in [(4, 1.3), (12, 0.6), (30, 0.25)]:
        mine = equal_power.fixed_power(n, effect, (0.0, math.inf), 1.0, 1.0, 0.05)
        assert mine == pytest.approx(TTestIndPower().power(effect, n, 0.05, alternative="larger"), rel=1e-6)
        ratio = equal_power.fixed_power(n, 1.0 - effect * 0.2, (-math.inf, 1.0), 0.2, None, 0.01)
        assert ratio == pytest.approx(TTestPower().power(effect, n, 0.01, alternative="larger"), rel=1e-6)


@pytest.mark.parametrize(
    "expect,margin,mean,sd_b", [("greater", 0.0, 0.7, 1.5), ("equivalent", 1.0, 0.1, 1.2), ("less", 0.0, 0.5, 1.0)]
)
def test_the_equal_power_design_is_the_fewest_seeds_reaching_the_power(expect, margin, mean, sd_b):
    edges = equal_power.region(expect, margin)
    design = equal_power.equal_power(0.75, mean, edges, 1.0, sd_b, 0.05)
    n = design.seeds
    assert equal_power.fixed_power(n, mean, edges, 1.0, sd_b, 0.05) >= 0.75
    assert n == 2 or equal_power.fixed_power(n - 1, mean, edges, 1.0, sd_b, 0.05) < 0.75
    capped = equal_power.equal_power(1.0, mean, edges, 1.0, sd_b, 0.05)  # a power of 1 stands for POWER_CAP
    assert capped.power == equal_power.POWER_CAP and capped.seeds > n


def test_no_fixed_design_is_priced_without_spread_or_on_the_edge():
    edges = equal_power.region("equivalent", 0.5)
    assert "zero spread" in equal_power.equal_power(0.9, 0.1, edges, 0.0, 0.0, 0.05).describe()
    assert "on the claim's edge" in equal_power.equal_power(0.9, 0.5, edges, 1.0, 1.0, 0.05).describe()
    assert "never decided" in equal_power.equal_power(0.0, 0.1, edges, 1.0, 1.0, 0.05).describe()
    far = equal_power.equal_power(0.9, 0.499, edges, 1.0, 1.0, 0.05)
    assert far.seeds is None and "more than" in far.reason


def test_planted_effect_is_decided_early_for_a_difference_and_an_equivalence_claim():
    found = anytime.savings(effect=1.0, alpha=0.05, reps=REPS, budget=BUDGET, seed=1)
    assert found.adaptive.wrong <= 0.05 and found.adaptive.power > 0.5
    assert found.adaptive.mean_seeds < BUDGET and found.fixed_seeds is not None
    same = anytime.savings(effect=0.0, alpha=0.05, reps=REPS, budget=BUDGET, seed=1, margin=2.0)
    assert same.adaptive.wrong <= 0.05 and same.adaptive.power > 0.9
    assert same.adaptive.mean_seeds < BUDGET and same.fixed_seeds is not None
