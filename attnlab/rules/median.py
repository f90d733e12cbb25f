"""The median rule (``boundary=median``): Howard and Ramdas' confidence sequence for the median paired difference
(its math in attnlab.median), valid for any distribution, bounded or not, ties and diverged seeds included."""

from __future__ import annotations

from typing import Sequence

from attnlab import median
from attnlab.rules import RULES, Look

ASSUMPTION = (
    "decides on the median paired difference, not the mean; assumes only independent seeds, valid for any "
    "distribution, ties and diverged seeds included (simulated: docs/adaptive_seeds.md); the interval and the "
    "estimate are of the median"
)


@RULES.register(
    "median",
    estimand="median",
    order=30,
    text=median.RULE,
    assumption=ASSUMPTION,
    label="anytime CS (median, Howard-Ramdas)",
    ratio="decides on the median paired difference of two cells",
)
class Median:
    @staticmethod
    def intervals(values: Sequence[float], alpha: float, look: Look) -> list[tuple[float, float]]:
        return median.intervals(values, alpha)

    @staticmethod
    def center(values: Sequence[float]) -> float:
        return median.sample_median(values)

    @staticmethod
    def undecided(values: Sequence[float]) -> str:
        return ""

    @staticmethod
    def settings(mixture: float, bounds: tuple[float, float] | None) -> str:
        prior = f"Beta({median.PRIOR:g}, {median.PRIOR:g})"
        return f"boundary median (claims on the median paired difference), {prior} mixture"
