"""Anytime-valid claim decisions (common.sequential) and their simulations (analysis.stats.anytime).

The closed-form interval is checked against the mixture martingale integrated numerically; the error rate
against thousands of simulated null comparisons looked at after every seed, with the fixed-n Welch test
re-run after every seed as the negative control that shows the simulation can fail.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from analysis.stats import anytime
from common.sequential import intervals, radius_factor, replay, verdict

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


def test_fixed_n_interval_in_place_of_the_confidence_sequence_fails_the_type_one_simulation(monkeypatch):
    """The bug of testing after every seed with the fixed-n t-interval, planted in the anytime rule's own path."""

    def fixed_n_factor(n: int, alpha: float, c: float = 1.0) -> float:
        # the (1 − alpha) t-interval's half-width in units of the biased sd: t * s_unbiased / sqrt(n)
        return math.inf if n < 2 else stats.t.ppf(1 - alpha / 2, n - 1) / math.sqrt(n - 1)

    monkeypatch.setattr(anytime, "radius_factor", fixed_n_factor)
    rate, se = anytime.type_one_error("anytime", 0.05, REPS, BUDGET)
    assert rate > 0.05 + 3 * se


def test_planted_effect_is_decided_early_and_the_fixed_design_has_the_power_it_is_sized_for():
    found = anytime.savings(effect=1.0, alpha=0.05, reps=REPS, budget=BUDGET, seed=1)
    assert found.wrong <= 0.05 and found.power > 0.5
    assert found.mean_seeds < BUDGET
    # the fixed design at the reported seeds reaches the adaptive rule's power (Welch, simulated independently)
    n = found.fixed_seeds
    a, b = anytime.draw(REPS, n, 1.0, 1.0, 1.0, seed=7)
    _, p = stats.ttest_ind(a, b, axis=1, equal_var=False)
    simulated = float((p < 0.05).mean())
    assert simulated >= found.power - 3 * math.sqrt(found.power * (1 - found.power) / REPS)
    a, b = anytime.draw(REPS, n - 1, 1.0, 1.0, 1.0, seed=8)
    _, p = stats.ttest_ind(a, b, axis=1, equal_var=False)
    assert float((p < 0.05).mean()) <= found.power + 3 * math.sqrt(found.power * (1 - found.power) / REPS)


@pytest.mark.parametrize("effect", [8.0, 3.0, 0.8])
def test_the_fixed_design_is_the_fewest_seeds_with_the_power_even_for_a_huge_effect(effect):
    n = anytime.fixed_design(effect, 0.05, 1.0)  # a simulated power of 1 stands for POWER_CAP
    # the power by simulated Welch tests (scipy), independent of the power formula
    a, b = anytime.draw(REPS, n, effect, 1.0, 1.0, seed=11)
    assert float((stats.ttest_ind(a, b, axis=1, equal_var=False)[1] < 0.05).mean()) >= anytime.POWER_CAP - 0.01
    if n > 2:
        a, b = anytime.draw(REPS, n - 1, effect, 1.0, 1.0, seed=12)
        assert float((stats.ttest_ind(a, b, axis=1, equal_var=False)[1] < 0.05).mean()) < anytime.POWER_CAP + 0.01
