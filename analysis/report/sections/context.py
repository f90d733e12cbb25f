"""What every section of a report reads: the runs, the metrics and baseline chosen, the per-cell summaries and the
figure options, gathered once in a frozen ``ReportContext`` instead of being passed along parameter by parameter."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd

from analysis.data.runs import Runs
from analysis.report.figures import figure_style
from analysis.report.figures.report_figures import FigureBudget
from analysis.report.plan.baseline import Baseline
from analysis.report.plan.task_plan import TaskPlan


@dataclass(frozen=True)
class ReportContext:
    """One report's inputs, fixed before the first section is built.

    ``metrics`` are those reported (by importance), ``all_metrics`` every metric found; ``factors`` are the ones
    asked for with --factors (None: the default order) and ``where`` the --where filters. ``summaries`` holds
    ``inference.cell_summary`` per reported metric. The figure budgets are shared and count the figures drawn
    across sections, so the cap holds for the whole report.
    """

    runs: Runs
    paths: Sequence[str | Path]
    out: Path
    figures_dir: Path
    metrics: list[str]
    all_metrics: list[str]
    factors: Sequence[str] | None
    where: Sequence[str] | None
    baseline: Baseline
    baseline_present: bool
    plans: list[TaskPlan]
    summaries: dict[str, pd.DataFrame]
    curves: pd.DataFrame
    style: figure_style.FigureStyle
    budget: FigureBudget
    map_budget: FigureBudget

    @property
    def frame(self) -> pd.DataFrame:
        """One row per run (``Runs.runs``)."""
        return self.runs.runs
