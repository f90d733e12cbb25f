"""Ablation report: ``python -m analysis.report SWEEP_DIR [...] --out DIR``.

Reads result files only (result.json, CSV logs, attention_maps.npz, an optional
benchmark JSON) and writes report.md, a self-contained report.html, results.csv
(one row per run), cells.csv and comparisons.csv (the numbers behind the tables)
and the figures under DIR/figures/.
"""
from __future__ import annotations

import argparse
import hashlib
import re
import sys
import warnings
from collections import Counter
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from analysis import figures, stats
from analysis.attention_section import attention_section
from analysis.benchmarks import bench_section, load_bench
from analysis.collect import Runs, collect, learning_curves
from analysis.document import Document, Figure, Paragraph, Section, to_html, to_markdown
from analysis.errors import AnalysisError, ReportError
from analysis.sections import (ONE_SEED_NOTICE, Grid, comparisons_block, cost_table, effects_block, failures_table,
                               metric_table, provenance_section, results_frame_for_csv, status_table, variant)

__all__ = ["ReportError", "build_report", "main"]

DEFAULT_BASELINE = ("multihead", "sinusoidal")
MAPS_FILE = "attention_maps.npz"
MAX_MAP_FIGURES = 12
BLOCK_ORDER = ("encoder_self", "encoder", "decoder_self", "decoder", "cross")
CURVE_METRICS = ("val/loss", "train/loss")


# ---------------------------------------------------------------- choices that can be wrong

def parse_baseline(text: str) -> tuple[str, str]:
    parts = text.split("+")
    if len(parts) != 2 or not all(parts):
        raise ReportError(f"--baseline={text!r} must be ATTENTION+POSITION, e.g. multihead+sinusoidal")
    return parts[0], parts[1]


def _cells_found(runs: pd.DataFrame) -> str:
    cells = sorted({variant(a, p) for a, p in zip(runs["attention"], runs["position"])})
    return ", ".join(cells)


def resolve_baseline(runs: pd.DataFrame, baseline: str | None) -> tuple[tuple[str, str], bool]:
    """The baseline cell and whether it is in the sweep; a baseline asked for by name must exist."""
    cell = DEFAULT_BASELINE if baseline is None else parse_baseline(baseline)
    present = bool(((runs["attention"] == cell[0]) & (runs["position"] == cell[1])).any())
    if baseline is not None and not present:
        raise ReportError(f"--baseline={baseline!r}: no run has attention={cell[0]!r}, position={cell[1]!r}; "
                          f"cells found: {_cells_found(runs)}")
    return cell, present


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
            raise ReportError(f"--metrics {' '.join(unknown)}: not found in the results; metrics found: "
                              f"{', '.join(everything) or 'none'}")
        return list(dict.fromkeys(requested))
    with_values = {t: ms for t, ms in per_task.items() if ms}
    if not with_values:
        return []  # every run failed: the report shows the status grid and the errors
    common = sorted(set.intersection(*(set(ms) for ms in with_values.values())))
    if not common:
        found = "; ".join(f"{t}: {', '.join(ms)}" for t, ms in with_values.items())
        raise ReportError(f"no metric is common to all tasks ({found}); pass --metrics to choose which to report")
    return common


# ---------------------------------------------------------------- figures

def _safe_name(*parts: str) -> str:
    """A file name from run-supplied strings: readable where possible, unique by hash, never a path."""
    text = "_".join(parts)
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")[:60] or "figure"
    return f"{readable}-{hashlib.sha1(text.encode()).hexdigest()[:8]}.png"


def _train_range(task_runs: pd.DataFrame) -> tuple[int, int] | None:
    ranges = [tuple(r) for r in task_runs["train_lengths"] if isinstance(r, (list, tuple)) and len(r) == 2]
    return Counter(ranges).most_common(1)[0][0] if ranges else None


def length_figures(runs: Runs, task: str, colors: dict, figures_dir: Path) -> list[Figure]:
    done_ids = set(runs.runs.loc[(runs.runs["task"] == task) & (runs.runs["status"] == "completed"), "run_id"])
    data = runs.by_length[runs.by_length["run_id"].isin(done_ids)]
    data = data[np.isfinite(data["value"].to_numpy(float))]
    train = _train_range(runs.runs[runs.runs["task"] == task])
    shaded = f"shaded: training lengths {train[0]}–{train[1]}; " if train else ""
    out = []
    for metric, group in data.groupby("metric", sort=True):
        path = figures.length_generalisation(group, metric, train, colors, f"{task}: {metric} vs length",
                                             figures_dir / _safe_name("length", task, metric))
        out.append(Figure(path, f"{task}: {metric} vs evaluation length; a panel per attention type, a line per "
                                f"position encoding; {shaded}bands: 95% CI over seeds"))
    return out


def curve_figure(curves: pd.DataFrame, runs: pd.DataFrame, task: str, colors: dict,
                 figures_dir: Path) -> Figure | None:
    done_ids = set(runs.loc[(runs["task"] == task) & (runs["status"] == "completed"), "run_id"])
    task_curves = curves[curves["run_id"].isin(done_ids)]
    for metric in CURVE_METRICS:
        data = task_curves[task_curves["metric"] == metric]
        if not data.empty:
            path = figures.learning_curves(data, metric, colors, f"{task}: {metric} vs step",
                                           figures_dir / _safe_name("curves", task, metric))
            return Figure(path, f"{task}: {metric} vs step for completed runs; bold: mean over seeds, "
                                "faint: each seed; a colour per position encoding")
    return None


def _load_maps(path: Path) -> tuple[dict[str, np.ndarray], dict[str, list[str]]] | None:
    """Arrays keyed ``block/layer`` (H, Tq, Tk) and optional token labels; pickles are refused."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            maps = {k: np.asarray(npz[k], dtype=float) for k in npz.files if "/" in k and npz[k].ndim == 3}
            tokens = {k: [str(t) for t in npz[k]] for k in ("src_tokens", "tgt_tokens") if k in npz.files}
    except (OSError, ValueError) as err:
        warnings.warn(f"{path}: skipped, not a readable attention map file ({err})", stacklevel=2)
        return None

    def order(key: str) -> tuple:
        # Encoder first, then decoder, then cross attention; layers in numeric order.
        block, _, layer = key.partition("/")
        rank = BLOCK_ORDER.index(block) if block in BLOCK_ORDER else len(BLOCK_ORDER)
        return (rank, block, int(layer) if layer.isdigit() else 0, layer)

    return {k: maps[k] for k in sorted(maps, key=order)}, tokens


def map_figures(runs: pd.DataFrame, task: str, budget: list[int], figures_dir: Path) -> list:
    """Heatmaps of the first seed of each variant that saved maps, while the report-wide budget lasts."""
    task_runs = runs[runs["task"] == task].sort_values(["attention", "position", "seed"])
    candidates = [r for r in task_runs.to_dict("records")
                  if isinstance(r["run_dir"], str) and (Path(r["run_dir"]) / MAPS_FILE).is_file()]
    firsts: dict[tuple[str, str], dict] = {}
    for r in candidates:
        firsts.setdefault((r["attention"], r["position"]), r)
    blocks: list = []
    skipped = 0
    for (attention, position), r in firsts.items():
        if budget[0] <= 0:
            skipped += 1
            continue
        loaded = _load_maps(Path(r["run_dir"]) / MAPS_FILE)
        if not loaded or not loaded[0]:
            continue
        maps, tokens = loaded
        title = f"{task}: {variant(attention, position)}, seed {r['seed']}"
        path = figures.attention_maps(maps, tokens, title, figures_dir / _safe_name("maps", task, attention, position))
        shown = ", ".join(list(maps)[:4])
        blocks.append(Figure(path, f"Attention weights of {variant(attention, position)} on one fixed example "
                                   f"(seed {r['seed']}; rows: {shown}; queries down, keys across)"))
        budget[0] -= 1
    if skipped:
        blocks.append(Paragraph(f"{skipped} more variants saved attention maps; not drawn (cap of "
                                f"{MAX_MAP_FIGURES} map figures per report).", kind="note"))
    return blocks


# ---------------------------------------------------------------- the report

def _task_section(runs: Runs, task: str, metrics: list[str], baseline: tuple[str, str], baseline_present: bool,
                  summaries: dict[str, pd.DataFrame], comparisons: dict[str, pd.DataFrame], curves: pd.DataFrame,
                  colors: dict, map_budget: list[int], figures_dir: Path) -> Section:
    frame = runs.runs
    grid = Grid.of(frame, task)
    section = Section(f"Task: {task}")
    section.add(Section("Runs per cell", [status_table(frame, grid)], level=3))
    here = set(task_metrics(runs).get(task, []))
    for metric in metrics:
        sub = Section(f"{task} — {metric}", level=3)
        if metric not in here:
            section.add(sub.add(Paragraph(f"Task {task} reports no {metric} in any completed run.", kind="note")))
            continue
        sub.add(metric_table(frame, grid, metric, summaries[metric]))
        sub.add(Section(f"Main effects and interaction — {task}, {metric}", effects_block(frame, grid, metric),
                        level=4))
        if baseline_present:
            compare = comparisons_block(frame, grid, metric, comparisons[metric], baseline)
        else:
            compare = [Paragraph(f"The default baseline {variant(*baseline)} is not in this sweep; pass --baseline "
                                 f"ATTENTION+POSITION to compare (cells: {_cells_found(frame)}).", kind="note")]
        sub.add(Section(f"Comparisons with {variant(*baseline)} — {task}, {metric}", compare, level=4))
        section.add(sub)
    lengths = length_figures(runs, task, colors, figures_dir)
    if lengths:
        section.add(Section(f"Length generalisation — {task}", lengths, level=3))
    section.add(*attention_section(frame, task, figures_dir))
    curve = curve_figure(curves, frame, task, colors, figures_dir)
    if curve is not None:
        section.add(Section(f"Learning curves — {task}", [curve], level=3))
    maps = map_figures(frame, task, map_budget, figures_dir)
    if maps:
        section.add(Section(f"Attention maps — {task}", maps, level=3))
    cost = cost_table(frame, grid)
    if cost is not None:
        section.add(Section(f"Cost — {task}", [cost], level=3))
    return section


def _overview(runs: Runs, metrics: list[str], baseline: tuple[str, str], baseline_present: bool,
              all_metrics: list[str]) -> Section:
    frame = runs.runs
    status = Counter(frame["status"])
    text = (f"{len(frame)} runs ({', '.join(f'{n} {s}' for s, n in sorted(status.items()))}) over "
            f"{frame['task'].nunique()} task(s): {', '.join(sorted(frame['task'].unique()))}. "
            f"Metrics reported: {', '.join(metrics) or 'none (no completed run)'}. "
            f"Baseline for comparisons: {variant(*baseline)}{'' if baseline_present else ' (not in this sweep)'}. "
            "Statistics use completed runs only; "
            "intervals are 95% t-intervals over seeds; p-values are Welch's t-test, Holm-corrected per task "
            "and metric.")
    section = Section("Overview", [Paragraph(text)])
    done = frame[frame["status"] == "completed"]
    seeds = done.groupby(["task", "attention", "position"])["seed"].nunique()
    single = sorted(t for t, n in seeds.groupby(level="task").max().items() if n < 2)
    if single:
        section.add(Paragraph(f"{', '.join(single)}: every cell has at most one completed seed, so "
                              f"{ONE_SEED_NOTICE}; the tables show means without intervals.", kind="note"))
    others = [m for m in all_metrics if m not in metrics]
    if others:
        section.add(Paragraph(f"Also found, not reported: {', '.join(others)} (choose metrics with --metrics).",
                              kind="note"))
    return section


def _prepare_out(out: Path) -> Path:
    figures_dir = out / "figures"
    figures_dir.mkdir(parents=True, exist_ok=True)
    for stale in figures_dir.glob("*.png"):  # figures of an earlier report would be mistaken for new ones
        stale.unlink()
    return figures_dir


def build_report(paths: Sequence[str | Path], out: str | Path, baseline: str | None = None,
                 bench: str | Path | None = None, metrics: Sequence[str] | None = None) -> Path:
    """Collect the sweeps under ``paths`` and write the report into ``out``; returns the report.html path.

    ``baseline`` is ``"ATTENTION+POSITION"``; None means multihead+sinusoidal when that cell exists.
    """
    if baseline is not None:
        parse_baseline(baseline)  # a malformed option fails before any file is read
    runs = collect(paths)
    if runs.runs.empty:
        shown = ", ".join(str(p) for p in paths)
        raise ReportError(f"no readable result.json under {shown}; need run folders written by experiments.train")
    chosen = choose_metrics(runs, metrics)
    baseline_cell, baseline_present = resolve_baseline(runs.runs, baseline)
    bench_data = load_bench(bench) if bench is not None else None

    out = Path(out)
    figures_dir = _prepare_out(out)
    frame = runs.runs
    summaries = {m: stats.cell_summary(frame, m) for m in chosen}
    comparisons = {m: stats.compare_to_baseline(frame, m, baseline_cell) for m in chosen}
    curves = learning_curves(runs)
    colors = figures.palette(sorted(frame["position"].unique()))
    map_budget = [MAX_MAP_FIGURES]

    doc = Document("attnlab ablation report",
                   subtitle=f"sweeps: {', '.join(sorted(str(s) for s in frame['sweep'].dropna().unique()))}")
    doc.sections.append(_overview(runs, chosen, baseline_cell, baseline_present, sorted(set(runs.metrics))))
    for task in sorted(frame["task"].unique()):
        doc.sections.append(_task_section(runs, task, chosen, baseline_cell, baseline_present, summaries,
                                          comparisons, curves, colors, map_budget, figures_dir))
    failures = failures_table(frame)
    if failures is not None:
        doc.sections.append(Section("Failed and diverged runs", [failures]))
    if bench_data is not None:
        doc.sections.append(bench_section(bench_data, figures_dir))
    doc.sections.append(provenance_section(frame))

    (out / "report.md").write_text(to_markdown(doc, out), encoding="utf-8")
    (out / "report.html").write_text(to_html(doc), encoding="utf-8")
    results_frame_for_csv(frame).to_csv(out / "results.csv", index=False)
    pd.concat(list(summaries.values()) or [stats.cell_summary(frame.iloc[0:0], "_")]).to_csv(
        out / "cells.csv", index=False)
    pd.concat(list(comparisons.values()) or [pd.DataFrame(columns=stats.COMPARISON_COLUMNS)]).to_csv(
        out / "comparisons.csv", index=False)
    return out / "report.html"


# ---------------------------------------------------------------- command line

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m analysis.report", description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+", metavar="SWEEP_DIR", help="sweep folders, result.json files or globs")
    parser.add_argument("--out", required=True, type=Path, help="folder for the report")
    parser.add_argument("--baseline", default=None, metavar="ATTENTION+POSITION",
                        help="cell to compare against (default multihead+sinusoidal when present)")
    parser.add_argument("--bench", default=None, type=Path, help="benchmark JSON from python -m experiments.bench")
    parser.add_argument("--metrics", nargs="+", default=None, help="metrics to report (default: common to all tasks)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            html = build_report(args.paths, args.out, baseline=args.baseline, bench=args.bench,
                                metrics=args.metrics)
        except AnalysisError as err:
            _print_warnings(caught)
            print(f"error: {err}", file=sys.stderr)
            return 2
    _print_warnings(caught)
    print(html)
    return 0


def _print_warnings(caught: list[warnings.WarningMessage]) -> None:
    """One line per skipped file or other problem with the inputs; library deprecation notices stay quiet."""
    quiet = (DeprecationWarning, PendingDeprecationWarning, FutureWarning)
    for w in caught:
        if not issubclass(w.category, quiet):
            print(f"warning: {w.message}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
