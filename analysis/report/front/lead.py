"""The report's lead, its first screen: the per-task summaries beside their figures, and what the statistics
leave out."""

from __future__ import annotations

from pathlib import Path

from analysis.data.runs import Runs
from analysis.report.document.model import Bullets, Document, Paragraph, Section
from analysis.report.figures import figure_style, summary_figure
from analysis.report.figures.report_figures import safe_name
from analysis.report.front.summary_text import summary_section
from analysis.report.plan import summary


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
        figure = summary_figure.write_figure(
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
