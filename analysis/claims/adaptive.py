"""Claims of an adaptive-seed sweep (``hydra/sweeper=adaptive``): decided as the sweep decided them.

The sweep records its plan and claims in ``<sweep dir>/adaptive.json``. Here each claim's seeds are
read back from the result files, paired by seed and replayed through the same anytime-valid
confidence sequence (attnlab.sequential, at the sweep's alpha per claim), so ``python -m
analysis.claims`` on the finished sweep gives the sweep's decisions: diverged and failed seeds enter as the sweep
entered them (attnlab.outcomes), and the correction (Bonferroni over the sweep's claims) stands beside each verdict.
The section says how it decided: the rule and its parameters, the seeds each cell used, each claim's decision and
its interval at stopping (or why it stopped undecided), each side's completed / diverged / failed seeds, and the
seeds per side the suite's fixed test of the claim (Welch, TOST, one-sample t) would have spent
for the same power at the observed mean and spreads, or why that is not computable (analysis.stats.equal_power).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd

from analysis.claims.evaluate import COLUMNS, _expectation
from analysis.claims.sides import check_metric, metric_values, run_factors, select_side
from analysis.report.document.model import fmt
from analysis.stats import anytime, inference
from analysis.stats.equal_power import Design, equal_power, fixed_test, region, unpriced
from attnlab import outcomes
from attnlab.claims import Claim, ClaimError, parse_claims, split_metric
from attnlab.metric_scale import worst_value
from attnlab.rules import DEFAULT, RULES, ordered
from attnlab.sequential import Decision, correction, replay, rule

STATE = "adaptive.json"  # written by experiments/sweep/adaptive.py; analysis reads files only
SIMULATED = 2000  # comparisons simulated to price the fixed design of equal power


class _Labels(Mapping[str, str]):
    """The claims table's test column per rule (its entry's ``label``), read from attnlab.rules when asked, so a
    rule registered after this module was imported has one."""

    def __getitem__(self, name: str) -> str:
        if name not in RULES:
            raise KeyError(name)
        return str(RULES.declared(name).label)

    def __iter__(self) -> Iterator[str]:
        return iter(ordered())

    def __len__(self) -> int:
        return len(RULES)


TESTS: Mapping[str, str] = _Labels()


def assumed(claim: Claim, boundary: str, lost: Sequence[bool]) -> str | None:
    """The assumption an adaptive verdict rests on, as the claims table names it (None: none)."""
    if claim.assume is None:
        return None
    if not RULES.declared(boundary).survivors:
        return f"{claim.assume} (declared; the {boundary} rule is valid without it, so it changes nothing)"
    if any(lost):
        return f"{claim.assume} (declared), refuted by {sum(lost)} lost seed pair(s)"
    return f"{claim.assume} (declared): the t-mixture is not widened for divergence its seeds have not shown"


def _boundary(plan: Mapping[str, Any]) -> tuple[str, tuple[float, float] | None]:
    """The plan's boundary and metric bounds; a state written before the choice used the default (the t-mixture)."""
    boundary = str(plan.get("boundary") or DEFAULT)
    bounds = plan.get("bounds")
    return boundary, None if bounds is None else (float(bounds[0]), float(bounds[1]))


def _support(bounds: tuple[float, float] | None) -> tuple[float, float] | None:
    return None if bounds is None else (bounds[0] - bounds[1], bounds[1] - bounds[0])


def check_observed(claim: Claim, sides: Mapping[str, Any], bounds: tuple[float, float]) -> None:
    """Under a rule that declares bounds each seed's metric must lie in the sweep's bounds, as the sweep required."""
    lo, hi = bounds
    for tag in ("a", "b"):
        for value in sides[f"{tag}_values"] or ():
            if not lo <= value <= hi:
                raise ClaimError(
                    f"claim {claim.name!r}: {claim.metric}={value!r} (side {tag}) lies outside the bounds "
                    f"[{lo:g}, {hi:g}] the sweep's boundary assumes"
                )


def find_state(paths: Sequence[str | Path]) -> tuple[Path, dict[str, Any]] | None:
    """The adaptive sweep's state among the given folders (one at most), or None."""
    found = [Path(p) / STATE for p in paths if (Path(p) / STATE).is_file()]
    if not found:
        return None
    if len(found) > 1:
        raise ClaimError(
            f"{len(found)} adaptive sweeps given ({', '.join(str(p.parent) for p in found)}); "
            "their claims are decided one sweep at a time"
        )
    try:
        return found[0], json.loads(found[0].read_text())
    except (OSError, ValueError) as err:
        raise ClaimError(f"{found[0]} cannot be read ({err})") from None


def _side_summary(values: Sequence[float]) -> tuple[float, float]:
    if len(values) < 2:
        return (float(values[0]) if values else math.nan), math.nan
    mean, half, _ = inference.mean_ci(np.asarray(values, float))
    return mean, half


def _by_seed(side, runs, metric: str) -> dict[int, outcomes.Seed]:
    """Each seed's outcome for the metric: its value, or diverged / failed (a completed run without a finite value
    diverged, as the sweep counts it)."""
    values = metric_values(side.runs, runs.by_length, metric)
    frame = side.runs[["run_id", "status", "seed"]]
    return {int(seed): outcomes.seed(status, values.get(run_id)) for run_id, status, seed in frame.to_numpy()}


def _completed(seeds: Mapping[int, outcomes.Seed]) -> list[float]:
    return [s.value for s in seeds.values() if s.value is not None]


def observations(
    runs, claim: Claim, bounds: tuple[float, float] | None = None
) -> tuple[outcomes.Observations, dict[str, Any]]:
    """The claim's sequence, as the sweep built it (paired differences by seed, a lost side at the metric's worst
    value within ``bounds``, or side a's per-seed ratios), and the sides' labels and completed values."""
    frame, factors = runs.runs, run_factors(runs)
    check_metric(runs, frame, claim)
    a = select_side(frame, factors, claim, "a")
    top = _by_seed(a, runs, claim.metric)
    sides = {"a": a.label, "a_values": _completed(top), "b": None, "b_values": None}
    name, _ = split_metric(claim.metric)
    if claim.expect == "ratio":
        bottom = _by_seed(a, runs, f"{name}@{claim.over}")
        zeros = outcomes.zero_denominators(bottom)
        if zeros:
            raise ClaimError(
                f"claim {claim.name!r}: {name}@{claim.over} is 0 on seed(s) {', '.join(map(str, zeros))}, where the "
                "ratio does not exist"
            )
        return outcomes.ratios(top, bottom), sides
    b = select_side(frame, factors, claim, "b")
    other = _by_seed(b, runs, claim.metric)
    sides.update(b=b.label, b_values=_completed(other))
    return outcomes.paired(top, other, worst_value(name, bounds)), sides


def fixed_equivalent(
    values: Sequence[float], sides: Mapping[str, Any], claim: Claim, plan: Mapping[str, Any]
) -> Design:
    """The suite's fixed test of the claim (one-sided Welch, TOST at an equivalence margin, one-sample t for a ratio)
    with the seeds per side that give it the adaptive rule's power, both at the observed mean and spreads: the
    rule's power simulated within the sweep's budget, the fixed test's computed (analysis.stats.equal_power), at
    the sweep's alpha per claim (Holm's first step)."""
    edges = region(claim.expect, claim.margin, claim.bounds)
    test = fixed_test(edges, claim.expect != "ratio")
    groups = [values] if claim.expect == "ratio" else [sides["a_values"], sides["b_values"]]
    if len(values) < 2 or any(len(g) < 2 for g in groups):
        return Design(test, math.nan, reason="fewer than 2 seeds on a side: no spread to price it at")
    sd_a, *rest = (float(np.std(g, ddof=1)) for g in groups)
    sd_b = rest[0] if rest else None
    mean, alpha = float(np.mean(values)), float(plan["alpha_per_claim"])
    reason = unpriced(mean, edges, sd_a, sd_b)
    if reason:
        return Design(test, math.nan, reason=reason)
    # Each design is priced at the spread it sees: the rule at the paired differences' (seed i of both cells shares
    # its initialisation and data order where their models match), the unpaired fixed test at each cell's own.
    boundary, bounds = _boundary(plan)
    found = anytime.decided_share(
        mean,
        float(np.std(values, ddof=1)),
        edges,
        int(plan["budget"]),
        alpha,
        float(plan["mixture"]),
        SIMULATED,
        boundary=boundary,
        support=_support(bounds),
    )
    return equal_power(found.power, mean, edges, sd_a, sd_b, alpha)


def refuse_ratio(claims: Sequence[Claim], boundary: str, origin: str) -> None:
    """A rule that declares why it refuses ratio claims refuses them when the claims are read back, as the sweep
    did before its first seed."""
    why = RULES.declared(boundary).ratio
    for claim in claims:
        if why and claim.expect == "ratio":
            raise ClaimError(f"{origin}: ratio claim {claim.name!r} under the {boundary} boundary, which {why}")


def expectation(claim: Claim, estimand: str) -> str:
    """The claim as the table states it: of the mean difference (plain), else of the rule's estimand."""
    said = _expectation(claim)
    return said if estimand == "mean" else f"{estimand} of paired differences {said}"


def _replay(observed: outcomes.Observations, claim: Claim, plan: Mapping[str, Any]) -> Decision:
    """The claim's decision as the sweep reached it: its confidence sequence replayed over the paired seeds."""
    boundary, bounds = _boundary(plan)
    return replay(
        observed.values,
        claim.expect,
        claim.margin,
        claim.bounds,
        float(plan["alpha_per_claim"]),
        float(plan["mixture"]),
        boundary,
        _support(bounds),
        lost=observed.lost,
        metric=claim.metric,
        assumed=claim.assume is not None,
    )


def _adaptive_row(
    claim: Claim, sides: Mapping[str, Any], decision: Decision, lost: Sequence[bool], plan: Mapping[str, Any], test: str
) -> dict[str, Any]:
    """The claim's row of the claims table (COLUMNS): the replayed decision, ``test`` naming its rule and correction,
    and each side's seeds."""
    boundary, _ = _boundary(plan)
    row: dict[str, Any] = {c: math.nan for c in COLUMNS}
    row.update(
        claim=claim.name,
        metric=claim.metric,
        expect=expectation(claim, RULES.declared(boundary).estimand),
        a=sides["a"],
        b=sides["b"],
        diff=decision.mean,
        diff_low=decision.low,
        diff_high=decision.high,
        test=test,
        verdict=decision.verdict or "inconclusive",
        lacked=""
        if decision.verdict
        else decision.reason or f"undecided at the budget of {plan['budget']} seeds per cell",
        source=claim.source,
        paper=claim.paper,
        assumption=assumed(claim, boundary, lost),
    )
    for tag in ("a", "b"):
        if sides[f"{tag}_values"] is not None:
            row[f"{tag}_n"] = len(sides[f"{tag}_values"])
            row[f"{tag}_mean"], row[f"{tag}_ci"] = _side_summary(sides[f"{tag}_values"])
    return row


def evaluate_adaptive(runs, state: Mapping[str, Any], origin: str) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """The claims table of an adaptive sweep (COLUMNS, the verdicts of its confidence sequences) and per claim
    what the section reports."""
    claims = parse_claims(state.get("claims_raw"), f"{origin}: claims")
    plan = state["plan"]
    boundary, bounds = _boundary(plan)
    refuse_ratio(claims, boundary, origin)
    rows, details = [], []
    for claim in claims:
        observed, sides = observations(runs, claim, bounds)
        if RULES.declared(boundary).bounds and bounds is not None:
            check_observed(claim, sides, bounds)
        decision = _replay(observed, claim, plan)
        corrected = correction(len(claims), float(plan["alpha"]))
        rows.append(_adaptive_row(claim, sides, decision, observed.lost, plan, f"{TESTS[boundary]}, {corrected}"))
        details.append(
            {
                "claim": claim,
                "decision": decision,
                "pairs": len(observed.values),
                "sides": observed.sides,
                "correction": corrected,
                "fixed": fixed_equivalent(observed.values, sides, claim, plan),
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS), details


def section_text(path: Path, state: Mapping[str, Any], details: Sequence[Mapping[str, Any]]) -> str:
    """How the sweep decided, for a terminal: the heading line, then one indented line per fact."""
    head, *rest = section_lines(path, state, details)
    return "\n".join([head, *(f"    {line}" for line in rest)])


def section_lines(path: Path, state: Mapping[str, Any], details: Sequence[Mapping[str, Any]]) -> list[str]:
    """How the sweep decided: rule and parameters, seeds per cell, each claim's decision and interval at stopping."""
    plan = state["plan"]
    boundary, bounds = _boundary(plan)
    k = len(details)
    entry = RULES.entry(boundary)
    named, assumption = entry.target.settings(float(plan["mixture"]), bounds), entry.declared.assumption
    estimand = entry.declared.estimand
    lines = [
        f"Adaptive seeds ({path}): {state.get('rule') or rule(boundary)}",
        f"the rule {assumption}",
        f"alpha {plan['alpha']:g} over {k} claim(s), {plan['alpha_per_claim']:g} each; {named}; "
        f"first round seeds {', '.join(map(str, plan['first']))}, then {plan['step']} per "
        f"round, budget {plan['budget']} per cell; {len(state.get('rounds', []))} round(s)"
        + ("" if state.get("finished") else "; the sweep has not finished (resume it with the same command)"),
    ]
    cells: dict[str, list[int]] = {}
    for done in state.get("rounds", []):
        for key, seeds in (done.get("folders") or {}).items():
            cells.setdefault(key, []).extend(int(s) for s in seeds)
    shared = set.intersection(*(set(k.split(",")) for k in cells)) if len(cells) > 1 else set()
    for key, seeds in cells.items():
        name = ",".join(part for part in key.split(",") if part not in shared)  # what tells the cells apart
        lines.append(f"cell {name or key}: {len(seeds)} seeds ({', '.join(map(str, sorted(seeds)))})")
    for item in details:
        decision, claim = item["decision"], item["claim"]
        interval = f"[{fmt(decision.low)}, {fmt(decision.high)}]"
        if estimand != "mean":  # the claim is about the median of the paired differences: the interval says so
            interval = (
                f"of the {estimand} of paired differences a − b {interval} (sample {estimand} {fmt(decision.mean)})"
            )
        if decision.verdict:
            said = f"{decision.verdict} after {decision.n} seed pair(s)"
        elif decision.reason:
            said = f"undecided after {decision.n} seed pair(s): {decision.reason}"
        else:
            said = f"undecided at the budget ({decision.n} seed pair(s))"
        per = "seeds" if claim.expect == "ratio" else "seeds per side"
        seeds = "; ".join(f"{tag}: {outcomes.describe(tally)}" for tag, tally in (item.get("sides") or {}).items())
        corrected = item.get("correction") or correction(k, float(plan["alpha"]))
        if claim.assume is not None and entry.declared.survivors:  # as the sweep's own closing line names it
            corrected += f", assuming {claim.assume}"
        lines.append(
            f"{claim.name}: {said} ({corrected}), interval {interval}; seeds {seeds}; "
            f"a fixed design of equal power: {item['fixed'].describe(per)}"
        )
    return lines
