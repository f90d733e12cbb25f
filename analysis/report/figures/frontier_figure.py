"""The quality–cost figure: a grid of axes (a row per cost source, a column per quality panel), each cell one
point with its quality interval and cost spread, marker area ∝ peak memory, the Pareto set ringed in black and
joined by a step line.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure
from matplotlib.lines import Line2D
from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

from analysis.report.document.model import fmt
from analysis.report.figures import figure_canvas, figure_style
from analysis.report.plan.frontier_data import CostSource, Panel

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
MAX_AREA, MIN_AREA = 300.0, 14.0  # pt²: the largest memory's marker, and a floor that keeps small ones visible


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
    path: Path | None = None,
    style: "figure_style.FigureStyle | None" = None,
    ax=None,
) -> Path | MplFigure:
    """A grid of axes (a row per cost source, a column per quality panel); each point a cell with x and y bars.

    ``style``: the report's figure style, for its paper width and file formats. Saved to ``path`` (returns the
    path), or the figure (into ``ax``: rows × columns axes, row by row) without one.
    """
    rows, columns = len(layout), max(len(r) for r in layout)
    style = figure_style.style_of(style)
    given = figure_canvas.given_axes(ax, rows * columns)
    if given is None:
        fig = MplFigure(
            figsize=style.size((4.6 * columns + 2.2, 3.8 * rows + 0.6)), dpi=figure_canvas.DPI, layout="constrained"
        )
        FigureCanvasAgg(fig)
        axes = fig.subplots(rows, columns, squeeze=False)
    else:
        fig, flat = given
        axes = np.array(flat, dtype=object).reshape(rows, columns)  # (cost sources, quality panels)
    for i, row in enumerate(layout):
        for j in range(columns):
            ax = axes[i][j]
            if j >= len(row):
                ax.set_visible(False)
                continue
            _draw_axes(ax, *row[j], colors, markers)
    _draw_legend(fig, colors, markers, legend)
    fig.suptitle(title, fontsize=11)
    return figure_canvas.finish(fig, path, style)


def _draw_axes(
    ax, panel: Panel, source: CostSource, points: pd.DataFrame, colors: Mapping[str, tuple], markers: Mapping[str, str]
) -> None:
    """One (cost source, quality panel): the cells that have both values, the Pareto step line, the labels."""
    shown = points[np.isfinite(points["mean"]) & np.isfinite(points["cost"])]
    _draw_cells(ax, shown, colors, markers)
    _draw_front(ax, shown, panel.better)
    _cost_scale(ax, shown["cost"])
    _memory_key(ax, shown["memory"])
    ax.set_xlabel(source.label, fontsize=8)
    ax.set_ylabel(f"{panel.metric} ({panel.better} is better)", fontsize=8)
    ax.set_title(panel.title, fontsize=9)
    ax.grid(alpha=0.3)


def _draw_cells(ax, shown: pd.DataFrame, colors: Mapping[str, tuple], markers: Mapping[str, str]) -> None:
    """Each cell: its quality interval and cost spread as bars, a marker whose area follows its memory."""
    for (_, p), size in zip(shown.iterrows(), _sizes(shown["memory"])):
        color = colors.get(p["column"] or p["row"], "C0")
        spread = None if math.isnan(p["cost_low"]) else [[p["cost"] - p["cost_low"]], [p["cost_high"] - p["cost"]]]
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


def _draw_front(ax, shown: pd.DataFrame, better: str) -> None:
    """The Pareto cells joined by a step line and named by the table's levels."""
    front = shown[shown["pareto"]].sort_values(["cost", "mean"], ascending=[True, better == "lower"])
    if not len(front):
        return
    # The attainable boundary: for a cost between two Pareto cells, the cheaper one's quality.
    ax.step(front["cost"], front["mean"], where="post", color="black", lw=1.1, alpha=0.8, zorder=1)
    for p in front.itertuples(index=False):
        name = f"{p.row}, {p.column}" if p.column else p.row  # the table's levels: short
        ax.annotate(name, (p.cost, p.mean), xytext=(5, 4), textcoords="offset points", fontsize=7)


def _cost_scale(ax, cost: pd.Series) -> None:
    """A log cost axis when the costs span more than a factor of 8, ticked at 1, 2 and 5 times a power of ten."""
    costs = cost.to_numpy(float)
    if len(costs) and costs.min() > 0 and costs.max() / costs.min() > 8:
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.xaxis.set_minor_formatter(NullFormatter())  # 2×10¹ 3×10¹ ... would overlap


def _memory_key(ax, memory: pd.Series) -> None:
    """What the largest marker means, in this axes' own scale (nothing when no cell reports its memory)."""
    top = _top(memory)
    if math.isfinite(top):
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


def _draw_legend(
    fig: MplFigure, colors: Mapping[str, tuple], markers: Mapping[str, str], legend: tuple[str, str]
) -> None:
    """One legend for the figure: a colour per line level, a marker per panel level (when more than one), the set."""
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
