"""What the report compares in each task: the metrics to report (``choose_metrics``) and a task's factors, tables,
baselines and comparisons (``TaskPlan``), computed once and read by every section and export."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from analysis.command.errors import ReportError
from analysis.data.confounds import Confounds
from analysis.data.runs import Runs
from analysis.report.document.model import Paragraph
from analysis.report.plan.baseline import Baseline, baseline_cell
from analysis.report.plan.layout import asked_factors, grids, task_factors
from analysis.stats import inference


def task_metrics(runs: Runs) -> dict[str, list[str]]:
    """Per task, the metrics with at least one finite value in a completed run."""
    found = {}
    for task, group in runs.runs.groupby("task", sort=True):
        done = group[group["status"] == "completed"]
        found[task] = [m for m in runs.metrics if np.isfinite(done[m].to_numpy(float)).any()]
    return found


def choose_metrics(runs: Runs, requested: Sequence[str] | None) -> list[str]:
    """The metrics asked for, or those common to every task that has any; none in common is an error."""
    per_task = task_metrics(runs)
    everything = sorted({m for ms in per_task.values() for m in ms})
    if requested:
        unknown = [m for m in requested if m not in everything]
        if unknown:
            raise ReportError(
                f"--metrics {' '.join(unknown)}: not found in the results; metrics found: "
                f"{', '.join(everything) or 'none'}"
            )
        return list(dict.fromkeys(requested))
    with_values = {t: ms for t, ms in per_task.items() if ms}
    if not with_values:
        return []  # every run failed: the report shows the status grid and the errors
    common = sorted(set.intersection(*(set(ms) for ms in with_values.values())))
    if not common:
        found = "; ".join(f"{t}: {', '.join(ms)}" for t, ms in with_values.items())
        raise ReportError(f"no metric is common to all tasks ({found}); pass --metrics to choose which to report")
    return common


class TaskPlan:
    """One task's factors, tables, confounds and the comparisons of each table against its baseline."""

    def __init__(
        self,
        frame: pd.DataFrame,
        task: str,
        factors: Sequence[str],
        asked: Sequence[str] | None,
        baseline: Baseline,
        metrics: Sequence[str],
    ):
        self.task = task
        runs = frame[frame["task"] == task]
        self.factors = task_factors(runs, factors)
        self.designed = asked_factors(runs, self.factors, asked)
        self.grids = grids(frame, task, factors, asked)
        self.confounds = Confounds(runs, self.factors, self.designed, named=bool(asked))
        self.baselines = [baseline_cell(runs, g, baseline) for g in self.grids]
        self.comparisons = {}
        for metric in metrics:
            parts = []
            for grid, (base, _) in zip(self.grids, self.baselines):
                if base is None:
                    continue
                table = inference.compare_cells(runs, metric, base, list(grid.cells["cell"]))
                table["table"] = grid.title
                table["confounds"] = [", ".join(self.confounds.between(c, base)) for c in table["cell"]]
                parts.append(table)
            columns = [*inference.CELL_COMPARISON_COLUMNS, "table", "confounds"]
            self.comparisons[metric] = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=columns)

    def describe(self) -> Paragraph:
        grid = self.grids[0]
        if not self.factors:
            return Paragraph(f"One configuration in {self.task}: no factor varies.")
        axes = " × ".join(a.name for a in (grid.rows, grid.columns) if a is not None)
        text = f"Factors that vary in {self.task}: {', '.join(self.factors)}. Tables: {axes}"
        sliced = list(grid.where)
        if sliced:
            text += (
                f"; one table per combination of {', '.join(sliced)} ({len(self.grids)} tables), never "
                "averaged across them (pick the axes with --factors, a subset with --where KEY=VALUE)"
            )
        return Paragraph(text + ".")
