"""Report figures, drawn with matplotlib's object API on the Agg canvas (no pyplot, no display, no global state).

Each function takes a tidy frame for one table of one task, writes one PNG and
returns its path. Panels are the levels of the table's row factor and lines the
levels of its column factor (by default attention types and position encodings),
one line per cell, with one colour per column level across a report's figures.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from analysis.stats import mean_ci

DPI = 100
PANEL_W, PANEL_H = 3.8, 3.0
MAX_COLUMNS = 4
# PNG metadata without the matplotlib version: identical inputs give identical bytes.
PNG_METADATA = {"Software": None}


def palette(names: Sequence[str]) -> dict[str, tuple]:
    """A stable colour per name (sorted), from the tab10 / tab20 qualitative maps."""
    from matplotlib import colormaps

    cmap = colormaps["tab10" if len(names) <= 10 else "tab20"]
    return {name: cmap(i % cmap.N) for i, name in enumerate(sorted(names))}


def _panels(n: int, title: str, sharey: bool = True) -> tuple[Figure, list]:
    columns = min(n, MAX_COLUMNS)
    rows = math.ceil(n / columns)
    # The extra width holds the figure legend on the right.
    fig = Figure(figsize=(PANEL_W * columns + 1.6, PANEL_H * rows + 0.7), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, columns, sharey=sharey, squeeze=False).ravel().tolist()
    for extra in axes[n:]:
        extra.set_visible(False)
    fig.suptitle(title, fontsize=12)
    return fig, axes[:n]


def _legend(fig: Figure, lines: Sequence[str], colors: Mapping[str, tuple], train_range=None,
            title: str = "position") -> None:
    """One legend for the whole figure, so a line missing from the first panel is still named."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Line2D([], [], color=colors[p], lw=2, label=p) for p in lines]
    if train_range is not None:
        handles.append(Patch(color="0.88", label=f"train lengths {train_range[0]}–{train_range[1]}"))
    fig.legend(handles=handles, loc="outside right upper", fontsize=8, title=title, title_fontsize=8)


def _in_order(values: Sequence[str], order: Sequence[str] | None) -> list[str]:
    present = list(dict.fromkeys(values))
    if order is None:
        return sorted(present)
    return [v for v in order if v in present] + sorted(v for v in present if v not in order)


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", metadata=PNG_METADATA)
    return path


def _mean_band(frame: pd.DataFrame, x: str) -> pd.DataFrame:
    """Mean and t-interval of ``value`` over seeds at each x."""
    rows = []
    for xv, group in frame.groupby(x, sort=True):
        mean, half, n = mean_ci(group["value"])
        rows.append({x: xv, "mean": mean, "half": half, "n": n})
    return pd.DataFrame(rows)


def length_generalisation(data: pd.DataFrame, metric: str, train_range: Sequence[int] | None,
                          colors: Mapping[str, tuple], title: str, path: Path, panel: str = "attention",
                          line: str = "position", panels: Sequence[str] | None = None,
                          lines: Sequence[str] | None = None, legend: str | None = None) -> Path:
    """``metric`` vs evaluation length: a panel per ``panel`` level, a line per ``line`` level, training range shaded.

    ``data``: columns ``panel``, ``line``, seed, length, value (completed runs of one
    table, so each (panel, line) is one cell); ``panels`` / ``lines`` give the order.
    """
    panel_levels = _in_order(data[panel], panels)
    line_levels = _in_order(data[line], lines)
    fig, axes = _panels(len(panel_levels), title)
    for ax, level in zip(axes, panel_levels):
        if train_range is not None:
            ax.axvspan(train_range[0], train_range[1], color="0.88", zorder=0)
        here = data[data[panel] == level]
        for name in [n for n in line_levels if n in set(here[line])]:
            band = _mean_band(here[here[line] == name], "length")
            ax.plot(band["length"], band["mean"], marker="o", ms=3, color=colors[name])
            ok = np.isfinite(band["half"].to_numpy(float))
            if ok.any():
                ax.fill_between(band["length"][ok], (band["mean"] - band["half"])[ok],
                                (band["mean"] + band["half"])[ok], color=colors[name], alpha=0.18, lw=0)
        ax.set_title(level, fontsize=10)
        ax.set_xlabel("evaluation length")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(metric)
    _legend(fig, line_levels, colors, train_range, title=legend or line)
    return _save(fig, path)


def learning_curves(curves: pd.DataFrame, metric: str, colors: Mapping[str, tuple], title: str,
                    path: Path, panel: str = "attention", line: str = "position",
                    panels: Sequence[str] | None = None, lines: Sequence[str] | None = None,
                    legend: str | None = None) -> Path:
    """``metric`` vs step: a panel per ``panel`` level, the seed mean bold and each seed faint, a colour per line.

    ``curves``: columns ``panel``, ``line``, seed, step, value (one table of one task, one metric).
    """
    panel_levels = _in_order(curves[panel], panels)
    line_levels = _in_order(curves[line], lines)
    fig, axes = _panels(len(panel_levels), title)
    for ax, level in zip(axes, panel_levels):
        here = curves[curves[panel] == level]
        for name in [n for n in line_levels if n in set(here[line])]:
            group = here[here[line] == name]
            for _, seed_curve in group.groupby("seed"):
                seed_curve = seed_curve.sort_values("step")
                ax.plot(seed_curve["step"], seed_curve["value"], color=colors[name], alpha=0.25, lw=0.8)
            mean = group.groupby("step")["value"].mean()
            ax.plot(mean.index, mean.to_numpy(), color=colors[name], lw=1.8)
        ax.set_title(level, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(metric)
    _legend(fig, line_levels, colors, title=legend or line)
    return _save(fig, path)


def parameter_curve(summary: pd.DataFrame, metric: str, parameter: str, colors: Mapping[str, tuple], title: str,
                    path: Path, line: str | None = None, lines: Sequence[str] | None = None,
                    legend: str | None = None) -> Path:
    """``metric`` against a numeric factor's value: mean and 95% CI over seeds, a line per ``line`` level.

    ``summary``: one row per cell with columns ``x`` (the parameter value), mean,
    ci_half and, when given, ``line``.
    """
    fig = Figure(figsize=(PANEL_W + 1.8, PANEL_H + 0.7), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    groups = [(None, summary)] if line is None else [(n, summary[summary[line] == n])
                                                     for n in _in_order(summary[line], lines)]
    for name, group in groups:
        group = group.sort_values("x")
        color = colors.get(name, "C0") if name is not None else "C0"
        ax.plot(group["x"], group["mean"], marker="o", ms=4, color=color, label=name)
        ok = np.isfinite(group["ci_half"].to_numpy(float))
        if ok.any():
            ax.errorbar(group["x"][ok], group["mean"][ok], yerr=group["ci_half"][ok], fmt="none", color=color,
                        capsize=3, lw=1)
    ax.set_xlabel(parameter)
    ax.set_ylabel(metric)
    ax.grid(alpha=0.3)
    if line is not None:
        ax.legend(fontsize=8, title=legend or line, title_fontsize=8)
    fig.suptitle(title, fontsize=11)
    return _save(fig, path)


def _labels(block: str, axis: str, tokens: Mapping[str, Sequence[str]], size: int) -> Sequence[str] | None:
    """Token labels for one axis when they fit: encoder and cross keys are source tokens, the rest target."""
    source_side = block.startswith("encoder") or (block.startswith("cross") and axis == "k")
    labels = tokens.get("src_tokens" if source_side else "tgt_tokens")
    return list(labels) if labels is not None and len(labels) == size and size <= 32 else None


def attention_maps(maps: Mapping[str, np.ndarray], tokens: Mapping[str, Sequence[str]], title: str,
                   path: Path, max_layers: int = 4, max_heads: int = 4) -> Path:
    """A grid of heatmaps: a row per ``block/layer`` map, a column per head (capped), rows of weights sum to 1."""
    keys = list(maps)[:max_layers]
    heads = min(max(maps[k].shape[0] for k in keys), max_heads)
    fig = Figure(figsize=(2.6 * heads + 1.0, 2.5 * len(keys) + 0.6), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(keys), heads, squeeze=False)
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
            image = ax.imshow(weights[h], cmap="viridis", vmin=0.0, vmax=row_max, aspect="auto",
                              interpolation="nearest")
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
    return _save(fig, path)


def bench_scaling(records: pd.DataFrame, colors: Mapping[str, tuple], path: Path) -> Path:
    """Time and peak memory vs sequence length on log–log axes, a line per variant and backend (ok points only)."""
    fig = Figure(figsize=(11, 4.2), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax_time, ax_mem = fig.subplots(1, 2)
    ok = records[records["status"] == "ok"]
    for (label, group) in ok.groupby("variant", sort=True):
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
    return _save(fig, path)
