"""Ablation report: ``python -m analysis.report SWEEP_DIR [...] --out DIR``.

Reads result files only (result.json, CSV logs, attention_maps.npz, an optional
benchmark JSON) and writes report.md, a self-contained report.html, results.csv
(one row per run), summary.csv, cells.csv, comparisons.csv and confounds.csv (the
numbers behind the tables) and the figures under DIR/figures/ (PNG, PDF and SVG). The report
opens with the summary (analysis.report.plan.summary); the details follow, folded in the HTML. For a
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
from pathlib import Path
from typing import Sequence

import pandas as pd

from analysis.claims.render import report_claims
from analysis.command.errors import ReportError, run_cli
from analysis.command.outputs import check_out_dir, writing
from analysis.data.collect import collect
from analysis.data.curves import learning_curves
from analysis.data.runs import Runs
from analysis.report.document.model import Document, Paragraph, Section, fold
from analysis.report.exports import write_report
from analysis.report.figures.figure_style import FORMATS, report_style
from analysis.report.figures.report_figures import MAX_FIGURES, MAX_MAP_FIGURES, FigureBudget
from analysis.report.front.lead import lead, left_out
from analysis.report.inputs import check_options, filtered, prepare_out, read_bench
from analysis.report.plan import summary
from analysis.report.plan.baseline import DEFAULT_BASELINE, Baseline, resolve_baseline
from analysis.report.plan.bench_cells import measure_cells
from analysis.report.plan.layout import check_asked
from analysis.report.plan.task_plan import TaskPlan, choose_metrics
from analysis.report.sections.confounds import confounds_section
from analysis.report.sections.context import ReportContext
from analysis.report.sections.registry import SectionInputs, build_sections
from analysis.report.sections.tuned import RECORD as TUNED_RECORD
from analysis.report.sections.tuned import lead_section as tuned_lead
from analysis.stats import inference
from attnlab.prog import prog_name

__all__ = ["ReportError", "build_report", "main"]


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
    figure_formats: Sequence[str] = FORMATS,
    paper_files: bool = True,
) -> Path:
    """Collect the sweeps under ``paths`` and write the report into ``out``; returns the report.html path.

    ``baseline`` is ``"ATTENTION+POSITION"`` or ``"KEY=VALUE[,KEY=VALUE]"``; None means
    multihead+sinusoidal when that cell exists. ``factors`` names the (at most two)
    factors of the tables; ``where`` is a list of ``KEY=VALUE`` filters. ``claims`` is a
    YAML file of claims tested beside those the runs carry (analysis/claims/). ``bench`` is a
    benchmark JSON file, or True to measure each cell's configuration at long T (analysis/report/plan/bench_cells.py).
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


def _context(
    runs: Runs,
    paths: Sequence[str | Path],
    out: Path,
    metrics: list[str],
    factors: Sequence[str] | None,
    where: Sequence[str] | None,
    baseline: tuple[Baseline, bool],
    figure_style: dict,
) -> ReportContext:
    """Everything the sections share, computed once; clears the figures of an earlier report in ``out``."""
    frame = runs.runs
    baseline_spec, baseline_present = baseline
    plans = [
        TaskPlan(frame, task, runs.factors, factors, baseline_spec, metrics) for task in sorted(frame["task"].unique())
    ]
    return ReportContext(
        runs=runs,
        paths=paths,
        out=out,
        figures_dir=prepare_out(out),
        metrics=metrics,
        all_metrics=sorted(set(runs.metrics)),
        factors=factors,
        where=where,
        baseline=baseline_spec,
        baseline_present=baseline_present,
        plans=plans,
        summaries={m: inference.cell_summary(frame, m) for m in metrics},
        curves=learning_curves(runs),
        # one colour per variant in every figure of the report, and the figures' width and formats
        style=report_style([g for p in plans for g in p.grids], **figure_style),
        budget=FigureBudget(MAX_FIGURES),
        map_budget=FigureBudget(MAX_MAP_FIGURES),
    )


def _lead_blocks(ctx: ReportContext, doc: Document, claims_block: Section | None) -> dict[str, summary.TaskSummary]:
    """The first screen: what is left out, the per-task summaries, the claims and a tuned sweep's answer."""
    left = left_out(ctx.runs)
    if left is not None:
        doc.lead.append(left)  # first: every number below is over the runs that are left
    task_summaries = lead(doc, ctx.runs, ctx.figures_dir, ctx.style)
    if claims_block is not None:
        doc.lead.append(claims_block)  # the hypotheses and their verdicts, right after the per-task answers
    for path in ctx.paths:  # a tuned sweep's answer: does tuning each cell change the ranking?
        if (Path(path) / TUNED_RECORD).is_file():
            doc.lead.append(tuned_lead(path))
    return task_summaries


def _sections(ctx: ReportContext, doc: Document, task_summaries: dict, measured, bench_data) -> pd.DataFrame:
    """The registered sections after the lead, in reading order (analysis/report/sections/registry.py); returns
    the confounds table for confounds.csv."""
    built = build_sections(SectionInputs(ctx, task_summaries, measured, bench_data))
    if ctx.budget.skipped:
        built["overview"][0].add(
            Paragraph(
                f"{ctx.budget.skipped} more figures not drawn (cap of {MAX_FIGURES} per "
                "report); narrow the report with --where KEY=VALUE.",
                kind="note",
            )
        )
    doc.sections.extend(section for sections in built.values() for section in sections)
    fold(doc.sections[1:])  # everything after the overview opens on demand in the HTML
    return confounds_section(ctx.plans, ctx.factors)[1]


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
    figure_style = {"width": figure_width, "formats": figure_formats}
    check_options(baseline, where, claims, figure_style)
    runs = collect(paths)
    if runs.runs.empty:
        shown = ", ".join(str(p) for p in paths)
        raise ReportError(f"no readable result.json under {shown}; need run folders written by experiments.train")
    claims_block, claim_results = report_claims(runs, claims, paths)  # on every run: a claim is about the sweep
    runs = filtered(runs, where)
    check_asked(factors, runs.factors)
    chosen = summary.by_importance(choose_metrics(runs, metrics))
    resolved = resolve_baseline(runs.runs, baseline)  # (the baseline, whether it is in the sweep)
    bench_data = read_bench(bench)
    ctx = _context(runs, paths, Path(out), chosen, factors, where, resolved, figure_style)
    measured = measure_cells(ctx.frame, ctx.out) if bench is True else None  # cached in out/, measured once
    if measured is not None:
        bench_data = measured.bench
    doc = Document(
        "attnlab ablation report",
        subtitle=f"sweeps: {', '.join(sorted(str(s) for s in ctx.frame['sweep'].dropna().unique()))}",
    )
    task_summaries = _lead_blocks(ctx, doc, claims_block)
    confound_table = _sections(ctx, doc, task_summaries, measured, bench_data)
    write_report(ctx, doc, confound_table, task_summaries, claim_results, paper_files)
    return ctx.out / "report.html"


# ---------------------------------------------------------------- command line


def _add_cells(parser: argparse.ArgumentParser) -> None:
    """Which runs, and how they are laid out: the baseline cell, the tables' factors, the runs kept."""
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


def _add_contents(parser: argparse.ArgumentParser) -> None:
    """What the report holds beside the runs: a benchmark, the metrics, claims."""
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


def _add_files(parser: argparse.ArgumentParser) -> None:
    """The files written: figure size and formats, the paper files, a W&B artifact."""
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
        default=list(FORMATS),
        metavar="FORMAT",
        help=f"figure files to write, png always (default: {' '.join(FORMATS)})",
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog_name("analysis.report"), description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+", metavar="SWEEP_DIR", help="sweep folders, result.json files or globs")
    parser.add_argument("--out", required=True, type=Path, help="folder for the report")
    # in this order in --help: the cells, what else the report holds, the files it writes
    _add_cells(parser)
    _add_contents(parser)
    _add_files(parser)
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
