"""The sequential (adaptive-seed) stopping rules: the values of ``hydra.sweeper.boundary``, one module each.

A rule is a confidence sequence that may be looked at after every seed pair. Each module of this package registers
one class on ``RULES`` (the ``sequential rule`` kind of attnlab.registry) with what the rule declares (``RuleEntry``):

    @RULES.register("median", estimand="median", order=30, text=..., assumption=..., label=..., ratio="...")
    class Median:
        intervals(values, alpha, look) -> [(low_1, high_1), ...]  # the running intersection after each observation
        center(values) -> float                                    # the estimate the interval is about
        undecided(values) -> str                                   # why the end of the seeds gave no interval ("")
        settings(mixture, bounds) -> str                           # its parameters, as the claims section names them

attnlab.sequential.replay asks the entry (which lost pairs it decides on, its intervals), the sweep's plan checks
(experiments/sweep/adaptive.py) and the claims read back (analysis/claims/adaptive.py) check a claim against it, and
the simulations (analysis/stats/anytime.py, simulate.py) iterate the registry: a new rule is one module here.

Standard library only: the sweeper decides here at run time and ``import attnlab`` stays light.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, Sequence

from attnlab.registry import Registry

ESTIMANDS = ("mean", "median")  # of the observations: paired differences a − b, or a ratio claim's per-seed ratios
DEFAULT = "t_mixture"  # the rule of a plan that names none (and of every state written before the choice)
MIXTURE = 1.0  # c: the t-mixture's prior precision of the standardised effect; 1 puts its spread at Cohen's d = 1


@dataclass(frozen=True)
class RuleEntry:
    """What a rule declares: what it decides on, which claims and plans it takes, and how reports name it."""

    estimand: str  # one of ESTIMANDS: what the interval, and so a verdict, is about
    order: int  # its place among the rules (the sweeper's comment, the simulations' tables)
    text: str  # the rule's name as a report states it (attnlab.sequential.rule)
    assumption: str  # what its guarantee rests on, after "the rule " in the claims section
    label: str  # the claims table's test column
    ratio: str = ""  # why it refuses ratio claims, after "which " ("": it decides them)
    bounds: bool = False  # it needs the claim metrics' range (hydra.sweeper.bounds) and every seed within it
    survivors: bool = False  # it decides on completed seeds only: it stops at the first lost pair, and a claim's
    # ``assume: no_divergence`` changes what it does; otherwise a lost seed is scored at the metric's worst value

    def __post_init__(self) -> None:
        if self.estimand not in ESTIMANDS:
            raise ValueError(f"estimand={self.estimand!r} is not allowed; choose one of {list(ESTIMANDS)}")


@dataclass(frozen=True)
class Look:
    """What a rule may use besides the values and alpha: the plan's mixture and support, and the claim's metric,
    expectation and declared assumption."""

    mixture: float = MIXTURE
    support: tuple[float, float] | None = None  # where an observation lies: [lo − hi, hi − lo] for bounds [lo, hi]
    metric: str = "the metric"
    expect: str = "greater"
    assumed: bool = False  # the claim declares ``assume: no_divergence``


class SequentialRule(Protocol):
    @staticmethod
    def intervals(values: Sequence[float], alpha: float, look: Look) -> list[tuple[float, float]]: ...

    @staticmethod
    def center(values: Sequence[float]) -> float: ...

    @staticmethod
    def undecided(values: Sequence[float]) -> str: ...

    @staticmethod
    def settings(mixture: float, bounds: tuple[float, float] | None) -> str: ...


RULES: Registry[type[SequentialRule]] = Registry("sequential rule", RuleEntry, package="attnlab.rules")


def ordered() -> list[str]:
    """Every rule's name, in its declared order (the default first)."""
    return sorted(RULES.names(), key=lambda name: (RULES.declared(name).order, name))


def mean(values: Sequence[float]) -> float:
    """The sample mean (NaN for no values): the center of the mean-based rules."""
    return sum(values) / len(values) if values else math.nan
