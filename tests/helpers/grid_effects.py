"""Main effects and comparisons against a baseline (attention, position) pair, over a whole task: helpers the
tests use to check the report's per-table statistics (analysis.stats.inference) from a second direction."""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from analysis.stats import inference


def main_effects(
    runs: pd.DataFrame, metric: str, attentions: Sequence[str] | None = None, positions: Sequence[str] | None = None
) -> tuple[pd.Series, pd.Series, pd.DataFrame, float]:
    """Marginal means of attention and position, the interaction table and the grand mean, for one task.

    Each cell counts once (the mean of its seeds), so a cell with more seeds does
    not pull the marginals. Interaction = cell − row mean − column mean + grand
    mean; with every cell present its rows and columns sum to zero. With cells
    missing the marginals are over the cells present (the report says so).
    ``attentions`` / ``positions`` give the full grid, so levels without a
    completed run stay visible as NaN instead of vanishing.
    """
    done = inference.completed(runs, metric)
    if "cell" in done.columns and (done.groupby(list(inference.FACTORS))["cell"].nunique() > 1).any():
        raise ValueError(
            "attention x position holds several configurations here; group by cell "
            "(analysis.report.plan.layout.grids) instead of averaging across them"
        )
    cells = done.groupby(list(inference.FACTORS))[metric].mean().unstack("position")
    if attentions is not None:
        cells = cells.reindex(index=list(attentions))
    if positions is not None:
        cells = cells.reindex(columns=list(positions))
    row_means, col_means, interaction, grand = inference.effects(cells)
    return row_means.rename("attention"), col_means.rename("position"), interaction, grand


def compare_to_baseline(
    runs: pd.DataFrame,
    metric: str,
    baseline: tuple[str, str],
    alpha: float = inference.ALPHA,
    confidence: float = inference.CONFIDENCE,
) -> pd.DataFrame:
    """Every cell of each task against the baseline (attention, position) cell of that task.

    Welch's t-test over seeds; Holm's correction over the comparisons of one task
    and metric (one family). With cells (``analysis.collect``), a task whose
    (attention, position) pair names several configurations is refused rather
    than pooled; the report compares within each table instead.
    """
    parts = []
    frame = (
        runs
        if "cell" in runs.columns
        else runs.assign(cell=runs["attention"].astype(str) + "+" + runs["position"].astype(str))
    )
    for task, task_runs in inference.completed(frame, metric).groupby("task", sort=True):
        if (task_runs.groupby(list(inference.FACTORS))["cell"].nunique() > 1).any():
            raise ValueError(
                f"task {task}: attention x position holds several configurations; "
                "compare cells within a table (analysis.report.plan.layout.grids)"
            )
        base = task_runs[(task_runs["attention"] == baseline[0]) & (task_runs["position"] == baseline[1])]
        if base.empty:
            continue
        cells = list(dict.fromkeys(task_runs.sort_values(list(inference.FACTORS), kind="stable")["cell"]))
        parts.append(inference.compare_cells(task_runs, metric, base["cell"].iloc[0], cells, alpha, confidence))
    if not parts:
        return pd.DataFrame(columns=inference.COMPARISON_COLUMNS)
    return pd.concat(parts, ignore_index=True)[inference.COMPARISON_COLUMNS]
