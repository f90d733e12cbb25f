"""Claims as the report's "Claims" section and table, and as text for a terminal."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from analysis.claims.evaluate import ALPHA, VERDICTS, evaluate
from analysis.report.document.model import Bullets, Paragraph, Section, Table, fmt, fmt_p
from analysis.stats.claims import EXACT, POWER
from attnlab.claims import ClaimError


def _side_text(mean: float, ci: float, n: Any, outcomes: Any = None) -> str:
    """``0.637 ± 0.31 (n=10: 7 completed, 3 diverged, each scored 0, 0 failed)``."""
    if not isinstance(n, (int, np.integer)) and not (isinstance(n, float) and math.isfinite(n)):
        return "—"
    runs = f": {outcomes}" if _str(outcomes) != "—" else ""
    if int(n) == 0:
        return f"no value (n=0{runs})"
    spread = f" ± {fmt(ci)}" if math.isfinite(ci) else ""
    return f"{fmt(mean)}{spread} (n={int(n)}{runs})"


def _side(r: Mapping[str, Any], tag: str) -> str:
    ratio = "ratio of means " if tag == "a" and "/ mean a@" in r["expect"] else ""
    return f"{r[tag]}: {ratio}{_side_text(r[f'{tag}_mean'], r[f'{tag}_ci'], r[f'{tag}_n'], r.get(f'{tag}_runs'))}"


def _verdict_text(r: Mapping[str, Any]) -> str:
    """``supported (Holm over 3 claims, p_adj 0.012)``: the verdict and the correction that made it."""
    correction = f" ({r['correction']})" if _str(r.get("correction")) != "—" else ""
    return f"{r['verdict']}{correction}"


def _interval(r: Mapping[str, Any]) -> str:
    """The interval that decided, with its level where the row has one: ``95% interval [0.013, 0.139]``; an
    anytime confidence sequence's row (analysis/claims/adaptive.py) shows its interval bare."""
    level = r.get("level")
    bare = f"[{fmt(r['diff_low'])}, {fmt(r['diff_high'])}]"
    if isinstance(level, float) and math.isfinite(level):
        return f"{100 * level:.0f}% interval {bare}"
    return "no interval (no spread)" if r["test"] == EXACT else bare


def _statistic_text(row: Mapping[str, Any]) -> str:
    # an anytime confidence sequence decides by its interval alone: it has no t statistic to show
    if not isinstance(row["test"], str) or row["test"] == "—" or _str(row["statistic"]) == "—":
        return "—"
    df = f", df {row['df']:.1f}" if math.isfinite(row["df"]) else ""
    return f"t = {fmt(row['statistic'])}{df}"


def _str(value: Any) -> str:
    """Text for a table cell: "—" for a missing value (None, or NaN once it went through a frame)."""
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) or value == "" else str(value)


def claims_table(results: pd.DataFrame) -> Table:
    header = [
        "claim",
        "metric",
        "expected",
        "a: mean ± CI",
        "b: mean ± CI",
        "test",
        "statistic",
        "interval",
        "p (Holm)",
        "divergence",
        "verdict",
        "source",
    ]
    rows = []
    for r in results.to_dict("records"):
        verdict = _verdict_text(r) + (f": {r['lacked']}" if _str(r["lacked"]) != "—" else "")
        if _str(r.get("assumption")) != "—":
            verdict += f"; assumes {r['assumption']}"
        rows.append(
            [
                r["claim"],
                r["metric"],
                r["expect"],
                _side(r, "a"),
                "—" if _str(r["b"]) == "—" else _side(r, "b"),
                _str(r["test"]),
                _statistic_text(r),
                _interval(r) if isinstance(r["test"], str) and r["test"] != "—" else "—",
                fmt_p(r["p_holm"]),
                _str(r.get("divergence")),
                verdict,
                _str(r["source"]),
            ]
        )
    return Table(header, rows, caption=METHOD)


ASSUMES = "assumes"  # the label of the assumption a verdict rests on (analysis.claims.evaluate.assumption)
FIXED_HEADING = "Claims of {file}, decided by the fixed-n engine (not the sweep's anytime rule):"
METHOD = (
    f"Each claim: a test for it and one against it, each wrong at most α = {ALPHA} (Welch two-sided for a "
    f"direction, TOST with its {1 - 2 * ALPHA:.0%} interval for an equivalence, a delta-method t for a ratio of "
    "means, an exact permutation test where neither side has spread); Holm's correction over the claims. "
    "A diverged seed scores the metric's worst value (no mean test where that is +∞); a bounded metric's means are "
    "decided over every divergence rate the seeds leave possible (Clopper–Pearson box); divergence rates are "
    "compared by Fisher's exact test. A verdict names the assumption it rests on: a claim's declared 'assume: "
    "no_divergence' sets the bound aside until a seed diverges, and a loss's mean assumes it always. "
    f"Means ± 95% t-intervals over scored seeds. Seeds needed: {POWER:.0%} power "
    "at α / claims, at the claim's margin or min_effect (docs/claims.md)."
)


def report_claims(
    runs, claims_file: str | Path | None = None, paths: Sequence[str | Path] = ()
) -> tuple[Section | None, pd.DataFrame | None]:
    """The report's "Claims" section and the results behind it; (None, None) when no claim was tested.

    A claim carried by the runs that does not fit them becomes a note in the section (the rest
    of the report still stands); with ``claims_file`` the user asked for claims, so it is an error.
    An adaptive-seed sweep among ``paths`` is decided as it decided (analysis/claims/adaptive.py).
    """
    from analysis.claims import adaptive

    found = adaptive.find_state(paths)
    if found is not None:
        results, details = adaptive.evaluate_adaptive(runs, found[1], str(found[0]))
        head, *facts = adaptive.section_lines(found[0], found[1], details)
        section = _section(results)
        section.add(Paragraph(head), Bullets(facts))
        if claims_file is not None:  # the user's claims: decided beside the sweep's, in their own table
            given = evaluate(runs, claims_file, carried=False)
            section.add(Paragraph(FIXED_HEADING.format(file=claims_file)), claims_table(given))
            results = pd.concat([results, given], ignore_index=True)
        return section, results
    try:
        results = evaluate(runs, claims_file)
    except ClaimError as err:
        if claims_file is not None:
            raise
        return Section("Claims", [Paragraph(f"The claims these runs carry cannot be tested: {err}", kind="note")]), None
    if results.empty:
        return None, None
    return _section(results), results


def _section(results: pd.DataFrame) -> Section:
    counts = results["verdict"].value_counts()
    summary = ", ".join(f"{counts[v]} {v}" for v in VERDICTS if v in counts)
    section = Section("Claims", [Paragraph(f"{len(results)} claim(s): {summary}.")])
    section.add(claims_table(results))
    papers = [f"{r['claim']}: {r['paper']}" for r in results.to_dict("records") if _str(r["paper"]) != "—"]
    if papers:
        section.add(Paragraph("What the papers report:"), Bullets(papers))
    return section


def _estimate_label(test: str) -> str:
    """What the row's estimate and interval are of: the per-run ratio, the median paired difference (the median
    boundary decides on it, not on the mean) or the difference of means."""
    from analysis.claims.adaptive import TESTS

    if "ratio" in test:
        return "ratio of means"
    return "median a − b" if test.startswith(TESTS["median"]) else "a − b"


def format_text(results: pd.DataFrame) -> str:
    """The claims table for a terminal: one block per claim."""
    lines = []
    for r in results.to_dict("records"):
        correction = f" ({r['correction']})" if _str(r.get("correction")) != "—" else ""
        lines.append(f"[{r['verdict'].upper()}] {r['claim']}{correction}")
        lines.append(f"    {r['metric']}: {r['expect']}")
        lines.append(f"    a  {_side(r, 'a')}")
        if _str(r["b"]) != "—":
            lines.append(f"    b  {_side(r, 'b')}")
        if isinstance(r["test"], str) and r["test"] != "—":
            statistic = "" if r["test"] == EXACT else f"{_statistic_text(r)}, "  # an exact test has no t
            comma = "," if isinstance(r.get("level"), float) and math.isfinite(r["level"]) or r["test"] == EXACT else ""
            lines.append(
                f"    {r['test']}: {statistic}{_estimate_label(r['test'])} {fmt(r['diff'])}{comma} {_interval(r)}, "
                f"p {fmt_p(r['p'])}, Holm {fmt_p(r['p_holm'])}"
            )
        for label in ("divergence", "assumption", "lacked", "source", "paper"):
            if _str(r.get(label)) != "—":
                lines.append(f"    {ASSUMES if label == 'assumption' else label}: {r[label]}")
    counts = results["verdict"].value_counts()
    lines.append(f"{len(results)} claim(s): " + ", ".join(f"{counts[v]} {v}" for v in VERDICTS if v in counts))
    return "\n".join(lines)
