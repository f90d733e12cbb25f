"""The summary's figure: the main metric against evaluation length, one line per cell, sized to sit beside the table.

Drawn with matplotlib's object API on the Agg canvas, like analysis.report.figures.plots.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from analysis.report.document.model import Figure as ReportFigure
from analysis.report.figures.figure_canvas import finish
from analysis.report.figures.figure_style import FigureStyle, line_id, palette, style_of
from analysis.report.plan.summary import TaskSummary, figure_data
from analysis.stats.inference import band as clipped_band
from analysis.stats.inference import mean_ci

DPI = 100
WIDTH, HEIGHT = 6.2, 4.0  # inches: about 620 px, half of a wide report page
MARKERS = "osD^vP*Xh<>p"


def metric_vs_length(
    data: pd.DataFrame,
    order: Sequence[str],
    metric: str,
    train_range: Sequence[int] | None,
    title: str,
    path: Path | None = None,
    style: FigureStyle | None = None,
    ax=None,
) -> Path | Figure:
    """``data``: columns label, length, value (one row per run and length); a line per label, in ``order``.

    Each label takes its cell's colour and marker from the report's ``style``; a label the
    style does not know gets one of the colour-blind-safe palette. Saved to ``path`` (returns the path),
    or the figure (drawn into ``ax`` when given) without one.
    """
    style = style_of(style)
    fallback = palette(order)
    if ax is None:
        fig = Figure(figsize=style.size((WIDTH, HEIGHT)), dpi=DPI, layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.subplots()
    if train_range is not None:
        ax.axvspan(train_range[0], train_range[1], color="0.9", zorder=0, label="training lengths")
    for i, label in enumerate(order):
        rows = data[data["label"] == label]
        band = [(length, *mean_ci(g["value"])) for length, g in rows.groupby("length", sort=True)]
        x = np.array([b[0] for b in band], dtype=float)
        mean = np.array([b[1] for b in band])
        half = np.array([b[2] for b in band])
        color, marker = style.for_label(label) or (fallback[label], MARKERS[i % len(MARKERS)])
        ax.plot(x, mean, marker=marker, ms=4, lw=1.6, color=color, label=label, gid=line_id("cell", label))
        ok = np.isfinite(half)
        if ok.any():
            low, high = clipped_band(mean[ok], half[ok], metric)  # within the metric's range: accuracy in [0, 1]
            ax.fill_between(x[ok], low, high, color=color, alpha=0.15, lw=0)
    ax.set_xlabel("evaluation length")
    ax.set_ylabel(metric)
    ax.set_xticks(sorted(data["length"].unique()))
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="best", ncols=2 if len(order) > 6 else 1)
    return finish(ax.figure, path, style)


def write_figure(
    frame: pd.DataFrame, by_length: pd.DataFrame, summary: TaskSummary, path: Path, style=None
) -> ReportFigure | None:
    """The main metric against evaluation length, one line per cell in rank order; None without per-length data.

    ``style``: the report's ``analysis.report.figures.figure_style.FigureStyle`` (each cell's colour and marker,
    the width).
    """
    data = figure_data(frame, by_length, summary)
    if data.empty:
        return None
    present = set(data["label"])
    order = [label for label in (summary.labels()[k] for k in summary.order) if label in present]
    metric_vs_length(data, order, summary.main, summary.train, f"{summary.task}: {summary.main} vs length", path, style)
    trained = f"shaded: training lengths {summary.train[0]}–{summary.train[1]}; " if summary.train else ""
    return ReportFigure(
        path,
        f"{summary.task}: {summary.main} against evaluation length, a line per cell (legend in "
        f"table order); {trained}bands: 95% CI over seeds",
    )
