"""A confidence sequence for the median of the paired seed differences: valid for any distribution, ties included.

Howard and Ramdas (2022), "Sequential estimation of quantiles with applications to A/B-testing and best-arm
identification", Bernoulli 28(3) 1704-1728 (arXiv 1906.09712; bibliography: howard2022sequential): a
confidence sequence for a fixed quantile from a uniform boundary for the Bernoulli process of indicators below a
candidate value. Here the quantile is the median (p = 1/2) and the boundary is the conjugate beta-binomial mixture
(Robbins 1970; Howard et al. 2021, the beta-binomial mixture of their Section 3), centred at p = 1/2.

For a candidate value v the indicators 1{d_i <= v} are Bernoulli(F(v)). With S successes in t trials, the mixture of
the likelihood ratios of Bernoulli(q) against Bernoulli(1/2) over a Beta(a, a) prior on q,

    M_t(S) = 2^t B(a + S, a + t - S) / B(a, a),

is a nonnegative martingale with M_0 = 1 when the indicators are Bernoulli(1/2), so by Ville's inequality it ever
reaches 1/alpha with chance at most alpha. M_t is symmetric about S = t/2 and log-convex in S, so it reaches 1/alpha
exactly when S <= l_t or S >= t - l_t, with l_t the largest S < t/2 at which it does (l_t = -1: none yet).

The sequence. v is excluded as too small when #{d_i <= v} <= l_t, and as too large when #{d_i >= v} <= l_t; what is
left is the closed interval of order statistics [d_(k), d_(t+1-k)], k = l_t + 1 (unbounded while k = 0).

Ties (paired differences exactly equal, e.g. at 0) and the two sides, worked out for the median set
[m_lo, m_hi] = {m : F(m) >= 1/2 and F(m-) <= 1/2}:
- one point m with an atom (F(m-) < 1/2 < F(m)): the left test at m counts 1{d_i <= m} (success chance F(m) >= 1/2),
  the right test 1{d_i < m} (chance F(m-) <= 1/2). Break the ties at m by an independent coin with the chance that
  makes Z_i (1{d_i < m} <= Z_i <= 1{d_i <= m}) exactly Bernoulli(1/2); excluding m on either side makes Z's count
  reach the same rejection region, whose chance is at most alpha: one martingale covers both sides, so no alpha/2
  split is needed, and no coin is ever tossed by the rule (it lives in the proof only);
- a median interval (m_lo < m_hi): no mass lies between them, so 1{d_i <= m_lo} = 1{d_i < m_hi}, one Bernoulli(1/2)
  process whose two sides are the two exclusions: again at most alpha.
So with chance at least 1 - alpha the CS contains the whole median set at every t, and a claim on the median is
decided wrongly with chance at most alpha. Counting 1{d_i < v} for the lower edge, or dropping ties as a textbook sign
test does, tests another quantity (P(d > 0) against P(d < 0)) and fails where ties pile up on the median.

Nothing here assumes a shape: a diverged seed is one more order statistic, however far it lies. The price is that only
signs relative to v count, so clear differences need about log2(1/alpha) + 2 seeds at the least (all differences on one
side), and a small shift relative to the spread needs many more than the t-mixture.

Standard library only: the sweep driver (experiments) and the analysis both decide here.
"""

from __future__ import annotations

import functools
import math
from typing import Sequence

RULE = (
    "Howard and Ramdas (2022) confidence sequence for the median paired difference "
    "(beta-binomial mixture at p = 1/2, running intersection, Bonferroni over claims)"
)
# a: the Beta(a, a) prior on the chance that a difference lies below the candidate. Howard et al. tune it to a target
# time t_opt (confseq's BetaBinomialMixture: a = 2 r, r = rho - 1/4, rho = (t_opt / 4) / (2 log(1/alpha) +
# log(1 + 2 log(1/alpha)))); a = 1/4 is that tuning for t_opt near 12 seeds at alpha 0.05: a clear difference is
# decided at 6 seeds (8 under the uniform a = 1), and a budget of 20 to 30 seeds is where the closer ones are decided.
PRIOR = 0.25


def log_mixture(successes: int, trials: int, a: float = PRIOR) -> float:
    """log M_t(S): the beta-binomial mixture against Bernoulli(1/2) after ``trials`` indicators, ``successes`` of 1."""
    return (
        math.lgamma(a + successes)
        + math.lgamma(a + trials - successes)
        - math.lgamma(2 * a + trials)
        - 2 * math.lgamma(a)
        + math.lgamma(2 * a)
        + trials * math.log(2)
    )


@functools.lru_cache(maxsize=4096)  # a replay asks for every t, the simulations for every t of thousands of rows
def depth(trials: int, alpha: float, a: float = PRIOR) -> int:
    """k_t = l_t + 1: the CS after ``trials`` differences is [d_(k), d_(t+1-k)]; 0 while it is unbounded."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha!r} is not allowed; it must lie in (0, 1)")
    if not a > 0:
        raise ValueError(f"prior a={a!r} is not allowed; the Beta(a, a) prior needs a > 0")
    threshold, k = math.log(1 / alpha), 0
    while 2 * k < trials and log_mixture(k, trials, a) >= threshold:  # M falls as S rises towards t/2
        k += 1
    return k


def intervals(values: Sequence[float], alpha: float, a: float = PRIOR) -> list[tuple[float, float]]:
    """The running intersection of the CS for the median of ``values`` after each one. An infinite value is an order
    statistic like any other (a seed scored at a loss's worst value, +inf); NaN is refused."""
    for n, x in enumerate(values, start=1):
        if math.isnan(x):
            raise ValueError(f"observation {n} is {x!r}; a confidence sequence needs values")
    out: list[tuple[float, float]] = []
    low, high = -math.inf, math.inf
    for t in range(1, len(values) + 1):
        k = depth(t, alpha, a)
        if k > 0:
            ordered = sorted(values[:t])
            low, high = max(low, ordered[k - 1]), min(high, ordered[t - k])
        out.append((low, high))
    return out


def sample_median(values: Sequence[float]) -> float:
    """The estimate the interval is about: the sample median (the mean of the two middle values when even)."""
    if not values:
        return math.nan
    ordered, half = sorted(values), len(values) // 2
    return ordered[half] if len(values) % 2 else (ordered[half - 1] + ordered[half]) / 2
