"""Seeds added in rounds until every claim is decided (``hydra/sweeper=adaptive``).

The grid's cells train a first round of seeds; after each round every claim is replayed seed by seed
through its anytime-valid confidence sequence (attnlab.sequential, Lai's t-mixture, alpha shared by
Bonferroni over the claims); the cells of claims still undecided get ``step`` more seeds, until every
claim is decided (or stopped undecided with a reason) or each of those cells has ``budget`` seeds. A diverged or
failed seed is an outcome, not a gap: it enters the decision as attnlab.outcomes says, and each side's completed /
diverged / failed seeds are recorded beside the decision. The rounds are recorded in
``<sweep dir>/adaptive.json``: a killed sweep started again with the same command resumes at the
round it was in (finished seeds are skipped as in any rerun), the same command with a larger
``hydra.sweeper.budget`` continues the same sequences (a confidence sequence may be extended at any time), and
``python -m analysis.claims`` reads the same file to decide the claims the same way.

This module holds what the Hydra sweeper (hydra_plugins/attnlab_launcher/adaptive_sweeper.py) needs
that is not Hydra: the plan and its checks, which cell a claim's side names, a seed's metric, the
decisions and the state file.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from attnlab import outcomes
from attnlab.claims import Claim, split_metric
from attnlab.metric_scale import worst_value
from attnlab.outcomes import Observations
from attnlab.rules import DEFAULT, MIXTURE, RULES, ordered
from attnlab.sequential import Decision, correction, replay, rule

STATE = "adaptive.json"
SCHEMA = 1


class AdaptiveError(ValueError):
    """An adaptive sweep that cannot run as asked: one line naming the key, raised before any seed trains."""


@dataclass(frozen=True)
class Plan:
    """How seeds are added: the first round's seeds, seeds per later round, the most per cell, the error rate."""

    first: tuple[int, ...]
    step: int
    budget: int
    alpha: float
    mixture: float = MIXTURE
    boundary: str = DEFAULT  # a rule of attnlab.rules
    bounds: tuple[float, float] | None = None  # the claim metrics' range, which a rule declaring bounds needs

    def check(self) -> None:
        if not self.first:
            raise AdaptiveError("hydra.sweeper.first_round=0 is not allowed; the first round needs >= 2 seeds")
        if len(self.first) < 2:
            raise AdaptiveError(
                f"hydra.sweeper.first_round={len(self.first)} is not allowed; a first round of >= 2 seeds "
                "gives each cell a spread"
            )
        if isinstance(self.step, bool) or not isinstance(self.step, int) or self.step < 1:
            raise AdaptiveError(f"hydra.sweeper.step={self.step!r} is not allowed; seeds per round: an integer >= 1")
        if isinstance(self.budget, bool) or not isinstance(self.budget, int) or self.budget < len(self.first):
            raise AdaptiveError(
                f"hydra.sweeper.budget={self.budget!r} is not allowed; it must be an integer >= the first "
                f"round's {len(self.first)} seeds ({', '.join(map(str, self.first))})"
            )
        if not isinstance(self.alpha, (int, float)) or not 0 < self.alpha < 1:
            raise AdaptiveError(f"hydra.sweeper.alpha={self.alpha!r} is not allowed; it must lie in (0, 1)")
        if not isinstance(self.mixture, (int, float)) or not self.mixture > 0:
            raise AdaptiveError(
                f"hydra.sweeper.mixture={self.mixture!r} is not allowed; the mixture's precision c must be > 0"
            )
        if self.boundary not in RULES:
            raise AdaptiveError(
                f"hydra.sweeper.boundary={self.boundary!r} is not allowed; choose one of {', '.join(ordered())}"
            )
        if RULES.declared(self.boundary).bounds or self.bounds is not None:
            self._check_bounds()

    def _check_bounds(self) -> None:
        bounds = self.bounds
        if bounds is None:
            raise AdaptiveError(
                f"hydra.sweeper.bounds=null is not allowed with boundary={self.boundary}; give the claim metrics' "
                "range, e.g. hydra.sweeper.bounds=[0,1] for an accuracy"
            )
        numbers = len(bounds) == 2 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in bounds
        )
        if not numbers or bounds[0] >= bounds[1]:
            raise AdaptiveError(
                f"hydra.sweeper.bounds={list(bounds)!r} is not allowed; it must be two finite numbers [lo, hi] "
                "with lo < hi"
            )

    @property
    def support(self) -> tuple[float, float] | None:
        """Where a paired difference of a metric in [lo, hi] lies: [lo − hi, hi − lo]; None without bounds."""
        if self.bounds is None:
            return None
        lo, hi = self.bounds
        return (lo - hi, hi - lo)

    def next_seeds(self, used: Sequence[int]) -> list[int]:
        """The next round's seeds for a cell that has ``used``: the next free numbers, up to the budget."""
        room = self.budget - len(used)
        out: list[int] = []
        candidate = max([*used, *self.first, -1]) + 1
        while len(out) < min(self.step, room):
            out.append(candidate)
            candidate += 1
        return out


@dataclass(frozen=True)
class Cell:
    """One cell of the grid: its overrides without the seed, and its resolved config flattened."""

    key: str  # the overrides joined, the cell's name in the state file
    overrides: tuple[str, ...]
    config: Mapping[str, Any] = field(compare=False, repr=False)


def _matches(config: Mapping[str, Any], key: str, wanted: Any) -> bool:
    found = config.get(key, config.get(f"{key}.name"))
    if isinstance(found, bool) or isinstance(wanted, bool):
        return str(found).lower() == str(wanted).lower()
    if isinstance(found, (int, float)) and isinstance(wanted, (int, float)):
        return math.isclose(found, wanted, rel_tol=1e-9)
    return found is not None and str(found) == str(wanted)


def side_cell(cells: Sequence[Cell], claim: Claim, side: str) -> Cell:
    """The one cell of the grid that a claim's side (with its where) names; else an AdaptiveError."""
    pairs = (*claim.filters, *((claim.a if side == "a" else claim.b) or ()))
    hits = [c for c in cells if all(_matches(c.config, k, v) for k, v in pairs)]
    described = ", ".join(f"{k}={v}" for k, v in pairs)
    if not hits:
        seen = {k: sorted({str(c.config.get(k, c.config.get(f"{k}.name"))) for c in cells}) for k, _ in pairs}
        choices = "; ".join(f"{k} is one of {', '.join(v)}" for k, v in seen.items())
        raise AdaptiveError(f"{claim.origin}.{side}={{{described}}} names no cell of the grid: {choices}")
    if len(hits) > 1:
        raise AdaptiveError(
            f"{claim.origin}.{side}={{{described}}} covers {len(hits)} cells of the grid "
            f"({'; '.join(c.key or '(no overrides)' for c in hits)}); pin the keys that differ in the claim's where"
        )
    return hits[0]


def require_claims(claims: Sequence[Claim]) -> None:
    """An adaptive sweep without claims has nothing to stop on."""
    if not claims:
        raise AdaptiveError(
            "hydra/sweeper=adaptive needs claims to decide: give the preset a claims: list "
            "(conf/experiment/study/) or point hydra.sweeper.claims_file at a claims YAML"
        )


def claim_cells(cells: Sequence[Cell], claims: Sequence[Claim]) -> list[tuple[Cell, Cell | None]]:
    """Each claim's cells (a, b); b is None for a ratio claim."""
    require_claims(claims)
    out = []
    for claim in claims:
        a = side_cell(cells, claim, "a")
        b = None if claim.expect == "ratio" else side_cell(cells, claim, "b")
        if b is not None and a.key == b.key:
            raise AdaptiveError(f"{claim.origin}: a and b name the same cell ({a.key}); the sides must differ")
        out.append((a, b))
    return out


def _lookup(result: Mapping[str, Any], metric: str) -> tuple[bool, Any]:
    """(whether the result has the metric at all, its raw value)."""
    name, length = split_metric(metric)
    found = result.get("metrics") or {}
    if length is not None:
        found = (result.get("by_length") or {}).get(str(length)) or {}
    return name in found, found.get(name)


def metric_value(result: Mapping[str, Any], metric: str) -> float | None:
    """A completed seed's value of a claim metric (``test/bleu`` or ``token_acc@24``); None when it has none."""
    return seed_outcome(result, metric).value


def seed_outcome(result: Mapping[str, Any], metric: str) -> outcomes.Seed:
    """A seed's outcome for a claim metric: completed with its value, diverged, or failed (attnlab.outcomes)."""
    return outcomes.seed(result.get("status"), _lookup(result, metric)[1])


def _side(claim: Claim, results: Mapping[int, Mapping], metric: str, side: str) -> dict[int, outcomes.Seed]:
    """Each seed's outcome; a completed seed without the metric at all is a claim naming a metric the runs do not
    log, refused in one line (scoring it as a failure would decide on nothing)."""
    out = {}
    for number, result in sorted(results.items()):
        if result.get("status") == "completed" and not _lookup(result, metric)[0]:
            raise AdaptiveError(
                f"claim {claim.name!r}: seed {number} of side {side} completed without {metric}; "
                f"its metrics are {', '.join(sorted(result.get('metrics') or {})) or 'none'}"
            )
        out[number] = seed_outcome(result, metric)
    return out


def claim_values(
    claim: Claim, a: Mapping[int, Mapping], b: Mapping[int, Mapping] | None, bounds: tuple[float, float] | None = None
) -> Observations:
    """The observations a claim's sequence is made of, by seed: paired differences a − b, a diverged or failed side
    at the metric's worst value (within ``bounds`` when declared), or side a's per-seed ratios of the metric at its
    length over the length ``over``; with each side's completed / diverged / failed counts."""
    name, _ = split_metric(claim.metric)
    top = _side(claim, a, claim.metric, "a")
    if b is None:
        bottom = _side(claim, a, f"{name}@{claim.over}", "a")
        zeros = outcomes.zero_denominators(bottom)
        if zeros:
            raise AdaptiveError(
                f"claim {claim.name!r}: {name}@{claim.over} is 0 on seed(s) {', '.join(map(str, zeros))}, "
                "where the ratio does not exist; choose another length over"
            )
        return outcomes.ratios(top, bottom)
    return outcomes.paired(top, _side(claim, b, claim.metric, "b"), worst_value(name, bounds))


def check_boundary(claims: Sequence[Claim], plan: Plan) -> None:
    """A rule that declares why it refuses ratio claims (betting bounds paired differences, and a ratio of two
    bounded values is not bounded by them; median decides on the median paired difference) refuses them here."""
    why = RULES.declared(plan.boundary).ratio
    if not why:
        return
    takes = " or ".join(name for name in ordered() if not RULES.declared(name).ratio)
    for claim in claims:
        if claim.expect == "ratio":
            raise AdaptiveError(
                f"{claim.origin}: a ratio claim ({claim.name}) is not allowed with "
                f"hydra.sweeper.boundary={plan.boundary}, which {why}; use boundary={takes}"
            )


def check_observed(claim: Claim, sides: Sequence[Mapping[int, Mapping] | None], plan: Plan) -> None:
    """Under a rule that declares bounds each seed's metric must lie in them; its validity rests on them."""
    if not RULES.declared(plan.boundary).bounds or plan.bounds is None:
        return
    lo, hi = plan.bounds
    for side, results in zip("ab", sides):
        for seed, result in sorted((results or {}).items()):
            value = metric_value(result, claim.metric)
            if value is not None and not lo <= value <= hi:
                raise AdaptiveError(
                    f"claim {claim.name!r}: {claim.metric}={value!r} (side {side}, seed {seed}) lies outside "
                    f"hydra.sweeper.bounds=[{lo:g}, {hi:g}] the {plan.boundary} boundary assumes; widen the bounds"
                )


def decide(claim: Claim, observed: Observations | Sequence[float], plan: Plan, claims: int) -> Decision:
    """The claim replayed through the plan's confidence sequence at alpha / (number of claims); plain values are
    seeds that all completed."""
    if not isinstance(observed, Observations):
        observed = Observations(list(observed), [False] * len(observed))
    return replay(
        observed.values,
        claim.expect,
        claim.margin,
        claim.bounds,
        plan.alpha / claims,
        plan.mixture,
        plan.boundary,
        plan.support,
        lost=observed.lost,
        metric=claim.metric,
        assumed=claim.assume is not None,
    )


def summary(claim: Claim, decision: Decision, observed: Observations, plan: Plan, claims: int) -> str:
    """A claim's line in the sweep's closing summary: its verdict, the correction beside it, each side's seeds."""
    said = (
        f"{decision.verdict} after {decision.n} seed pair(s)"
        if decision.verdict
        else f"undecided: {decision.reason}"
        if decision.reason
        else f"undecided at the budget ({decision.n} seed pair(s))"
    )
    sides = "; ".join(f"{tag}: {outcomes.describe(tally)}" for tag, tally in observed.sides.items())
    assumes = (
        f", assuming {claim.assume}" if claim.assume is not None and RULES.declared(plan.boundary).survivors else ""
    )
    return f"Claim {claim.name!r}: {said} ({correction(claims, plan.alpha)}{assumes}); {sides}"


def _content(cells: Sequence[Cell], claims: Sequence[Claim], plan: Plan, budget: bool) -> str:
    settings = asdict(plan)
    if plan.boundary == DEFAULT and plan.bounds is None:
        del settings["boundary"], settings["bounds"]  # the default rule: states written before the choice still resume
    if not budget:
        del settings["budget"]  # a confidence sequence may be extended: a larger budget continues the sweep
    content = {"cells": sorted(c.key for c in cells), "claims": [c.key() for c in claims], "plan": settings}
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]


def fingerprint(cells: Sequence[Cell], claims: Sequence[Claim], plan: Plan) -> str:
    """What a resumed sweep must share with the one that wrote the state: the grid, the claims and the plan but its
    budget."""
    return _content(cells, claims, plan, budget=False)


def _legacy_fingerprint(cells: Sequence[Cell], claims: Sequence[Claim], plan: Plan, budget: int) -> str:
    """The fingerprint of a state written while the budget was part of it, at that state's budget."""
    return _content(cells, claims, replace(plan, budget=budget), budget=True)


def new_state(cells: Sequence[Cell], claims: Sequence[Claim], plan: Plan, raw: Any) -> dict[str, Any]:
    """A sweep's first state; ``raw`` is the claims as written, so the analysis decides the same claims."""
    return {
        "schema": SCHEMA,
        "rule": rule(plan.boundary),
        "plan": {
            **asdict(plan),
            "first": list(plan.first),
            "bounds": None if plan.bounds is None else list(plan.bounds),
            "alpha_per_claim": plan.alpha / len(claims),
        },
        "fingerprint": fingerprint(cells, claims, plan),
        "claims_raw": raw,
        "rounds": [],
        "jobs": 0,
        "finished": False,
    }


def load_state(
    sweep_dir: Path, expected: dict[str, Any], cells: Sequence[Cell] = (), claims: Sequence[Claim] = (), plan=None
) -> dict[str, Any]:
    """The recorded state of this sweep, or ``expected`` (a new one) when there is none. Its budget is this run's: a
    larger one continues the sequences where they stopped (``cells``, ``claims`` and ``plan`` also recognise a state
    written while the budget was part of the fingerprint)."""
    path = sweep_dir / STATE
    if not path.exists():
        return expected
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise AdaptiveError(f"{path} cannot be read ({err}); move it aside to start the adaptive sweep anew") from None
    known = {expected["fingerprint"]}
    if plan is not None and isinstance((state.get("plan") or {}).get("budget"), int):
        known.add(_legacy_fingerprint(cells, claims, plan, state["plan"]["budget"]))
    if state.get("fingerprint") not in known:
        raise AdaptiveError(
            f"{path} was written by an adaptive sweep with another grid, claims or plan; resume it with its own "
            "settings (only hydra.sweeper.budget may change), or give this one another name= (or move the folder aside)"
        )
    state["fingerprint"] = expected["fingerprint"]
    if state["plan"].get("budget") != expected["plan"]["budget"]:
        state.setdefault("budgets", [state["plan"].get("budget")]).append(expected["plan"]["budget"])
        state["plan"]["budget"] = expected["plan"]["budget"]
        state["finished"] = False  # the cells of claims still undecided get seeds up to the new budget
    return state


def save_state(sweep_dir: Path, state: Mapping[str, Any]) -> None:
    """Written to a temp file and renamed: a kill leaves the previous round's state whole."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=sweep_dir, prefix=".adaptive.", suffix=".json")
    with os.fdopen(fd, "w") as handle:
        json.dump(state, handle, indent=2, sort_keys=True)
    os.replace(tmp, sweep_dir / STATE)
