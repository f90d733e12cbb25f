"""The files of a report besides the figures: report.md and report.html, the CSVs of the numbers behind the tables
and, for a paper, latex/, references.bib and methods.*."""

from __future__ import annotations

import pandas as pd

from analysis.command.outputs import whole_or_absent
from analysis.paper import export
from analysis.report.document.model import Document, to_html, to_markdown
from analysis.report.plan import summary
from analysis.report.sections.context import ReportContext
from analysis.report.sections.tables import results_frame_for_csv
from analysis.stats import inference


def _cells_frame(ctx: ReportContext) -> pd.DataFrame:
    """Every reported metric's per-cell summary, with each cell's factor values so cells.csv groups like the tables."""
    frame = ctx.frame
    cells = pd.concat(list(ctx.summaries.values()) or [inference.cell_summary(frame.iloc[0:0], "_")], ignore_index=True)
    extra = [k for k in ctx.runs.factors if k in frame.columns and k not in cells.columns]
    if extra:
        values = frame.drop_duplicates("cell").set_index("cell")[extra]
        cells = cells.join(values, on="cell")
    return cells


def write_report(
    ctx: ReportContext,
    doc: Document,
    confound_table: pd.DataFrame,
    task_summaries: dict[str, summary.TaskSummary],
    claim_results: pd.DataFrame | None,
    paper_files: bool,
) -> None:
    """Write the document and the exports into ``ctx.out``."""
    out, frame = ctx.out, ctx.frame
    for name, text in (("report.md", to_markdown(doc, out)), ("report.html", to_html(doc))):
        with whole_or_absent(out / name) as tmp:  # a cut report (a full disk, ulimit -f) is no report
            tmp.write_text(text, encoding="utf-8")
    results_frame_for_csv(frame).to_csv(out / "results.csv", index=False)
    _cells_frame(ctx).to_csv(out / "cells.csv", index=False)
    compared = [p.comparisons[m] for p in ctx.plans for m in ctx.metrics]
    pd.concat(compared or [pd.DataFrame(columns=inference.CELL_COMPARISON_COLUMNS)]).to_csv(
        out / "comparisons.csv", index=False
    )
    confound_table.to_csv(out / "confounds.csv", index=False)
    summary.summaries_frame(list(task_summaries.values())).to_csv(out / "summary.csv", index=False)
    if paper_files:  # latex/, references.bib, methods.md / .tex
        export.export(out, frame, ctx.plans, ctx.metrics, ctx.summaries, task_summaries, claim_results)
