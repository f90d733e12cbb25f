"""The fixed design of equal power: the seeds per cell that the suite's fixed-n test of a claim needs to decide
it correctly as often as the adaptive rule did within its budget.

Every claim kind says that a mean lies in a region (low, high): a − b above the margin (greater), below −margin
(less), inside ±margin (equivalent), or the ratio of means inside its bounds (ratio). The suite's fixed tests
(analysis/stats/claims.py) decide it by one-sided t-tests at the region's finite edges, each at the level given
here (alpha over the claims, Holm's first step; halved for a one-edge claim, tested in both directions):
supported when every edge's test rejects the mean lying beyond it (Welch, or TOST when both edges are finite),
contradicted when an edge's test in the other direction rejects the
mean lying inside. The chance of the correct decision at a true mean and spread:

- supported at one edge: scipy's noncentral t beyond the critical value;
- contradicted: the noncentral t tails of both edges added (disjoint events: the estimate cannot lie below the low
  edge and above the high edge at once);
- supported at two edges (TOST): both tests share one estimate and one spread, so the power is the normal
  probability that the estimate lies c·s inside both edges, integrated over the spread's chi-square law (the exact
  TOST power, Schuirmann 1987; the sum of the two tails minus one is only a lower bound).

A two-sample claim has n seeds per cell, standard error sqrt((sd_a² + sd_b²)/n) and the Welch–Satterthwaite
degrees of freedom; a ratio claim is a one-sample t on n seeds with the ratio's delta-method spread (sd_b None).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy import integrate, stats

MAX_SEEDS = 10_000  # beyond this the power calculation says "more than"
# The fixed tests by name, as the claims table shows them (analysis.stats.claims runs them).
WELCH, TOST = "Welch two-sided", "TOST (Welch)"
RATIO, RATIO_TOST = "delta-method t (ratio of means)", "delta-method TOST (ratio of means)"
# A simulated power of 1.0 has no finite fixed design; the design of 99% power stands in for it.
POWER_CAP = 0.99


def region(expect: str, margin: float = 0.0, bounds=None) -> tuple[float, float]:
    """Where a claim's mean (a − b, or the ratio) lies when the claim holds: (low, high), either may be infinite."""
    if expect == "greater":
        return margin, math.inf
    if expect == "less":
        return -math.inf, -margin
    if expect == "equivalent":
        return -margin, margin
    if expect == "ratio":
        low, high = bounds
        return (-math.inf if low is None else low), (math.inf if high is None else high)
    raise ValueError(f"expect={expect!r} is not allowed; choose one of greater, less, equivalent, ratio")


def fixed_test(edges: tuple[float, float], two_sample: bool) -> str:
    """The suite's fixed test of a claim with these edges."""
    both = all(math.isfinite(e) for e in edges)
    if two_sample:
        return TOST if both else WELCH
    return RATIO_TOST if both else RATIO


def standard_error(n: int, sd_a: float, sd_b: float | None) -> tuple[float, float]:
    """The fixed test's standard error and degrees of freedom with n seeds per cell (Welch–Satterthwaite)."""
    if sd_b is None:
        return sd_a / math.sqrt(n), n - 1.0
    va, vb = sd_a * sd_a, sd_b * sd_b
    return math.sqrt((va + vb) / n), (n - 1) * (va + vb) ** 2 / (va * va + vb * vb)


def fixed_power(
    n: int, mean: float, edges: tuple[float, float], sd_a: float, sd_b: float | None, alpha: float
) -> float:
    """The chance that the fixed test with n seeds per cell decides the claim correctly at this true mean and spread."""
    low, high = edges
    if mean in (low, high):
        raise ValueError(f"mean={mean!r} lies on the claim's edge; neither decision is the correct one")
    se, df = standard_error(n, sd_a, sd_b)
    c = float(stats.t.ppf(1 - alpha, df))
    if not low < mean < high:  # the claim is false: its negation's one-sided test at either edge must reject
        power = 0.0
        if math.isfinite(low):
            power += float(stats.nct.cdf(-c, df, (mean - low) / se))
        if math.isfinite(high):
            power += float(stats.nct.sf(c, df, (mean - high) / se))
        return power
    if not math.isfinite(high):
        return float(stats.nct.sf(c, df, (mean - low) / se))
    if not math.isfinite(low):
        return float(stats.nct.cdf(-c, df, (mean - high) / se))

    # TOST: the estimate m̂ ~ N(mean, se²) and the spread s = se·sqrt(W/df), W ~ chi²(df), independent; both tests
    # reject when low + c·s < m̂ < high − c·s, possible only while s < (high − low) / (2c), i.e. W below w_max.
    # Integrated over the chi-square's probability scale u = F(W), where the integrand is smooth and bounded
    # whatever df is.
    def inside(u: float) -> float:
        s = se * math.sqrt(float(stats.chi2.ppf(u, df)) / df)
        p = stats.norm.cdf((high - c * s - mean) / se) - stats.norm.cdf((low + c * s - mean) / se)
        return max(float(p), 0.0)

    u_max = float(stats.chi2.cdf(df * ((high - low) / (2 * c * se)) ** 2, df))
    found, _ = integrate.quad(inside, 0.0, u_max, limit=200)
    return min(max(found, 0.0), 1.0)


@dataclass(frozen=True)
class Design:
    """The fixed design matched to a power: seeds per cell (seeds, for a ratio claim), or why there is no number."""

    test: str
    power: float  # the power it is matched to: the adaptive rule's, at most POWER_CAP
    seeds: int | None = None
    reason: str = ""  # when seeds is None: why no fixed design is computable

    def describe(self, per: str = "seeds per side") -> str:
        if self.seeds is None:
            return f"not computable ({self.reason})"
        return f"{self.seeds} {per} ({self.test} at power {self.power:.2f})"


def unpriced(mean: float, edges: tuple[float, float], sd_a: float, sd_b: float | None) -> str:
    """Why no fixed design can be matched at this estimate and spread ('' when one can)."""
    spread = math.hypot(sd_a, sd_b or 0.0)
    if not (math.isfinite(mean) and math.isfinite(spread)):
        return "the estimate or its spread is not finite"
    if spread == 0:
        return "every seed gave the same value on each side: zero spread, no power to match"
    if mean in edges:
        return "the estimate lies on the claim's edge: neither decision is the correct one"
    return ""


def equal_power(
    power: float, mean: float, edges: tuple[float, float], sd_a: float, sd_b: float | None, alpha: float
) -> Design:
    """The fewest seeds per cell (at least 2) whose fixed test decides the claim correctly with ``power``."""
    test = fixed_test(edges, sd_b is not None)
    target = min(power, POWER_CAP)
    reason = unpriced(mean, edges, sd_a, sd_b)
    if reason:
        return Design(test, target, reason=reason)
    if not target > 0:
        return Design(test, target, reason="the adaptive rule never decided it correctly in the simulated sweeps")
    if fixed_power(MAX_SEEDS, mean, edges, sd_a, sd_b, alpha) < target:
        return Design(test, target, reason=f"more than {MAX_SEEDS} seeds per cell")
    # power grows with n for every test here: the smallest n reaching the target by bisection over [2, MAX_SEEDS]
    lo, hi = 1, MAX_SEEDS
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fixed_power(max(mid, 2), mean, edges, sd_a, sd_b, alpha) >= target:
            hi = mid
        else:
            lo = mid
    return Design(test, target, seeds=max(hi, 2))
