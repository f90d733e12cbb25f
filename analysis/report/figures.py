"""Report figures, drawn with matplotlib's object API on the Agg canvas (no pyplot, no display, no global state).

Each function takes a tidy frame for one table of one task, writes one figure and
returns the PNG's path; ``save`` writes every figure as PNG (for report.html), PDF
and SVG (for a paper) side by side. Panels are the levels of the table's row factor
and lines the levels of its column factor (by default attention types and position
encodings), one line per cell.

Colours come from one ``FigureStyle`` per report, so a variant has the same colour
in every figure: a colour-blind-safe colour per line level (Okabe and Ito's eight,
then matplotlib's tableau-colorblind10) and a marker per panel level, so a cell drawn
alone (the summary, the attention statistics) keeps its table's colour and shape.
``FigureStyle.width`` draws every figure that many inches wide for a paper (3.3 for
one column, 6.9 for two) with fonts of 5 to 9 pt; without it figures are sized for
the screen.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text

from analysis.command.errors import ReportError
from analysis.stats.inference import band as clipped_band
from analysis.stats.inference import mean_ci

DPI = 100
PAPER_DPI = 200  # PNGs of a paper-width figure: sharp in the HTML report too
PANEL_W, PANEL_H = 3.8, 3.0
MAX_COLUMNS = 4
MIN_PANEL_W = 1.35  # inches: the narrowest panel that still holds its tick labels at paper fonts
NARROW = 5.0  # inches: below this the legend goes under the panels, not beside them
# PNG metadata without the matplotlib version, PDF and SVG without dates: identical inputs give identical bytes.
PNG_METADATA = {"Software": None}
PDF_METADATA = {"Creator": None, "Producer": None, "CreationDate": None}
SVG_METADATA = {"Date": None, "Creator": None}
FORMATS = ("png", "pdf", "svg")
# Okabe & Ito (2008), "Color Universal Design": distinguishable under every common colour-vision deficiency.
# Yellow comes last: it is faint on white.
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")
MARKERS = "osD^vP*Xh<>p"


def palette(names: Sequence[str]) -> dict[str, str]:
    """A stable colour-blind-safe colour per name (sorted): Okabe–Ito up to 8, tableau-colorblind10 up to 10,
    then the 10 again (figures tell those apart by marker)."""
    from matplotlib import style

    names = sorted(dict.fromkeys(names))
    if len(names) <= len(OKABE_ITO):
        colours = list(OKABE_ITO)
    else:
        colours = [c["color"] for c in style.library["tableau-colorblind10"]["axes.prop_cycle"]]
    return {name: colours[i % len(colours)] for i, name in enumerate(names)}


class FigureStyle(Mapping):
    """One report's figure style: a colour per line level (a Mapping, as figures take it), a colour and a
    marker per cell (by its label), and the width every figure is drawn at (None: screen sizes)."""

    def __init__(
        self,
        colors: Mapping[str, str],
        labels: Mapping[str, tuple[str, str]] | None = None,
        width: float | None = None,
        formats: Sequence[str] = FORMATS,
    ) -> None:
        if width is not None and not (1.0 <= width <= 20.0):
            raise ReportError(
                f"--figure-width {width} is not allowed; give inches between 1 and 20 (3.3 for one column, 6.9 for two)"
            )
        unknown = sorted(set(formats) - set(FORMATS))
        if unknown or "png" not in formats:
            raise ReportError(
                f"--figure-formats {' '.join(formats)} is not allowed; choose among {list(FORMATS)}, "
                "png included (the HTML report shows it)"
            )
        self.colors = dict(colors)
        self.labels = dict(labels or {})
        self.width = width
        self.formats = tuple(dict.fromkeys(formats))

    def __getitem__(self, name: str) -> str:
        return self.colors[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.colors)

    def __len__(self) -> int:
        return len(self.colors)

    def for_label(self, label: str) -> tuple[str, str] | None:
        """(colour, marker) of a cell by its label (``cell_label``)."""
        return self.labels.get(label)

    def size(self, natural: tuple[float, float]) -> tuple[float, float]:
        """A single-axes figure's size: ``natural`` on screen, else the paper width at the same aspect."""
        if self.width is None:
            return natural
        return self.width, max(natural[1] * self.width / natural[0], 0.5 * self.width)


def line_id(kind: str, name: str) -> str:
    """The SVG id of a line: ``level:rope`` (a table's line level) or ``cell:<cell label>``, so the colours of
    a report's figures can be read back from their SVG files."""
    return f"{kind}:{name}"


def style_of(colors: Mapping | None) -> FigureStyle:
    """The style a figure function was given: the report's, or a screen style around a plain colour dict."""
    return colors if isinstance(colors, FigureStyle) else FigureStyle(colors or {})


def report_style(grids: Sequence, width: float | None = None, formats: Sequence[str] = FORMATS) -> FigureStyle:
    """One style for every figure of a report, from its tables (``analysis.report.layout.Grid``).

    A colour per line level (the column factor's levels, or the row factor's when a table has
    one factor) over all tables, and a marker per panel level (the row factor's), so the cell
    ``local + rope`` has rope's colour and local's marker wherever it is drawn.
    """
    lines, panels = [], []
    placed = []
    for grid in grids:
        for r in grid.cells.itertuples(index=False):
            line, panel = (r.column, r.row) if grid.columns is not None else (r.row, None)
            lines.append(line)
            panels.append(panel)
            placed.append((r.cell_label, line, panel))
    colors = palette(lines)
    line_order = sorted(dict.fromkeys(lines))
    panel_order = sorted(dict.fromkeys(p for p in panels if p is not None))
    labels = {}
    for label, line, panel in placed:
        # a marker per panel level; with one factor per line level, so shape repeats what colour says
        index = panel_order.index(panel) if panel is not None else line_order.index(line)
        labels[label] = (colors[line], MARKERS[index % len(MARKERS)])
    return FigureStyle(colors, labels, width, formats)


def _given_axes(ax, n: int) -> tuple[Figure, list] | None:
    """The figure and ``n`` axes of a caller's ``ax`` (one Axes, or a sequence of ``n``); None when not given."""
    if ax is None:
        return None
    axes = list(np.ravel(ax)) if isinstance(ax, (list, tuple, np.ndarray)) else [ax]
    if len(axes) < n:
        raise ValueError(f"ax: this figure draws {n} panels; give {n} axes (plt.subplots(1, {n})[1]), got {len(axes)}")
    return axes[0].figure, axes[:n]


def _done(fig: Figure, path: Path | None, style: FigureStyle | None) -> Figure | Path:
    """Saved to ``path`` (the report: returns the path), or the figure itself (a notebook: path None)."""
    return fig if path is None else _save(fig, path, style)


def _panels(n: int, title: str, sharey: bool = True, style: FigureStyle | None = None, ax=None) -> tuple[Figure, list]:
    given = _given_axes(ax, n)
    if given is not None:
        return given
    width = style.width if style is not None else None
    if width is None:
        columns = min(n, MAX_COLUMNS)
        rows = math.ceil(n / columns)
        # The extra width holds the figure legend on the right.
        size = (PANEL_W * columns + 1.6, PANEL_H * rows + 0.7)
    else:
        legend = 0.0 if width < NARROW else 1.3
        most = max(1, min(n, int((width - legend) // MIN_PANEL_W)))
        rows = math.ceil(n / most)
        columns = math.ceil(n / rows)  # balanced: 4 panels in 3 columns become 2 x 2, not 3 + 1
        panel = (width - legend) / columns
        # under the panels: room for the legend's rows
        size = (width, rows * panel * 0.8 + 0.4 + (0.7 if width < NARROW else 0.0))
    fig = Figure(figsize=size, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, columns, sharey=sharey, squeeze=False).ravel().tolist()
    for extra in axes[n:]:
        extra.set_visible(False)
    fig.suptitle(title, fontsize=12)
    return fig, axes[:n]


def _legend(
    fig: Figure, lines: Sequence[str], colors: Mapping[str, str], train_range=None, title: str = "position"
) -> None:
    """One legend for the whole figure, so a line missing from the first panel is still named."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [Line2D([], [], color=colors[p], lw=2, label=p) for p in lines]
    if train_range is not None:
        handles.append(Patch(color="0.88", label=f"train lengths {train_range[0]}–{train_range[1]}"))
    style = style_of(colors)
    if style.width is not None and style.width < NARROW:
        fig.legend(
            handles=handles,
            loc="outside lower center",
            fontsize=8,
            title=title,
            title_fontsize=8,
            ncols=min(len(handles), 3),
        )
    else:
        fig.legend(handles=handles, loc="outside right upper", fontsize=8, title=title, title_fontsize=8)


def _in_order(values: Sequence[str], order: Sequence[str] | None) -> list[str]:
    present = list(dict.fromkeys(values))
    if order is None:
        return sorted(present)
    return [v for v in order if v in present] + sorted(v for v in present if v not in order)


def fit_fonts(fig: Figure, width: float) -> None:
    """Every text of ``fig`` at paper sizes: the screen's 7–12 pt become 5–9 pt (smaller in one column)."""
    scale = 0.7 if width < NARROW else 0.8
    for text in fig.findobj(Text):
        text.set_fontsize(min(9.0, max(5.0, text.get_fontsize() * scale)))


def save(fig: Figure, path: Path, style: FigureStyle | None = None) -> Path:
    """Write ``fig`` as ``path`` (PNG) and, beside it, PDF and SVG (``style.formats``); returns the PNG's path.

    Every report figure goes through here, so each exists in all three formats. With a
    paper width the fonts are fitted to it first and the PNG is drawn at PAPER_DPI.
    Fonts stay text: TrueType in the PDF (journals refuse Type 3), ``<text>`` in the SVG,
    so both remain editable.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    formats = style.formats if style is not None else FORMATS
    paper = style is not None and style.width is not None
    if paper:
        fit_fonts(fig, style.width)
    with rc_context({"pdf.fonttype": 42, "svg.fonttype": "none", "svg.hashsalt": "attnlab"}):
        fig.savefig(path, format="png", metadata=PNG_METADATA, dpi=PAPER_DPI if paper else DPI)
        # The PNG's constrained layout (figure fractions) holds for the vector copies: solving it again
        # for each would cost as much as drawing. The figure is done after this call.
        fig.set_layout_engine("none")
        if "pdf" in formats:
            fig.savefig(path.with_suffix(".pdf"), format="pdf", metadata=PDF_METADATA)
        if "svg" in formats:
            fig.savefig(path.with_suffix(".svg"), format="svg", metadata=SVG_METADATA)
    return path


_save = save  # the name the figure modules use


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
    panel_levels = _in_order(data[panel], panels)
    line_levels = _in_order(data[line], lines)
    fig, axes = _panels(len(panel_levels), title, style=style, ax=ax)
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
    _legend(fig, line_levels, colors, train_range, title=legend or line)
    return _done(fig, path, style)


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
    panel_levels = _in_order(curves[panel], panels)
    line_levels = _in_order(curves[line], lines)
    fig, axes = _panels(len(panel_levels), title, style=style, ax=ax)
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
    _legend(fig, line_levels, colors, title=legend or line)
    return _done(fig, path, style)


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
        else [(n, summary[summary[line] == n]) for n in _in_order(summary[line], lines)]
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
    return _done(fig, path, style)


def _labels(block: str, axis: str, tokens: Mapping[str, Sequence[str]], size: int) -> Sequence[str] | None:
    """Token labels for one axis when they fit: encoder and cross keys are source tokens, the rest target."""
    source_side = block.startswith("encoder") or (block.startswith("cross") and axis == "k")
    labels = tokens.get("src_tokens" if source_side else "tgt_tokens")
    return list(labels) if labels is not None and len(labels) == size and size <= 32 else None


def attention_maps(
    maps: Mapping[str, np.ndarray],
    tokens: Mapping[str, Sequence[str]],
    title: str,
    path: Path,
    max_layers: int = 4,
    max_heads: int = 4,
    style: FigureStyle | None = None,
) -> Path:
    """A grid of heatmaps: a row per ``block/layer`` map, a column per head (capped), rows of weights sum to 1."""
    keys = list(maps)[:max_layers]
    heads = min(max(maps[k].shape[0] for k in keys), max_heads)
    style = style_of(style)
    fig = Figure(figsize=style.size((2.6 * heads + 1.0, 2.5 * len(keys) + 0.6)), dpi=DPI, layout="constrained")
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
    return _save(fig, path, style)


def bench_scaling(records: pd.DataFrame, colors: Mapping[str, tuple], path: Path) -> Path:
    """Time and peak memory vs sequence length on log–log axes, a line per variant and backend (ok points only)."""
    style = style_of(colors)
    fig = Figure(figsize=style.size((11, 4.2)), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    ax_time, ax_mem = fig.subplots(1, 2)
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
    return _save(fig, path, style)
