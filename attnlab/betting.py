"""A betting confidence sequence for the mean of bounded observations: valid for any distribution on the bounds.

Waudby-Smith and Ramdas (2024), "Estimating means of bounded random variables by betting", JRSS-B 86(1)
(arXiv 2010.09686; bibliography: waudbysmith2024estimating), Section 4, the hedged capital process with
predictable plug-in bets. For observations y_1, y_2, ... in [0, 1] and a candidate mean m, two gamblers bet
that the mean is above or below m:

    K_t^+(m) = prod_{i<=t} (1 + lambda_i^+(m) (y_i - m)),   K_t^-(m) = prod_{i<=t} (1 - lambda_i^-(m) (y_i - m)),
    K_t^+-(m) = max(theta K_t^+(m), (1 - theta) K_t^-(m)),   theta = 1/2 (the hedged capital),

with the predictable plug-in bet (uses y_1 .. y_{t-1} only)

    lambda_t = sqrt(2 log(2/alpha) / (sigma2_{t-1} t log(1 + t))),
    mu_t = (1/2 + sum_{i<=t} y_i) / (t + 1),   sigma2_t = (1/4 + sum_{i<=t} (y_i - mu_i)^2) / (t + 1),

truncated per side and per candidate only, lambda_t^+(m) = min(lambda_t, c/m) and lambda_t^-(m) = min(lambda_t,
c/(1 - m)), c = 1/2 (the paper's Theorem 3 and its default; 3/4 is also allowed there), so every factor stays >= 1 - c >
0. No further cap applies: a cap of lambda_t at c before the per-candidate truncation keeps the bet small where the
paper lets it grow (candidates near 0 or 1, where c/m or c/(1 - m) exceeds 1): on ten small paired differences in
[-1, 1] it gave [-1, 1] at t = 10, where the paper's process (and its authors' package confseq) gives [-.46, .48]
(tests/attnlab/test_anytime_verdicts_betting.py checks every look against the paper's formulas and confseq).

Under mean m each K^+- is a nonnegative martingale starting at 1 (the bet is fixed before y_t is seen), so by
Ville's inequality {m : K_t^+-(m) < 1/alpha} is a (1 - alpha) confidence sequence, whatever the distribution on [0,
1]. K^+ is nonincreasing and K^- nondecreasing in m (the truncation keeps each factor monotone), so the set is the
interval between the root of K^+(m) = 1/(theta alpha) and that of K^-(m) = 1/((1 - theta) alpha), found here by
bisection; the running intersection of the intervals is reported.
Observations in [lo, hi] are mapped to [0, 1] and the interval back.

Standard library only: the sweep driver (experiments) and the analysis both decide here.
"""

from __future__ import annotations

import math
from typing import Sequence

RULE = "Waudby-Smith and Ramdas (2024) betting confidence sequence (hedged capital, predictable plug-in bets)"
TRUNCATION = 0.5  # c: a bet on candidate m is at most c/m (c/(1 - m)); 1/2 is the paper's default, 3/4 also allowed
THETA = 0.5  # the hedge between the upward and the downward gambler
_TOLERANCE = 1e-10  # the edges' precision on [0, 1]: far below any metric's resolution


def bets(ys: Sequence[float], alpha: float) -> list[float]:
    """lambda_1 .. lambda_n, each from the observations before it (predictable); truncated only per candidate, by
    ``truncate``."""
    out: list[float] = []
    total, spread = 0.0, 0.25  # the priors 1/2 and 1/4 of mu_0 and sigma2_0
    for t, y in enumerate(ys, start=1):
        sigma2 = spread / t  # sigma2_{t-1}
        out.append(math.sqrt(2 * math.log(2 / alpha) / (sigma2 * t * math.log(1 + t))))
        total += y
        spread += (y - (0.5 + total) / (t + 1)) ** 2
    return out


def truncate(m: float, side: int) -> float:
    """The largest bet on candidate ``m``: c/m for the upward gambler (side +1), c/(1 - m) for the downward (side -1);
    unbounded where that gambler cannot lose (m = 0 upward, m = 1 downward)."""
    room = m if side > 0 else 1 - m
    return TRUNCATION / room if room > 0 else math.inf


def log_capital(ys: Sequence[float], lambdas: Sequence[float], m: float, side: int) -> float:
    """log K_n^+(m) (side +1) or log K_n^-(m) (side -1) over all of ``ys``."""
    cap = truncate(m, side)
    return sum(math.log1p(side * min(lam, cap) * (y - m)) for y, lam in zip(ys, lambdas))


def _edge(ys: Sequence[float], lambdas: Sequence[float], threshold: float, side: int, start: float) -> float:
    """The running lower edge (side +1): the least m with log K^+(m) < threshold, but never below ``start`` (the edge
    so far); the upper edge (side -1) the mirror, with K^-. Bisection on [start, 1] (or [0, start])."""
    outside, inside = start, (1.0 if side > 0 else 0.0)
    if log_capital(ys, lambdas, outside, side) < threshold:
        return outside  # the capital is monotone in m: nothing beyond the running edge is newly excluded
    while abs(inside - outside) > _TOLERANCE:
        middle = (inside + outside) / 2
        if log_capital(ys, lambdas, middle, side) < threshold:
            inside = middle
        else:
            outside = middle
    return outside  # the excluded side of the root: the interval is never narrower than the exact one


def check_support(lo: float, hi: float) -> None:
    if not (isinstance(lo, (int, float)) and isinstance(hi, (int, float))) or not (
        math.isfinite(lo) and math.isfinite(hi) and lo < hi
    ):
        raise ValueError(f"bounds=[{lo!r}, {hi!r}] are not allowed; a betting CS needs finite bounds lo < hi")


def intervals(values: Sequence[float], alpha: float, lo: float, hi: float) -> list[tuple[float, float]]:
    """The running intersection of the betting CS for the mean of ``values`` (each in [lo, hi]) after each one."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha!r} is not allowed; it must lie in (0, 1)")
    check_support(lo, hi)
    for n, x in enumerate(values, start=1):
        if not (math.isfinite(x) and lo <= x <= hi):
            raise ValueError(f"observation {n} is {x!r}, outside the bounds [{lo:g}, {hi:g}] the betting CS assumes")
    width = hi - lo
    ys = [(x - lo) / width for x in values]
    lambdas = bets(ys, alpha)
    up, down = math.log(1 / (THETA * alpha)), math.log(1 / ((1 - THETA) * alpha))
    out: list[tuple[float, float]] = []
    low, high = 0.0, 1.0  # the running intersection, on [0, 1]
    for n in range(1, len(ys) + 1):
        low = _edge(ys[:n], lambdas[:n], up, +1, low)
        high = _edge(ys[:n], lambdas[:n], down, -1, high)
        out.append((lo + width * low, lo + width * high))
    return out
