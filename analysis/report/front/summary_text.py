"""The summary as the reader sees it (``analysis.report.plan.summary`` ranks the cells): the answer in one sentence per
column, the ranked table, the procedure it followed and which cells no test could reach.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis.report.document.model import Cell, Figure, Paragraph, Row, Section, Table, fmt
from analysis.report.plan.summary import ALPHA, Column, TaskSummary, by_key
from analysis.stats import inference

TIE_MARK = "≈"  # a cell not significantly different from the best


def _value_cell(row: pd.Series | None) -> Cell:
    if row is None:
        return Cell("—", kind="missing")
    count = f"(n={int(row['n'])})"
    spread = f" ± {fmt(row['ci_half'])}" if int(row["n"]) > 1 and math.isfinite(row["ci_half"]) else ""
    text = f"{fmt(row['mean'])}{spread} {count} #{int(row['rank'])}"
    if row["tie"] and not row["best"]:
        return Cell(f"{text} {TIE_MARK}", kind="tie")
    return Cell(text, best=bool(row["best"]))


def _testable(column: Column) -> bool:
    return bool(np.isfinite(column.ranking["p"].to_numpy(float)).any())


def _answer(summary: TaskSummary) -> str:
    """One sentence per column: the winner when there is one (a single best mean, every other cell significantly
    worse); otherwise the cells that tie, or the best mean with what could not be told apart from it."""
    parts = []
    for column in summary.columns:
        ranking = column.ranking
        if ranking.empty:
            continue
        title = column.title.capitalize()
        best = ranking.iloc[0]
        leaders = ranking.loc[ranking["best"], "label"].tolist()
        others = len(ranking) - 1
        if not others:
            parts.append(f"{title}: {best['label']} ({fmt(best['mean'])}), the only cell.")
            continue
        if len(leaders) > 1:  # equal means: no order among them
            rest = others + 1 - len(leaders)
            tail = f"; {rest} other cell(s) below" if rest else ""
            parts.append(f"{title}: no winner; {', '.join(leaders)} share the best mean ({fmt(best['mean'])}){tail}.")
            continue
        head = f"{best['label']} has the best mean ({fmt(best['mean'])})"
        if not _testable(column):
            parts.append(f"{title}: {head}.")
            continue
        ties = ranking.loc[ranking["tie"], "label"].tolist()
        worse = int(ranking["worse"].sum())
        untested = others - len(ties) - worse
        the_others = "the other cell is" if others == 1 else f"the other {others} are"
        if worse == others:
            parts.append(f"{title}: {best['label']} is best ({fmt(best['mean'])}); {the_others} significantly worse.")
        elif len(ties) == others:
            parts.append(f"{title}: no winner; {head}, but {the_others} not significantly different from it.")
        else:
            text = (
                f"{worse} of {others} significantly worse"
                + (f"; not significantly different: {', '.join(ties)}" if ties else "")
                + (f"; {untested} untested (one seed)" if untested else "")
            )
            parts.append(f"{title}: no winner; {head}; {text}.")  # a tie or an untested cell: not established
    if len(parts) and not any(_testable(c) for c in summary.columns):
        parts.append("With one seed per cell no difference can be tested.")
    return " ".join(parts)


def _procedure(summary: TaskSummary) -> str:
    scopes = "; ".join(
        f"{c.title}: {summary.main} averaged over {c.scope_text}"
        if c.title != "whole test set"
        else f"{c.metric} over the whole test set"
        for c in summary.columns
    )
    better = inference.direction(summary.columns[0].metric) or "higher"
    testable = any(_testable(c) for c in summary.columns)
    if testable:
        test = (
            f"★ best mean; {TIE_MARK} not significantly different from the best (Welch's t-test against the "
            f"best cell, Holm-corrected over each column, α = {ALPHA}); unmarked cells are significantly worse"
        )
    else:
        test = (
            "★ best mean; with one seed per cell no test is possible, so no cell is marked as "
            "indistinguishable from the best"
        )
    return (
        f"Mean ± 95% t-interval over seeds (n = completed seeds), #rank per column, {better} is better; "
        f"rows in order of the {summary.columns[-1].title} rank. {test}. {scopes[0].upper()}{scopes[1:]}."
    )


def summary_table(summary: TaskSummary) -> Table:
    by_column = [by_key(c.ranking) for c in summary.columns]
    header = [
        "cell",
        *[f"{summary.main} {c.title}" if c.title != "whole test set" else c.metric for c in summary.columns],
    ]
    labels = summary.labels()
    rows = [[labels[key], *[_value_cell(r.get(key)) for r in by_column]] for key in summary.order]
    return Table(header, rows)


def untested_note(summary: TaskSummary) -> str | None:
    """Which cells no test could reach (one seed on a side), or that none could be tested at all."""
    if not any(_testable(c) for c in summary.columns):
        return (
            f"Every cell of {summary.task} has at most one completed seed (or the best has one): no test is "
            "possible and the ranks are those of single runs. Run more seeds (e.g. seed=0,1,2) for intervals "
            "and tests."
        )
    lone = sorted(
        {
            str(r["label"])
            for c in summary.columns
            for _, r in c.ranking.iloc[1:].iterrows()
            if not math.isfinite(r["p"])
        }
    )
    return f"Not tested, fewer than two seeds: {', '.join(lone)}." if lone else None


def summary_section(summary: TaskSummary, figure: Figure | None) -> Section:
    """The task's first screen: the answer, the ranked table beside the length figure, the procedure."""
    section = Section(f"Summary — {summary.task}")
    section.add(Paragraph(_answer(summary), kind="answer"))
    table = summary_table(summary)
    table.caption = f"{summary.task}: cells ranked by {summary.main}"
    notes = [Paragraph(note, kind="note") for note in [*summary.notes, untested_note(summary)] if note]
    left = [table, Paragraph(_procedure(summary), kind="small"), *notes]
    if figure is None:
        return section.add(*left)
    return section.add(Row([left, figure]))
