"""Quality against cost: one point per cell, the Pareto set marked, in the manner of the Long Range Arena's chart.

Per task and per table of the report (a cell is one configuration, never a pool):

- **Quality** is the summary's main metric (analysis.report.summary): with per-length results,
  the metric at the longest evaluation length inside the training range and at the
  longest evaluation length overall (two panels; one when they coincide); without
  them, the whole-test-set metric the summary ranks by. Mean over the completed seeds
  of the cell, bars the 95% t-interval.
- **Cost** is the time of one training step the runs measured (``cost.step_ms``: the
  median step after warm-up, ``experiments.training.callbacks.StepTimer``), mean over seeds with
  bars from the fastest to the slowest seed (a timing is a measurement on a possibly
  busy machine, not a sample whose t-interval means much at 2 or 3 seeds); marker area
  is proportional to the runs' peak memory
  (``cost.peak_memory_mb``) when they report it. With ``--bench`` a second row uses
  the benchmark's time of one attention layer's forward + backward at the longest T
  every cell of the table reached (``analysis.report.bench_cells``), marker area its peak memory.
- **The Pareto set**: the cells no other cell beats on both axes (as fast or faster and
  as good or better, one of them strictly), computed on the means; joined by a step
  line, ringed in black and named. The direction of quality comes from the metric's
  name (a loss or bpc: lower is better).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure
from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

from analysis.report import figure_canvas, figure_style
from analysis.report.document import Cell, Figure, Paragraph, Section, Table, fmt
from analysis.report.layout import Grid
from analysis.report.report_figures import FigureBudget, roles, safe_name
from analysis.report.summary import TaskSummary
from analysis.stats import inference

STEP_COLUMN = "cost.step_ms"
MEMORY_COLUMN = "cost.peak_memory_mb"
COST_FIELDS = ["cost", "cost_low", "cost_high", "memory"]
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
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
MAX_AREA, MIN_AREA = 300.0, 14.0  # pt²: the largest memory's marker, and a floor that keeps small ones visible


# ---------------------------------------------------------------- the Pareto set (pure)


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


# ---------------------------------------------------------------- what the axes hold


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


# ---------------------------------------------------------------- drawing


def _top(memory: pd.Series) -> float:
    values = memory.to_numpy(float)
    return float(np.nanmax(values)) if np.isfinite(values).any() and np.nanmax(values) > 0 else math.nan


def _sizes(memory: pd.Series) -> np.ndarray:
    """Marker areas in pt² proportional to memory (the largest MAX_AREA, none below MIN_AREA); 50 when unknown."""
    values, top = memory.to_numpy(float), _top(memory)
    if not math.isfinite(top):
        return np.full(len(values), 50.0)
    return np.where(np.isfinite(values), np.maximum(MAX_AREA * values / top, MIN_AREA), 50.0)


def draw_frontier(
    layout: Sequence[Sequence[tuple[Panel, CostSource, pd.DataFrame]]],
    colors: Mapping[str, tuple],
    markers: Mapping[str, str],
    title: str,
    legend: tuple[str, str],
    path: Path,
    style: "figure_style.FigureStyle | None" = None,
) -> Path:
    """A grid of axes (a row per cost source, a column per quality panel); each point a cell with x and y bars.

    ``style``: the report's figure style, for its paper width and file formats.
    """
    from matplotlib.lines import Line2D

    rows, columns = len(layout), max(len(r) for r in layout)
    style = figure_style.style_of(style)
    fig = MplFigure(
        figsize=style.size((4.6 * columns + 2.2, 3.8 * rows + 0.6)), dpi=figure_canvas.DPI, layout="constrained"
    )
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, columns, squeeze=False)
    for i, row in enumerate(layout):
        for j in range(columns):
            ax = axes[i][j]
            if j >= len(row):
                ax.set_visible(False)
                continue
            panel, source, points = row[j]
            shown = points[np.isfinite(points["mean"]) & np.isfinite(points["cost"])]
            sizes = _sizes(shown["memory"])
            for (_, p), size in zip(shown.iterrows(), sizes):
                color = colors.get(p["column"] or p["row"], "C0")
                spread = (
                    None if math.isnan(p["cost_low"]) else [[p["cost"] - p["cost_low"]], [p["cost_high"] - p["cost"]]]
                )
                ax.errorbar(
                    p["cost"],
                    p["mean"],
                    yerr=None if math.isnan(p["half"]) else p["half"],
                    xerr=spread,
                    fmt="none",
                    ecolor=color,
                    elinewidth=0.9,
                    capsize=2,
                    alpha=0.7,
                    zorder=2,
                )
                ax.scatter(
                    [p["cost"]],
                    [p["mean"]],
                    s=size,
                    marker=markers.get(p["row"], "o"),
                    color=color,
                    alpha=0.8,
                    edgecolors="black" if p["pareto"] else "none",
                    linewidths=1.4,
                    zorder=3,
                )
            front = shown[shown["pareto"]].sort_values(["cost", "mean"], ascending=[True, panel.better == "lower"])
            if len(front):
                # The attainable boundary: for a cost between two Pareto cells, the cheaper one's quality.
                ax.step(front["cost"], front["mean"], where="post", color="black", lw=1.1, alpha=0.8, zorder=1)
                for p in front.itertuples(index=False):
                    name = f"{p.row}, {p.column}" if p.column else p.row  # the table's levels: short
                    ax.annotate(name, (p.cost, p.mean), xytext=(5, 4), textcoords="offset points", fontsize=7)
            costs = shown["cost"].to_numpy(float)
            if len(costs) and costs.min() > 0 and costs.max() / costs.min() > 8:
                ax.set_xscale("log")
                ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
                ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
                ax.xaxis.set_minor_formatter(NullFormatter())  # 2×10¹ 3×10¹ ... would overlap
            top = _top(shown["memory"])
            if math.isfinite(top):  # what the largest marker means, in this axes' own scale
                ax.text(
                    0.99,
                    0.01,
                    f"largest marker: {fmt(top)} MB",
                    transform=ax.transAxes,
                    ha="right",
                    va="bottom",
                    fontsize=7,
                    color="0.35",
                )
            ax.set_xlabel(source.label, fontsize=8)
            ax.set_ylabel(f"{panel.metric} ({panel.better} is better)", fontsize=8)
            ax.set_title(panel.title, fontsize=9)
            ax.grid(alpha=0.3)
    handles = [Line2D([], [], color=colors[n], marker="o", lw=0, label=n) for n in colors]
    handles += [Line2D([], [], color="0.3", marker=m, lw=0, label=n) for n, m in markers.items() if len(markers) > 1]
    handles.append(Line2D([], [], color="black", lw=1.1, label="Pareto set"))
    fig.legend(
        handles=handles,
        loc="outside right upper",
        fontsize=8,
        title=" / ".join(n for n in legend if n),
        title_fontsize=8,
    )
    fig.suptitle(title, fontsize=11)
    return figure_canvas.save(fig, path, style)


# ---------------------------------------------------------------- the report section


def _quality_text(p) -> str:
    spread = f" ± {fmt(p.half)}" if p.n > 1 and math.isfinite(p.half) else ""
    return f"{fmt(p.mean)}{spread} (n={p.n})"


def pareto_table(blocks: Sequence[tuple[Panel, CostSource, pd.DataFrame]], caption: str) -> Table:
    """The Pareto cells of each (cost source, panel), cheapest first."""
    rows = []
    for panel, source, points in blocks:
        front = points[points["pareto"]].sort_values(["cost", "label"])
        for p in front.itertuples(index=False):
            cost = fmt(p.cost) + (f" [{fmt(p.cost_low)}–{fmt(p.cost_high)}]" if math.isfinite(p.cost_low) else "")
            rows.append(
                [
                    source.name,
                    panel.metric,
                    p.label,
                    Cell(_quality_text(p)),
                    Cell(cost),
                    Cell(fmt(p.memory) if math.isfinite(p.memory) else "—"),
                ]
            )
    return Table(["cost from", "quality", "cell", "quality mean ± CI (n)", "ms", "peak MB"], rows, caption=caption)


def _title(grid: Grid) -> str:
    return f"{grid.task}" + (f" ({grid.title})" if grid.where else "")


def quality_cost_section(
    frame: pd.DataFrame,
    by_length: pd.DataFrame,
    task_grids: Mapping[str, Sequence[Grid]],
    summaries: Mapping[str, TaskSummary],
    colors: Mapping[str, tuple],
    figures_dir: Path,
    budget: FigureBudget,
    bench_by_cell: Mapping[str, Sequence[Mapping]] | None = None,
) -> Section:
    """ "Quality and cost": per task and table, the frontier figure and the table of Pareto cells."""
    section = Section(
        "Quality and cost",
        [
            Paragraph(
                "Each point is one cell: its quality (the summary's main metric, mean over seeds, bars 95% CI) "
                "against the time of one training step (each run's median step after warm-up, mean over seeds, "
                "bars from the fastest to the slowest seed) and, with --bench, against one attention layer's time "
                "at long T; marker area ∝ peak memory. The black step line joins the Pareto set: cells that no "
                "other cell beats on both time and quality."
            )
        ],
    )
    run_cells = frame.set_index("run_id")["cell"]
    for task, grids in task_grids.items():
        summary = summaries.get(task)
        if summary is None:
            continue
        panels = quality_panels(frame, by_length, summary)
        sources = []
        runs_cost = run_costs(frame, task)
        if runs_cost is None:
            text = (
                f"{task}: no completed run records {STEP_COLUMN} (time per training step), so the quality–cost "
                "figure has no run timings; runs trained with this version record it"
            )
            warnings.warn(text, stacklevel=2)
            section.add(Paragraph(text + ".", kind="note"))
        else:
            sources.append(runs_cost)
        for grid in grids:
            grid_sources = list(sources)
            if bench_by_cell is not None:
                measured = bench_costs(bench_by_cell, list(grid.cells["cell"]))
                if measured is None:
                    section.add(
                        Paragraph(
                            f"{_title(grid)}: the benchmark has no length that every cell reached; no benchmark row.",
                            kind="note",
                        )
                    )
                else:
                    grid_sources.append(measured)
            if not panels or not grid_sources:
                continue
            layout = [
                [(panel, source, frontier_points(grid, panel, source, run_cells)) for panel in panels]
                for source in grid_sources
            ]
            block = Section(f"Quality and cost — {_title(grid)}", level=3)
            if budget.take():
                panel_axis, line_axis, panel_levels, line_levels = roles(grid)
                markers = {level: MARKERS[i % len(MARKERS)] for i, level in enumerate(panel_levels)}
                used = {lv: colors.get(lv, "C0") for lv in line_levels}
                path = draw_frontier(
                    layout,
                    used,
                    markers,
                    f"{_title(grid)}: quality against cost",
                    (line_axis, panel_axis) if len(markers) > 1 else (line_axis, ""),
                    figures_dir / safe_name("frontier", grid.task, grid.title),
                    style=figure_style.style_of(colors),
                )
                notes = "; ".join(
                    f"row {i + 1} ({s.name}): {s.note}" if len(grid_sources) > 1 else s.note
                    for i, s in enumerate(grid_sources)
                )
                block.add(
                    Figure(
                        path,
                        f"{_title(grid)}: {summary.main} against cost, one point per cell (colour: "
                        f"{line_axis}"
                        + (f", marker: {panel_axis}" if len(markers) > 1 else "")
                        + f"); {notes}; black rings and the step line: the Pareto set",
                    )
                )
            block.add(
                pareto_table(
                    [b for row in layout for b in row],
                    f"{_title(grid)}: the Pareto cells, cheapest first (quality: mean ± 95% CI over "
                    "seeds; ms: for runs the mean time per training step over seeds [fastest–slowest "
                    "seed], for the bench one measurement of one attention layer at T)",
                )
            )
            section.add(block)
    return section
