"""The report's "Overview" section: what was read, what is reported and how the statistics are made."""

from __future__ import annotations

from collections import Counter

from analysis.report.document.model import Paragraph, Section
from analysis.report.sections.context import ReportContext
from analysis.report.sections.registry import SECTIONS
from analysis.report.sections.tables import ONE_SEED_NOTICE


@SECTIONS.register("overview", order=10, inputs=("ctx",))
def overview(ctx: ReportContext) -> Section:
    """What was read, what is reported and how the statistics are made; the notes a reader needs first."""
    runs, metrics, baseline, where = ctx.runs, ctx.metrics, ctx.baseline, ctx.where
    frame = runs.runs
    status = Counter(frame["status"])
    text = (
        f"{len(frame)} runs ({', '.join(f'{n} {s}' for s, n in sorted(status.items()))}) in "
        f"{frame.groupby('task')['cell'].nunique().sum()} cells over "
        f"{frame['task'].nunique()} task(s): {', '.join(sorted(frame['task'].unique()))}. "
        f"Factors (config keys that vary): {', '.join(runs.factors) or 'none'}. "
        f"Metrics reported: {', '.join(metrics) or 'none (no completed run)'}. "
        f"Baseline for comparisons: {baseline.name}{'' if ctx.baseline_present else ' (not in this sweep)'}. "
        "A cell is one configuration (everything but the seed); statistics use the completed seeds of one "
        "cell and never average across cells; intervals are 95% t-intervals over seeds; p-values are Welch's "
        "t-test, Holm-corrected per task, metric and table."
    )
    section = Section("Overview", [Paragraph(text)])
    if where:
        section.add(Paragraph(f"Only runs with {', '.join(where)} (--where).", kind="note"))
    if len(runs.duplicates):
        dups = "; ".join(f"{r.run_id} ({r.source}) = {r.duplicate_of}" for r in runs.duplicates.itertuples())
        section.add(
            Paragraph(
                f"{len(runs.duplicates)} run(s) read twice (same configuration and seed as another "
                f"run), each counted once: {dups}.",
                kind="note",
            )
        )
    done = frame[frame["status"] == "completed"]
    seeds = done.groupby(["task", "cell"])["seed"].nunique()
    single = sorted(t for t, n in seeds.groupby(level="task").max().items() if n < 2)
    if single:
        section.add(
            Paragraph(
                f"{', '.join(single)}: every cell has at most one completed seed, so "
                f"{ONE_SEED_NOTICE}; the tables show means without intervals.",
                kind="note",
            )
        )
    others = [m for m in ctx.all_metrics if m not in metrics]
    if others:
        section.add(
            Paragraph(f"Also found, not reported: {', '.join(others)} (choose metrics with --metrics).", kind="note")
        )
    return section
