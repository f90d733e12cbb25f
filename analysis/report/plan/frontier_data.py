"""What the quality–cost chart holds: per run a quality value on each panel, per cell a cost from each source, and
per table one point per cell with the Pareto set marked (``analysis.report.sections.frontier`` draws and reports them).

- **Quality** (``quality_panels``) is the summary's main metric (analysis.report.plan.summary):
  with per-length results, at the longest evaluation length inside the training range
  and at the longest evaluation length overall (two panels; one when they coincide);
  without them, the whole-test-set metric the summary ranks by.
- **Cost** (``run_costs``) is the time of one training step the runs measured
  (``cost.step_ms``: the median step after warm-up,
  ``experiments.training.callbacks.StepTimer``) and their peak memory; with ``--bench``
  (``bench_costs``) the benchmark's time of one attention layer's forward + backward at
  the longest T every cell of the table reached (``analysis.report.plan.bench_cells``).
- **The Pareto set** (``pareto_mask``): the cells no other cell beats on both axes (as
  fast or faster and as good or better, one of them strictly), computed on the means.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from analysis.report.plan.layout import Grid
from analysis.report.plan.summary import TaskSummary
from analysis.stats import inference

STEP_COLUMN = "cost.step_ms"
MEMORY_COLUMN = "cost.peak_memory_mb"
COST_FIELDS = ["cost", "cost_low", "cost_high", "memory"]
POINT_COLUMNS = [
    "cell",
    "label",
    "row",
    "column",
    "n",
    "mean",
    "half",
    "cost",
    "cost_low",
    "cost_high",
    "memory",
    "pareto",
]


def pareto_mask(cost: Sequence[float], quality: Sequence[float], higher_is_better: bool = True) -> np.ndarray:
    """Which points no other point dominates; cost is always lower-is-better.

    Point j dominates i when cost_j <= cost_i and quality_j is at least as good, one of
    them strictly. Equal points dominate neither, so both stay in the set. Points with a
    non-finite coordinate are never in the set and dominate nothing.
    """
    x = np.asarray(cost, dtype=float)
    y = np.asarray(quality, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"cost and quality must be 1-d and of one length, got shapes {x.shape} and {y.shape}")
    y = y if higher_is_better else -y  # from here on, higher is better
    mask = np.zeros(len(x), dtype=bool)
    ok = np.flatnonzero(np.isfinite(x) & np.isfinite(y))
    best_cheaper = -math.inf  # the best quality among strictly cheaper points seen so far
    for value in np.unique(x[ok]):  # ascending cost
        same = ok[x[ok] == value]
        top = y[same].max()
        if top > best_cheaper:  # nothing cheaper is as good; within equal cost only the best survive
            mask[same[y[same] == top]] = True
        best_cheaper = max(best_cheaper, top)
    return mask


@dataclass
class Panel:
    """One quality axis: a per-run value for each completed run of the task."""

    title: str  # "at length 12, the longest trained"
    metric: str  # the y label: "token_acc at length 12"
    better: str  # "higher" | "lower"
    values: pd.Series  # run_id -> value


@dataclass
class CostSource:
    """One cost axis: per cell, a mean time, the fastest and slowest seed's, and the peak memory (NaN when unknown)."""

    name: str  # "runs" | "bench"
    label: str  # the x label
    per_cell: pd.DataFrame  # index cell; columns cost, cost_low, cost_high, memory
    note: str = ""


def quality_panels(frame: pd.DataFrame, by_length: pd.DataFrame, summary: TaskSummary) -> list[Panel]:
    """The summary's main metric at the longest trained and the longest evaluated length, or its whole-set metric."""
    task = summary.task
    done = frame[(frame["task"] == task) & (frame["status"] == "completed")]
    first = summary.columns[0]
    better = inference.direction(first.metric) or "higher"
    if first.title == "whole test set":
        values = pd.Series(done[first.metric].to_numpy(float), index=done["run_id"])
        return [Panel("whole test set", first.metric, better, values)]
    data = by_length[(by_length["metric"] == summary.main) & by_length["run_id"].isin(set(done["run_id"]))]
    data = data[np.isfinite(data["value"].to_numpy(float))]
    lengths = sorted(int(n) for n in data["length"].unique())
    if not lengths:
        return []
    trained = [n for n in lengths if summary.train and summary.train[0] <= n <= summary.train[1]]
    chosen = []
    if trained:
        chosen.append((trained[-1], f"at length {trained[-1]}, the longest trained"))
    if not trained or lengths[-1] != trained[-1]:
        chosen.append((lengths[-1], f"at length {lengths[-1]}, the longest evaluated"))
    panels = []
    for length, title in chosen:
        at = data[data["length"] == length]
        panels.append(
            Panel(
                title,
                f"{summary.main} at length {length}",
                better,
                pd.Series(at["value"].to_numpy(float), index=at["run_id"]),
            )
        )
    return panels


def run_costs(frame: pd.DataFrame, task: str) -> CostSource | None:
    """Per cell, the runs' time per training step (mean, min, max over completed seeds) and peak memory.

    None when no completed run of the task records the step time.
    """
    done = frame[(frame["task"] == task) & (frame["status"] == "completed")]
    if (
        STEP_COLUMN not in done.columns
        or not np.isfinite(pd.to_numeric(done[STEP_COLUMN], errors="coerce").to_numpy(float)).any()
    ):
        return None
    rows = {}
    for cell, group in done.groupby("cell", sort=True):
        times = pd.to_numeric(group[STEP_COLUMN], errors="coerce").dropna().to_numpy(float)
        memory = (
            pd.to_numeric(group[MEMORY_COLUMN], errors="coerce").mean() if MEMORY_COLUMN in group.columns else math.nan
        )
        if len(times):
            rows[cell] = {
                "cost": times.mean(),
                "cost_low": times.min(),
                "cost_high": times.max(),
                "memory": float(memory),
            }
    return CostSource(
        "runs",
        "ms per training step (runs; median after warm-up)",
        pd.DataFrame.from_dict(rows, orient="index", columns=COST_FIELDS),
        note=f"marker area ∝ the runs' peak memory ({MEMORY_COLUMN}; on CPU the process's resident maximum)",
    )


def bench_costs(records_by_cell: Mapping[str, Sequence[Mapping]], cells: Sequence[str]) -> CostSource | None:
    """The benchmark's ms and peak MB per cell at the longest T that every one of ``cells`` measured ok."""
    ok: dict[str, dict[int, Mapping]] = {
        c: {int(r["T"]): r for r in records_by_cell.get(c, ()) if r.get("status") == "ok"} for c in cells
    }
    if not cells or any(not found for found in ok.values()):
        return None
    common = set.intersection(*(set(found) for found in ok.values()))
    if not common:
        return None
    T = max(common)
    rows = {
        c: {
            "cost": float(ok[c][T]["ms"]),
            "cost_low": math.nan,
            "cost_high": math.nan,
            "memory": float(ok[c][T]["peak_mb"]) if ok[c][T].get("peak_mb") is not None else math.nan,
        }
        for c in cells
    }
    return CostSource(
        f"bench T={T}",
        f"ms per attention forward + backward at T={T} (--bench)",
        pd.DataFrame.from_dict(rows, orient="index", columns=COST_FIELDS),
        note=f"marker area ∝ the benchmark's peak memory at T={T}",
    )


def frontier_points(grid: Grid, panel: Panel, source: CostSource, run_cells: pd.Series) -> pd.DataFrame:
    """One row per cell of the table with quality and cost (POINT_COLUMNS), ``pareto`` marking the Pareto set.

    ``run_cells`` maps run_id -> cell. Cells without a completed value or a cost are kept
    with NaN and are never in the Pareto set.
    """
    rows = []
    for r in grid.cells.itertuples(index=False):
        runs_here = run_cells.index[run_cells == r.cell]
        mean, half, n = inference.mean_ci(panel.values.reindex(runs_here).dropna().to_numpy(float))
        cost = source.per_cell.loc[r.cell] if r.cell in source.per_cell.index else None
        rows.append(
            {
                "cell": r.cell,
                "label": r.cell_label,
                "row": r.row,
                "column": r.column,
                "n": n,
                "mean": mean,
                "half": half,
                "cost": float(cost["cost"]) if cost is not None else math.nan,
                "cost_low": float(cost["cost_low"]) if cost is not None else math.nan,
                "cost_high": float(cost["cost_high"]) if cost is not None else math.nan,
                "memory": float(cost["memory"]) if cost is not None else math.nan,
            }
        )
    points = pd.DataFrame(rows, columns=POINT_COLUMNS[:-1])
    points["pareto"] = pareto_mask(points["cost"], points["mean"], higher_is_better=panel.better == "higher")
    return points
