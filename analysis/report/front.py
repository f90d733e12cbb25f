"""The report's opening: what the statistics leave out, the per-task summaries, the overview and the confounds."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Sequence

import pandas as pd

from analysis.data.confounds import CONFOUND_COLUMNS
from analysis.data.runs import Runs
from analysis.report import figure_style, summary
from analysis.report.context import ReportContext
from analysis.report.document import Bullets, Document, Paragraph, Section, Table
from analysis.report.plan import TaskPlan
from analysis.report.report_figures import safe_name
from analysis.report.section_registry import SECTIONS
from analysis.report.sections import ONE_SEED_NOTICE
from analysis.report.summary_text import summary_section


def confounds_section(plans: list[TaskPlan], asked: Sequence[str] | None) -> tuple[Section, pd.DataFrame]:
    """The rule that makes a confound, and the confounds of every task (also written to confounds.csv)."""
    rule = (
        "A confound is a difference between runs that is not a factor asked for: "
        + (
            f"the factors asked for are {', '.join(asked)} (--factors); "
            if asked
            else "by default every varying config key in which two cells differ alone (a controlled comparison), "
            "except budget and provenance keys (training steps, data sizes, device, kernels); "
        )
        + "the environment (torch, python, device, code version, package versions) counts too. Confounded "
        "runs stay separate cells, and every comparison between cells that differ in one carries ⚠."
    )
    table = pd.concat(
        [p.confounds.table(p.task) for p in plans] or [pd.DataFrame(columns=CONFOUND_COLUMNS)], ignore_index=True
    )
    section = Section("Confounds", [Paragraph(rule)])
    if table.empty:
        section.add(
            Paragraph("None: within each task the cells differ only in the factors asked for, on one environment.")
        )
    else:
        rows = [[r.task, r.key, r.kind, r.values, r.cells] for r in table.itertuples(index=False)]
        section.add(
            Table(
                ["task", "key", "kind", "values", "cells [value]"],
                rows,
                caption="Keys that differ between the compared runs but are not factors asked for",
            )
        )
    return section, table


@SECTIONS.register("confounds", order=20, inputs=("plans", "factors"))
def confounds(plans: list[TaskPlan], factors: Sequence[str] | None) -> Section:
    """The report's "Confounds" section (its table also goes to confounds.csv, ``confounds_section``)."""
    return confounds_section(plans, factors)[0]


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


def lead(
    doc: Document, runs: Runs, figures_dir: Path, style: figure_style.FigureStyle | None = None
) -> dict[str, summary.TaskSummary]:
    """The first screen: per task, the cells ranked in and beyond the training range, beside the length figure."""
    found = {}
    for task in sorted(runs.runs["task"].unique()):
        ranked = summary.summarise_task(runs.runs, runs.by_length, task)
        if ranked is None:
            doc.lead.append(
                Section(
                    f"Summary — {task}",
                    [
                        Paragraph(
                            f"No completed run of {task} has a metric to rank the cells by; see the details below.",
                            kind="note",
                        )
                    ],
                )
            )
            continue
        figure = summary.write_figure(
            runs.runs, runs.by_length, ranked, figures_dir / safe_name("summary", task, ranked.main), style
        )
        doc.lead.append(summary_section(ranked, figure))
        found[task] = ranked
    # The claims table (analysis.claims) joins the lead here, after the per-task summaries.
    return found


def left_out(runs: Runs) -> Section | None:
    """The lead's note of what the statistics leave out (``Runs.dropped``) and of settings no model used."""
    blocks: list = []
    if len(runs.unused):
        varied = "; ".join(f"{key} ({', '.join(values)})" for key, values in runs.unused.items())
        blocks.append(
            Paragraph(
                f"Set but not used by the models that ran: {varied}. Not factors: runs that differ "
                "only there are one cell.",
                kind="note",
            )
        )
    if len(runs.dropped):
        blocks.append(Paragraph(f"{len(runs.dropped)} run(s) or file(s) are left out of the statistics:", kind="note"))
        blocks.append(Bullets([f"{r.source}: {r.reason}" for r in runs.dropped.itertuples(index=False)]))
    return Section("Left out", blocks) if blocks else None
