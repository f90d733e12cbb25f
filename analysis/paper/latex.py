"""The report's tables as LaTeX: one ``.tex`` per table, laid out by pandas' ``Styler.to_latex``.

Each file is a ``table`` float with booktabs rules that needs only ``\\usepackage{booktabs}``;
``tables.tex`` inputs them all (set ``\\reportlatexdir`` to this folder, with a trailing
slash, when the paper lives elsewhere), and ``preview.tex`` is a minimal document around
``tables.tex`` (``pdflatex preview.tex``).

A value is ``mean ± CI (n)``: the mean over the completed seeds of a cell, the half-width
of its 95% t-interval and the number of seeds. Both are rounded to the decimal of the
interval's first significant digit (0.0437 -> 0.04, so 0.6123 -> 0.61), which is all the
interval supports; a cell without an interval (one seed, or no spread) takes the finest
decimal of the intervals in its table, or 3 decimals when there are none. The best cell
is bold; marks say what the tests found and each table's caption says what they mean.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from analysis.stats import inference

FALLBACK_DECIMALS = 3
MAX_DECIMALS = 6
PREAMBLE = "\\documentclass{article}\n\\usepackage{booktabs}\n"
# Characters LaTeX treats specially, and the Unicode the report's labels use, as pdflatex-safe text.
_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "|": r"\textbar{}",
    "±": r"$\pm$",
    "×": r"$\times$",
    "—": "---",
    "–": "--",
    "−": "$-$",
    "≈": r"$\approx$",
    "≤": r"$\leq$",
    "≥": r"$\geq$",
    "α": r"$\alpha$",
    "→": r"$\to$",
    "★": r"$\star$",
    "⚠": "(!)",
    "†": r"\dag{}",
    "…": r"\ldots{}",
    "·": r"$\cdot$",
    "σ": r"$\sigma$",
}
_SPECIAL_RE = re.compile("|".join(re.escape(c) for c in _SPECIAL))


def tex_escape(text: object) -> str:
    """``text`` as LaTeX that pdflatex typesets literally; other non-ASCII characters become '?'."""
    escaped = _SPECIAL_RE.sub(lambda m: _SPECIAL[m.group(0)], str(text))
    return escaped.encode("ascii", "replace").decode("ascii")


# ---------------------------------------------------------------- numbers


def ci_decimals(half: float) -> int | None:
    """Decimals that keep one significant digit of the interval's half-width; None without one."""
    if half is None or not math.isfinite(half) or half <= 0:
        return None
    decimals = -math.floor(math.log10(half))
    if round(half, decimals) >= 10.0 ** -(decimals - 1):  # 0.096 rounds to 0.10: one digit is 0.1
        decimals -= 1
    return min(decimals, MAX_DECIMALS)


def rounded(x: float, decimals: int) -> str:
    """``x`` to ``decimals`` places (negative: tens, hundreds), without a minus sign on zero."""
    if not math.isfinite(x):
        return "--"
    value = round(x, decimals)
    text = f"{value:.{max(decimals, 0)}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


@dataclass
class Value:
    """One table cell: a mean with its interval and seed count, and how the tests marked it."""

    mean: float
    half: float
    n: int
    decimals: int = FALLBACK_DECIMALS
    best: bool = False
    baseline: bool = False
    mark: str = ""  # a key of MARKS

    def latex(self) -> str:
        spread = f" $\\pm$ {rounded(self.half, self.decimals)}" if self.n > 1 and math.isfinite(self.half) else ""
        mark = f"$^{{{MARKS[self.mark][0]}}}$" if self.mark else ""
        return f"{rounded(self.mean, self.decimals)}{spread} ({self.n}){mark}"


# mark -> (LaTeX, meaning in the legend)
MARKS = {
    "worse": (
        r"*",
        "significantly worse than the best cell of its column (Welch's t-test, Holm-corrected over "
        "the column, $\\alpha = {alpha}$)",
    ),
    "untested": (r"\dagger", "not tested: fewer than two seeds"),
    "better": (
        r"\uparrow",
        "significantly better than the baseline (Welch's t-test, Holm-corrected over the table, $\\alpha = {alpha}$)",
    ),
    "below": (r"\downarrow", "significantly worse than the baseline (same test)"),
    "differs": (r"\neq", "significantly different from the baseline (same test; the metric has no direction)"),
}


def with_decimals(values: list[Value]) -> list[Value]:
    """Each value at its interval's precision; those without one at the finest precision of the others."""
    found = [d for d in (ci_decimals(v.half) if v.n > 1 else None for v in values) if d is not None]
    fallback = max(found) if found else FALLBACK_DECIMALS
    for v in values:
        own = ci_decimals(v.half) if v.n > 1 else None
        v.decimals = own if own is not None else fallback
    return values


# ---------------------------------------------------------------- one table through pandas' Styler


def _cell_text(value: object) -> str:
    if isinstance(value, Value):
        return value.latex()
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "--"
    return tex_escape(value)


def styled(frame: pd.DataFrame, caption: str, label: str) -> str:
    """``frame`` (first column: row labels; the others: ``Value`` or text) as a booktabs ``table`` float.

    pandas' Styler lays the table out; best cells are bold and the baseline underlined through its
    LaTeX-command styles, so no table line is assembled by hand.
    """
    first, rest = frame.columns[0], list(frame.columns[1:])
    styler = frame.style.hide(axis="index")
    styler = styler.format(tex_escape, subset=[first]).format(_cell_text, subset=rest)
    styler = styler.format_index(tex_escape, axis=1)

    def emphasis(data: pd.DataFrame) -> pd.DataFrame:
        def props(v: object) -> str:
            if not isinstance(v, Value):
                return ""
            return ("textbf:--rwrap;" if v.best else "") + ("underline:--rwrap;" if v.baseline else "")

        return data.map(props)

    styler = styler.apply(emphasis, axis=None, subset=rest)
    styler = styler.set_table_styles([{"selector": "small", "props": ":;"}], overwrite=False)
    return styler.to_latex(
        hrules=True,
        column_format="l" + "c" * len(rest),
        caption=caption,
        label=label,
        position="htbp",
        position_float="centering",
    )


def legend(marks: set[str], alpha: float = inference.ALPHA) -> str:
    used = [m for m in MARKS if m in marks]
    return " ".join(f"$^{{{MARKS[m][0]}}}$ {MARKS[m][1].format(alpha=alpha)}." for m in used)


def _label(*parts: str) -> str:
    return "tab:" + re.sub(r"[^A-Za-z0-9]+", "-", "-".join(parts)).strip("-").lower()[:60]


def file_name(*parts: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", "-".join(parts)).strip("-").lower()[:80] + ".tex"


VALUE_NOTE = "mean $\\pm$ half-width of its 95\\% t-interval over seeds (number of completed seeds)"


# ---------------------------------------------------------------- the report's tables


def summary_table(summary) -> tuple[str, pd.DataFrame]:
    """The task's summary (``analysis.report.plan.summary.TaskSummary``): cells ranked in and beyond the training
    range."""
    from analysis.report.plan.summary import by_key

    labels = summary.labels()
    columns = [
        (f"{summary.main} {c.title}" if c.title != "whole test set" else c.metric, by_key(c.ranking))
        for c in summary.columns
    ]
    values: dict[tuple[tuple, str], Value] = {}
    for title, rows in columns:
        for key, r in rows.items():
            mark = "" if r["best"] else "untested" if not math.isfinite(r["p"]) else "worse" if r["worse"] else ""
            # every cell with the best mean is bold (rank 1 is shared by equal means)
            values[key, title] = Value(
                float(r["mean"]), float(r["ci_half"]), int(r["n"]), best=int(r["rank"]) == 1, mark=mark
            )
    with_decimals(list(values.values()))
    records = [
        {"cell": labels[key], **{title: values.get((key, title)) for title, _ in columns}} for key in summary.order
    ]
    frame = pd.DataFrame(records, columns=["cell", *[t for t, _ in columns]])
    marks = {v.mark for v in values.values() if v.mark}
    better = inference.direction(summary.columns[0].metric) or "higher"
    testable = any(np.isfinite(c.ranking["p"].to_numpy(float)).any() for c in summary.columns)
    scopes = "; ".join(f"{c.title}: {c.scope_text}" for c in summary.columns)
    caption = (
        f"{summary.task}: cells ranked by {summary.main} ({better} is better; {scopes}). "
        f"Each value: {VALUE_NOTE}. Bold: the best mean of each column. "
        + (
            "Unmarked: not significantly different from the best. "
            if testable
            else "One seed per cell: no test is possible. "
        )
    )
    caption = tex_escape(caption).replace(tex_escape(VALUE_NOTE), VALUE_NOTE) + legend(marks)
    return styled(frame, caption, _label("summary", summary.task)), frame


def _best_mean(here: pd.DataFrame, grid, better: str | None) -> float | None:
    """The best mean over the grid's cells in the direction ``better`` (None: direction unknown, or no cell)."""
    present = here[here.index.isin(set(grid.cells["cell"]))]
    if better is None or not len(present):
        return None
    return present["mean"].max() if better == "higher" else present["mean"].min()


def _verdicts(comparisons: pd.DataFrame, metric: str, baseline: str | None) -> dict:
    """{cell: verdict} of the metric's tests against the baseline cell ({} without one)."""
    if baseline is None or not len(comparisons):
        return {}
    mine = comparisons[(comparisons["baseline_cell"] == baseline) & (comparisons["metric"] == metric)]
    return dict(zip(mine["cell"], mine["verdict"]))


def _corner(grid) -> str:
    """The table's top-left header: the row factor / the column factor."""
    if grid.columns is not None:
        return f"{grid.rows.name} / {grid.columns.name}"
    return grid.rows.name if grid.rows is not None else "cell"


def _grid_records(
    grid, here: pd.DataFrame, columns: list, corner: str, best: float | None, baseline: str | None, verdicts: dict
) -> tuple[list[dict], list[Value]]:
    """One record per grid row: each column's Value (None where the grid has no cell, "no value" where the cell
    has no summary), and every Value placed."""
    mark_of = {"better": "better", "worse": "below", "differs": "differs"}
    records, values = [], []
    for row in grid.row_levels:
        record: dict = {corner: row}
        for column in columns:
            hit = grid.cell_at(row, column if grid.columns is not None else None)
            if hit is None:
                record[column] = None
                continue
            cell = hit["cell"]
            if cell not in here.index:
                record[column] = "no value"
                continue
            s = here.loc[cell]
            value = Value(
                float(s["mean"]),
                float(s["ci_half"]),
                int(s["n"]),
                best=best is not None and s["mean"] == best,
                baseline=cell == baseline,
                mark=mark_of.get(verdicts.get(cell, ""), ""),
            )
            values.append(value)
            record[column] = value
        records.append(record)
    return records, values


def _metric_caption(grid, metric: str, better: str | None, baseline: str | None, values: list[Value]) -> str:
    where = f" ({grid.title})" if grid.where else ""
    how = f"{better} is better, the best cell bold" if better else "direction unknown, no best cell marked"
    base = " Underlined: the baseline." if baseline is not None and any(v.baseline for v in values) else ""
    caption = (
        tex_escape(f"{grid.task}{where}: {metric}; ")
        + VALUE_NOTE
        + tex_escape(f"; {how}.")
        + base
        + " "
        + legend({v.mark for v in values if v.mark})
    )
    return caption.strip()


def metric_table(
    grid, metric: str, cells: pd.DataFrame, comparisons: pd.DataFrame, baseline: str | None
) -> tuple[str, pd.DataFrame]:
    """One table of the report: the grid's rows × columns, each cell mean ± CI (n) of ``metric``.

    ``cells``: ``analysis.stats.cell_summary`` of the metric; ``comparisons``: its tests against
    the table's ``baseline`` cell (verdicts better / worse / differs mark the cells).
    """
    here = cells[cells["task"] == grid.task].set_index("cell")
    better = inference.direction(metric)
    columns = grid.column_levels or [metric]
    corner = _corner(grid)
    verdicts = _verdicts(comparisons, metric, baseline)
    records, values = _grid_records(grid, here, columns, corner, _best_mean(here, grid, better), baseline, verdicts)
    with_decimals(values)
    frame = pd.DataFrame(records, columns=[corner, *columns])
    caption = _metric_caption(grid, metric, better, baseline, values)
    return styled(frame, caption, _label(grid.task, metric, grid.title)), frame


def claims_table(results: pd.DataFrame) -> tuple[str, pd.DataFrame]:
    """The claims (``analysis.claims.evaluate``): each side's mean ± CI (n), the test, Holm's p and the verdict."""
    records, values = [], []
    for r in results.to_dict("records"):
        sides = []
        for side in ("a", "b"):
            n = r[f"{side}_n"]
            if n is None or (isinstance(n, float) and not math.isfinite(n)) or int(n) == 0:
                sides.append(None)
                continue
            value = Value(float(r[f"{side}_mean"]), float(r[f"{side}_ci"]), int(n))
            sides.append(value)
        with_decimals([v for v in sides if v is not None])
        values += [v for v in sides if v is not None]
        p = r["p_holm"]
        records.append(
            {
                "claim": r["claim"],
                "metric": r["metric"],
                "expected": r["expect"],
                "a": sides[0],
                "b": sides[1] if sides[1] is not None else "--",
                "test": r["test"] if isinstance(r["test"], str) else "--",
                "p (Holm)": _p_text(p),
                "verdict": r["verdict"],
            }
        )
    frame = pd.DataFrame(records, columns=["claim", "metric", "expected", "a", "b", "test", "p (Holm)", "verdict"])
    caption = (
        "Claims: each side "
        + VALUE_NOTE
        + tex_escape(
            "; the smaller of the two one-sided tests decides (Welch for two sides, TOST for equivalence, a one-sample "
            f"t-test on per-run ratios), Holm-corrected over the claims; verdict at α = {inference.ALPHA}."
        )
    )
    return styled(frame, caption, _label("claims")), frame


def _p_text(p: float) -> str:
    if p is None or not math.isfinite(p):
        return "--"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


# ---------------------------------------------------------------- files


def write_tables(folder: Path, tables: Sequence[tuple[str, str]]) -> list[Path]:
    """Write each (file name, LaTeX) into ``folder``, then ``tables.tex`` and ``preview.tex``; returns the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.tex"):  # tables of an earlier report would be mistaken for new ones
        stale.unlink()
    paths = []
    for name, tex in tables:
        path = folder / name
        path.write_text(tex, encoding="utf-8")
        paths.append(path)
    inputs = "".join(f"\\input{{\\reportlatexdir {p.stem}}}\n" for p in paths)
    (folder / "tables.tex").write_text(
        "% Every table of the report; needs \\usepackage{booktabs}. From another folder, first\n"
        "% \\newcommand{\\reportlatexdir}{path/to/latex/} (with the trailing slash).\n"
        "\\providecommand{\\reportlatexdir}{}\n" + inputs,
        encoding="utf-8",
    )
    (folder / "preview.tex").write_text(
        PREAMBLE + "\\begin{document}\n\\input{tables}\n\\end{document}\n", encoding="utf-8"
    )
    return paths
