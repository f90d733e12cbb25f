"""The canvas every report figure is drawn on and saved from: matplotlib's object API on the Agg canvas (no
pyplot, no display, no global state).

``panel_grid`` lays out one panel per level (screen sizes, or a paper width with
balanced rows), ``figure_legend`` names every line once for the whole figure,
``fit_fonts`` brings text to paper sizes (5 to 9 pt), and ``save`` writes each
figure as PNG (for report.html), PDF and SVG (for a paper) side by side, with the
same bytes for the same inputs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text

from analysis.command.outputs import whole_or_absent
from analysis.report.figures.figure_style import FORMATS, FigureStyle, style_of

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


def given_axes(ax, n: int) -> tuple[Figure, list] | None:
    """The figure and ``n`` axes of a caller's ``ax`` (one Axes, or a sequence of ``n``); None when not given."""
    if ax is None:
        return None
    axes = list(np.ravel(ax)) if isinstance(ax, (list, tuple, np.ndarray)) else [ax]
    if len(axes) < n:
        raise ValueError(f"ax: this figure draws {n} panels; give {n} axes (plt.subplots(1, {n})[1]), got {len(axes)}")
    return axes[0].figure, axes[:n]


def finish(fig: Figure, path: Path | None, style: FigureStyle | None) -> Figure | Path:
    """Saved to ``path`` (the report: returns the path), or the figure itself (a notebook: path None)."""
    return fig if path is None else save(fig, path, style)


def panel_grid(
    n: int, title: str, sharey: bool = True, style: FigureStyle | None = None, ax=None
) -> tuple[Figure, list]:
    """A figure of ``n`` panels titled ``title`` (or the caller's axes, ``ax``): screen sizes, up to MAX_COLUMNS
    panels a row; at a paper width, as many panels a row as fit at MIN_PANEL_W, rows balanced."""
    given = given_axes(ax, n)
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


def figure_legend(
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


def in_order(values: Sequence[str], order: Sequence[str] | None) -> list[str]:
    """The distinct ``values`` in the given ``order`` (those it does not name after, sorted); sorted without one."""
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
        # each file whole or absent: a write cut short (a full disk, ulimit -f) leaves no part of a figure
        with whole_or_absent(path) as tmp:
            fig.savefig(tmp, format="png", metadata=PNG_METADATA, dpi=PAPER_DPI if paper else DPI)
        # The PNG's constrained layout (figure fractions) holds for the vector copies: solving it again
        # for each would cost as much as drawing. The figure is done after this call.
        fig.set_layout_engine("none")
        if "pdf" in formats:
            with whole_or_absent(path.with_suffix(".pdf")) as tmp:
                fig.savefig(tmp, format="pdf", metadata=PDF_METADATA)
        if "svg" in formats:
            with whole_or_absent(path.with_suffix(".svg")) as tmp:
                fig.savefig(tmp, format="svg", metadata=SVG_METADATA)
    return path
