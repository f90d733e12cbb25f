"""Anytime-valid decisions on claims: a confidence sequence that may be looked at after every seed.

A fixed-n test (Welch, TOST) keeps its error rate only when it is run once, at a number of seeds chosen
in advance; re-running it after every new seed and stopping at the first p < alpha does not. A
confidence sequence (CS) is a sequence of intervals that all cover the true mean at once with
probability at least 1 − alpha, so a sweep may add seeds until the interval decides a claim.

The boundary is Lai's (1976) t-mixture CS for a Gaussian mean with unknown variance, as presented by
Wang and Ramdas (2025, "Anytime-valid t-tests and confidence sequences for Gaussian means with unknown
variance"; bibliography: lai1976confidence, and howard2021time for confidence sequences in general): the
scale-invariant likelihood ratio of the standardised mean, mixed over N(0, 1/c),

    M_n(m) = sqrt(c / (n + c)) * (1 − S_n(m)² / ((n + c) V_n(m)))^(−n/2),
    S_n(m) = Σ (x_i − m),  V_n(m) = Σ (x_i − m)²,

is a nonnegative martingale with M_1 = 1 under mean m, so by Ville's inequality {m : M_n(m) < 1/alpha}
is a (1 − alpha) CS. Solved for m it is x̄_n ± s_n * radius_factor(n) with s_n the biased (1/n) standard
deviation. Assumption: the observations are independent and Gaussian (the assumption behind the t-test).

Two things a Gaussian sample never shows, and what the rule does when the data show them:
- no spread (every difference so far equal, as discrete metrics with ties give): the formula's interval would be the
  single point x̄, a decision from nothing. Such a look gives no interval (it stays unbounded) and a claim still
  without spread at the end is undecided with that reason (``NO_SPREAD``).
- an empty running intersection (low > high): two intervals that each should cover the mean do not meet, which under
  the model happens only on the alpha of paths it allows to miss and is far likelier a broken model (an outlier, a
  drift). It is reported as a model violation and the claim stops undecided (``EMPTY``), never decided from it; this
  holds for every boundary.

A two-sided claim's observations are the paired differences a_i − b_i of the two cells' seed i (seeds
are independent runs, paired by seed number, fixed before any result is seen); a ratio claim's are the
per-seed ratios. The running intersection of the intervals is reported (a CS's intersection is still a
CS), so a decision once reached is kept, and replaying the seeds one by one gives the same decision
whatever the rounds were. Several claims share alpha by Bonferroni, which holds at every time; a verdict is always
reported with it (``correction``).

A diverged or failed seed (attnlab.outcomes) is a lost pair: the median and betting rules see it at the metric's worst
value, the t-mixture stops undecided at it rather than decide on the survivors. Before the first lost pair the
t-mixture's seeds have shown no divergence, yet a cell diverging one seed in ten shows none in ten seeds 35% of the
time; for a bounded metric (an accuracy, a BLEU: ``metric_scale.span``) its interval also spans the divergence the
seeds leave possible (``unseen_rate``): a cell's scored mean is (1 − p)·μ + p·w, so with p at most p̄ on each side the
difference of scored means lies within p̄·span of the converged one. The t-mixture then runs at alpha·(1 − SHARE) and
each side's rate bound at alpha·SHARE / 2.

The t-mixture's guarantee fails when a cell's seeds sometimes diverge (analysis.stats.anytime); for a bounded
metric (an accuracy in [0, 1]) the betting CS of attnlab.betting is valid for any distribution, diverged seeds
included: ``boundary="betting"`` with the observations' bounds ``support`` (a paired difference of a metric in
[lo, hi] lies in [lo − hi, hi − lo]). Where a seed can diverge and the budget is tens of seeds, ``boundary="median"``
(attnlab.median, Howard and Ramdas 2022) decides on the median of the paired differences instead of their mean: valid
for any distribution, bounded or not, and it decides a clear difference in about as many seeds as the t-mixture.

Standard library only: the sweep driver (experiments) and ``python -m analysis.claims`` both decide here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from attnlab.outcomes import no_worst_reason, survivors_reason
from attnlab.rules import DEFAULT, MIXTURE, RULES, Look, ordered

RULE = "Lai (1976) t-mixture confidence sequence, running intersection, Bonferroni over claims"
SHARE = 0.5  # for a bounded metric: the part of alpha spent on the two sides' divergence-rate bounds
EXPECTS = ("greater", "less", "equivalent", "ratio")
VERDICTS = ("supported", "contradicted")


def radius_factor(n: int, alpha: float, c: float = MIXTURE) -> float:
    """The CS half-width at n observations in units of their biased standard deviation (inf: not yet bounded).

    From M_n(m) < 1/alpha with S²/V = n u / (s² + u), u = (x̄ − m)²: u < s² R / (n − R),
    R = (n + c) (1 − (alpha² c / (n + c))^(1/n)).
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha!r} is not allowed; it must lie in (0, 1)")
    if not c > 0:
        raise ValueError(f"mixture c={c!r} is not allowed; it must be > 0")
    if n < 2:
        return math.inf
    r = (n + c) * (1 - (alpha * alpha * c / (n + c)) ** (1 / n))
    return math.sqrt(r / (n - r)) if r < n else math.inf


REFUTED = (
    "the claim assumes no divergence, and {k} seed pair(s) diverged or failed: the assumption is refuted, and the "
    "t-mixture does not decide on survivors"
)
NO_SPREAD = "no spread: all {n} observations are equal, and the t-mixture gives no interval without spread"
EMPTY = (
    "model violation: the running intersection is empty after {n} observations (low {low:.4g} > high {high:.4g}); "
    "the rule's assumption fails on these seeds, so it decides nothing"
)


def correction(claims: int, alpha: float) -> str:
    """The multiplicity correction as it stands beside a verdict: ``Bonferroni over 2 claims, alpha 0.025 each``."""
    return f"Bonferroni over {claims} claim(s), alpha {alpha / claims:.4g} each"


def intervals(values: Sequence[float], alpha: float, c: float = MIXTURE) -> list[tuple[float, float]]:
    """The running intersection of the CS after each observation: [(low_1, high_1), ..., (low_n, high_n)]; a look
    without spread adds no interval (see NO_SPREAD)."""
    out: list[tuple[float, float]] = []
    low, high, mean, m2, varied = -math.inf, math.inf, 0.0, 0.0, False
    for n, x in enumerate(values, start=1):
        if not math.isfinite(x):
            raise ValueError(f"observation {n} is {x!r}; a confidence sequence needs finite values")
        step = x - mean  # Welford's update: no cancellation between the sum of squares and the squared mean
        mean += step / n
        m2 += step * (x - mean)
        varied = varied or x != values[0]  # exactly: a rounding residue in m2 is no spread
        half = math.sqrt(max(m2 / n, 0.0)) * radius_factor(n, alpha, c)
        if math.isfinite(half) and varied:
            low, high = max(low, mean - half), min(high, mean + half)
        out.append((low, high))
    return out


def unseen_rate(n: int, alpha: float) -> float:
    """The divergence rate a cell may have after n seeds none of which diverged, at every n at once with chance at
    least 1 − alpha: the beta-binomial mixture confidence sequence of a Bernoulli rate (Robbins 1970; Howard et al.
    2021; bibliography: robbins1970statistical), uniform prior. Its martingale after n seeds without an event is
    (1/(n + 1)) / (1 − p)^n, below 1/alpha exactly for p < 1 − (alpha / (n + 1))^(1/n)."""
    return 1.0 if n < 1 else 1 - (alpha / (n + 1)) ** (1 / n)


def widened(seq: list[tuple[float, float]], alpha: float, width: float) -> list[tuple[float, float]]:
    """The t-mixture's running intervals of the converged paired differences, each widened by the unseen divergence
    rate of its look times the metric's ``width``: an interval for the difference of the scored means."""
    out = []
    for n, (low, high) in enumerate(seq, start=1):
        slack = unseen_rate(n, alpha * SHARE / 2) * width
        out.append((low, high) if low > high else (low - slack, high + slack))  # an empty intersection stays empty
    return out


def verdict(low: float, high: float, expect: str, margin: float = 0.0, bounds=None) -> str | None:
    """What an interval of a − b (or of the ratio) says of a claim: supported, contradicted, or None (continue).

    greater: a − b > margin; less: a − b < −margin; equivalent: |a − b| < margin; ratio: inside bounds.
    """
    if expect not in EXPECTS:
        raise ValueError(f"expect={expect!r} is not allowed; choose one of {list(EXPECTS)}")
    if expect == "greater":
        return "supported" if low > margin else "contradicted" if high < margin else None
    if expect == "less":
        return "supported" if high < -margin else "contradicted" if low > -margin else None
    if expect == "equivalent":
        if -margin < low and high < margin:
            return "supported"
        return "contradicted" if low > margin or high < -margin else None
    lo, hi = bounds
    if (lo is None or low > lo) and (hi is None or high < hi):
        return "supported"
    return "contradicted" if (lo is not None and high < lo) or (hi is not None and low > hi) else None


@dataclass(frozen=True)
class Decision:
    """A claim replayed seed by seed: its verdict (None: undecided), the seeds it took, the interval then."""

    verdict: str | None
    n: int  # observations when decided, or all of them when undecided
    low: float
    high: float
    mean: float  # the estimate the interval is about: the mean, or under boundary "median" the sample median
    reason: str = ""  # why it stopped undecided before the end of the seeds (a lost seed, a model violation), if so


def __getattr__(name: str) -> tuple[str, ...]:
    # BOUNDARIES is read from the registry when asked: the rules' modules import this one, and a rule registered
    # after this module was imported is one of them
    if name == "BOUNDARIES":
        return tuple(ordered())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def rule(boundary: str) -> str:
    """The rule's name as a report states it; an unknown one is a one-line error naming the rules."""
    return str(RULES.declared(boundary).text)


def replay(
    values: Sequence[float],
    expect: str,
    margin: float,
    bounds,
    alpha: float,
    c: float = MIXTURE,
    boundary: str = DEFAULT,
    support: tuple[float, float] | None = None,
    lost: Sequence[bool] | None = None,
    metric: str = "the metric",
    assumed: bool = False,
) -> Decision:
    """The first observation count at which the running CS decides the claim, or the last one if none does.

    ``boundary`` names a rule of attnlab.rules ("t_mixture": Lai; "betting": attnlab.betting, which needs the
    observations' ``support``; "median": attnlab.median, whose interval, and so the decision, is about the median of
    the observations; or any other registered); its entry says what it decides on. Under the t-mixture a difference of
    a bounded ``metric`` is decided on the scored means (``widened``). ``lost`` marks the pairs with a diverged or
    failed seed (attnlab.outcomes): their values are already at the worst value (NaN where ``metric`` has none). The
    claim stops undecided, with the reason, at the first lost pair under a rule that decides on survivors only (the
    t-mixture), at a lost pair without a worst value under any rule, and at an empty running intersection.
    ``assumed``: the claim declares that no seed diverges (``assume: no_divergence``), so the t-mixture's interval is
    not widened for unseen divergence and keeps all of alpha; a lost pair refutes the assumption (``REFUTED``). A rule
    valid without it (median, betting) does the same with and without it.
    """
    entry = RULES.entry(boundary)
    method, survivors = entry.target, entry.declared.survivors
    lost = list(lost) if lost is not None else [False] * len(values)
    usable = len(values)
    reason = ""
    if survivors and any(lost):
        usable = lost.index(True)
        reason = REFUTED.format(k=sum(lost)) if assumed else survivors_reason(sum(lost))
    gaps = [n for n, x in enumerate(values[:usable]) if math.isnan(x)]
    if gaps:
        usable, reason = gaps[0], no_worst_reason(metric)
    values = list(values[:usable])
    seq = method.intervals(values, alpha, Look(c, support, metric, expect, assumed))
    for n, (low, high) in enumerate(seq, start=1):
        if low > high:
            return Decision(None, n, low, high, method.center(values[:n]), EMPTY.format(n=n, low=low, high=high))
        found = verdict(low, high, expect, margin, bounds)
        if found is not None:
            return Decision(found, n, low, high, method.center(values[:n]))
    low, high = seq[-1] if seq else (-math.inf, math.inf)
    return Decision(None, len(seq), low, high, method.center(values), reason or method.undecided(values))
