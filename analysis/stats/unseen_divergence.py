"""A difference of scored means of a bounded metric, valid whatever the cells' divergence rates, seen or not.

A seed of a cell diverges with an unknown chance p and is then scored at the metric's worst value w; otherwise it
converges to a value of mean μ. The scored mean is (1 − p)·μ + p·w. Ten seeds that all converged are what a cell
diverging one time in ten shows 35% of the time (0.9^10), and a Gaussian rule on them answers for μ, not for the
scored mean: the fixed-n Welch test erred 0.35 of the time at such a null (analysis.stats.simulate).

The bound here treats each side's divergence rate as a nuisance parameter (Berger and Boos 1994, "P values maximized
over a confidence set for the nuisance parameter", JASA 89; bibliography: berger1994p, clopper1934use,
welch1947generalization): a one-sided Clopper–Pearson bound on each side's rate,
each at a quarter of the level, and Welch's test of the weighted difference (1 − p_a)·μ_a − (1 − p_b)·μ_b on the
converged seeds at the remaining half, at every corner of the box the two bounds span. Welch's lower edge is concave
in the weights (a linear term less a norm), so its smallest value over the box lies at a corner; the interval is the
box's extremes. Its p-value is the smallest level at which this bound excludes the boundary (taken on a grid of
levels, rounded up: conservative).

Working scale: v' = s·(v − w) with s = +1 where higher is better and −1 where lower is, so a diverged seed is 0 and a
converged one lies in [0, R], R = |best − w|; the difference of the scored means is s times the difference of the
primed ones. The price: the bound cannot exclude divergence that n seeds would rarely show (0 of 10 converged seeds
leave a rate up to 0.40 at a quarter of 0.025), so a gap of a few points needs about a hundred seeds a side.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import special
from scipy import stats as sps

SHARE = 0.5  # the part of each one-sided level spent on the two divergence-rate bounds (a quarter each)
LEVELS = np.geomspace(1e-7, 0.5, 400)  # one-sided levels the p-value is read from (ratio 1.04 between neighbours)


@dataclass(frozen=True)
class Bounded:
    """A side of a claim on a bounded metric: its converged seeds' values and how many seeds diverged."""

    converged: np.ndarray
    diverged: int

    @property
    def n(self) -> int:
        return len(self.converged) + self.diverged


# A rate bound depends on (k, n) and the levels only, and the same few seed counts recur: in a claim's p-value
# and interval, over a report's claims, over a simulation's thousands of draws. Each is computed once (read-only).
@lru_cache(maxsize=4096)
def _beta_quantile(q: bytes, a: int, b: int) -> np.ndarray:
    quantile = sps.beta.ppf(np.frombuffer(q), a, b)
    quantile.flags.writeable = False
    return quantile


def _rate_high(k: int, n: int, level: np.ndarray) -> np.ndarray:
    """Clopper–Pearson one-sided upper bound of a rate with k events in n trials, wrong at most ``level``."""
    return np.ones_like(level) if k >= n else _beta_quantile(np.asarray(1 - level, float).tobytes(), k + 1, n - k)


def _rate_low(k: int, n: int, level: np.ndarray) -> np.ndarray:
    """Clopper–Pearson one-sided lower bound of a rate, wrong at most ``level``."""
    return np.zeros_like(level) if k <= 0 else _beta_quantile(np.asarray(level, float).tobytes(), k, n - k + 1)


def _lower_edge(a: np.ndarray, b: np.ndarray, level: np.ndarray, weights_a, weights_b) -> np.ndarray:
    """min over the corner weights of Welch's one-sided (1 − level) lower edge of wa·mean(a) − wb·mean(b)."""
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    edges = []
    for wa in weights_a:
        for wb in weights_b:
            ta, tb = wa * wa * va, wb * wb * vb  # (L,) each
            se = np.sqrt(ta + tb)
            with np.errstate(invalid="ignore", divide="ignore"):  # no spread at this corner: no t term
                df = (ta + tb) ** 2 / (ta**2 / (len(a) - 1) + tb**2 / (len(b) - 1))
                # Student's t quantile: the function scipy.stats.t.ppf evaluates, without its argument checks
                # (df is positive or NaN here, 1 − level inside (0, 1)), which cost more than the quantile itself
                spread = np.where(se > 0, special.stdtrit(df, 1 - level) * se, 0.0)
            edges.append(wa * a.mean() - wb * b.mean() - spread)
    return np.min(edges, axis=0)


def primed_lower(a: Bounded, b: Bounded, level: np.ndarray) -> np.ndarray:
    """One-sided (1 − level) lower bounds of (1 − p_a) μ'_a − (1 − p_b) μ'_b on the primed scale, per level."""
    test, rate = level * (1 - SHARE), level * SHARE / 2
    weights_a = (1 - _rate_high(a.diverged, a.n, rate), np.ones_like(level))  # p_a <= its upper bound
    weights_b = (np.zeros_like(level), 1 - _rate_low(b.diverged, b.n, rate))  # p_b >= its lower bound
    return _lower_edge(a.converged, b.converged, test, weights_a, weights_b)


def primed_upper(a: Bounded, b: Bounded, level: np.ndarray) -> np.ndarray:
    """One-sided (1 − level) upper bounds on the primed scale: the lower bound of b against a, negated."""
    return -primed_lower(b, a, level)


@dataclass(frozen=True)
class Scale:
    """The metric's worst value and which way is better: v' = sign·(v − worst) is 0 at a divergence, >= 0 else."""

    worst: float
    sign: float  # +1: higher is better; −1: lower is better

    def primed(self, side: Bounded) -> Bounded:
        return Bounded(self.sign * (side.converged - self.worst), side.diverged)


def difference_bounds(a: Bounded, b: Bounded, scale: Scale, level: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) one-sided (1 − level) bounds of the difference of scored means a − b, per level."""
    pa, pb = scale.primed(a), scale.primed(b)
    low, high = primed_lower(pa, pb, level), primed_upper(pa, pb, level)
    return (low, high) if scale.sign > 0 else (-high, -low)


def p_value(bounds: np.ndarray, excludes) -> float:
    """The smallest grid level at which ``excludes(bound)`` holds (1 where none does): a one-sided p-value."""
    hit = np.flatnonzero(excludes(bounds))
    return float(LEVELS[hit[0]]) if len(hit) else 1.0


@dataclass(frozen=True)
class OneSided:
    """One-sided p-values of the scored difference d = a − b against a boundary c, both directions."""

    above: float  # H1: d > c
    below: float  # H1: d < c


def one_sided(a: Bounded, b: Bounded, scale: Scale, boundary: float) -> OneSided:
    """p-values for d > boundary and for d < boundary (Berger–Boos over the Clopper–Pearson box)."""
    low, high = difference_bounds(a, b, scale, LEVELS)
    return OneSided(p_value(low, lambda x: x > boundary), p_value(high, lambda x: x < boundary))


def interval(a: Bounded, b: Bounded, scale: Scale, level: float) -> tuple[float, float]:
    """The two-sided ``level`` interval of the scored difference a − b: each edge wrong at most (1 − level) / 2."""
    tail = np.array([(1 - level) / 2])
    low, high = difference_bounds(a, b, scale, tail)
    return float(low[0]), float(high[0])


def unusable(a: Bounded, b: Bounded) -> str:
    """Why the bound cannot be computed ('' when it can): fewer than 2 converged seeds, or none with spread."""
    for tag, side in (("a", a), ("b", b)):
        if len(side.converged) < 2:
            return (
                f"fewer than 2 converged seeds on side {tag} ({len(side.converged)} of {side.n}): the converged mean "
                "of a bounded metric is estimated from two at least"
            )
    if a.converged.std() == 0 and b.converged.std() == 0:
        return "no spread among either side's converged seeds: Welch's test of them has no standard error"
    return ""
