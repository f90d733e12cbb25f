"""Quality against cost: one point per cell, the Pareto set marked, in the manner of the Long Range Arena's chart.

Per task and per table of the report (a cell is one configuration, never a pool), the
"Quality and cost" section holds the figure (``analysis.report.figures.frontier_figure``) and
the table of Pareto cells; what the chart holds is computed in
``analysis.report.plan.frontier_data``:

- **Quality** is the summary's main metric (analysis.report.plan.summary): with per-length results,
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
  every cell of the table reached (``analysis.report.plan.bench_cells``), marker area its peak memory.
- **The Pareto set**: the cells no other cell beats on both axes (as fast or faster and
  as good or better, one of them strictly), computed on the means; joined by a step
  line, ringed in black and named. The direction of quality comes from the metric's
  name (a loss or bpc: lower is better).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

import pandas as pd

from analysis.report.document.model import Cell, Figure, Paragraph, Section, Table, fmt
from analysis.report.figures import figure_style
from analysis.report.figures.frontier_figure import MARKERS, draw_frontier
from analysis.report.figures.report_figures import FigureBudget, roles, safe_name
from analysis.report.plan.frontier_data import (
    STEP_COLUMN,
    CostSource,
    Panel,
    bench_costs,
    frontier_points,
    quality_panels,
    run_costs,
)
from analysis.report.plan.layout import Grid
from analysis.report.plan.summary import TaskSummary
from analysis.report.sections.registry import SECTIONS

if TYPE_CHECKING:
    from analysis.data.runs import Runs
    from analysis.report.plan.bench_cells import CellBench
    from analysis.report.plan.task_plan import TaskPlan

INTRO = (
    "Each point is one cell: its quality (the summary's main metric, mean over seeds, bars 95% CI) "
    "against the time of one training step (each run's median step after warm-up, mean over seeds, "
    "bars from the fastest to the slowest seed) and, with --bench, against one attention layer's time "
    "at long T; marker area ∝ peak memory. The black step line joins the Pareto set: cells that no "
    "other cell beats on both time and quality."
)
# one (quality panel, cost source, points) per axes, a row per cost source
Layout = list[list[tuple[Panel, CostSource, pd.DataFrame]]]


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
    section = Section("Quality and cost", [Paragraph(INTRO)])
    run_cells = frame.set_index("run_id")["cell"]
    for task, grids in task_grids.items():
        summary = summaries.get(task)
        if summary is None:
            continue
        panels = quality_panels(frame, by_length, summary)
        sources = _run_sources(frame, task, section)
        for grid in grids:
            grid_sources = sources + _bench_sources(grid, bench_by_cell, section)
            if not panels or not grid_sources:
                continue
            layout = [
                [(panel, source, frontier_points(grid, panel, source, run_cells)) for panel in panels]
                for source in grid_sources
            ]
            section.add(_grid_block(grid, summary, layout, colors, figures_dir, budget))
    return section


@SECTIONS.register(
    "quality and cost",
    order=30,
    inputs=("frame", "runs", "plans", "task_summaries", "style", "figures_dir", "budget", "measured"),
)
def quality_and_cost(
    frame: pd.DataFrame,
    runs: Runs,
    plans: Sequence[TaskPlan],
    task_summaries: Mapping[str, TaskSummary],
    style: figure_style.FigureStyle,
    figures_dir: Path,
    budget: FigureBudget,
    measured: CellBench | None,
) -> Section:
    """The report's "Quality and cost" section, over every task's tables."""
    grids = {p.task: p.grids for p in plans}
    by_cell = measured.by_cell if measured else None
    return quality_cost_section(frame, runs.by_length, grids, task_summaries, style, figures_dir, budget, by_cell)


def _run_sources(frame: pd.DataFrame, task: str, section: Section) -> list[CostSource]:
    """The runs' own timings as a cost source, or a note (and a warning) that no run of the task records them."""
    runs_cost = run_costs(frame, task)
    if runs_cost is not None:
        return [runs_cost]
    text = (
        f"{task}: no completed run records {STEP_COLUMN} (time per training step), so the quality–cost "
        "figure has no run timings; runs trained with this version record it"
    )
    warnings.warn(text, stacklevel=3)  # at the report's call of quality_cost_section
    section.add(Paragraph(text + ".", kind="note"))
    return []


def _bench_sources(
    grid: Grid, bench_by_cell: Mapping[str, Sequence[Mapping]] | None, section: Section
) -> list[CostSource]:
    """With --bench, the benchmark as a cost source of this table, or a note that no length was reached by all."""
    if bench_by_cell is None:
        return []
    measured = bench_costs(bench_by_cell, list(grid.cells["cell"]))
    if measured is not None:
        return [measured]
    section.add(
        Paragraph(
            f"{_title(grid)}: the benchmark has no length that every cell reached; no benchmark row.",
            kind="note",
        )
    )
    return []


def _grid_block(
    grid: Grid,
    summary: TaskSummary,
    layout: Layout,
    colors: Mapping[str, tuple],
    figures_dir: Path,
    budget: FigureBudget,
) -> Section:
    """One table's block: the frontier figure (while the report's figure budget lasts) and the Pareto cells."""
    block = Section(f"Quality and cost — {_title(grid)}", level=3)
    if budget.take():
        block.add(_frontier_figure(grid, summary, layout, colors, figures_dir))
    block.add(
        pareto_table(
            [b for row in layout for b in row],
            f"{_title(grid)}: the Pareto cells, cheapest first (quality: mean ± 95% CI over "
            "seeds; ms: for runs the mean time per training step over seeds [fastest–slowest "
            "seed], for the bench one measurement of one attention layer at T)",
        )
    )
    return block


def _frontier_figure(
    grid: Grid, summary: TaskSummary, layout: Layout, colors: Mapping[str, tuple], figures_dir: Path
) -> Figure:
    """The frontier figure of one table, a colour per line level and a marker per panel level, with its caption."""
    sources = [row[0][1] for row in layout]
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
        f"row {i + 1} ({s.name}): {s.note}" if len(sources) > 1 else s.note for i, s in enumerate(sources)
    )
    return Figure(
        path,
        f"{_title(grid)}: {summary.main} against cost, one point per cell (colour: "
        f"{line_axis}"
        + (f", marker: {panel_axis}" if len(markers) > 1 else "")
        + f"); {notes}; black rings and the step line: the Pareto set",
    )
