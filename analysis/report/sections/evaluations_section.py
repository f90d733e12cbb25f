"""The report's section on evaluations of the runs' checkpoints (``python -m experiments.evaluate``), e.g. a
sweep evaluated again on longer lengths.

One table per task: a row per evaluation (one checkpoint measured once: its run, variant, seed, step and
overrides), a column per evaluated length holding the task's headline per-length metric. Evaluations are shown
as they are, never pooled with the runs' own results or averaged over seeds; ``--where`` filters the runs, not
these rows.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

from analysis.data.evaluations import collect_evaluations
from analysis.report.document.model import Cell, Paragraph, Section, Table, fmt
from analysis.report.sections.registry import SECTIONS

# the per-length metric a table shows: the first of these the task's evaluations report
HEADLINE = ("seq_acc", "acc", "token_acc", "bpc")


@SECTIONS.register("evaluations", order=60, inputs=("paths",))
def evaluations_section(paths: Sequence[str | Path]) -> Section | None:
    """The section, or None when no evaluation lies under ``paths``."""
    found = collect_evaluations(paths)
    if found.runs.empty:
        return None
    section = Section("Evaluations of checkpoints")
    section.add(
        Paragraph(
            "Each row is one checkpoint tested again by python -m experiments.evaluate, with the overrides shown; "
            "never counted as a seed of its run (from Python: analysis.collect.collect_evaluations)."
        )
    )
    for task, rows in found.runs.groupby("task", sort=True):
        lengths = found.by_length[found.by_length["evaluation_id"].isin(rows["evaluation_id"])]
        metric = next((m for m in HEADLINE if m in set(lengths["metric"])), None)
        shown = lengths[lengths["metric"] == metric]
        columns = sorted(shown["length"].unique())
        value = {(r.evaluation_id, r.length): float(r.value) for r in shown.itertuples(index=False)}
        table_rows: list[list[Cell | str]] = [
            [
                str(r.run_id),
                f"{r.attention}+{r.position}",
                str(r.seed),
                str(r.checkpoint_step),
                " ".join(r.eval_overrides) or "none",
                *(fmt(value.get((r.evaluation_id, n), math.nan)) for n in columns),
            ]
            for r in rows.sort_values(["attention", "position", "seed", "evaluation_id"]).itertuples(index=False)
        ]
        header = ["run", "variant", "seed", "step", "overrides", *(f"{metric} @ {n}" for n in columns)]
        section.add(Table(header, table_rows, caption=f"{task}: {metric} per evaluated length"))
    return section
