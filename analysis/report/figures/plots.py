"""Report figures: each function takes a tidy frame for one table of one task, writes one figure and returns
the PNG's path (or, without a path, the figure, drawn into the caller's axes ``ax`` when given).

Panels are the levels of the table's row factor and lines the levels of its column
factor (by default attention types and position encodings), one line per cell.
Colours and markers come from the report's ``FigureStyle``
(``analysis.report.figures.figure_style``); the panel grid, the legend and the files
(PNG, PDF and SVG side by side) from ``analysis.report.figures.figure_canvas``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from analysis.report.figures.figure_canvas import (
    DPI,
    PANEL_H,
    PANEL_W,
    figure_legend,
    finish,
    given_axes,
    in_order,
    panel_grid,
)
from analysis.report.figures.figure_style import FigureStyle, line_id, style_of
from analysis.stats.inference import band as clipped_band
from analysis.stats.inference import mean_ci


def _mean_band(frame: pd.DataFrame, x: str) -> pd.DataFrame:
    """Mean and t-interval of ``value`` over seeds at each x."""
    rows = []
    for xv, group in frame.groupby(x, sort=True):
        mean, half, n = mean_ci(group["value"])
        rows.append({x: xv, "mean": mean, "half": half, "n": n})
    return pd.DataFrame(rows)


def length_generalisation(
    data: pd.DataFrame,
    metric: str,
    train_range: Sequence[int] | None,
    colors: Mapping[str, tuple],
    title: str,
    path: Path | None = None,
    panel: str = "attention",
    line: str = "position",
    panels: Sequence[str] | None = None,
    lines: Sequence[str] | None = None,
    legend: str | None = None,
    ax=None,
) -> Path | Figure:
    """``metric`` vs evaluation length: a panel per ``panel`` level, a line per ``line`` level, training range shaded.

    Saved to ``path`` (returns the path); without a path the figure is returned, drawn into ``ax``
    (one matplotlib Axes per panel) when given.

    ``data``: columns ``panel``, ``line``, seed, length, value (completed runs of one
    table, so each (panel, line) is one cell); ``panels`` / ``lines`` give the order.
    """
    style = style_of(colors)
    panel_levels = in_order(data[panel], panels)
    line_levels = in_order(data[line], lines)
    fig, axes = panel_grid(len(panel_levels), title, style=style, ax=ax)
    for ax, level in zip(axes, panel_levels):
        if train_range is not None:
            ax.axvspan(train_range[0], train_range[1], color="0.88", zorder=0)
        here = data[data[panel] == level]
        for name in [n for n in line_levels if n in set(here[line])]:
            band = _mean_band(here[here[line] == name], "length")
            ax.plot(band["length"], band["mean"], marker="o", ms=3, color=colors[name], gid=line_id("level", name))
            ok = np.isfinite(band["half"].to_numpy(float))
            if ok.any():
                low, high = clipped_band(band["mean"][ok], band["half"][ok], metric)  # within the metric's range
                ax.fill_between(band["length"][ok], low, high, color=colors[name], alpha=0.18, lw=0)
        ax.set_title(level, fontsize=10)
        ax.set_xlabel("evaluation length")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(metric)
    figure_legend(fig, line_levels, colors, train_range, title=legend or line)
    return finish(fig, path, style)


def learning_curves(
    curves: pd.DataFrame,
    metric: str,
    colors: Mapping[str, tuple],
    title: str,
    path: Path | None = None,
    panel: str = "attention",
    line: str = "position",
    panels: Sequence[str] | None = None,
    lines: Sequence[str] | None = None,
    legend: str | None = None,
    ax=None,
) -> Path | Figure:
    """``metric`` vs step: a panel per ``panel`` level, the seed mean bold and each seed faint, a colour per line.

    Saved to ``path`` (returns the path), or the figure (into ``ax`` when given) without one.

    ``curves``: columns ``panel``, ``line``, seed, step, value (one table of one task, one metric).
    """
    style = style_of(colors)
    panel_levels = in_order(curves[panel], panels)
    line_levels = in_order(curves[line], lines)
    fig, axes = panel_grid(len(panel_levels), title, style=style, ax=ax)
    for ax, level in zip(axes, panel_levels):
        here = curves[curves[panel] == level]
        for name in [n for n in line_levels if n in set(here[line])]:
            group = here[here[line] == name]
            for _, seed_curve in group.groupby("seed"):
                seed_curve = seed_curve.sort_values("step")
                ax.plot(seed_curve["step"], seed_curve["value"], color=colors[name], alpha=0.25, lw=0.8)
            mean = group.groupby("step")["value"].mean()
            ax.plot(mean.index, mean.to_numpy(), color=colors[name], lw=1.8, gid=line_id("level", name))
        ax.set_title(level, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(metric)
    figure_legend(fig, line_levels, colors, title=legend or line)
    return finish(fig, path, style)


def parameter_curve(
    summary: pd.DataFrame,
    metric: str,
    parameter: str,
    colors: Mapping[str, tuple],
    title: str,
    path: Path | None = None,
    line: str | None = None,
    lines: Sequence[str] | None = None,
    legend: str | None = None,
    ax=None,
) -> Path | Figure:
    """``metric`` against a numeric factor's value: mean and 95% CI over seeds, a line per ``line`` level.

    Saved to ``path`` (returns the path), or the figure (into ``ax`` when given) without one.

    ``summary``: one row per cell with columns ``x`` (the parameter value), mean,
    ci_half and, when given, ``line``.
    """
    style = style_of(colors)
    if ax is None:
        fig = Figure(figsize=style.size((PANEL_W + 1.8, PANEL_H + 0.7)), dpi=DPI, layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.subplots()
    fig = ax.figure
    groups = (
        [(None, summary)]
        if line is None
        else [(n, summary[summary[line] == n]) for n in in_order(summary[line], lines)]
    )
    for name, group in groups:
        group = group.sort_values("x")
        color = colors.get(name, "C0") if name is not None else "C0"
        ax.plot(
            group["x"],
            group["mean"],
            marker="o",
            ms=4,
            color=color,
            label=name,
            gid=line_id("level", name) if name is not None else None,
        )
        ok = np.isfinite(group["ci_half"].to_numpy(float))
        if ok.any():
            ax.errorbar(
                group["x"][ok], group["mean"][ok], yerr=group["ci_half"][ok], fmt="none", color=color, capsize=3, lw=1
            )
    ax.set_xlabel(parameter)
    ax.set_ylabel(metric)
    ax.grid(alpha=0.3)
    if line is not None:
        ax.legend(fontsize=8, title=legend or line, title_fontsize=8)
    fig.suptitle(title, fontsize=11)
    return finish(fig, path, style)


def _labels(block: str, axis: str, tokens: Mapping[str, Sequence[str]], size: int) -> Sequence[str] | None:
    """Token labels for one axis when they fit: encoder and cross keys are source tokens, the rest target."""
    source_side = block.startswith("encoder") or (block.startswith("cross") and axis == "k")
    labels = tokens.get("src_tokens" if source_side else "tgt_tokens")
    return list(labels) if labels is not None and len(labels) == size and size <= 32 else None


def attention_maps(
    maps: Mapping[str, np.ndarray],
    tokens: Mapping[str, Sequence[str]],
    title: str,
    path: Path | None = None,
    max_layers: int = 4,
    max_heads: int = 4,
    style: FigureStyle | None = None,
    ax=None,
) -> Path | Figure:
    """A grid of heatmaps: a row per ``block/layer`` map, a column per head (capped), rows of weights sum to 1.

    Saved to ``path`` (returns the path), or the figure (into ``ax``: layers × heads axes, row by row) without one.
    """
    keys = list(maps)[:max_layers]
    heads = min(max(maps[k].shape[0] for k in keys), max_heads)
    style = style_of(style)
    given = given_axes(ax, len(keys) * heads)
    if given is None:
        fig = Figure(figsize=style.size((2.6 * heads + 1.0, 2.5 * len(keys) + 0.6)), dpi=DPI, layout="constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(len(keys), heads, squeeze=False)
    else:
        fig, flat = given
        axes = np.array(flat, dtype=object).reshape(len(keys), heads)  # (layers, heads)
    fig.suptitle(title, fontsize=11)
    for r, key in enumerate(keys):
        weights = maps[key]  # (H, Tq, Tk)
        block = key.split("/")[0]
        row_max = float(np.nanmax(weights[:heads])) if np.isfinite(weights[:heads]).any() else 1.0
        for h in range(heads):
            ax = axes[r][h]
            if h >= weights.shape[0]:
                ax.set_visible(False)
                continue
            # One colour scale per row, so the heads of a layer compare by colour.
            image = ax.imshow(
                weights[h], cmap="viridis", vmin=0.0, vmax=row_max, aspect="auto", interpolation="nearest"
            )
            ax.set_title(f"{key} head {h}", fontsize=8)
            q_labels = _labels(block, "q", tokens, weights.shape[1])
            k_labels = _labels(block, "k", tokens, weights.shape[2])
            if q_labels:
                ax.set_yticks(range(len(q_labels)), q_labels, fontsize=7)
            if k_labels:
                long = max(len(t) for t in k_labels) > 3
                ax.set_xticks(range(len(k_labels)), k_labels, fontsize=7, rotation=90 if long else 0)
            ax.tick_params(length=0)
            if h == 0:
                ax.set_ylabel("query", fontsize=8)
            if r == len(keys) - 1:
                ax.set_xlabel("key", fontsize=8)
        fig.colorbar(image, ax=axes[r][min(heads, weights.shape[0]) - 1], shrink=0.8)
    return finish(fig, path, style)


def bench_scaling(
    records: pd.DataFrame, colors: Mapping[str, tuple], path: Path | None = None, ax=None
) -> Path | Figure:
    """Time and peak memory vs sequence length on log–log axes, a line per variant and backend (ok points only).

    Saved to ``path`` (returns the path), or the figure (into ``ax``: two axes, time then memory) without one.
    """
    style = style_of(colors)
    given = given_axes(ax, 2)
    if given is None:
        fig = Figure(figsize=style.size((11, 4.2)), dpi=DPI, layout="constrained")
        FigureCanvasAgg(fig)
        ax_time, ax_mem = fig.subplots(1, 2)
    else:
        fig, (ax_time, ax_mem) = given
    ok = records[records["status"] == "ok"]
    for label, group in ok.groupby("variant", sort=True):
        group = group.sort_values("T")
        color = colors[label]
        ax_time.plot(group["T"], group["ms"], marker="o", ms=3, color=color, label=label)
        if group["peak_mb"].notna().any():
            ax_mem.plot(group["T"], group["peak_mb"], marker="o", ms=3, color=color, label=label)
    lengths = sorted(int(t) for t in records["T"].unique())
    for ax, ylabel in ((ax_time, "ms per step"), (ax_mem, "peak memory (MB)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths, [str(t) for t in lengths])
        ax.minorticks_off()
        ax.set_yscale("log")
        ax.set_xlabel("sequence length T")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, which="both")
    ax_time.legend(fontsize=7, loc="best")
    fig.suptitle("Cost vs sequence length", fontsize=12)
    return finish(fig, path, style)
