"""Ablation report: ``python -m analysis.report SWEEP_DIR [...] --out DIR``.

Reads result files only (result.json, CSV logs, attention_maps.npz, an optional
benchmark JSON) and writes report.md, a self-contained report.html, results.csv
(one row per run), summary.csv, cells.csv, comparisons.csv and confounds.csv (the
numbers behind the tables) and the figures under DIR/figures/ (PNG, PDF and SVG). The report
opens with the summary (analysis.report.summary); the details follow, folded in the HTML. For a
paper (analysis.paper) it also writes DIR/latex/ (a .tex per table and tables.tex),
references.bib and methods.md / methods.tex; ``--figure-width`` sizes the figures for a
one- or two-column layout.

Statistics are per cell (a configuration minus the seed, ``analysis.data.cells``) and
never averaged across cells. The factors are the config keys that vary; two of
them are a table's rows and columns (``--factors`` picks them) and every
combination of the others gets its own table; ``--where KEY=VALUE`` keeps only
matching runs. Differences that are not factors asked for are confounds
(``analysis.data.confounds``): listed in their own section and flagged on every
comparison they touch.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from analysis.claims.render import report_claims
from analysis.claims.scope import load_claims_file
from analysis.command.errors import ReportError, run_cli
from analysis.command.outputs import check_out_dir, writing
from analysis.data.cells import assign_cells
from analysis.data.collect import Runs, collect, learning_curves
from analysis.data.confounds import CONFOUND_COLUMNS, Confounds
from analysis.paper import export
from analysis.report import figures, summary
from analysis.report.attention_section import attention_section
from analysis.report.baseline import DEFAULT_BASELINE, FORMS, Baseline, baseline_cell, parse_baseline, resolve_baseline
from analysis.report.bench_cells import measure_cells
from analysis.report.benchmarks import bench_section, load_bench
from analysis.report.document import Block, Bullets, Document, Paragraph, Section, Table, fold, to_html, to_markdown
from analysis.report.frontier import quality_cost_section
from analysis.report.layout import Grid, apply_where, asked_factors, check_asked, grids, parse_assignments, task_factors
from analysis.report.report_figures import (
    MAX_FIGURES,
    MAX_MAP_FIGURES,
    FigureBudget,
    curve_figure,
    length_figures,
    map_figures,
    parameter_figure,
    safe_name,
)
from analysis.report.sections import (
    ONE_SEED_NOTICE,
    comparisons_block,
    cost_table,
    effects_block,
    failures_table,
    metric_table,
    provenance_section,
    results_frame_for_csv,
    status_table,
)
from analysis.stats import inference
from common.prog import prog_name

__all__ = ["ReportError", "build_report", "main"]

# ---------------------------------------------------------------- choices that can be wrong


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


# ---------------------------------------------------------------- the report


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


def _grid_blocks(
    runs: Runs,
    plan: TaskPlan,
    grid: Grid,
    base: tuple[str | None, str | None],
    metrics: list[str],
    here: set[str],
    baseline: Baseline,
    baseline_present: bool,
    summaries: dict[str, pd.DataFrame],
    curves: pd.DataFrame,
    colors: figures.FigureStyle,
    budget: FigureBudget,
    figures_dir: Path,
    level: int,
) -> list:
    frame = runs.runs
    task = grid.task
    suffix = f" ({grid.title})" if grid.where else ""
    blocks: list = []
    for metric in metrics:
        sub = Section(f"{task} — {metric}{suffix}", level=level)
        if metric not in here:
            blocks.append(sub.add(Paragraph(f"Task {task} reports no {metric} in any completed run.", kind="note")))
            continue
        sub.add(metric_table(frame, grid, metric, summaries[metric]))
        effects = effects_block(frame, grid, metric, summaries[metric])
        if effects:
            sub.add(Section(f"Main effects and interaction — {task}, {metric}{suffix}", effects, level=level + 1))
        if baseline_present:
            compare = comparisons_block(frame, grid, metric, plan.comparisons[metric], base[0], baseline.name, base[1])
        else:
            compare = [
                Paragraph(
                    f"The default baseline {baseline.name} is not in this sweep; pass --baseline {FORMS} to compare.",
                    kind="note",
                )
            ]
        sub.add(Section(f"Comparisons with {baseline.name} — {task}, {metric}{suffix}", compare, level=level + 1))
        figure = parameter_figure(frame, grid, metric, summaries[metric], colors, figures_dir, budget)
        if figure is not None:
            sub.add(figure)
        blocks.append(sub)
    lengths = length_figures(frame, runs.by_length, grid, colors, figures_dir, budget)
    if lengths:
        blocks.append(Section(f"Length generalisation — {task}{suffix}", list[Block](lengths), level=level))
    curve = curve_figure(curves, frame, grid, colors, figures_dir, budget)
    if curve is not None:
        blocks.append(Section(f"Learning curves — {task}{suffix}", [curve], level=level))
    blocks.append(Section(f"Runs per cell{suffix}", [status_table(frame, grid)], level=level))
    cost = cost_table(frame, grid)
    if cost is not None:
        blocks.append(Section(f"Cost — {task}{suffix}", [cost], level=level))
    return blocks


def _task_section(
    runs: Runs,
    plan: TaskPlan,
    metrics: list[str],
    baseline: Baseline,
    baseline_present: bool,
    summaries: dict[str, pd.DataFrame],
    curves: pd.DataFrame,
    colors: figures.FigureStyle,
    budget: FigureBudget,
    map_budget: FigureBudget,
    figures_dir: Path,
    task_summary: summary.TaskSummary | None = None,
) -> Section:
    task = plan.task
    section = Section(f"Details: {task}", [plan.describe()])
    if task_summary is not None and (per_length := summary.per_length_table(runs.runs, runs.by_length, task_summary)):
        section.add(Section(f"Per evaluation length — {task}", [per_length], level=3))
    here = set(task_metrics(runs).get(task, []))
    several = len(plan.grids) > 1
    for grid, base in zip(plan.grids, plan.baselines):
        blocks = _grid_blocks(
            runs,
            plan,
            grid,
            base,
            metrics,
            here,
            baseline,
            baseline_present,
            summaries,
            curves,
            colors,
            budget,
            figures_dir,
            level=4 if several else 3,
        )
        if several:
            section.add(Section(f"Table {grid.title} — {task}", blocks, level=3))
        else:
            section.add(*blocks)
    section.add(*attention_section(runs.runs, task, figures_dir, colors))
    maps = map_figures(runs.runs, task, map_budget, figures_dir, colors)
    if maps:
        section.add(Section(f"Attention maps — {task}", maps, level=3))
    return section


def _confounds_section(plans: list[TaskPlan], asked: Sequence[str] | None) -> tuple[Section, pd.DataFrame]:
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


def _overview(
    runs: Runs,
    metrics: list[str],
    baseline: Baseline,
    baseline_present: bool,
    all_metrics: list[str],
    where: Sequence[str] | None,
) -> Section:
    frame = runs.runs
    status = Counter(frame["status"])
    text = (
        f"{len(frame)} runs ({', '.join(f'{n} {s}' for s, n in sorted(status.items()))}) in "
        f"{frame.groupby('task')['cell'].nunique().sum()} cells over "
        f"{frame['task'].nunique()} task(s): {', '.join(sorted(frame['task'].unique()))}. "
        f"Factors (config keys that vary): {', '.join(runs.factors) or 'none'}. "
        f"Metrics reported: {', '.join(metrics) or 'none (no completed run)'}. "
        f"Baseline for comparisons: {baseline.name}{'' if baseline_present else ' (not in this sweep)'}. "
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
    others = [m for m in all_metrics if m not in metrics]
    if others:
        section.add(
            Paragraph(f"Also found, not reported: {', '.join(others)} (choose metrics with --metrics).", kind="note")
        )
    return section


def _lead(
    doc: Document, runs: Runs, figures_dir: Path, style: figures.FigureStyle | None = None
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
        doc.lead.append(summary.summary_section(ranked, figure))
        found[task] = ranked
    # The claims table (analysis.claims) joins the lead here, after the per-task summaries.
    return found


def _left_out(runs: Runs) -> Section | None:
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


def _prepare_out(out: Path) -> Path:
    figures_dir = out / "figures"
    figures_dir.mkdir(parents=True, exist_ok=True)
    for form in figures.FORMATS:  # figures of an earlier report would be mistaken for new ones
        for stale in figures_dir.glob(f"*.{form}"):
            stale.unlink()
    return figures_dir


def _filtered(runs: Runs, where: Sequence[str] | None) -> Runs:
    """The runs of ``--where``, with the factors found again among them."""
    if not where:
        return runs
    kept = apply_where(runs.runs, where)
    frame, factors = assign_cells(
        kept.drop(columns=[c for c in runs.factors if c in kept.columns and c not in ("attention", "position")])
    )
    lengths = runs.by_length[runs.by_length["run_id"].isin(set(frame["run_id"]))]
    dropped = runs.dropped[runs.dropped["run_id"].isna() | runs.dropped["run_id"].isin(set(frame["run_id"]))]
    return Runs(
        frame.reset_index(drop=True),
        lengths.reset_index(drop=True),
        runs.metrics,
        factors,
        runs.duplicates,
        dropped.reset_index(drop=True),
        runs.unused,
    )


def build_report(
    paths: Sequence[str | Path],
    out: str | Path,
    baseline: str | None = None,
    bench: str | Path | bool | None = None,
    metrics: Sequence[str] | None = None,
    factors: Sequence[str] | None = None,
    where: Sequence[str] | None = None,
    claims: str | Path | None = None,
    figure_width: float | None = None,
    figure_formats: Sequence[str] = figures.FORMATS,
    paper_files: bool = True,
) -> Path:
    """Collect the sweeps under ``paths`` and write the report into ``out``; returns the report.html path.

    ``baseline`` is ``"ATTENTION+POSITION"`` or ``"KEY=VALUE[,KEY=VALUE]"``; None means
    multihead+sinusoidal when that cell exists. ``factors`` names the (at most two)
    factors of the tables; ``where`` is a list of ``KEY=VALUE`` filters. ``claims`` is a
    YAML file of claims tested beside those the runs carry (analysis/claims/). ``bench`` is a
    benchmark JSON file, or True to measure each cell's configuration at long T (analysis/report/bench_cells.py).
    ``figure_width`` draws every figure that many inches wide with paper fonts (3.3: one
    column, 6.9: two); ``figure_formats`` are the figure files written (png always);
    ``paper_files=False`` leaves out latex/, references.bib and methods.*.

    ``out`` is checked first: a file, or a place that cannot be written, is an error before any
    sweep is read; a full disk met while writing is one error naming the path.
    """
    check_out_dir(out)
    with writing(out):
        return _build_report(
            paths, out, baseline, bench, metrics, factors, where, claims, figure_width, figure_formats, paper_files
        )


def _build_report(
    paths: Sequence[str | Path],
    out: str | Path,
    baseline: str | None,
    bench: str | Path | bool | None,
    metrics: Sequence[str] | None,
    factors: Sequence[str] | None,
    where: Sequence[str] | None,
    claims: str | Path | None,
    figure_width: float | None,
    figure_formats: Sequence[str],
    paper_files: bool,
) -> Path:
    if baseline is not None:
        parse_baseline(baseline)  # a malformed option fails before any file is read
    if where:
        parse_assignments(where, "--where")
    if claims is not None:
        load_claims_file(claims)
    figures.FigureStyle({}, width=figure_width, formats=figure_formats)  # a bad option fails before reading
    runs = collect(paths)
    if runs.runs.empty:
        shown = ", ".join(str(p) for p in paths)
        raise ReportError(f"no readable result.json under {shown}; need run folders written by experiments.train")
    claims_block, claim_results = report_claims(runs, claims, paths)  # on every run: a claim is about the sweep
    runs = _filtered(runs, where)
    check_asked(factors, runs.factors)
    chosen = summary.by_importance(choose_metrics(runs, metrics))
    baseline_spec, baseline_present = resolve_baseline(runs.runs, baseline)
    if not isinstance(bench, (str, Path, bool, type(None))):
        raise ReportError(
            f"bench={bench!r} is not allowed; give a benchmark JSON path, True (measure each cell) or None"
        )
    # False and None both mean no benchmark section (False once reached load_bench as a path)
    bench_data = load_bench(bench) if isinstance(bench, (str, Path)) else None

    out = Path(out)
    figures_dir = _prepare_out(out)
    frame = runs.runs
    measured = measure_cells(frame, out) if bench is True else None  # cached in out/, measured once per report
    if measured is not None:
        bench_data = measured.bench
    summaries = {m: inference.cell_summary(frame, m) for m in chosen}
    plans = [
        TaskPlan(frame, task, runs.factors, factors, baseline_spec, chosen) for task in sorted(frame["task"].unique())
    ]
    curves = learning_curves(runs)
    # one colour per variant in every figure of the report, and the figures' width and formats
    colors = figures.report_style([g for p in plans for g in p.grids], figure_width, figure_formats)
    budget, map_budget = FigureBudget(MAX_FIGURES), FigureBudget(MAX_MAP_FIGURES)

    doc = Document(
        "attnlab ablation report",
        subtitle=f"sweeps: {', '.join(sorted(str(s) for s in frame['sweep'].dropna().unique()))}",
    )
    left_out = _left_out(runs)
    if left_out is not None:
        doc.lead.append(left_out)  # first: every number below is over the runs that are left
    task_summaries = _lead(doc, runs, figures_dir, colors)
    if claims_block is not None:
        doc.lead.append(claims_block)  # the hypotheses and their verdicts, right after the per-task answers
    overview = _overview(runs, chosen, baseline_spec, baseline_present, sorted(set(runs.metrics)), where)
    doc.sections.append(overview)
    confounds, confound_table = _confounds_section(plans, factors)
    doc.sections.append(confounds)
    doc.sections.append(
        quality_cost_section(
            frame,
            runs.by_length,
            {p.task: p.grids for p in plans},
            task_summaries,
            colors,
            figures_dir,
            budget,
            measured.by_cell if measured else None,
        )
    )
    for plan in plans:
        doc.sections.append(
            _task_section(
                runs,
                plan,
                chosen,
                baseline_spec,
                baseline_present,
                summaries,
                curves,
                colors,
                budget,
                map_budget,
                figures_dir,
                task_summaries.get(plan.task),
            )
        )
    if budget.skipped:
        overview.add(
            Paragraph(
                f"{budget.skipped} more figures not drawn (cap of {MAX_FIGURES} per "
                "report); narrow the report with --where KEY=VALUE.",
                kind="note",
            )
        )
    failures = failures_table(frame)
    if failures is not None:
        doc.sections.append(Section("Failed and diverged runs", [failures]))
    if bench_data is not None:
        doc.sections.append(bench_section(bench_data, figures_dir, colors))
    from analysis.report.tuned import RECORD, tuned_section

    # a tuned sweep (hparams_search=tuned): its cells at their own best settings against the shared defaults
    for path in paths:
        if (Path(path) / RECORD).is_file():
            doc.sections.append(tuned_section(path, figures_dir))
    doc.sections.append(provenance_section(frame))
    fold(doc.sections[1:])  # everything after the overview opens on demand in the HTML

    (out / "report.md").write_text(to_markdown(doc, out), encoding="utf-8")
    (out / "report.html").write_text(to_html(doc), encoding="utf-8")
    results_frame_for_csv(frame).to_csv(out / "results.csv", index=False)
    cells = pd.concat(list(summaries.values()) or [inference.cell_summary(frame.iloc[0:0], "_")], ignore_index=True)
    extra = [k for k in runs.factors if k in frame.columns and k not in cells.columns]
    if extra:  # each cell's factor values, so cells.csv groups like the tables
        values = frame.drop_duplicates("cell").set_index("cell")[extra]
        cells = cells.join(values, on="cell")
    cells.to_csv(out / "cells.csv", index=False)
    compared = [p.comparisons[m] for p in plans for m in chosen]
    pd.concat(compared or [pd.DataFrame(columns=inference.CELL_COMPARISON_COLUMNS)]).to_csv(
        out / "comparisons.csv", index=False
    )
    confound_table.to_csv(out / "confounds.csv", index=False)
    summary.summaries_frame(list(task_summaries.values())).to_csv(out / "summary.csv", index=False)
    if paper_files:  # latex/, references.bib, methods.md / .tex
        export.export(out, frame, plans, chosen, summaries, task_summaries, claim_results)
    return out / "report.html"


# ---------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog_name("analysis.report"), description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+", metavar="SWEEP_DIR", help="sweep folders, result.json files or globs")
    parser.add_argument("--out", required=True, type=Path, help="folder for the report")
    parser.add_argument(
        "--baseline",
        default=None,
        metavar="ATTENTION+POSITION|KEY=VALUE[,KEY=VALUE]",
        help=f"cell to compare against, by factor values (default {DEFAULT_BASELINE} when present)",
    )
    parser.add_argument(
        "--factors",
        nargs="+",
        default=None,
        metavar="KEY",
        help="one or two factors for the tables' rows and columns (default: attention, position, "
        "then the other varying keys); the others get one table per combination",
    )
    parser.add_argument(
        "--where",
        nargs="+",
        default=None,
        metavar="KEY=VALUE",
        help="keep only runs with these config values, e.g. --where optim.lr=0.001",
    )
    parser.add_argument(
        "--bench",
        default=None,
        type=Path,
        nargs="?",
        const=True,
        metavar="FILE",
        help="benchmark JSON from python -m experiments.bench; without FILE (after the sweep "
        "folders), measure each cell's attention and position at long T (cached in --out)",
    )
    parser.add_argument("--metrics", nargs="+", default=None, help="metrics to report (default: common to all tasks)")
    parser.add_argument(
        "--claims",
        default=None,
        type=Path,
        metavar="FILE",
        help="YAML file of claims, tested beside those the runs carry (see analysis/claims/)",
    )
    parser.add_argument(
        "--figure-width",
        default=None,
        type=float,
        metavar="INCHES",
        help="draw every figure this wide with paper fonts: 3.3 for one column, 6.9 for two "
        "(default: sized for the screen)",
    )
    parser.add_argument(
        "--figure-formats",
        nargs="+",
        default=list(figures.FORMATS),
        metavar="FORMAT",
        help=f"figure files to write, png always (default: {' '.join(figures.FORMATS)})",
    )
    parser.add_argument(
        "--no-paper", action="store_true", help="leave out latex/, references.bib and methods.md / methods.tex"
    )
    parser.add_argument(
        "--wandb",
        action="store_true",
        help="then log the report folder as a W&B artifact (type report, job_type report, group = "
        "the sweep); WANDB_MODE, offline by default; a failure exits 2, the report kept",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    html, code = run_cli(
        lambda: build_report(
            args.paths,
            args.out,
            baseline=args.baseline,
            bench=args.bench,
            metrics=args.metrics,
            factors=args.factors,
            where=args.where,
            claims=args.claims,
            figure_width=args.figure_width,
            figure_formats=args.figure_formats,
            paper_files=not args.no_paper,
        )
    )
    if code == 0:
        print(html)
    if code == 0 and args.wandb:  # after the report is written: a failure to log leaves it in place
        from analysis.report.wandb_artifact import log_report

        where, code = run_cli(lambda: log_report(args.out))
        if code == 0:
            print(f"report logged to W&B: {where}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
