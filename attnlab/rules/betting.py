"""The betting rule (``boundary=betting``): Waudby-Smith and Ramdas' confidence sequence for the mean of bounded
observations (its math in attnlab.betting), valid for any distribution within the bounds, diverged seeds included;
it needs ``hydra.sweeper.bounds``."""

from __future__ import annotations

from typing import Sequence

from attnlab import betting
from attnlab.rules import RULES, Look, mean

ASSUMPTION = (
    "assumes only independent seeds whose metric lies within the bounds; valid for any distribution there, "
    "diverged seeds included (simulated: docs/adaptive_seeds.md), at the price of a width set by the bounds"
)


@RULES.register(
    "betting",
    estimand="mean",
    order=20,
    text=f"{betting.RULE}, running intersection, Bonferroni over claims",
    assumption=ASSUMPTION,
    label="anytime CS (betting)",
    ratio="bounds paired differences",  # a ratio of two bounded values is not bounded by them
    bounds=True,
)
class Betting:
    @staticmethod
    def intervals(values: Sequence[float], alpha: float, look: Look) -> list[tuple[float, float]]:
        if look.support is None:
            raise ValueError("boundary=betting needs the observations' bounds [lo, hi]; none were given")
        return betting.intervals(values, alpha, *look.support)

    @staticmethod
    def center(values: Sequence[float]) -> float:
        return mean(values)

    @staticmethod
    def undecided(values: Sequence[float]) -> str:
        return ""

    @staticmethod
    def settings(mixture: float, bounds: tuple[float, float] | None) -> str:
        lo, hi = bounds if bounds is not None else (float("nan"), float("nan"))
        return f"boundary betting, metric bounds [{lo:g}, {hi:g}] (paired differences in [{lo - hi:g}, {hi - lo:g}])"
