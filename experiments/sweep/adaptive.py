"""Seeds added in rounds until every claim is decided (``hydra/sweeper=adaptive``).

The grid's cells train a first round of seeds; after each round every claim is replayed seed by seed
through its anytime-valid confidence sequence (common.sequential, Lai's t-mixture, alpha shared by
Bonferroni over the claims); the cells of claims still undecided get ``step`` more seeds, until every
claim is decided or each of those cells has ``budget`` seeds. The rounds are recorded in
``<sweep dir>/adaptive.json``: a killed sweep started again with the same command resumes at the
round it was in (finished seeds are skipped as in any rerun), and ``python -m analysis.claims``
reads the same file to decide the claims the same way.

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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from common.claims import Claim, split_metric
from common.sequential import BOUNDARIES, MIXTURE, Decision, replay, rule

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
    boundary: str = "t_mixture"  # common.sequential.BOUNDARIES
    bounds: tuple[float, float] | None = None  # the claim metrics' range, which the betting boundary needs

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
        if self.boundary not in BOUNDARIES:
            raise AdaptiveError(
                f"hydra.sweeper.boundary={self.boundary!r} is not allowed; choose one of {', '.join(BOUNDARIES)}"
            )
        if self.boundary == "betting" or self.bounds is not None:
            self._check_bounds()

    def _check_bounds(self) -> None:
        bounds = self.bounds
        if bounds is None:
            raise AdaptiveError(
                "hydra.sweeper.bounds=null is not allowed with boundary=betting; give the claim metrics' range, "
                "e.g. hydra.sweeper.bounds=[0,1] for an accuracy"
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
        out, candidate = [], max([*used, *self.first, -1]) + 1
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


def metric_value(result: Mapping[str, Any], metric: str) -> float | None:
    """A completed seed's value of a claim metric (``test/bleu`` or ``token_acc@24``); None when it has none."""
    if result.get("status") != "completed":
        return None
    name, length = split_metric(metric)
    if length is None:
        value = (result.get("metrics") or {}).get(name)
    else:
        value = ((result.get("by_length") or {}).get(str(length)) or {}).get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def claim_values(claim: Claim, a: Mapping[int, Mapping], b: Mapping[int, Mapping] | None) -> list[float]:
    """The observations a claim's sequence is made of, by seed: paired differences a − b of the seeds both cells
    completed, or side a's per-seed ratios of the metric at its length over the length ``over``."""
    out = []
    for seed in sorted(a):
        x = metric_value(a[seed], claim.metric)
        if b is None:
            name, _ = split_metric(claim.metric)
            under = metric_value(a[seed], f"{name}@{claim.over}")
            if x is not None and under:
                out.append(x / under)
        elif seed in b:
            y = metric_value(b[seed], claim.metric)
            if x is not None and y is not None:
                out.append(x - y)
    return out


# Why each boundary other than the t-mixture refuses a ratio claim, as its one line says.
RATIO_REFUSED = {
    "betting": "which bounds paired differences",
    "median": "which decides on the median paired difference of two cells",
}


def check_boundary(claims: Sequence[Claim], plan: Plan) -> None:
    """The betting boundary bounds paired differences (a ratio of two bounded values is not bounded by them); the
    median boundary's claims are about the median of paired differences. Both refuse ratio claims."""
    why = RATIO_REFUSED.get(plan.boundary)
    if why is None:
        return
    for claim in claims:
        if claim.expect == "ratio":
            raise AdaptiveError(
                f"{claim.origin}: a ratio claim ({claim.name}) is not allowed with "
                f"hydra.sweeper.boundary={plan.boundary}, {why}; use boundary=t_mixture"
            )


def check_observed(claim: Claim, sides: Sequence[Mapping[int, Mapping] | None], plan: Plan) -> None:
    """Under the betting boundary each seed's metric must lie in the bounds; its validity rests on them."""
    if plan.boundary != "betting" or plan.bounds is None:
        return
    lo, hi = plan.bounds
    for side, results in zip("ab", sides):
        for seed, result in sorted((results or {}).items()):
            value = metric_value(result, claim.metric)
            if value is not None and not lo <= value <= hi:
                raise AdaptiveError(
                    f"claim {claim.name!r}: {claim.metric}={value!r} (side {side}, seed {seed}) lies outside "
                    f"hydra.sweeper.bounds=[{lo:g}, {hi:g}] the betting boundary assumes; widen the bounds"
                )


def decide(claim: Claim, values: Sequence[float], plan: Plan, claims: int) -> Decision:
    """The claim replayed through the plan's confidence sequence at alpha / (number of claims)."""
    return replay(
        values,
        claim.expect,
        claim.margin,
        claim.bounds,
        plan.alpha / claims,
        plan.mixture,
        plan.boundary,
        plan.support,
    )


def fingerprint(cells: Sequence[Cell], claims: Sequence[Claim], plan: Plan) -> str:
    """What a resumed sweep must share with the one that wrote the state: the grid, the claims and the plan."""
    settings = asdict(plan)
    if plan.boundary == "t_mixture" and plan.bounds is None:
        del settings["boundary"], settings["bounds"]  # the default rule: states written before the choice still resume
    content = {"cells": sorted(c.key for c in cells), "claims": [c.key() for c in claims], "plan": settings}
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]


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


def load_state(sweep_dir: Path, expected: dict[str, Any]) -> dict[str, Any]:
    """The recorded state of this sweep, or ``expected`` (a new one) when there is none."""
    path = sweep_dir / STATE
    if not path.exists():
        return expected
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise AdaptiveError(f"{path} cannot be read ({err}); move it aside to start the adaptive sweep anew") from None
    if state.get("fingerprint") != expected["fingerprint"]:
        raise AdaptiveError(
            f"{path} was written by an adaptive sweep with another grid, claims or plan; resume it with its own "
            "settings, or give this one another name= (or move the folder aside)"
        )
    return state


def save_state(sweep_dir: Path, state: Mapping[str, Any]) -> None:
    """Written to a temp file and renamed: a kill leaves the previous round's state whole."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=sweep_dir, prefix=".adaptive.", suffix=".json")
    with os.fdopen(fd, "w") as handle:
        json.dump(state, handle, indent=2, sort_keys=True)
    os.replace(tmp, sweep_dir / STATE)
