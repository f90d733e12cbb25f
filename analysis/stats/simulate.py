"""Type-I error and power of every rule that decides a claim, simulated: ``python -m analysis.stats.simulate``.

    python -m analysis.stats.simulate                          # 2,000 comparisons per figure, budgets 10, 30, 100
    python -m analysis.stats.simulate --reps 200 --budgets 10,30  # a small run

The claim is a − b > 0. Each family (FAMILIES) draws the seeds of two cells under the null (the rule's estimand at
its edge) and under an alternative (cell a better), and every rule decides within each budget of seeds per side:

- ``welch``: the fixed-n claims engine at n = budget (one look; a diverged seed of a bounded metric scored at its
  worst value 0, as the engine scores it, and on the bounded families the difference of scored means bounded over
  every divergence rate the seeds leave possible, analysis.stats.unseen_divergence), through ``fixed_n_verdict``:
  the one place this module calls it.
- ``t_mixture``, ``betting``, ``median``: the adaptive sweep's anytime-valid rules (attnlab.sequential, attnlab.betting,
  attnlab.median) looked at after every seed pair, vectorised in analysis.stats.anytime, with diverged seeds as the
  sweep treats them (attnlab.outcomes): scored at the accuracy's worst value 0 for the median and betting rules, a
  stop for the t-mixture, whose interval on the bounded families also spans the divergence its seeds have not shown
  (attnlab.sequential.widened). Betting runs on the bounded (accuracy) families only.
- ``welch, assumed`` and ``t_mixture, assumed``: the same two rules for a claim that declares ``assume: no_divergence``
  (the bound over unseen divergence set aside until a seed diverges). They keep alpha where the assumption is true
  and show, on the families where seeds diverge (DIVERGING), what a false assumption costs.

A false verdict is any verdict at the null (supported or contradicted: at the edge neither is true). The null is each
rule's own: equal means of the scored values for the mean-based rules (welch, t_mixture, betting), the true median
of the scored paired differences for the median rule (from TRUE_MEDIAN_DRAWS pairs; not 0 where one cell diverges
and the other does not). Power is the share of alternatives decided "supported". ± is the Monte-Carlo standard error
(at least that of a rate of alpha, so a rate of 0 does not claim certainty). Seeded: the same command prints the
same table. Each budget reads the first seeds of one draw at the largest budget (a sequence's decisions within
10 seeds are those of the first 10 of 100).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from analysis.claims.evaluate import COLUMNS, decided
from analysis.stats import anytime
from analysis.stats import unseen_divergence as unseen
from analysis.stats.claims import BoundedSides, two_sample_test
from attnlab.claims import Claim, parse_claim
from attnlab.rules import RULES as SEQUENTIAL
from attnlab.rules import ordered

ALPHA = 0.05
REPS = 2000
BUDGETS = (10, 30, 100)
FIXED = "welch"  # the fixed-n claims engine, beside the sequential rules of attnlab.rules
ASSUMING = ", assumed"  # a rule's name under a claim's declared ``assume: no_divergence``


def rules() -> tuple[str, ...]:
    """The fixed-n engine and every sequential rule of attnlab.rules, the default first; read when asked, so a rule
    registered after this module was imported is simulated too."""
    return (FIXED, *ordered())


def assumed_rules() -> tuple[str, ...]:
    """The rules that decide on survivors (the fixed-n engine, the t-mixture) under a claim's declared
    ``assume: no_divergence``: valid only where no seed diverges."""
    return tuple(f"{r}{ASSUMING}" for r in rules() if r == FIXED or SEQUENTIAL.declared(r).survivors)


def __getattr__(name: str) -> tuple[str, ...]:
    # RULES and ASSUMED, as the tests and docs name them, read when asked
    if name == "RULES":
        return rules()
    if name == "ASSUMED":
        return assumed_rules()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


SEEDED = 20_260_101
DIVERGES = 0.1  # a seed of a diverging cell diverges with this chance (its metric: NaN, scored at the worst value 0)
ACCURACY = anytime.ACCURACY  # 0.95: an accuracy near its ceiling
SPREAD = anytime.ACCURACY_UNIT  # 0.04: its seed-to-seed sd
GAP = 0.05  # the alternative of the accuracy families: cell b lower by 5 points
EFFECT = 1.0  # the alternative of the unbounded families: cell a higher by 1 (cell a's sd 1, cell b's 1.5)
TEST_SET = 32  # the discrete family: accuracies k / 32 on a test set of 32 items, many ties
TRUE_MEDIAN_DRAWS = 1_000_000
CLAIM = parse_claim(
    {"name": "a beats b", "metric": "test/token_acc", "a": {"x": 1}, "b": {"x": 2}, "expect": "greater"}, "simulate"
)


@dataclass(frozen=True)
class Draw:
    """Two cells' seeds, (reps, budget) each, a diverged seed already at the worst value; which seeds diverged."""

    a: np.ndarray
    b: np.ndarray
    lost_a: np.ndarray
    lost_b: np.ndarray

    @property
    def lost(self) -> np.ndarray:
        return self.lost_a | self.lost_b


def _unbounded(name: str) -> Callable[[np.random.Generator, tuple[int, int], bool], Draw]:
    sample_a, sample_b = anytime.FAMILIES[name]

    def draw(rng: np.random.Generator, shape: tuple[int, int], alternative: bool) -> Draw:
        none = np.zeros(shape, bool)
        return Draw(EFFECT * alternative + sample_a(rng, shape, 1.0), sample_b(rng, shape, 1.5), none, none)

    return draw


def _diverging(rng: np.random.Generator, shape: tuple[int, int], mean: float, diverges: float):
    """Beta accuracies of this mean, each diverged with chance ``diverges``: (scored values, diverged)."""
    lost = rng.random(shape) < diverges
    return np.where(lost, 0.0, anytime.beta_accuracies(rng, shape, mean, SPREAD)), lost


def _asymmetric(rng: np.random.Generator, shape: tuple[int, int], alternative: bool) -> Draw:
    # cell a diverges, cell b never: at the null b's mean is a's scored mean (1 − DIVERGES) ACCURACY
    a, lost_a = _diverging(rng, shape, ACCURACY, DIVERGES)
    b, lost_b = _diverging(rng, shape, (1 - DIVERGES) * ACCURACY - GAP * alternative, 0.0)
    return Draw(a, b, lost_a, lost_b)


def _symmetric(rng: np.random.Generator, shape: tuple[int, int], alternative: bool) -> Draw:
    a, lost_a = _diverging(rng, shape, ACCURACY, DIVERGES)
    b, lost_b = _diverging(rng, shape, ACCURACY - GAP * alternative, DIVERGES)
    return Draw(a, b, lost_a, lost_b)


def _ties(rng: np.random.Generator, shape: tuple[int, int], alternative: bool) -> Draw:
    # accuracies on a small test set: k / 32 correct, so seeds often tie, and a few seeds may all agree
    none = np.zeros(shape, bool)
    a = rng.binomial(TEST_SET, 0.9, shape) / TEST_SET
    b = rng.binomial(TEST_SET, 0.9 - GAP * alternative, shape) / TEST_SET
    return Draw(a, b, none, none)


FAMILIES: dict[str, Callable[[np.random.Generator, tuple[int, int], bool], Draw]] = {
    "gaussian": _unbounded("gaussian"),
    "t3": _unbounded("t3"),
    "lognormal": _unbounded("lognormal"),
    "accuracy, asymmetric divergence": _asymmetric,
    "accuracy, symmetric divergence": _symmetric,
    "accuracy k/32, ties": _ties,
}
BOUNDED = {"accuracy, asymmetric divergence", "accuracy, symmetric divergence", "accuracy k/32, ties"}
DIVERGING = {"accuracy, asymmetric divergence", "accuracy, symmetric divergence"}  # where no_divergence is false
SUPPORT = (-1.0, 1.0)  # where a difference of two accuracies lies
RANGE = (0.0, 1.0)  # where an accuracy lies: worst 0, best 1


def draw(family: str, reps: int, budget: int, alternative: bool, seed: int) -> Draw:
    if family not in FAMILIES:
        raise ValueError(f"family={family!r} is not allowed; choose one of {list(FAMILIES)}")
    return FAMILIES[family](np.random.default_rng(seed), (reps, budget), alternative)


def true_median(family: str) -> float:
    """The median of the scored paired differences at the family's null: the median rule's edge."""
    pairs = draw(family, 1, TRUE_MEDIAN_DRAWS, False, seed=SEEDED + 1)
    return float(np.median(pairs.a - pairs.b))


def fixed_n_verdict(
    a: np.ndarray,
    b: np.ndarray,
    claim: Claim,
    alpha: float,
    lost: tuple[np.ndarray, np.ndarray] | None = None,
    assume: bool = False,
) -> int:
    """+1 supported, −1 contradicted, 0 inconclusive: the fixed-n claims engine (analysis.stats.claims'
    two_sample_test, analysis.claims.evaluate's decided over one claim) on each side's seeds, a diverged one already at
    the metric's worst value as the engine scores it. ``lost`` (which seeds of a and b diverged) marks an accuracy
    in RANGE, decided as the engine decides a bounded metric; ``assume``: the claim declares no divergence, which
    sets that bound aside unless a seed diverged (analysis.claims.evaluate.assumption). The one call of the fixed-n
    engine here."""
    if len(a) < 2 or len(b) < 2:
        return 0
    bounded = None
    if lost is not None and not (assume and not (lost[0].any() or lost[1].any())):
        sides = [unseen.Bounded(x[~gone], int(gone.sum())) for x, gone in zip((a, b), lost)]
        bounded = BoundedSides(sides[0], sides[1], unseen.Scale(RANGE[0], 1.0))
    test = two_sample_test(a, b, claim, alpha, bounded)
    row: dict[str, Any] = {c: math.nan for c in COLUMNS}
    row.update(lacked="", p_for=test.p_for, p_against=test.p_against, diff_low=test.low, diff_high=test.high)
    (verdict,) = (r["verdict"] for r in decided([row], [claim], alpha))
    return {"supported": 1, "contradicted": -1}.get(verdict, 0)


@dataclass(frozen=True)
class Looks:
    """Per comparison: the verdict (+1, −1, 0) and the seeds per side spent, within each budget."""

    decision: dict[int, np.ndarray]
    seeds: dict[int, np.ndarray]


def run(rule: str, pairs: Draw, budgets: Sequence[int], alpha: float, margin: float, bounded: bool = False) -> Looks:
    """One rule on one draw, within each budget; ``bounded``: the draw is an accuracy in RANGE, decided as such."""
    assume = rule.endswith(ASSUMING)
    rule = rule.removesuffix(ASSUMING)
    if rule == FIXED:
        lost = zip(pairs.lost_a, pairs.lost_b) if bounded else None
        rows = list(zip(pairs.a, pairs.b, lost or [None] * len(pairs.a)))
        decision = {
            n: np.array(
                [
                    fixed_n_verdict(
                        a[:n] - margin,
                        b[:n],
                        CLAIM,
                        alpha,
                        None if gone is None else (gone[0][:n], gone[1][:n]),
                        assume,
                    )
                    for a, b, gone in rows
                ]
            )
            for n in budgets
        }
        return Looks(decision, {n: np.full(len(pairs.a), n) for n in budgets})
    declared = SEQUENTIAL.declared(rule)
    support = SUPPORT if declared.bounds else None
    width = RANGE[1] - RANGE[0] if bounded and declared.survivors and not assume else None
    out = anytime.run_rule(rule, pairs.a, pairs.b, alpha, margin=margin, support=support, lost=pairs.lost, width=width)
    return Looks(
        {n: np.where(out.seeds <= n, out.decision, 0) for n in budgets},
        {n: np.minimum(out.seeds, n) for n in budgets},
    )


def standard_error(rate: float, reps: int, alpha: float) -> float:
    return math.sqrt(max(rate * (1 - rate), alpha * (1 - alpha)) / reps)


def rules_for(family: str) -> list[str]:
    """The rules simulated on ``family``: a rule that needs bounds (betting) on the bounded families only, and the
    assumed rules on every family (where seeds diverge, their rows show what a false assumption costs)."""
    found = [r for r in rules() if r == FIXED or not SEQUENTIAL.declared(r).bounds or family in BOUNDED]
    return found + list(assumed_rules())


def simulate(
    reps: int = REPS, budgets: Sequence[int] = BUDGETS, alpha: float = ALPHA, seed: int = SEEDED
) -> pd.DataFrame:
    """One row per family, budget and rule: type-I error and power with their standard errors, mean seeds spent."""
    rows = []
    for f, family in enumerate(FAMILIES):
        null = draw(family, reps, max(budgets), False, seed + 2 * f)
        alternative = draw(family, reps, max(budgets), True, seed + 2 * f + 1)
        median_edge = true_median(family)
        done: dict[str, tuple[Looks, Looks]] = {}
        for rule in rules_for(family):
            on_median = rule in SEQUENTIAL and SEQUENTIAL.declared(rule).estimand == "median"
            margin = median_edge if on_median else 0.0  # the assumed rules are mean-based: edge 0
            bounded = family in BOUNDED
            if rule.endswith(ASSUMING) and not bounded:  # no bound to set aside: the rule's own looks, not run twice
                wrong, right = done[rule.removesuffix(ASSUMING)]
            else:
                wrong = run(rule, null, budgets, alpha, margin, bounded)
                right = run(rule, alternative, budgets, alpha, 0.0, bounded)
            done[rule] = wrong, right
            for n in budgets:
                error = float((wrong.decision[n] != 0).mean())
                power = float((right.decision[n] == 1).mean())
                rows.append(
                    {
                        "family": family,
                        "budget": n,
                        "rule": rule,
                        "type_one": error,
                        "type_one_se": standard_error(error, reps, alpha),
                        "power": power,
                        "power_se": standard_error(power, reps, alpha),
                        "seeds_null": float(wrong.seeds[n].mean()),
                        "seeds_alternative": float(right.seeds[n].mean()),
                    }
                )
    return pd.DataFrame(rows)


def table(found: pd.DataFrame, reps: int, alpha: float) -> str:
    """The rows as a markdown table; a type-I error above alpha + 3 s.e. is marked."""
    lines = [
        f"Claim a − b > 0 at alpha {alpha:g}, {reps} comparisons per figure (null and alternative each); ± is the "
        "Monte-Carlo standard error; seeds: the mean spent per side (null / alternative).",
        "",
        "| family | budget | rule | type-I error | power | seeds (null / alt.) |",
        "|---|---|---|---|---|---|",
    ]
    for r in found.to_dict("records"):
        above = " (above alpha)" if r["type_one"] > alpha + 3 * r["type_one_se"] else ""
        if above and r["rule"].endswith(ASSUMING) and r["family"] in DIVERGING:
            above = " (above alpha: no_divergence is false here)"
        lines.append(
            f"| {r['family']} | {r['budget']} | {r['rule']} | {r['type_one']:.3f} ± {r['type_one_se']:.3f}{above} | "
            f"{r['power']:.3f} ± {r['power_se']:.3f} | {r['seeds_null']:.1f} / {r['seeds_alternative']:.1f} |"
        )
    return "\n".join(lines)


def _budgets(text: str) -> tuple[int, ...]:
    try:
        found = tuple(int(v) for v in text.split(","))
    except ValueError:
        found = ()
    if not found or any(n < 2 for n in found):
        raise argparse.ArgumentTypeError(f"--budgets={text!r} is not allowed; give seeds per side >= 2, e.g. 10,30,100")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis.stats.simulate", description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=REPS, help=f"comparisons per figure (default {REPS})")
    parser.add_argument("--budgets", type=_budgets, default=BUDGETS, help="seeds per side, e.g. 10,30,100")
    parser.add_argument("--alpha", type=float, default=ALPHA, help=f"the error rate (default {ALPHA:g})")
    parser.add_argument("--seed", type=int, default=SEEDED, help="the simulation's seed")
    args = parser.parse_args(argv)
    if args.reps < 1:
        parser.error(f"--reps={args.reps} is not allowed; give at least 1 comparison")
    if not 0 < args.alpha < 1:
        parser.error(f"--alpha={args.alpha} is not allowed; it must lie in (0, 1)")
    print(table(simulate(args.reps, args.budgets, args.alpha, args.seed), args.reps, args.alpha))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
