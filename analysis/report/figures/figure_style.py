"""How every report figure looks: a colour-blind-safe colour per variant and a marker per panel level, one
``FigureStyle`` per report, so a variant has the same colour in every figure.

A colour per line level (Okabe and Ito's eight, then matplotlib's tableau-colorblind10)
and a marker per panel level, so a cell drawn alone (the summary, the attention
statistics) keeps its table's colour and shape. ``FigureStyle.width`` draws every
figure that many inches wide for a paper (3.3 for one column, 6.9 for two); without it
figures are sized for the screen. ``FigureStyle.formats`` names the files each figure
is saved as (``analysis.report.figures.figure_canvas.save``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from analysis.command.errors import ReportError

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
    """One style for every figure of a report, from its tables (``analysis.report.plan.layout.Grid``).

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
