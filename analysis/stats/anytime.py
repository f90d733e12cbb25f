"""Simulations of seeds added until decided: the error rate of a stopping rule under the null, and the seeds
it spends against the fixed design of equal power. Vectorised over thousands of simulated comparisons.

Four rules look after every seed pair (n = 2, 3, ..., budget) and stop at their first decision (``RULES``, the rows
of the error-rate tables; ``run_rule`` also takes any rule of attnlab.rules by its name, replayed through its own
``intervals`` row by row where it has no vectorised twin here):

- ``anytime``: the confidence sequence of attnlab.sequential (Lai's t-mixture, running intersection) on the
  paired differences; its type-I error stays at or below alpha however often it is looked at, when the
  per-seed metric is Gaussian (its assumption).
- ``betting``: the betting confidence sequence of attnlab.betting (Waudby-Smith and Ramdas) on the paired
  differences of a bounded metric, mapped from their range to [0, 1]; valid for any distribution within the
  bounds, so only for the bounded families (SUPPORT). Its running interval passes an edge e exactly when the
  capital at e reaches its threshold (the capital is monotone in the candidate mean), so the simulation tracks
  the capital at the claim's edges instead of solving for the interval.
- ``median``: the confidence sequence of attnlab.median (Howard and Ramdas) for the median of the paired differences;
  valid for any distribution, bounded or not. Its null is a median difference of 0, not a mean of 0: its type-I error
  is the chance that it ever excludes the true median of the differences (TRUE_MEDIAN_DRAWS draws of the family give
  it), the other rules' the chance that they ever exclude the true mean 0. Its lower edge passes an edge e exactly
  when fewer than k_t differences lie at or below e (attnlab.median.depth), so the simulation counts instead of
  sorting.
- ``naive``: Welch's two-sided t-test at alpha (scipy) re-run after every seed, stopping at p < alpha: a
  fixed-n test used sequentially, the practice whose error grows with the number of looks.

The null comparisons are drawn from several families of per-seed metric (FAMILIES), because a training
metric is rarely Gaussian: skewed (a loss), heavy-tailed, bounded near its ceiling (an accuracy), or a
mixture in which a seed sometimes diverges. The fixed design of equal power (analysis.stats.equal_power)
is the suite's fixed test (one-sided Welch, TOST at an equivalence margin) with the seeds per cell whose
power at the planted effect equals the adaptive rule's chance of the correct decision within the budget.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy import stats

from analysis.stats.equal_power import equal_power, region
from attnlab import betting, median
from attnlab.rules import RULES as SEQUENTIAL
from attnlab.rules import Look
from attnlab.sequential import MIXTURE, SHARE, radius_factor, unseen_rate

RULES = ("anytime", "naive", "betting", "median")  # the error-rate tables' rows (analysis.stats.anytime_tables)
ALIASES = {"anytime": "t_mixture"}  # the tables' name of a rule of attnlab.rules

Sampler = Callable[[np.random.Generator, tuple[int, int], float], np.ndarray]


def _gaussian(rng: np.random.Generator, shape: tuple[int, int], sd: float) -> np.ndarray:
    return rng.normal(0.0, sd, shape)


def _lognormal(rng: np.random.Generator, shape: tuple[int, int], sd: float) -> np.ndarray:
    # log-scale sd 1 (skewness about 6), shifted and scaled to mean 0 and sd ``sd``: a skewed metric such as a loss
    z = np.exp(rng.normal(0.0, 1.0, shape))
    return sd * (z - math.exp(0.5)) / math.sqrt((math.e - 1) * math.e)


def _t3(rng: np.random.Generator, shape: tuple[int, int], sd: float) -> np.ndarray:
    # Student's t with 3 degrees of freedom (variance 3, no finite fourth moment), scaled to sd ``sd``
    return sd * rng.standard_t(3, shape) / math.sqrt(3)


DIVERGES, JUMP = 0.05, 20.0  # the diverging family: a seed diverges with chance 0.05 and lands 20 sd away
ACCURACY, ACCURACY_UNIT = 0.95, 0.04  # the accuracy family: mean 0.95, one sd unit is 4 points of accuracy


def beta_accuracies(rng: np.random.Generator, shape: tuple[int, int], mean: float, sd: float) -> np.ndarray:
    """Raw accuracies in [0, 1]: a Beta of this mean and sd (in accuracy, not units)."""
    k = mean * (1 - mean) / sd**2 - 1  # the Beta's concentration for that sd
    return rng.beta(mean * k, (1 - mean) * k, shape)


def _accuracy(rng: np.random.Generator, shape: tuple[int, int], sd: float) -> np.ndarray:
    # a Beta accuracy near its ceiling (skewed towards 0), of sd ``sd`` units, centred on its mean
    return (beta_accuracies(rng, shape, ACCURACY, ACCURACY_UNIT * sd) - ACCURACY) / ACCURACY_UNIT


DIVERGED = 0.01  # a diverged seed's mean accuracy (about chance on a large vocabulary): Beta(1, 99)
# the diverging-accuracy family's mean: seeds at ACCURACY, one in 20 (DIVERGES) diverged to about DIVERGED
DIVERGING_ACCURACY = (1 - DIVERGES) * ACCURACY + DIVERGES * DIVERGED


def _diverging_accuracy(rng: np.random.Generator, shape: tuple[int, int], sd: float) -> np.ndarray:
    # the accuracy family's seeds, except that one in 20 diverges to an accuracy near 0; centred on the mixture's mean
    raw = np.where(
        rng.random(shape) < DIVERGES,
        rng.beta(1.0, 99.0, shape),
        beta_accuracies(rng, shape, ACCURACY, ACCURACY_UNIT * sd),
    )
    return (raw - DIVERGING_ACCURACY) / ACCURACY_UNIT


def _accuracy_at_the_mixture(rng: np.random.Generator, shape: tuple[int, int], sd: float) -> np.ndarray:
    # a Beta accuracy that never diverges, of the diverging-accuracy family's mean: the other side of its null
    return (beta_accuracies(rng, shape, DIVERGING_ACCURACY, ACCURACY_UNIT * sd) - DIVERGING_ACCURACY) / ACCURACY_UNIT


def _diverging(rng: np.random.Generator, shape: tuple[int, int], sd: float) -> np.ndarray:
    # Gaussian seeds of sd ``sd``, except that a seed sometimes diverges (a loss that blew up); centred on the mean
    jumped = rng.random(shape) < DIVERGES
    return sd * (rng.normal(0.0, 1.0, shape) + JUMP * (jumped - DIVERGES))


# Per-seed metric families: the samplers of cell a and cell b, each of mean 0 and the given sd (the diverging cell's
# sd is that of its seeds that did not diverge). In "diverging" only cell a's seeds diverge; cell b is Gaussian of
# the same mean, the hardest case for a rule that sees its first seeds before any divergence.
FAMILIES: dict[str, tuple[Sampler, Sampler]] = {
    "gaussian": (_gaussian, _gaussian),
    "lognormal": (_lognormal, _lognormal),
    "t3": (_t3, _t3),
    "accuracy": (_accuracy, _accuracy),
    "diverging": (_diverging, _gaussian),
    "diverging_accuracy": (_diverging_accuracy, _accuracy_at_the_mixture),
}
# The bounded families: where a paired difference lies, ± this many sd units (two accuracies in [0, 1] differ by at
# most 1, which is 1 / ACCURACY_UNIT units). Only these may be decided by the betting rule.
SUPPORT: dict[str, float] = {"accuracy": 1 / ACCURACY_UNIT, "diverging_accuracy": 1 / ACCURACY_UNIT}


def draw(
    reps: int, budget: int, effect: float, sd_a: float, sd_b: float, seed: int, family: str = "gaussian"
) -> tuple[np.ndarray, np.ndarray]:
    """Seeds of two cells, unequal spreads: a (reps, budget) array each, mean(a) − mean(b) = effect."""
    if family not in FAMILIES:
        raise ValueError(f"family={family!r} is not allowed; choose one of {list(FAMILIES)}")
    rng = np.random.default_rng(seed)
    sample_a, sample_b = FAMILIES[family]
    return effect + sample_a(rng, (reps, budget), sd_a), sample_b(rng, (reps, budget), sd_b)


def anytime_bounds(d: np.ndarray, alpha: float, c: float = MIXTURE) -> tuple[np.ndarray, np.ndarray]:
    """The running-intersection CS of each row's mean after each column: (low, high), each (reps, budget). A column
    up to which a row's values are all equal gives no interval (attnlab.sequential: no spread, no interval)."""
    n = np.arange(1, d.shape[1] + 1)
    mean = np.cumsum(d, axis=1) / n
    sd = np.sqrt(np.maximum(np.cumsum(d * d, axis=1) / n - mean**2, 0.0))
    factor = np.array([radius_factor(int(k), alpha, c) for k in n])
    varied = np.logical_or.accumulate(d != d[:, :1], axis=1)  # exactly, as the sweep's rule tells spread
    with np.errstate(invalid="ignore"):
        half = np.where(np.isfinite(factor) & varied, sd * np.where(np.isfinite(factor), factor, 0.0), np.inf)
    return np.maximum.accumulate(mean - half, axis=1), np.minimum.accumulate(mean + half, axis=1)


def betting_passes(
    d: np.ndarray, alpha: float, support: tuple[float, float], edge: float
) -> tuple[np.ndarray, np.ndarray]:
    """Whether each row's running betting CS lies wholly above ``edge`` (low > edge), and wholly below it, after each
    column: (above, below), each (reps, budget). Its lower edge passes ``edge`` exactly when the upward capital at
    ``edge`` reaches 1/(theta alpha) (the capital is nonincreasing in the candidate mean), the upper the mirror."""
    lo, hi = support
    y = (d - lo) / (hi - lo)
    if np.any((y < 0) | (y > 1)):
        raise ValueError(f"observations outside the bounds [{lo:g}, {hi:g}] the betting rule assumes")
    lam = np.array([betting.bets(row, alpha) for row in y.tolist()]).reshape(y.shape)  # predictable, per row
    m = (edge - lo) / (hi - lo)
    out = []
    for side, reach in ((+1, 1 / (betting.THETA * alpha)), (-1, 1 / ((1 - betting.THETA) * alpha))):
        if not 0 <= m <= 1:  # an edge outside the bounds: the interval is always on one side of it
            out.append(np.full(y.shape, (m < 0) if side > 0 else (m > 1)))
            continue
        cap = betting.truncate(m, side)
        capital = np.cumsum(np.log1p(side * np.minimum(lam, cap) * (y - m)), axis=1)
        out.append(np.logical_or.accumulate(capital >= math.log(reach), axis=1))
    return out[0], out[1]


def median_passes(d: np.ndarray, alpha: float, edge: float) -> tuple[np.ndarray, np.ndarray]:
    """Whether each row's running median CS lies wholly above ``edge`` (low > edge), and wholly below it, after each
    column: (above, below), each (reps, budget). The CS after t columns is [d_(k), d_(t+1-k)], k = depth(t), so its
    low passes ``edge`` exactly when fewer than k of the t differences lie at or below it (ties count against it)."""
    k = np.array([median.depth(t, alpha) for t in range(1, d.shape[1] + 1)])
    at_or_below, at_or_above = np.cumsum(d <= edge, axis=1), np.cumsum(d >= edge, axis=1)
    return np.logical_or.accumulate(at_or_below < k, axis=1), np.logical_or.accumulate(at_or_above < k, axis=1)


TRUE_MEDIAN_DRAWS = 2_000_000  # draws that give a family's median paired difference to about 0.002 sd


@functools.lru_cache(maxsize=None)
def true_median(family: str, sd_a: float, sd_b: float, effect: float = 0.0) -> float:
    """The median of a − b for a family's two cells, from TRUE_MEDIAN_DRAWS paired draws (a seed of its own): the
    value the median rule's CS must cover. Not 0 where the differences are skewed (a diverging cell, unequal Beta
    spreads) even when the means are equal."""
    a, b = draw(1, TRUE_MEDIAN_DRAWS, effect, sd_a, sd_b, seed=10_007, family=family)
    return float(np.median(a - b))


def replayed_bounds(
    rule: str, d: np.ndarray, alpha: float, c: float = MIXTURE, support: tuple[float, float] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The running interval of a rule of attnlab.rules after each column, row by row through the rule's own
    ``intervals``: (low, high), each (reps, budget). The slow, obvious twin of the vectorised rules above, and the
    simulation of a rule that has no vectorised one."""
    method, look = SEQUENTIAL.get(rule), Look(mixture=c, support=support)
    found = np.array([method.intervals(row, alpha, look) for row in d.tolist()], float).reshape(*d.shape, 2)
    return found[..., 0], found[..., 1]


def _first(hit: np.ndarray) -> np.ndarray:
    """The first column where each row is True, or −1."""
    return np.where(hit.any(axis=1), hit.argmax(axis=1), -1)


@dataclass
class Outcome:
    """Per simulated comparison: +1 (a − b decided above the margin), −1 (below), 0 (undecided); seeds per side."""

    decision: np.ndarray
    seeds: np.ndarray


def naive_passes(a: np.ndarray, b: np.ndarray, alpha: float, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """Welch's two-sided test of a − b against ``margin`` re-run after each column from the second: whether it finds
    a − b above (p < alpha, t > 0), and below, each (reps, budget)."""
    above, below = np.zeros(a.shape, bool), np.zeros(a.shape, bool)
    for n in range(2, a.shape[1] + 1):
        t, p = stats.ttest_ind(a[:, :n] - margin, b[:, :n], axis=1, equal_var=False)
        above[:, n - 1], below[:, n - 1] = (p < alpha) & (t > 0), (p < alpha) & (t < 0)
    return above, below


def run_rule(
    rule: str,
    a: np.ndarray,
    b: np.ndarray,
    alpha: float,
    margin: float = 0.0,
    c: float = MIXTURE,
    support: tuple[float, float] | None = None,
    lost: np.ndarray | None = None,
    width: float | None = None,
) -> Outcome:
    """Each comparison looked at after every seed pair until ``rule`` decides a − b against ``margin``, or stops
    undecided, as attnlab.sequential.replay does; the betting rule needs the differences' ``support``.

    ``lost`` (reps, budget) marks pairs with a diverged or failed seed, whose sides ``a`` and ``b`` already hold at
    the metric's worst value: the t-mixture decides nothing from a row's first lost pair on, and with ``width`` (a
    bounded metric's best minus worst) its interval spans the divergence rates its seeds leave possible, as
    attnlab.sequential.widened does. An empty running
    intersection stops a row undecided: exactly for the t-mixture (its interval is computed), and for the betting and
    median rules where it straddles the margin (both passes at once), the one case in which a verdict could be read
    from it (the simulation tracks those rules at the margin only, not their whole interval)."""
    rule = ALIASES.get(rule, rule)
    if rule != "naive" and rule not in SEQUENTIAL:
        choices = ["naive", *ALIASES, *SEQUENTIAL.names()]
        raise ValueError(f"rule={rule!r} is not allowed; choose one of {choices}")
    reps, budget = a.shape
    d = a - b
    stopped = np.zeros((reps, budget), bool)
    if rule != "naive" and SEQUENTIAL.declared(rule).survivors and lost is not None:
        stopped = np.logical_or.accumulate(lost, axis=1)
        d = np.where(stopped, 0.0, d)  # never looked at: the rule stopped before it
    if rule == "t_mixture":
        low, high = anytime_bounds(d, alpha * (1 - SHARE) if width is not None else alpha, c)
        stopped = stopped | (low > high)
        if width is not None:
            slack = width * np.array([unseen_rate(n, alpha * SHARE / 2) for n in range(1, budget + 1)])
            low, high = np.where(low > high, low, low - slack), np.where(low > high, high, high + slack)
        above, below = low > margin, high < margin
    elif rule == "betting":
        if support is None:
            raise ValueError("rule='betting' needs the differences' support [lo, hi]")
        above, below = betting_passes(d, alpha, support, margin)
        stopped = above & below
    elif rule == "median":
        above, below = median_passes(d, alpha, margin)
        stopped = above & below
    elif rule == "naive":
        above, below = naive_passes(a, b, alpha, margin)
    else:
        low, high = replayed_bounds(rule, d, alpha, c, support)
        stopped = stopped | (low > high)
        above, below = low > margin, high < margin
    at = _first(above | below | stopped)
    rows = np.arange(reps)
    at_col = np.maximum(at, 0)
    decided = (at >= 0) & ~stopped[rows, at_col]
    sign = np.where(above[rows, at_col], 1, -1)
    return Outcome(np.where(decided, sign, 0), np.where(at >= 0, at + 1, budget))


def type_one_error(
    rule: str, alpha: float, reps: int, budget: int, seed: int = 0, family: str = "gaussian"
) -> tuple[float, float]:
    """The share of null comparisons (equal means, spreads 1 and 1.5) a rule ever decides, and its Monte-Carlo s.e.
    A rule that needs bounds (betting) is run only on the bounded families (SUPPORT). A median rule's null is the
    family's true median difference (true_median): the share whose CS ever leaves it out."""
    name = ALIASES.get(rule, rule)
    declared = SEQUENTIAL.declared(name) if name in SEQUENTIAL else None
    support = None
    if declared is not None and declared.bounds:
        if family not in SUPPORT:
            raise ValueError(f"family={family!r} is unbounded; the {rule} rule needs one of {list(SUPPORT)}")
        support = (-SUPPORT[family], SUPPORT[family])
    a, b = draw(reps, budget, 0.0, 1.0, 1.5, seed, family)
    margin = true_median(family, 1.0, 1.5) if declared is not None and declared.estimand == "median" else 0.0
    rate = float((run_rule(rule, a, b, alpha, margin=margin, support=support).decision != 0).mean())
    return rate, math.sqrt(max(rate * (1 - rate), alpha * (1 - alpha)) / reps)


@dataclass
class Adaptive:
    """The anytime rule on simulated Gaussian observations: how often it decides correctly within the budget."""

    power: float  # share decided correctly within the budget
    wrong: float  # share decided the wrong way
    mean_seeds: float  # observations (seeds per side) it spent, on average


def decided_share(
    mean: float,
    sd: float,
    edges: tuple[float, float],
    budget: int,
    alpha: float,
    c: float = MIXTURE,
    reps: int = 2000,
    seed: int = 0,
    boundary: str = "t_mixture",
    support: tuple[float, float] | None = None,
) -> Adaptive:
    """The anytime rule replayed on ``reps`` simulated sequences of Gaussian observations (paired differences or
    ratios) of this mean and sd, deciding the claim whose region is ``edges`` as attnlab.sequential.verdict does.
    ``boundary="betting"`` replays the betting CS instead, on the Gaussian draws clipped to its ``support``;
    ``boundary="median"`` the median CS (a Gaussian's median is its mean); any other rule of attnlab.rules its own
    intervals, row by row (``replayed_bounds``)."""
    d = np.random.default_rng(seed).normal(mean, sd, (reps, budget))
    lo, hi = edges
    if SEQUENTIAL.declared(boundary).bounds:
        if support is None:
            raise ValueError(f"boundary={boundary!r} needs the observations' support [lo, hi]")
        d = np.clip(d, *support)
    if boundary == "betting" and support is not None:
        above_lo, below_lo = betting_passes(d, alpha, support, lo)
        above_hi, below_hi = betting_passes(d, alpha, support, hi)
        supported, contradicted = above_lo & below_hi, below_lo | above_hi
    elif boundary == "median":
        above_lo, below_lo = median_passes(d, alpha, lo)
        above_hi, below_hi = median_passes(d, alpha, hi)
        supported, contradicted = above_lo & below_hi, below_lo | above_hi
    else:
        low, high = (
            anytime_bounds(d, alpha, c) if boundary == "t_mixture" else replayed_bounds(boundary, d, alpha, c, support)
        )
        supported = (low > lo) & (high < hi)
        contradicted = (high < lo) | (low > hi)
    at = _first(supported | contradicted)
    rows, decided = np.arange(reps), at >= 0
    said_supported = decided & supported[rows, np.maximum(at, 0)]
    said_contradicted = decided & ~said_supported
    correct, wrong = (said_supported, said_contradicted) if lo < mean < hi else (said_contradicted, said_supported)
    return Adaptive(
        power=float(correct.mean()),
        wrong=float(wrong.mean()),
        mean_seeds=float(np.where(decided, at + 1, budget).mean()),
    )


@dataclass
class Savings:
    """A planted effect decided by the anytime rule, against the suite's fixed test of the same power."""

    effect: float  # planted difference in units of the per-cell standard deviation
    margin: float | None  # an equivalence claim's margin (same units); None for a difference claim (a − b > 0)
    adaptive: Adaptive
    fixed_seeds: int | None  # seeds per side of the fixed test (one-sided Welch, or TOST) with the same power
    planned_seeds: int | None  # seeds per side of the fixed test sized in advance for 80% power (see tables)


def savings(effect: float, alpha: float, reps: int, budget: int, seed: int = 0, margin: float | None = None) -> Savings:
    """The anytime rule on a planted standardised effect (both cells' sd 1), against the fixed design of equal power.

    Without ``margin``: the claim a − b > 0, the fixed test one-sided Welch, planned for 80% at effect PLANNED.
    With it: the claim |a − b| < margin, the fixed test TOST, planned for 80% at a true difference of 0.
    """
    edges = region("greater") if margin is None else region("equivalent", margin)
    found = decided_share(effect, math.sqrt(2.0), edges, budget, alpha, reps=reps, seed=seed)
    fixed = equal_power(found.power, effect, edges, 1.0, 1.0, alpha)
    planned_at = PLANNED if margin is None else 0.0
    planned = equal_power(0.8, planned_at, edges, 1.0, 1.0, alpha)
    return Savings(effect, margin, found, fixed.seeds, planned.seeds)


def bounded_savings(rule: str, effect: float, alpha: float, reps: int, budget: int, seed: int = 0) -> Savings:
    """A planted effect on the accuracy family, decided by ``rule`` ("anytime", "betting" or "median": the claim
    a − b > 0 holds for the mean and the median alike), against the suite's fixed test of the same power: cell a's
    seeds Beta accuracies at ACCURACY, cell b's ``effect`` units (of ACCURACY_UNIT) lower, both of sd one unit; the
    claim a − b > 0; the fixed test one-sided Welch at the same spreads."""
    rng = np.random.default_rng(seed)
    a = beta_accuracies(rng, (reps, budget), ACCURACY, ACCURACY_UNIT)
    b = beta_accuracies(rng, (reps, budget), ACCURACY - effect * ACCURACY_UNIT, ACCURACY_UNIT)
    half = SUPPORT["accuracy"]
    out = run_rule(rule, a / ACCURACY_UNIT, b / ACCURACY_UNIT, alpha, support=(-half, half))
    found = Adaptive(
        power=float((out.decision == 1).mean()),
        wrong=float((out.decision == -1).mean()),
        mean_seeds=float(out.seeds.mean()),
    )
    edges = region("greater")
    fixed = equal_power(found.power, effect, edges, 1.0, 1.0, alpha)
    planned = equal_power(0.8, PLANNED, edges, 1.0, 1.0, alpha)
    return Savings(effect, None, found, fixed.seeds, planned.seeds)


ALPHAS = (0.01, 0.05, 0.1)
EFFECTS = (0.5, 1.0, 2.0, 3.0)
MARGINS = (0.5, 1.0, 2.0, 3.0)  # equivalence margins in per-cell standard deviations, at a true difference of 0
BOUNDED_EFFECTS = (1.0, 2.0, 5.0, 10.0)  # accuracy-family effects, in units of ACCURACY_UNIT (4 to 40 points)
BETTING_BUDGET = 400  # a second budget for the betting rule, whose width is set by the bounds, not the seeds' spread
PLANNED = 1.0  # the smallest effect a fixed design is sized for in the table, in standard deviations
