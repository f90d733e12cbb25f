"""A claim's row: both sides with what became of every seed, the deciding test, and its verdict after Holm's
correction over the claims of one report (supported, contradicted, or inconclusive with what it lacked and the
seeds that would decide it).

A diverged seed is an outcome: it scores the metric's worst value (analysis.stats.inference.worst_value) where
that value is finite, and a mean cannot decide without it where it is not (a loss's +inf). Where the metric is
bounded (an accuracy in [0, 1]), a difference of means is decided over every divergence rate the seeds leave possible,
not only the rate they show (analysis.stats.unseen_divergence). How often each side
diverges is compared by Fisher's exact test, which can leave a claim undecided or contradict an equivalence.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats as sps

from analysis.claims.scope import gather_claims
from analysis.claims.sides import Side, check_metric, metric_values, run_factors, select_side
from analysis.report.document.model import fmt, fmt_p
from analysis.stats import inference
from analysis.stats import unseen_divergence as unseen
from analysis.stats.claims import BoundedSides, Evidence, ratio_test, seeds_needed, two_sample_test
from attnlab.claims import NO_DIVERGENCE, Claim, ClaimError, split_metric

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
    "a_runs",
    "b",
    "b_n",
    "b_mean",
    "b_ci",
    "b_runs",
    "diff",
    "diff_low",
    "diff_high",
    "level",
    "test",
    "statistic",
    "df",
    "p",
    "p_holm",
    "correction",
    "divergence",
    "divergence_p",
    "assumption",
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
    ratio = f"mean a@{claim.length} / mean a@{claim.over}"
    if low is None:
        return f"{ratio} < {_g(high)}"
    return f"{ratio} > {_g(low)}" if high is None else f"{ratio} in [{_g(low)}, {_g(high)}]"


def _mean_ci(values: np.ndarray) -> tuple[float, float]:
    mean, half, _ = inference.mean_ci(values)
    return mean, half


def _with_diverged(values: np.ndarray, side: Side, worst: float) -> np.ndarray:
    """The side's values, each diverged seed scored as the metric's worst value (when that is finite)."""
    diverged = side.count("diverged")
    return np.concatenate([values, np.full(diverged, worst)]) if diverged and math.isfinite(worst) else values


def _unscorable(sides: Sequence[tuple[str, Side]], metric: str, worst: float) -> str:
    """Why a mean cannot take the sides' diverged seeds ('' when it can): the metric has no finite worst value."""
    diverged = [f"{side.count('diverged')} on side {tag}" for tag, side in sides if side.count("diverged")]
    if not diverged or math.isfinite(worst):
        return ""
    value = "+∞ (the worst loss)" if worst == math.inf else "unknown (the name says neither range nor direction)"
    return (
        f"diverged seeds ({', '.join(diverged)}) score {metric}'s worst value, {value}, which no mean takes; "
        "the survivors alone would decide on converged seeds only"
    )


def bounded_scale(metric: str) -> unseen.Scale | None:
    """The metric's worst value and direction where both ends of its range are finite (an accuracy, a BLEU), else
    None: a loss's worst value +inf bounds no mean."""
    worst, better = inference.worst_value(metric), inference.direction(metric)
    if better is None or not all(math.isfinite(e) for e in inference.metric_range(metric)):
        return None
    return unseen.Scale(worst, 1.0 if better == "higher" else -1.0)


def _divergence(a: Side, b: Side) -> dict[str, Any]:
    """Fisher's exact test of the two sides' divergence rates (over runs that trained to an outcome)."""
    (da, ca), (db, cb) = ((s.count("diverged"), s.count("completed")) for s in (a, b))
    if not (da or db):
        return {}
    p = float(sps.fisher_exact([[da, ca], [db, cb]]).pvalue)
    more = "a" if da * (db + cb) > db * (da + ca) else "b"
    text = f"diverged {da}/{da + ca} (a) vs {db}/{db + cb} (b), Fisher's exact p {fmt_p(p)}"
    return {"divergence": text, "divergence_p": p, "_more": more}


def _ratio_sides(runs, a: Side, claim: Claim, worst: float) -> tuple[np.ndarray, np.ndarray]:
    """Side a's metric at the claim's length and at ``over``, paired by run, diverged runs at the worst value."""
    name, _ = split_metric(claim.metric)
    top = metric_values(a.runs, runs.by_length, claim.metric)
    bottom = metric_values(a.runs, runs.by_length, f"{name}@{claim.over}")
    joined = pd.concat([top.rename("top"), bottom.rename("bottom")], axis=1, join="inner")
    return (_with_diverged(joined[c].to_numpy(float), a, worst) for c in ("top", "bottom"))  # type: ignore[return-value]


def _score_two_sides(
    runs, frame: pd.DataFrame, factors, claim: Claim, a: Side, worst: float
) -> tuple[Side, BoundedSides | None]:
    """Side b selected, both sides' values scored (a diverged seed at ``worst``), and on a bounded metric the
    converged values with their divergence counts, for the box over unseen divergence rates."""
    b = select_side(frame, factors, claim, "b")
    if "cell" in frame.columns and len(a.runs) and len(b.runs) and a.runs["cell"].iloc[0] == b.runs["cell"].iloc[0]:
        raise ClaimError(f"{claim.origin}: a and b are the same cell ({a.label}); the sides must differ")
    converged = []
    for side in (a, b):
        values = metric_values(side.runs, runs.by_length, claim.metric).to_numpy(float)
        converged.append(unseen.Bounded(values, side.count("diverged")))
        side.values = _with_diverged(values, side, worst)
    scale = bounded_scale(split_metric(claim.metric)[0])
    return b, BoundedSides(converged[0], converged[1], scale) if scale is not None else None


def assumption(
    claim: Claim, sides: Sequence[tuple[str, Side]], boxed: BoundedSides | None, worst: float
) -> tuple[BoundedSides | None, str | None]:
    """The bound over unseen divergence the claim is decided with (None: its values as they are) and the assumption
    its verdict rests on, as the verdict names it (None: none); ``worst`` is the metric's worst value.

    A declared ``assume: no_divergence`` sets the bound aside while no seed diverged, and is refuted by one that did.
    A mean of a metric whose worst value is +inf (a loss) assumes no divergence whether declared or not: a cell that
    diverges at any rate has an infinite mean."""
    diverged = sum(side.count("diverged") for _, side in sides)
    if claim.assume is not None and diverged:
        return boxed, (
            f"{NO_DIVERGENCE} (declared) is refuted by {diverged} diverged seed(s): decided over every divergence "
            "rate the seeds leave possible"
        )
    if boxed is not None and claim.assume is not None:
        return None, f"{NO_DIVERGENCE} (declared): the seeds' means are tested without the bound over unseen divergence"
    if worst == math.inf:
        said = "declared" if claim.assume is not None else "implicit"
        return (
            boxed,
            f"{NO_DIVERGENCE} ({said}): {claim.metric}'s worst value is +∞, so a cell that diverges has no mean",
        )
    return boxed, None


def _lacking(sides: Sequence[tuple[str, Side]], metric: str, worst: float) -> str:
    """Why the sides cannot be tested (a lost seed with nothing to score it at, fewer than 2 seeds on a side), or ""."""
    short = [(tag, side) for tag, side in sides if side.n < 2]
    return _unscorable(sides, metric, worst) or "; ".join(
        f"fewer than 2 seeds on side {tag} ({side.n} with a value of {len(side.runs)} runs"
        f"{': ' + side.missing() if side.missing() else ''})"
        for tag, side in short
    )


def _blank_row(claim: Claim, a: Side) -> dict[str, Any]:
    """The claim's row before any side is scored: every column NaN but what the claim itself says."""
    row: dict[str, Any] = {c: math.nan for c in COLUMNS}
    row.update(
        claim=claim.name,
        metric=claim.metric,
        expect=_expectation(claim),
        source=claim.source,
        paper=claim.paper,
        a=a.label,
        b=None,
        b_runs=None,
        lacked="",
        seeds_needed=None,
        test=None,
        divergence=None,
        assumption=None,
    )
    return row


def _describe_sides(row: dict[str, Any], sides: Sequence[tuple[str, Side]], worst: float) -> None:
    """Each side's seeds (what became of each), count, mean and CI half-width, into the row."""
    for tag, side in sides:
        row[f"{tag}_runs"] = side.outcomes(f"scored {_g(worst)}" if math.isfinite(worst) else "not scored")
        row[f"{tag}_n"] = side.n
        row[f"{tag}_mean"], row[f"{tag}_ci"] = _mean_ci(side.values)


def _record_test(row: dict[str, Any], test: Evidence) -> None:
    """The deciding test's statistic, interval and p for and against, into the row."""
    row.update(
        test=test.test,
        statistic=test.statistic,
        df=test.df,
        diff=test.estimate,
        diff_low=test.low,
        diff_high=test.high,
        level=test.level,
        p_for=test.p_for,
        p_against=test.p_against,
        _test=test,
    )


def evaluate_claim(runs, claim: Claim, scope: set[str] | None, alpha: float = ALPHA) -> dict[str, Any]:
    """The claim's row before Holm's correction: both sides, the test, and p for and against."""
    frame = runs.runs if scope is None else runs.runs[runs.runs["run_id"].isin(scope)]
    factors = run_factors(runs)
    check_metric(runs, frame, claim)
    a = select_side(frame, factors, claim, "a")
    name, _ = split_metric(claim.metric)
    worst = inference.worst_value(name)
    row = _blank_row(claim, a)
    if claim.expect == "ratio":
        top, bottom = _ratio_sides(runs, a, claim, worst)
        a.values = top
        sides = [("a", a)]
    else:
        b, boxed = _score_two_sides(runs, frame, factors, claim, a, worst)
        row.update(b=b.label, **_divergence(a, b))
        sides = [("a", a), ("b", b)]
        boxed, row["assumption"] = assumption(claim, sides, boxed, worst)
    _describe_sides(row, sides, worst)
    lacked = _lacking(sides, claim.metric, worst)
    if lacked:
        row.update(test="—", lacked=lacked)
        return row
    if claim.expect == "ratio":
        if bottom.mean() == 0:
            row.update(test="—", lacked=f"the mean of {name}@{claim.over} over side a is 0: no ratio of means")
            return row
        test = ratio_test(top, bottom, claim, alpha)
        row["a_mean"], row["a_ci"] = test.estimate, math.nan
    else:
        test = two_sample_test(a.values, b.values, claim, alpha, boxed)
    _record_test(row, test)
    return row


def _straddle(row: Mapping[str, Any], claim: Claim) -> str:
    level = row.get("level", math.nan)
    level = f"{100 * level:.0f}%" if math.isfinite(level) else "decisive"
    interval = f"[{fmt(row['diff_low'])}, {fmt(row['diff_high'])}]"
    if claim.expect == "ratio":
        edges = " and ".join(_g(e) for e in claim.bounds if e is not None)
        return f"the {level} interval of the ratio of means {interval} reaches the bound {edges}"
    # -margin or 0.0: a margin of 0 reads "0", not "-0"
    edge = {"greater": _g(claim.margin), "less": _g(-claim.margin or 0.0)}.get(claim.expect, f"±{_g(claim.margin)}")
    return f"the {level} interval of a − b {interval} straddles the margin {edge}"


def _favoured(claim: Claim) -> set[str]:
    """The side(s) the claim says do better on the metric: a diverging more there undermines it."""
    better = inference.direction(split_metric(claim.metric)[0])
    if claim.expect not in ("greater", "less") or better is None:
        return {"a", "b"}
    return {"a"} if (claim.expect == "greater") == (better == "higher") else {"b"}


def _weigh_divergence(row: dict[str, Any], claim: Claim, alpha: float, k: int) -> None:
    """A significant difference in divergence rates (Fisher's exact p below alpha / k, Bonferroni over the claims)
    contradicts an equivalence and leaves a supported claim undecided where its favoured side diverges more."""
    p, more = row.get("divergence_p", math.nan), row.pop("_more", None)
    if not (isinstance(p, float) and p < alpha / k):
        return
    why = f"side {more} diverges more often (Fisher's exact p {fmt_p(p)} < α/{k})"
    if claim.expect == "equivalent":
        row["verdict"], row["lacked"] = "contradicted", f"{why}: the cells differ in how often they train"
    elif row["verdict"] == "supported" and more in _favoured(claim):
        row["verdict"], row["lacked"] = "inconclusive", f"{why}, against the claim's favoured side"


def _price(row: dict[str, Any], claim: Claim, test: Evidence, alpha: float) -> None:
    """Append the seeds that would decide the claim, priced before the data (analysis.stats.claims.seeds_needed)."""
    n, said = seeds_needed(test, claim, alpha)
    row["seeds_needed"] = n
    if n is None:
        row["lacked"] += f"; {said}"
        return
    per = "seeds" if claim.expect == "ratio" else "seeds per side"
    row["lacked"] += f"; about {n} {per} would decide it with 80% power {said}"


def decide(rows: list[dict[str, Any]], claims: Sequence[Claim], alpha: float = ALPHA) -> pd.DataFrame:
    """Holm over the claims' decisive p-values (the smaller of for and against, each wrong at most alpha), then
    verdicts, each named with the correction that made it: one row per claim."""
    return pd.DataFrame(decided(rows, claims, alpha), columns=COLUMNS)


def decided(rows: list[dict[str, Any]], claims: Sequence[Claim], alpha: float = ALPHA) -> list[dict[str, Any]]:
    """``decide``'s rows as dicts, each given its verdict in place (a simulation reads thousands of single
    verdicts, and a table for each costs more than the verdict)."""
    decisive = [min(r.get("p_for", math.nan), r.get("p_against", math.nan)) for r in rows]
    adjusted = inference.holm(decisive)
    k = max(1, sum(math.isfinite(p) for p in decisive))
    family = f"Holm over {k} claim{'s' if k != 1 else ''}"
    for row, claim, p, p_holm in zip(rows, claims, decisive, adjusted):
        row["p"], row["p_holm"] = p, float(p_holm)
        row["correction"] = f"{family}, p_adj {fmt_p(p_holm)}" if math.isfinite(p_holm) else None
        test = row.pop("_test", None)
        if not math.isfinite(p_holm):
            row["verdict"] = "inconclusive"
            if not row["lacked"]:
                row["lacked"] = test.reason if test is not None and test.reason else "no test could be run"
        elif p_holm < alpha:
            row["verdict"] = "supported" if row["p_for"] <= row["p_against"] else "contradicted"
        else:
            row["verdict"] = "inconclusive"
            if test is not None and test.reason:
                row["lacked"] = test.reason
            elif p < alpha:
                row["lacked"] = f"significant alone (p={fmt_p(p)}) but not after Holm's correction over {k} claims"
            else:
                row["lacked"] = _straddle(row, claim)
            if test is not None and not test.reason:
                _price(row, claim, test, alpha / k)
        _weigh_divergence(row, claim, alpha, k)
    return rows


def evaluate(runs, claims_file: str | Path | None = None, alpha: float = ALPHA, carried: bool = True) -> pd.DataFrame:
    """Every claim carried by the runs (unless ``carried`` is False) or given in ``claims_file``: one row each,
    Holm-corrected together."""
    gathered = gather_claims(runs, claims_file, carried)
    rows = [evaluate_claim(runs, claim, scope, alpha) for claim, scope in gathered]
    return decide(rows, [c for c, _ in gathered], alpha)
