"""The benchmark section of the report: time and memory vs sequence length, from ``experiments.bench`` JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.command.errors import ReportError
from analysis.report.document.model import Bullets, Cell, Figure, Section, Table, fmt
from analysis.report.figures import figure_style
from analysis.report.figures import plots as figures
from analysis.report.sections.registry import SECTIONS

RECORD_KEYS = ("attention", "position", "backend", "T", "status")


def load_bench(path: str | Path) -> dict[str, Any]:
    """Read and check a benchmark JSON file; a bad file is a one-line ReportError."""
    path = Path(path)
    try:
        bench = json.loads(path.read_text())
    except OSError as err:
        raise ReportError(
            f"--bench={str(path)!r} cannot be read ({err.strerror}); "
            "give the JSON written by python -m experiments.bench"
        ) from None
    except ValueError as err:
        raise ReportError(f"--bench={str(path)!r} is not valid JSON ({err})") from None
    records = bench.get("records") if isinstance(bench, dict) else None
    if not isinstance(records, list):
        raise ReportError(f"--bench={str(path)!r} has no 'records' list; expected the output of experiments.bench")
    for i, record in enumerate(records):
        missing = [k for k in RECORD_KEYS if not isinstance(record, dict) or k not in record]
        if missing:
            raise ReportError(
                f"--bench={str(path)!r}: record {i} lacks {missing}; each record needs {list(RECORD_KEYS)}"
            )
    return bench


def _records(bench: dict[str, Any]) -> pd.DataFrame:
    frame = pd.DataFrame(bench["records"])
    for column in ("ms", "tokens_per_second", "peak_mb"):
        frame[column] = pd.to_numeric(frame.get(column), errors="coerce")
    frame["T"] = frame["T"].astype(int)
    frame["variant"] = [f"{a}+{p} ({b})" for a, p, b in zip(frame["attention"], frame["position"], frame["backend"])]
    return frame


def _pivot_table(frame: pd.DataFrame, column: str, caption: str) -> Table:
    lengths = sorted(frame["T"].unique())
    rows = []
    for name, group in frame.groupby("variant", sort=True):
        by_t = {int(r.T): r for r in group.itertuples(index=False)}
        row: list = [name]
        for t in lengths:
            r = by_t.get(int(t))
            if r is None:
                row.append(Cell("—", kind="missing"))
            elif r.status != "ok":
                row.append(Cell(str(r.status), kind="oom" if r.status == "oom" else "failed"))
            else:
                value = getattr(r, column)
                row.append(Cell(fmt(value) if value is not None and math.isfinite(value) else "—"))
        rows.append(row)
    return Table(["variant (backend)", *[f"T={t}" for t in lengths]], rows, caption=caption)


@SECTIONS.register("benchmarks", order=70, inputs=("bench", "figures_dir", "style"))
def benchmarks(bench: dict[str, Any] | None, figures_dir: Path, style: figure_style.FigureStyle) -> Section | None:
    """The benchmark section of a report given --bench (none without it)."""
    return None if bench is None else bench_section(bench, figures_dir, style)


def bench_section(bench: dict[str, Any], figures_dir: Path, style: figure_style.FigureStyle | None = None) -> Section:
    """Tables of time and peak memory vs T, fitted scaling exponents and a log–log figure."""
    section = Section("Benchmark: cost vs sequence length")
    section.add(Bullets([f"device: {bench.get('device', 'unknown')}", f"torch: {bench.get('torch', 'unknown')}"]))
    frame = _records(bench)
    if frame.empty:
        return section.add(Bullets(["the benchmark file has no records"]))
    section.add(
        _pivot_table(frame, "ms", "Milliseconds per forward+backward step"),
        _pivot_table(frame, "peak_mb", "Peak memory (MB)"),
    )
    exponents = bench.get("exponents") or []
    if exponents:
        rows = []
        for e in exponents:
            t_range = e.get("T_range") or [None, None]
            rows.append(
                [
                    f"{e.get('attention')}+{e.get('position')}",
                    str(e.get("backend")),
                    Cell(fmt(float(e.get("exponent", math.nan)))),
                    Cell(f"{t_range[0]}–{t_range[1]}"),
                ]
            )
        section.add(
            Table(
                ["variant", "backend", "exponent", "T range"],
                rows,
                caption="Fitted slope of log time vs log T (1 = linear, 2 = quadratic)",
            )
        )
    if (frame["status"] == "ok").any():
        # benchmark variants are not report cells: their own colours, the report's width and formats
        base = figure_style.style_of(style)
        colors = figure_style.FigureStyle(
            figure_style.palette(list(frame["variant"].unique())), width=base.width, formats=base.formats
        )
        path = figures.bench_scaling(frame, colors, figures_dir / "bench_scaling.png")
        section.add(Figure(path, "Time and peak memory vs sequence length (log–log); OOM and error points omitted"))
    return section
