"""A claim's seeds as outcomes: a metric value, or a run that diverged or failed, never a silently missing value.

A seed is paired by number with the other side's seed. A pair whose side diverged or failed is a *lost* pair; what a
rule does with it (docs/adaptive_seeds.md, "Diverged and failed seeds"):

- the median and betting rules score the lost side at the metric's worst value (``attnlab.metric_scale.worst_value``:
  an accuracy's 0, a loss's +inf, or the bad end of the declared bounds) and go on: a cell that diverges often is
  then found worse, as it is;
- the t-mixture, a rule on the mean of Gaussian differences, decides nothing from the first lost pair on: it stops
  undecided with ``survivors_reason`` rather than decide on the survivors (a mean with a worst value of +inf, or an
  outlier at an accuracy's 0, is not what its Gaussian model describes);
- a lost pair whose metric has no worst value stops every rule undecided, with the reason.

Standard library only: the adaptive sweeper (experiments) and the analysis pair the seeds here, alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

COMPLETED, DIVERGED, FAILED = "completed", "diverged", "failed"
OUTCOMES = (COMPLETED, DIVERGED, FAILED)


@dataclass(frozen=True)
class Seed:
    """One seed of one side: ``completed`` with its finite metric value, or ``diverged`` / ``failed`` without."""

    outcome: str
    value: float | None = None


def seed(status: str | None, value: float | None) -> Seed:
    """A run's outcome for a claim metric: completed with a finite value; diverged when the run diverged or completed
    with a non-finite value (a NaN loss is a divergence); failed otherwise (a crash, a missing result)."""
    finite = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if status == COMPLETED and finite:
        return Seed(COMPLETED, float(value))  # type: ignore[arg-type]
    if status in (COMPLETED, DIVERGED):
        return Seed(DIVERGED)
    return Seed(FAILED)


def counts(seeds: Mapping[int, Seed]) -> dict[str, int]:
    """{"completed": n, "diverged": n, "failed": n}."""
    return {o: sum(s.outcome == o for s in seeds.values()) for o in OUTCOMES}


def describe(tally: Mapping[str, int]) -> str:
    """``5 completed, 1 diverged, 0 failed``."""
    return ", ".join(f"{tally.get(o, 0)} {o}" for o in OUTCOMES)


@dataclass(frozen=True)
class Observations:
    """A claim's sequence in seed order: the paired differences a − b (or side a's ratios), a lost side scored at the
    worst value (NaN where the metric has none); which pairs were lost; each side's outcome counts."""

    values: list[float]
    lost: list[bool]
    sides: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def lost_count(self) -> int:
        return sum(self.lost)


def _scored(s: Seed, worst: float | None) -> float:
    if s.value is not None:
        return s.value
    return math.nan if worst is None else worst


def paired(a: Mapping[int, Seed], b: Mapping[int, Seed], worst: float | None) -> Observations:
    """The differences a − b of the seeds both sides have, in seed order. Both sides lost: 0 (both at the worst
    value, a tie, also where it is +inf)."""
    values, lost = [], []
    for number in sorted(set(a) & set(b)):
        x, y = a[number], b[number]
        gone = x.value is None or y.value is None
        values.append(
            0.0 if x.value is None and y.value is None and worst is not None else _scored(x, worst) - _scored(y, worst)
        )
        lost.append(gone)
    return Observations(values, lost, {"a": counts(a), "b": counts(b)})


def ratios(top: Mapping[int, Seed], bottom: Mapping[int, Seed]) -> Observations:
    """Side a's per-seed ratios of the metric at its length over the length ``over``: a lost seed has no ratio (NaN);
    a zero denominator is a ClaimError for the caller to raise (``zero_denominators``)."""
    values, lost = [], []
    for number in sorted(set(top) & set(bottom)):
        x, y = top[number], bottom[number]
        gone = x.value is None or y.value is None
        values.append(math.nan if gone or y.value == 0 else x.value / y.value)  # type: ignore[operator]
        lost.append(gone)
    return Observations(values, lost, {"a": counts(top)})


def zero_denominators(bottom: Mapping[int, Seed]) -> list[int]:
    """The seeds whose denominator of a ratio claim is 0: no ratio exists there."""
    return sorted(n for n, s in bottom.items() if s.value == 0)


def survivors_reason(lost: int) -> str:
    """Why the t-mixture stops undecided once a seed is lost."""
    return f"{lost} diverged or failed seed pair(s); a mean-based rule does not decide on survivors"


def no_worst_reason(metric: str) -> str:
    """Why every rule stops undecided at a lost seed of a metric without a worst value."""
    return (
        f"a diverged or failed seed, and {metric} has no worst value to score it at (its name says not which way is "
        "better)"
    )
