"""Claims as the report's "Claims" section and table, and as text for a terminal."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from analysis.claims.evaluate import ALPHA, VERDICTS, evaluate
from analysis.report.document import Bullets, Paragraph, Section, Table, fmt, fmt_p
from analysis.stats.claims import POWER
from common.claims import ClaimError


def _side_text(mean: float, ci: float, n: Any) -> str:
    if not isinstance(n, (int, np.integer)) and not (isinstance(n, float) and math.isfinite(n)):
        return "—"
    if int(n) == 0:
        return "no value (n=0)"
    spread = f" ± {fmt(ci)}" if math.isfinite(ci) else ""
    return f"{fmt(mean)}{spread} (n={int(n)})"


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
        "p (Holm)",
        "verdict",
        "source",
    ]
    rows = []
    for r in results.to_dict("records"):
        verdict = r["verdict"] + (f": {r['lacked']}" if _str(r["lacked"]) != "—" else "")
        b = "—" if _str(r["b"]) == "—" else f"{r['b']}: {_side_text(r['b_mean'], r['b_ci'], r['b_n'])}"
        ratio = "ratio " if "/ a@" in r["expect"] else ""
        rows.append(
            [
                r["claim"],
                r["metric"],
                r["expect"],
                f"{r['a']}: {ratio}{_side_text(r['a_mean'], r['a_ci'], r['a_n'])}",
                b,
                _str(r["test"]),
                _statistic_text(r),
                fmt_p(r["p_holm"]),
                verdict,
                _str(r["source"]),
            ]
        )
    return Table(header, rows, caption=METHOD)


METHOD = (
    f"Each claim: two one-sided tests at its margin (Welch for two sides, TOST for equivalence, one-sample t "
    f"on per-run ratios), the smaller p decides; Holm's correction over the claims; verdict at α = {ALPHA}. "
    f"Means ± 95% t-intervals over completed seeds. Seeds needed: {POWER:.0%} power at α / claims."
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

    if "sample" in test:
        return "ratio"
    return "median a − b" if test.startswith(TESTS["median"]) else "a − b"


def format_text(results: pd.DataFrame) -> str:
    """The claims table for a terminal: one block per claim."""
    lines = []
    for r in results.to_dict("records"):
        lines.append(f"[{r['verdict'].upper()}] {r['claim']}")
        lines.append(f"    {r['metric']}: {r['expect']}")
        ratio = "ratio " if "/ a@" in r["expect"] else ""
        lines.append(f"    a  {r['a']}: {ratio}{_side_text(r['a_mean'], r['a_ci'], r['a_n'])}")
        if _str(r["b"]) != "—":
            lines.append(f"    b  {r['b']}: {_side_text(r['b_mean'], r['b_ci'], r['b_n'])}")
        if isinstance(r["test"], str) and r["test"] != "—":
            what = _estimate_label(r["test"])
            lines.append(
                f"    {r['test']}: {_statistic_text(r)}, {what} {fmt(r['diff'])} "
                f"[{fmt(r['diff_low'])}, {fmt(r['diff_high'])}], p {fmt_p(r['p'])}, Holm {fmt_p(r['p_holm'])}"
            )
        for label in ("lacked", "source", "paper"):
            if _str(r[label]) != "—":
                lines.append(f"    {label}: {r[label]}")
    counts = results["verdict"].value_counts()
    lines.append(f"{len(results)} claim(s): " + ", ".join(f"{counts[v]} {v}" for v in VERDICTS if v in counts))
    return "\n".join(lines)
