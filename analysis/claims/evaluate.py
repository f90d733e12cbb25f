"""A claim's row: both sides, the deciding test, and its verdict after Holm's correction over the claims of
one report (supported, contradicted, or inconclusive with what it lacked and the seeds that would decide it)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from analysis.claims.scope import gather_claims
from analysis.claims.sides import check_metric, metric_values, run_factors, select_side
from analysis.report.document import fmt, fmt_p
from analysis.stats import inference
from analysis.stats.claims import MAX_SEEDS, ratio_test, seeds_needed, two_sample_test
from common.claims import Claim, ClaimError, split_metric

ALPHA = inference.ALPHA
VERDICTS = ("supported", "contradicted", "inconclusive")
COLUMNS = [
    "claim",
    "metric",
    "expect",
    "a",
    "a_n",
    "a_mean",
    "a_ci",
    "b",
    "b_n",
    "b_mean",
    "b_ci",
    "diff",
    "diff_low",
    "diff_high",
    "test",
    "statistic",
    "df",
    "p",
    "p_holm",
    "verdict",
    "lacked",
    "seeds_needed",
    "source",
    "paper",
]


def _g(x: float) -> str:
    """A number the user wrote (a margin, a bound), as written: 0, 0.05, 1.5."""
    return f"{x:g}".replace("-", "−")


def _expectation(claim: Claim) -> str:
    if claim.expect == "greater":
        return f"a − b > {_g(claim.margin)}"
    if claim.expect == "less":
        return f"a − b < {_g(-claim.margin)}" if claim.margin else "a − b < 0"
    if claim.expect == "equivalent":
        return f"|a − b| < {_g(claim.margin)}"
    low, high = claim.bounds
    ratio = f"a@{claim.length} / a@{claim.over}"
    if low is None:
        return f"{ratio} < {_g(high)}"
    return f"{ratio} > {_g(low)}" if high is None else f"{ratio} in [{_g(low)}, {_g(high)}]"


def _mean_ci(values: np.ndarray) -> tuple[float, float]:
    mean, half, _ = inference.mean_ci(values)
    return mean, half


def evaluate_claim(runs, claim: Claim, scope: set[str] | None) -> dict[str, Any]:
    """The claim's row before Holm's correction: both sides, the test, and p for and against."""
    frame = runs.runs if scope is None else runs.runs[runs.runs["run_id"].isin(scope)]
    factors = run_factors(runs)
    check_metric(runs, frame, claim)
    a = select_side(frame, factors, claim, "a")
    row: dict[str, Any] = {c: math.nan for c in COLUMNS}
    row.update(
        claim=claim.name,
        metric=claim.metric,
        expect=_expectation(claim),
        source=claim.source,
        paper=claim.paper,
        a=a.label,
        b=None,
        lacked="",
        seeds_needed=None,
        test=None,
    )
    if claim.expect == "ratio":
        top = metric_values(a.runs, runs.by_length, claim.metric)
        name, _ = split_metric(claim.metric)
        bottom = metric_values(a.runs, runs.by_length, f"{name}@{claim.over}")
        joined = pd.concat([top.rename("top"), bottom.rename("bottom")], axis=1, join="inner")
        zero = int((joined["bottom"] == 0).sum())
        if zero:
            a.dropped = f"{zero} with {name}@{claim.over} = 0, no ratio"
        joined = joined[joined["bottom"] != 0]
        a.values = (joined["top"] / joined["bottom"]).to_numpy(float)
        sides = [("a", a)]
    else:
        b = select_side(frame, factors, claim, "b")
        if "cell" in frame.columns and len(a.runs) and len(b.runs) and a.runs["cell"].iloc[0] == b.runs["cell"].iloc[0]:
            raise ClaimError(f"{claim.origin}: a and b are the same cell ({a.label}); the sides must differ")
        a.values = metric_values(a.runs, runs.by_length, claim.metric).to_numpy(float)
        b.values = metric_values(b.runs, runs.by_length, claim.metric).to_numpy(float)
        row["b"] = b.label
        sides = [("a", a), ("b", b)]
    for tag, side in sides:
        row[f"{tag}_n"] = side.n
        row[f"{tag}_mean"], row[f"{tag}_ci"] = _mean_ci(side.values)
    short = [(tag, side) for tag, side in sides if side.n < 2]
    if short:
        row["test"] = "—"
        row["lacked"] = "; ".join(
            f"fewer than 2 seeds on side {tag} ({side.n} with a value of {len(side.runs)} runs"
            f"{': ' + side.missing() if side.missing() else ''})"
            for tag, side in short
        )
        return row
    test = ratio_test(a.values, claim) if claim.expect == "ratio" else two_sample_test(a.values, b.values, claim)
    row.update(
        test=test.test,
        statistic=test.statistic,
        df=test.df,
        diff=test.estimate,
        diff_low=test.low,
        diff_high=test.high,
        p_for=test.p_for,
        p_against=test.p_against,
        _test=test,
    )
    return row


def _straddle(row: Mapping[str, Any], claim: Claim) -> str:
    level = f"{100 * (1 - 2 * ALPHA):.0f}%"
    interval = f"[{fmt(row['diff_low'])}, {fmt(row['diff_high'])}]"
    if claim.expect == "ratio":
        edges = " and ".join(_g(e) for e in claim.bounds if e is not None)
        return f"the {level} interval of the ratio {interval} reaches the bound {edges}"
    edge = {"greater": _g(claim.margin), "less": _g(-claim.margin)}.get(claim.expect, f"±{_g(claim.margin)}")
    return f"the {level} interval of a − b {interval} straddles the margin {edge}"


def decide(rows: list[dict[str, Any]], claims: Sequence[Claim], alpha: float = ALPHA) -> pd.DataFrame:
    """Holm over the claims' decisive p-values (the smaller of for and against), then verdicts."""
    decisive = [min(r.get("p_for", math.nan), r.get("p_against", math.nan)) for r in rows]
    adjusted = inference.holm(decisive)
    k = max(1, sum(math.isfinite(p) for p in decisive))
    for row, claim, p, p_holm in zip(rows, claims, decisive, adjusted):
        row["p"], row["p_holm"] = p, float(p_holm)
        test = row.pop("_test", None)
        if not math.isfinite(p_holm):
            row["verdict"] = "inconclusive"
            if not row["lacked"]:
                row["lacked"] = "the estimate sits exactly on the margin"
            continue
        if p_holm < alpha:
            row["verdict"] = "supported" if row["p_for"] <= row["p_against"] else "contradicted"
            continue
        row["verdict"] = "inconclusive"
        if p < alpha:
            row["lacked"] = f"significant alone (p={fmt_p(p)}) but not after Holm's correction over {k} claims"
        else:
            row["lacked"] = _straddle(row, claim)
        if test is not None:
            row["seeds_needed"] = seeds_needed(test, claim.expect == "ratio", alpha / k)
            n = row["seeds_needed"]
            if n is None:
                row["lacked"] += "; no number of seeds decides it at this estimate"
            else:
                per = "seeds" if claim.expect == "ratio" else "seeds per side"
                count = f"more than {MAX_SEEDS}" if n > MAX_SEEDS else f"about {n}"
                row["lacked"] += f"; {count} {per} would decide it at the observed difference and spread"
    for row in rows:
        row.pop("_test", None)
    return pd.DataFrame(rows, columns=COLUMNS)


def evaluate(runs, claims_file: str | Path | None = None, alpha: float = ALPHA) -> pd.DataFrame:
    """Every claim carried by the runs or given in ``claims_file``: one row each, Holm-corrected together."""
    gathered = gather_claims(runs, claims_file)
    rows = [evaluate_claim(runs, claim, scope) for claim, scope in gathered]
    return decide(rows, [c for c, _ in gathered], alpha)
