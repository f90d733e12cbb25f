"""Simulations of seeds added until decided: the error rate of a stopping rule under the null, and the seeds
it spends against the fixed design of equal power. Vectorised over thousands of simulated comparisons.

Two rules look after every seed pair (n = 2, 3, ..., budget) and stop at their first decision:

- ``anytime``: the confidence sequence of common.sequential (Lai's t-mixture, running intersection) on the
  paired differences; its type-I error stays at or below alpha however often it is looked at.
- ``naive``: Welch's two-sided t-test at alpha (scipy) re-run after every seed, stopping at p < alpha: a
  fixed-n test used sequentially, the practice whose error grows with the number of looks.

The fixed design of equal power is the Welch sample size (statsmodels' TTestIndPower) whose power at the
planted effect equals the adaptive rule's chance of a correct decision within the budget.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats
from statsmodels.stats.power import TTestIndPower

from common.sequential import MIXTURE, radius_factor

RULES = ("anytime", "naive")
# A simulated power of 1.0 has no finite fixed design; the design of 99% power stands in for it.
POWER_CAP = 0.99


@dataclass
class Outcome:
    """Per simulated comparison: +1 (a − b decided above the margin), −1 (below), 0 (undecided); seeds per side."""

    decision: np.ndarray
    seeds: np.ndarray


def draw(reps: int, budget: int, effect: float, sd_a: float, sd_b: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeds of two cells, Gaussian, unequal spreads: a (reps, budget) array each, mean(a) − mean(b) = effect."""
    rng = np.random.default_rng(seed)
    return rng.normal(effect, sd_a, (reps, budget)), rng.normal(0.0, sd_b, (reps, budget))


def anytime_bounds(d: np.ndarray, alpha: float, c: float = MIXTURE) -> tuple[np.ndarray, np.ndarray]:
    """The running-intersection CS of each row's mean after each column: (low, high), each (reps, budget)."""
    n = np.arange(1, d.shape[1] + 1)
    mean = np.cumsum(d, axis=1) / n
    sd = np.sqrt(np.maximum(np.cumsum(d * d, axis=1) / n - mean**2, 0.0))
    factor = np.array([radius_factor(int(k), alpha, c) for k in n])
    with np.errstate(invalid="ignore"):
        half = np.where(np.isfinite(factor), sd * np.where(np.isfinite(factor), factor, 0.0), np.inf)
    return np.maximum.accumulate(mean - half, axis=1), np.minimum.accumulate(mean + half, axis=1)


def _first(hit: np.ndarray) -> np.ndarray:
    """The first column where each row is True, or −1."""
    return np.where(hit.any(axis=1), hit.argmax(axis=1), -1)


def run_rule(rule: str, a: np.ndarray, b: np.ndarray, alpha: float, margin: float = 0.0, c: float = MIXTURE) -> Outcome:
    """Each comparison looked at after every seed pair until ``rule`` decides a − b against ``margin``."""
    if rule not in RULES:
        raise ValueError(f"rule={rule!r} is not allowed; choose one of {list(RULES)}")
    reps, budget = a.shape
    if rule == "anytime":
        low, high = anytime_bounds(a - b, alpha, c)
        above, below = low > margin, high < margin
    else:
        above = np.zeros((reps, budget), bool)
        below = np.zeros((reps, budget), bool)
        for n in range(2, budget + 1):
            t, p = stats.ttest_ind(a[:, :n] - margin, b[:, :n], axis=1, equal_var=False)
            above[:, n - 1], below[:, n - 1] = (p < alpha) & (t > 0), (p < alpha) & (t < 0)
    at = _first(above | below)
    rows = np.arange(reps)
    decided = at >= 0
    sign = np.where(above[rows, np.maximum(at, 0)], 1, -1)
    return Outcome(np.where(decided, sign, 0), np.where(decided, at + 1, budget))


def type_one_error(rule: str, alpha: float, reps: int, budget: int, seed: int = 0) -> tuple[float, float]:
    """The share of null comparisons (equal means, unequal spreads) a rule ever decides, and its Monte-Carlo s.e."""
    a, b = draw(reps, budget, 0.0, 1.0, 1.5, seed)
    rate = float((run_rule(rule, a, b, alpha).decision != 0).mean())
    return rate, math.sqrt(max(rate * (1 - rate), alpha * (1 - alpha)) / reps)


@dataclass
class Savings:
    """A planted effect decided by the anytime rule, against the fixed Welch design of the same power."""

    effect: float  # planted difference in units of the per-cell standard deviation
    power: float  # share decided correctly within the budget
    wrong: float  # share decided the wrong way
    mean_seeds: float  # seeds per side the adaptive rule spent, on average
    fixed_seeds: int | None  # seeds per side of the two-sided Welch test at alpha with the same power


def fixed_design(effect: float, alpha: float, power: float) -> int | None:
    """Seeds per side for a two-sided Welch test at alpha to reach ``power`` (at most POWER_CAP) at ``effect``."""
    if not power > 0 or effect == 0:
        return None
    power = min(power, POWER_CAP)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        n = float(TTestIndPower().solve_power(effect_size=abs(effect), alpha=alpha, power=power))
    if math.isfinite(n):
        return max(2, math.ceil(n))
    # an effect so large that the solver finds no root: the fewest seeds, counted up, whose power reaches it
    n = 2
    while welch_power(effect, n, alpha) < power:
        n += 1
    return n


def welch_power(effect: float, n: int, alpha: float) -> float:
    """Power of the two-sided two-sample t-test with n seeds a side (statsmodels); where its noncentral t gives
    no number (a noncentrality far past the critical value), the normal approximation, then close to 1."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = float(TTestIndPower().power(effect_size=abs(effect), nobs1=n, alpha=alpha))
    if math.isfinite(found):
        return found
    critical, shift = stats.t.ppf(1 - alpha / 2, 2 * n - 2), abs(effect) * math.sqrt(n / 2)
    return float(stats.norm.sf(critical - shift) + stats.norm.cdf(-critical - shift))


def savings(effect: float, alpha: float, reps: int, budget: int, seed: int = 0) -> Savings:
    """Simulate the anytime rule on a planted standardised effect (both cells' sd 1) and price the fixed design."""
    a, b = draw(reps, budget, effect, 1.0, 1.0, seed)
    out = run_rule("anytime", a, b, alpha)
    power = float((out.decision == np.sign(effect)).mean())
    return Savings(
        effect=effect,
        power=power,
        wrong=float((out.decision == -np.sign(effect)).mean()),
        mean_seeds=float(out.seeds.mean()),
        fixed_seeds=fixed_design(effect, alpha, power),
    )


ALPHAS = (0.01, 0.05, 0.1)
EFFECTS = (0.5, 1.0, 2.0, 3.0)
PLANNED = 1.0  # the smallest effect a fixed design is sized for in the table, in standard deviations


def tables(reps: int = 10_000, budget: int = 30, seed: int = 0) -> str:
    """The markdown tables docs/adaptive_seeds.md quotes: type-I error by rule and alpha, seeds by effect."""
    lines = [
        f"Type-I error, {reps} null comparisons (sd 1 against 1.5), looked at after every seed up to {budget}:",
        "",
        "| alpha | anytime CS | naive Welch re-tested |",
        "|---|---|---|",
    ]
    for alpha in ALPHAS:
        cells = [type_one_error(rule, alpha, reps, budget, seed) for rule in RULES]
        lines.append(f"| {alpha:g} | " + " | ".join(f"{r:.4f} ± {se:.4f}" for r, se in cells) + " |")
    lines += [
        "",
        f"Planted effects (in standard deviations), alpha 0.05, budget {budget} seeds per side, {reps} comparisons:",
        "",
        "| effect | power in budget | wrong way | mean seeds (adaptive) | fixed design, equal power |"
        f" fixed design sized in advance (80% at effect {PLANNED:g}) |",
        "|---|---|---|---|---|---|",
    ]
    planned = fixed_design(PLANNED, 0.05, 0.8)
    for effect in EFFECTS:
        s = savings(effect, 0.05, reps, budget, seed)
        lines.append(
            f"| {effect:g} | {s.power:.3f} | {s.wrong:.4f} | {s.mean_seeds:.1f} | {s.fixed_seeds} | {planned} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(tables())
