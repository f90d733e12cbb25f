"""The statistics that decide a claim: a test for the claim and one against it, each wrong at most alpha of the
time, the interval that decides, and the seeds that would decide it at 80% power. statsmodels for the tests and
intervals, analysis.stats.equal_power for the power.

- ``greater`` / ``less``: Welch's t of mean(a) − mean(b) against the margin, each direction at alpha / 2
  (the two-sided (1 − alpha) interval decides: a verdict either way is wrong at most alpha of the time).
- ``equivalent``: two one-sided Welch tests (TOST) at ±margin, its (1 − 2 alpha) interval; the claim is
  contradicted when the difference lies beyond either margin, each edge at alpha / 2.
- ``ratio``: the ratio of means mean(a@L) / mean(a@over) over the runs of side a, a t-test of it against each
  bound with the delta-method standard error (TOST when both bounds are given).
- A bounded metric with a finite worst value (an accuracy's 0), given ``bounded``: the difference of the scored
  means, whatever each side's divergence rate, seen or not (analysis.stats.unseen_divergence: Welch's test of the
  converged seeds over the Clopper–Pearson box of the two rates, Berger and Boos 1994). The same directions, edges
  and interval levels as above.
- Both sides without spread: no t exists; an exact test counts the arrangements of the seeds instead
  (3 against 3 seeds: 20 arrangements, so no p below 1/20 one-sided).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps
from statsmodels.stats.weightstats import CompareMeans, DescrStatsW, ttest_ind, ttost_ind

from analysis.stats import equal_power
from analysis.stats import unseen_divergence as unseen
from analysis.stats.inference import ALPHA
from attnlab.claims import Claim

POWER = 0.8
MAX_SEEDS = equal_power.MAX_SEEDS
EXACT = "exact permutation"
BOXED, BOXED_TOST = "Welch over the divergence-rate box", "TOST (Welch) over the divergence-rate box"
RATIO, RATIO_TOST, TOST, WELCH = equal_power.RATIO, equal_power.RATIO_TOST, equal_power.TOST, equal_power.WELCH


@dataclass
class Evidence:
    """A claim's test for it and against it, each p wrong at most alpha when compared with alpha."""

    test: str
    statistic: float = math.nan
    df: float = math.nan
    p_for: float = math.nan
    p_against: float = math.nan
    estimate: float = math.nan  # mean difference a − b, or the ratio of means
    low: float = math.nan  # the interval that decides, at ``level``
    high: float = math.nan
    level: float = math.nan  # 1 − alpha for a direction, 1 − 2 alpha for an equivalence (TOST)
    sd_a: float = math.nan  # the per-seed spreads the power of more seeds is priced at
    sd_b: float | None = None
    reason: str = ""  # why this test cannot decide whatever the data (an exact test with too few arrangements)


def _both_edges(p_low: float, p_high: float) -> float:
    """The two edges' tests against a claim, each at alpha / 2 (Bonferroni): one p wrong at most alpha."""
    return min(1.0, 2 * min(p_low, p_high))


def _one_sided(t: float, df: float) -> tuple[float, float]:
    """P(T >= t), P(T <= t) for Student's t with df degrees of freedom."""
    return float(sps.t.sf(t, df)), float(sps.t.cdf(t, df))


def exact_shift(a: np.ndarray, b: np.ndarray, shift: float) -> tuple[float, float, int]:
    """(P(≥), P(≤), arrangements) of the permutation test of mean(a − shift) − mean(b), both sides constant.

    With no spread on either side, the observed split is the only one of the C(n_a + n_b, n_a) arrangements as
    extreme as itself (any other mixes the two values), so the one-sided p in the direction of the difference
    is 1 / C and the other is 1; equal values give 1 both ways.
    """
    arrangements = math.comb(len(a) + len(b), len(a))
    d = float(a[0] - shift - b[0])
    if d == 0:
        return 1.0, 1.0, arrangements
    return (1 / arrangements, 1.0, arrangements) if d > 0 else (1.0, 1 / arrangements, arrangements)


def _exact(evidence: Evidence, a: np.ndarray, b: np.ndarray, claim: Claim, alpha: float) -> Evidence:
    """Both sides constant: the claim decided by the exact permutation test, or the reason it cannot be."""
    m = claim.margin
    evidence.test, evidence.level = EXACT, math.nan  # a test without spread has no interval to show
    if claim.expect == "equivalent":
        above_low, below_low, n = exact_shift(a, b, -m)  # H1: d > −m
        above_high, below_high, _ = exact_shift(a, b, m)  # H1: d < m
        evidence.p_for = max(above_low, below_high)
        evidence.p_against = _both_edges(below_low, above_high)
        smallest = 1 / n
    else:
        upper, lower, n = exact_shift(a, b, m if claim.expect == "greater" else -m)
        evidence.p_for, evidence.p_against = (upper, lower) if claim.expect == "greater" else (lower, upper)
        evidence.p_for, evidence.p_against = _both_edges(evidence.p_for, 1.0), _both_edges(evidence.p_against, 1.0)
        smallest = 2 / n
    if smallest >= alpha:
        evidence.reason = (
            f"no spread on either side: an exact permutation test over the {n} arrangements of "
            f"{len(a)} + {len(b)} seeds cannot reach p below {smallest:.3g} (alpha {alpha:g})"
        )
    return evidence


@dataclass(frozen=True)
class BoundedSides:
    """Both sides of a claim on a bounded metric: converged values, diverged counts, and the metric's scale."""

    a: unseen.Bounded
    b: unseen.Bounded
    scale: unseen.Scale


def _boxed(evidence: Evidence, sides: BoundedSides, claim: Claim) -> Evidence:
    """The claim decided on the scored means, whatever the divergence rates (analysis.stats.unseen_divergence)."""
    a, b, scale = sides.a, sides.b, sides.scale
    evidence.sd_a, evidence.sd_b = float(a.converged.std(ddof=1)), float(b.converged.std(ddof=1))
    evidence.reason = unseen.unusable(a, b)
    if evidence.reason:
        evidence.test, evidence.level = BOXED, math.nan
        return evidence
    m = claim.margin
    if claim.expect == "equivalent":
        evidence.test = BOXED_TOST
        low_edge, high_edge = unseen.one_sided(a, b, scale, -m), unseen.one_sided(a, b, scale, m)
        evidence.p_for = max(low_edge.above, high_edge.below)
        evidence.p_against = _both_edges(low_edge.below, high_edge.above)
    else:
        evidence.test = BOXED
        edge = unseen.one_sided(a, b, scale, m if claim.expect == "greater" else -m)
        for_, against = (edge.above, edge.below) if claim.expect == "greater" else (edge.below, edge.above)
        evidence.p_for, evidence.p_against = _both_edges(for_, 1.0), _both_edges(against, 1.0)
    evidence.low, evidence.high = unseen.interval(a, b, scale, evidence.level)
    return evidence


def two_sample_test(
    a: np.ndarray, b: np.ndarray, claim: Claim, alpha: float = ALPHA, bounded: BoundedSides | None = None
) -> Evidence:
    """The claim's tests on the sides' scored values ``a`` and ``b``; with ``bounded`` (a metric with a finite worst
    value), over every divergence rate the seeds leave possible."""
    d = float(a.mean() - b.mean())
    m = claim.margin
    level = 1 - 2 * alpha if claim.expect == "equivalent" else 1 - alpha
    evidence = Evidence("Welch", estimate=d, level=level, sd_a=float(a.std(ddof=1)), sd_b=float(b.std(ddof=1)))
    if bounded is not None:
        return _boxed(evidence, bounded, claim)
    if evidence.sd_a == 0 and evidence.sd_b == 0:
        return _exact(evidence, a, b, claim, alpha)
    if claim.expect == "equivalent":
        evidence.test = TOST
        p, (t1, p1, df1), (t2, p2, df2) = ttost_ind(a, b, -m, m, usevar="unequal")
        # The binding test is the one with the larger p; the claim fails when d is beyond either margin.
        evidence.statistic, evidence.df = (t1, df1) if p1 >= p2 else (t2, df2)
        evidence.p_for = float(p)
        evidence.p_against = _both_edges(_one_sided(t1, df1)[1], _one_sided(t2, df2)[0])
    else:
        # greater: H1 d > margin; less: H1 d < −margin. Each direction at alpha / 2: the two-sided test.
        boundary = m if claim.expect == "greater" else -m
        evidence.test = WELCH
        t, _, df = ttest_ind(a, b, alternative="two-sided", usevar="unequal", value=boundary)
        upper, lower = _one_sided(t, df)
        evidence.statistic, evidence.df = float(t), float(df)
        for_, against = (upper, lower) if claim.expect == "greater" else (lower, upper)
        evidence.p_for, evidence.p_against = _both_edges(for_, 1.0), _both_edges(against, 1.0)
    low, high = CompareMeans(DescrStatsW(a), DescrStatsW(b)).tconfint_diff(alpha=1 - level, usevar="unequal")
    evidence.low, evidence.high = float(low), float(high)
    return evidence


def ratio_of_means(top: np.ndarray, bottom: np.ndarray) -> tuple[float, float]:
    """(mean(top) / mean(bottom), its delta-method standard error) over paired runs.

    Var(R) ≈ (s_top² − 2 R s_top,bottom + R² s_bottom²) / (n · mean(bottom)²), the first-order expansion of
    the ratio around the means (Fieller's pivot, linearised).
    """
    n, r = len(top), float(top.mean() / bottom.mean())
    cov = np.cov(top, bottom, ddof=1)
    var = (cov[0, 0] - 2 * r * cov[0, 1] + r * r * cov[1, 1]) / (n * float(bottom.mean()) ** 2)
    return r, math.sqrt(max(var, 0.0))


def ratio_test(top: np.ndarray, bottom: np.ndarray, claim: Claim, alpha: float = ALPHA) -> Evidence:
    """The ratio of means against the claim's bounds: t = (R − bound) / se on n − 1 degrees of freedom."""
    low_bound, high_bound = claim.bounds
    edges = [e for e in claim.bounds if e is not None]
    r, se = ratio_of_means(top, bottom)
    n = len(top)
    level = 1 - 2 * alpha if len(edges) == 2 else 1 - alpha
    evidence = Evidence(
        RATIO_TOST if len(edges) == 2 else RATIO, estimate=r, level=level, df=n - 1.0, sd_a=se * math.sqrt(n)
    )
    if se == 0:
        evidence.low = evidence.high = r
        evidence.reason = "no spread in the ratio over the seeds: no standard error to test it with"
        return evidence
    t_of = {e: (r - e) / se for e in edges}
    if len(edges) == 2:
        p1 = _one_sided(t_of[low_bound], n - 1)[0]  # H1: R > low
        p2 = _one_sided(t_of[high_bound], n - 1)[1]  # H1: R < high
        evidence.statistic = t_of[low_bound] if p1 >= p2 else t_of[high_bound]
        evidence.p_for = max(p1, p2)
        evidence.p_against = _both_edges(_one_sided(t_of[low_bound], n - 1)[1], _one_sided(t_of[high_bound], n - 1)[0])
    else:
        bound = edges[0]
        upper, lower = _one_sided(t_of[bound], n - 1)
        for_, against = (upper, lower) if low_bound is not None else (lower, upper)
        evidence.statistic = t_of[bound]
        evidence.p_for, evidence.p_against = _both_edges(for_, 1.0), _both_edges(against, 1.0)
    half = float(sps.t.ppf(0.5 + level / 2, n - 1)) * se
    evidence.low, evidence.high = r - half, r + half
    return evidence


def seeds_needed(evidence: Evidence, claim: Claim, alpha: float) -> tuple[int | None, str]:
    """Seeds per side (seeds, for a ratio) that decide the claim with 80% power, and at what truth, or why not.

    Priced at a truth the user fixed before seeing the data, never at the observed estimate (post-hoc power
    only restates the p-value): an equivalence (or a ratio within two bounds) at the middle of its region,
    a direction at ``min_effect`` beyond its boundary, else one ``margin`` from it. The spread is the observed
    one. ``alpha`` is the claim's share of the family (Holm's strictest step); a direction is tested at half.
    """
    edges = equal_power.region(claim.expect, claim.margin, claim.bounds)
    both = all(math.isfinite(e) for e in edges)
    step = claim.min_effect if claim.min_effect is not None else (claim.margin or None)
    if both:
        truth, said = (edges[0] + edges[1]) / 2, "when the truth lies midway in the claim's region"
    elif step is None:
        what = "ratio" if claim.expect == "ratio" else "difference"
        return None, (
            f"give min_effect (the smallest {what} beyond the boundary worth deciding) to price the seeds that "
            "would decide it; the observed estimate would only restate the p-value"
        )
    else:
        edge = edges[0] if math.isfinite(edges[0]) else edges[1]
        truth = edge + step if math.isfinite(edges[0]) else edge - step
        source = "min_effect" if claim.min_effect is not None else "the margin"
        said = f"when the truth lies {step:g} inside the claim's boundary ({source})"
    level = alpha if both else alpha / 2
    sd_b = None if claim.expect == "ratio" else evidence.sd_b
    design = equal_power.equal_power(POWER, truth, edges, evidence.sd_a, sd_b, level)
    if design.seeds is None:
        return None, f"no number of seeds prices it ({design.reason})"
    return design.seeds, f"{said}, at the observed spread"
