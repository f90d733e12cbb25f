"""A task's details section: per table, each metric's table, effects, comparisons and figures, then the runs per
cell, cost, the attention statistics and maps."""

from __future__ import annotations

from analysis.data.curves import without_curves
from analysis.report.document.model import Block, Paragraph, Section
from analysis.report.figures.report_figures import curve_figure, length_figures, map_figures, parameter_figure
from analysis.report.plan import summary
from analysis.report.plan.baseline import FORMS
from analysis.report.plan.layout import Grid
from analysis.report.plan.task_plan import TaskPlan, task_metrics
from analysis.report.sections.attention_section import attention_section
from analysis.report.sections.context import ReportContext
from analysis.report.sections.registry import SECTIONS
from analysis.report.sections.tables import comparisons_block, cost_table, effects_block, metric_table, status_table


def _metric_section(
    ctx: ReportContext, plan: TaskPlan, grid: Grid, base: tuple[str | None, str | None], metric: str, level: int
) -> Section:
    frame, task, baseline = ctx.frame, grid.task, ctx.baseline
    suffix = f" ({grid.title})" if grid.where else ""
    sub = Section(f"{task} — {metric}{suffix}", level=level)
    sub.add(metric_table(frame, grid, metric, ctx.summaries[metric]))
    effects = effects_block(frame, grid, metric, ctx.summaries[metric])
    if effects:
        sub.add(Section(f"Main effects and interaction — {task}, {metric}{suffix}", effects, level=level + 1))
    if ctx.baseline_present:
        compare = comparisons_block(frame, grid, metric, plan.comparisons[metric], base[0], baseline.name, base[1])
    else:
        compare = [
            Paragraph(
                f"The default baseline {baseline.name} is not in this sweep; pass --baseline {FORMS} to compare.",
                kind="note",
            )
        ]
    sub.add(Section(f"Comparisons with {baseline.name} — {task}, {metric}{suffix}", compare, level=level + 1))
    figure = parameter_figure(frame, grid, metric, ctx.summaries[metric], ctx.style, ctx.figures_dir, ctx.budget)
    if figure is not None:
        sub.add(figure)
    return sub


def _grid_blocks(
    ctx: ReportContext, plan: TaskPlan, grid: Grid, base: tuple[str | None, str | None], here: set[str], level: int
) -> list:
    frame, task = ctx.frame, grid.task
    suffix = f" ({grid.title})" if grid.where else ""
    blocks: list = []
    for metric in ctx.metrics:
        if metric not in here:
            note = Paragraph(f"Task {task} reports no {metric} in any completed run.", kind="note")
            blocks.append(Section(f"{task} — {metric}{suffix}", level=level).add(note))
            continue
        blocks.append(_metric_section(ctx, plan, grid, base, metric, level))
    lengths = length_figures(frame, ctx.runs.by_length, grid, ctx.style, ctx.figures_dir, ctx.budget)
    if lengths:
        blocks.append(Section(f"Length generalisation — {task}{suffix}", list[Block](lengths), level=level))
    curve = curve_figure(ctx.curves, frame, grid, ctx.style, ctx.figures_dir, ctx.budget)
    missing = without_curves(ctx.curves, frame[frame["task"] == task])
    if curve is not None or missing:
        note = Paragraph(
            f"No learning curve for {len(missing)} completed run(s): no csv/metrics.csv in "
            f"{', '.join(missing[:5])}{' …' if len(missing) > 5 else ''}.",
            kind="note",
        )
        shown: list[Block] = [curve] if curve is not None else []
        blocks.append(Section(f"Learning curves — {task}{suffix}", [*shown, *([note] if missing else [])], level=level))
    blocks.append(Section(f"Runs per cell{suffix}", [status_table(frame, grid)], level=level))
    cost = cost_table(frame, grid)
    if cost is not None:
        blocks.append(Section(f"Cost — {task}{suffix}", [cost], level=level))
    return blocks


@SECTIONS.register("task details", order=40, inputs=("ctx", "task_summaries"))
def task_sections(ctx: ReportContext, task_summaries: dict[str, summary.TaskSummary]) -> list[Section]:
    """One folded "Details" section per task."""
    return [task_section(ctx, plan, task_summaries.get(plan.task)) for plan in ctx.plans]


def task_section(ctx: ReportContext, plan: TaskPlan, task_summary: summary.TaskSummary | None = None) -> Section:
    """The folded details of one task: its tables (one sub-section each when there are several), then attention."""
    runs, task = ctx.runs, plan.task
    section = Section(f"Details: {task}", [plan.describe()])
    if task_summary is not None and (per_length := summary.per_length_table(runs.runs, runs.by_length, task_summary)):
        section.add(Section(f"Per evaluation length — {task}", [per_length], level=3))
    here = set(task_metrics(runs).get(task, []))
    several = len(plan.grids) > 1
    for grid, base in zip(plan.grids, plan.baselines):
        blocks = _grid_blocks(ctx, plan, grid, base, here, level=4 if several else 3)
        if several:
            section.add(Section(f"Table {grid.title} — {task}", blocks, level=3))
        else:
            section.add(*blocks)
    section.add(*attention_section(runs.runs, task, ctx.figures_dir, ctx.style))
    maps = map_figures(runs.runs, task, ctx.map_budget, ctx.figures_dir, ctx.style)
    if maps:
        section.add(Section(f"Attention maps — {task}", maps, level=3))
    return section
