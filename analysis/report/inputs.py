"""The report's inputs before any section: its options checked, the runs narrowed by --where, the benchmark file
read and the output folder made ready."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from analysis.claims.scope import load_claims_file
from analysis.command.errors import ReportError
from analysis.data.cells import assign_cells
from analysis.data.runs import Runs
from analysis.report.figures.figure_style import FORMATS, FigureStyle
from analysis.report.plan.baseline import parse_baseline
from analysis.report.plan.layout import apply_where, parse_assignments
from analysis.report.sections.benchmarks import load_bench


def prepare_out(out: Path) -> Path:
    """The figures folder under ``out``, emptied of an earlier report's figures."""
    figures_dir = out / "figures"
    figures_dir.mkdir(parents=True, exist_ok=True)
    for form in FORMATS:  # figures of an earlier report would be mistaken for new ones
        for stale in figures_dir.glob(f"*.{form}"):
            stale.unlink()
    return figures_dir


def filtered(runs: Runs, where: Sequence[str] | None) -> Runs:
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


def check_options(
    baseline: str | None, where: Sequence[str] | None, claims: str | Path | None, figure_style: dict
) -> None:
    """A malformed option fails before any file is read."""
    if baseline is not None:
        parse_baseline(baseline)
    if where:
        parse_assignments(where, "--where")
    if claims is not None:
        load_claims_file(claims)
    FigureStyle({}, **figure_style)


def read_bench(bench: str | Path | bool | None) -> dict | None:
    """The benchmark file's data; None for no file or for True (the cells are measured once the output exists)."""
    if not isinstance(bench, (str, Path, bool, type(None))):
        raise ReportError(
            f"bench={bench!r} is not allowed; give a benchmark JSON path, True (measure each cell) or None"
        )
    # False and None both mean no benchmark section (False once reached load_bench as a path)
    return load_bench(bench) if isinstance(bench, (str, Path)) else None
