"""The statistics that decide a claim: two one-sided tests at its margin (the claim's and its negation's), and
the seeds that would decide it at 80% power. statsmodels for the tests, intervals and power.

- ``greater`` / ``less``: a one-sided Welch test of mean(a) − mean(b) against the margin.
- ``equivalent``: two one-sided Welch tests (TOST) at ±margin.
- ``ratio``: a one-sample t-test of per-run ratios per bound (TOST when both bounds are given).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps
from statsmodels.stats.power import TTestIndPower, TTestPower
from statsmodels.stats.weightstats import CompareMeans, DescrStatsW, ttest_ind, ttost_ind

from analysis.stats.inference import ALPHA
from common.claims import Claim

POWER = 0.8
MAX_SEEDS = 10_000  # beyond this the power calculation says "more than"


@dataclass
class Evidence:
    """A claim's two one-sided tests, for the claim and against it, on one statistic."""

    test: str
    statistic: float = math.nan
    df: float = math.nan
    p_for: float = math.nan
    p_against: float = math.nan
    estimate: float = math.nan  # mean difference a − b, or mean ratio
    low: float = math.nan  # its (1 − 2 alpha) interval: the one the one-sided tests at alpha agree with
    high: float = math.nan
    distance: float = math.nan  # how far the estimate is from the boundary that decides (power analysis)
    spread: float = math.nan  # the standard deviation that goes with it


def _one_sided(t: float, df: float) -> tuple[float, float]:
    """P(T >= t), P(T <= t) for Student's t with df degrees of freedom."""
    return float(sps.t.sf(t, df)), float(sps.t.cdf(t, df))


def _certain(evidence: Evidence, holds: bool, fails: bool) -> Evidence:
    """Every seed gave the same value on each side: the estimate decides outright (or not at all, on the boundary)."""
    evidence.low = evidence.high = evidence.estimate
    if holds or fails:
        evidence.statistic = math.inf if holds else -math.inf
        evidence.p_for, evidence.p_against = (0.0, 1.0) if holds else (1.0, 0.0)
    return evidence


def two_sample_test(a: np.ndarray, b: np.ndarray, claim: Claim) -> Evidence:
    d = float(a.mean() - b.mean())
    spread = math.sqrt((a.var(ddof=1) + b.var(ddof=1)) / 2)
    m = claim.margin
    if claim.expect == "equivalent":
        evidence = Evidence("TOST (Welch)", estimate=d, distance=abs(m - abs(d)), spread=spread)
        if spread == 0:
            return _certain(evidence, abs(d) < m, abs(d) > m)
        p, (t1, p1, df1), (t2, p2, df2) = ttost_ind(a, b, -m, m, usevar="unequal")
        # The binding test is the one with the larger p; the claim fails when d is beyond either margin.
        evidence.statistic, evidence.df = (t1, df1) if p1 >= p2 else (t2, df2)
        evidence.p_for, evidence.p_against = float(p), min(_one_sided(t1, df1)[1], _one_sided(t2, df2)[0])
    else:
        # greater: H1 d > margin; less: H1 d < −margin. The test against is the same t read the other way.
        boundary = m if claim.expect == "greater" else -m
        evidence = Evidence("Welch one-sided", estimate=d, distance=abs(d - boundary), spread=spread)
        if spread == 0:
            above, below = d > boundary, d < boundary
            return _certain(
                evidence, above if claim.expect == "greater" else below, below if claim.expect == "greater" else above
            )
        alternative = "larger" if claim.expect == "greater" else "smaller"
        t, p_for, df = ttest_ind(a, b, alternative=alternative, usevar="unequal", value=boundary)
        upper, lower = _one_sided(t, df)
        evidence.statistic, evidence.df, evidence.p_for = float(t), float(df), float(p_for)
        evidence.p_against = lower if claim.expect == "greater" else upper
    low, high = CompareMeans(DescrStatsW(a), DescrStatsW(b)).tconfint_diff(alpha=2 * ALPHA, usevar="unequal")
    evidence.low, evidence.high = float(low), float(high)
    return evidence


def ratio_test(r: np.ndarray, claim: Claim) -> Evidence:
    low_bound, high_bound = claim.bounds
    mean, spread = float(r.mean()), float(r.std(ddof=1))
    edges = [e for e in claim.bounds if e is not None]
    distance = min(abs(mean - e) for e in edges)
    evidence = Evidence(
        "one-sample TOST" if len(edges) == 2 else "one-sample t", estimate=mean, distance=distance, spread=spread
    )
    if spread == 0:
        holds = (low_bound is None or mean > low_bound) and (high_bound is None or mean < high_bound)
        fails = (low_bound is not None and mean < low_bound) or (high_bound is not None and mean > high_bound)
        return _certain(evidence, holds, fails)
    described = DescrStatsW(r)
    if len(edges) == 2:
        p, (t1, p1, df1), (t2, p2, df2) = described.ttost_mean(low_bound, high_bound)
        evidence.statistic, evidence.df = (t1, df1) if p1 >= p2 else (t2, df2)
        evidence.p_for, evidence.p_against = float(p), min(_one_sided(t1, df1)[1], _one_sided(t2, df2)[0])
    else:
        bound, alternative = (low_bound, "larger") if low_bound is not None else (high_bound, "smaller")
        t, p_for, df = described.ttest_mean(value=bound, alternative=alternative)
        upper, lower = _one_sided(t, df)
        evidence.statistic, evidence.df, evidence.p_for = float(t), float(df), float(p_for)
        evidence.p_against = lower if alternative == "larger" else upper
    low, high = described.tconfint_mean(alpha=2 * ALPHA)
    evidence.low, evidence.high = float(low), float(high)
    return evidence


def seeds_needed(test: Evidence, paired: bool, alpha: float) -> int | None:
    """Seeds per side for 80% power of the deciding one-sided test, the observed difference and spread taken as true.

    Two samples: statsmodels' TTestIndPower at effect size distance / spread, with
    spread the root mean square of the two sides' standard deviations. One sample
    (ratio): TTestPower. None when there is no spread or no distance to decide by.
    """
    if not (math.isfinite(test.distance) and math.isfinite(test.spread)) or test.spread == 0 or test.distance == 0:
        return None
    effect = test.distance / test.spread
    power = TTestPower() if paired else TTestIndPower()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            n = float(power.solve_power(effect_size=effect, alpha=alpha, power=POWER, alternative="larger"))
    except (ValueError, RuntimeError, ZeroDivisionError):
        return MAX_SEEDS + 1
    if not math.isfinite(n):
        return MAX_SEEDS + 1
    return max(2, min(MAX_SEEDS + 1, math.ceil(n)))
