"""The report's figures for one table of one task: one line per cell, never a mean across cells.

Lines are the levels of the table's column factor and panels the levels of its
row factor; with one factor, one panel with a line per level; with a numeric
factor, the metric against the factor's value. A report-wide budget caps how
many figures are drawn (``FigureBudget``) and says how many were left out.
"""

from __future__ import annotations

import hashlib
import re
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.data.cells import normalise
from analysis.report.document.model import Figure, Paragraph
from analysis.report.figures import plots as figures
from analysis.report.figures.figure_style import FigureStyle
from analysis.report.plan.layout import Grid

MAPS_FILE = "attention_maps.npz"
MAX_MAP_FIGURES = 12
MAX_FIGURES = 36
BLOCK_ORDER = ("encoder_self", "encoder", "decoder_self", "decoder", "cross")
CURVE_METRICS = ("val/loss", "train/loss")


@dataclass
class FigureBudget:
    """How many more figures of a kind the report may draw, and how many it did not."""

    left: int
    skipped: int = 0

    def take(self) -> bool:
        if self.left <= 0:
            self.skipped += 1
            return False
        self.left -= 1
        return True


def safe_name(*parts: str) -> str:
    """A file name from run-supplied strings: readable where possible, unique by hash, never a path."""
    text = "_".join(parts)
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")[:60] or "figure"
    return f"{readable}-{hashlib.sha1(text.encode()).hexdigest()[:8]}.png"


def train_range(task_runs: pd.DataFrame) -> tuple[int, int] | None:
    ranges = [tuple(r) for r in task_runs["train_lengths"] if isinstance(r, (list, tuple)) and len(r) == 2]
    return Counter(ranges).most_common(1)[0][0] if ranges else None


def roles(grid: Grid) -> tuple[str, str, list[str], list[str]]:
    """(panel axis name, line axis name, panel levels, line levels) of a table's figures."""
    if grid.columns is not None:
        return grid.rows.name, grid.columns.name, grid.row_levels, grid.column_levels
    return "task", grid.rows.name if grid.rows else "cell", [grid.task], grid.row_levels


def _placed(data: pd.DataFrame, grid: Grid) -> pd.DataFrame:
    """``data`` (with a cell column) restricted to the table's cells, with panel and line labels."""
    cells = grid.cells.set_index("cell")
    data = data[data["cell"].isin(cells.index)].copy()
    if grid.columns is not None:
        data["_panel"], data["_line"] = data["cell"].map(cells["row"]), data["cell"].map(cells["column"])
    else:
        data["_panel"], data["_line"] = grid.task, data["cell"].map(cells["row"])
    return data


def _title(grid: Grid, what: str) -> str:
    return f"{grid.task}: {what}" + (f" ({grid.title})" if grid.where else "")


def length_figures(
    runs: pd.DataFrame,
    by_length: pd.DataFrame,
    grid: Grid,
    colors: FigureStyle,
    figures_dir: Path,
    budget: FigureBudget,
) -> list[Figure]:
    done = set(runs.loc[(runs["task"] == grid.task) & (runs["status"] == "completed"), "cell"])
    data = _placed(by_length[by_length["cell"].isin(done)], grid)
    data = data[np.isfinite(data["value"].to_numpy(float))]
    train = train_range(runs[runs["task"] == grid.task])
    shaded = f"shaded: training lengths {train[0]}–{train[1]}; " if train else ""
    panel, line, panels, lines = roles(grid)
    out = []
    for metric, group in data.groupby("metric", sort=True):
        if not budget.take():
            continue
        path = figures.length_generalisation(
            group,
            metric,
            train,
            colors,
            _title(grid, f"{metric} vs length"),
            figures_dir / safe_name("length", grid.task, metric, grid.title),
            panel="_panel",
            line="_line",
            panels=panels,
            lines=lines,
            legend=line,
        )
        out.append(
            Figure(
                path,
                f"{grid.task}: {metric} vs evaluation length; a panel per {panel}, a line per "
                f"{line} (one cell each); {shaded}bands: 95% CI over seeds",
            )
        )
    return out


def curve_figure(
    curves: pd.DataFrame,
    runs: pd.DataFrame,
    grid: Grid,
    colors: FigureStyle,
    figures_dir: Path,
    budget: FigureBudget,
) -> Figure | None:
    done = set(runs.loc[(runs["task"] == grid.task) & (runs["status"] == "completed"), "cell"])
    data = _placed(curves[curves["cell"].isin(done)], grid)
    panel, line, panels, lines = roles(grid)
    for metric in CURVE_METRICS:
        here = data[data["metric"] == metric]
        if here.empty:
            continue
        if not budget.take():
            return None
        path = figures.learning_curves(
            here,
            metric,
            colors,
            _title(grid, f"{metric} vs step"),
            figures_dir / safe_name("curves", grid.task, metric, grid.title),
            panel="_panel",
            line="_line",
            panels=panels,
            lines=lines,
            legend=line,
        )
        return Figure(
            path,
            f"{grid.task}: {metric} vs step for completed runs; bold: mean over the seeds of one "
            f"cell, faint: each seed; a panel per {panel}, a colour per {line}",
        )
    return None


def parameter_figure(
    runs: pd.DataFrame,
    grid: Grid,
    metric: str,
    summary: pd.DataFrame,
    colors: FigureStyle,
    figures_dir: Path,
    budget: FigureBudget,
) -> Figure | None:
    """The metric against a numeric factor (rows, else columns) of the table, a line per level of the other."""
    first = runs.drop_duplicates("cell").set_index("cell")
    for axis, other in ((grid.rows, grid.columns), (grid.columns, grid.rows)):
        if axis is None or len(axis.keys) != 1 or axis.name not in first.columns:
            continue
        x = grid.cells["cell"].map(first[axis.name]).map(normalise)
        if x.isna().any() or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in x):
            continue
        means = summary[summary["task"] == grid.task].set_index("cell")
        table = grid.cells.assign(x=x.astype(float))
        table = table[table["cell"].isin(means.index)]
        if table["x"].nunique() < 2:
            continue
        table = table.assign(mean=table["cell"].map(means["mean"]), ci_half=table["cell"].map(means["ci_half"]))
        line = None
        if other is not None:
            table["_line"] = table["row"] if other is grid.rows else table["column"]
            line = "_line"
        if not budget.take():
            return None
        lines = (grid.row_levels if other is grid.rows else grid.column_levels) if other is not None else None
        path = figures.parameter_curve(
            table,
            metric,
            axis.name,
            colors,
            _title(grid, f"{metric} vs {axis.name}"),
            figures_dir / safe_name("param", grid.task, metric, axis.name, grid.title),
            line=line,
            lines=lines,
            legend=other.name if other is not None else None,
        )
        per = f", a line per {other.name}" if other is not None else ""
        return Figure(path, f"{grid.task}: {metric} against {axis.name} (mean, bars: 95% CI over seeds){per}")
    return None


def _load_maps(path: Path) -> tuple[dict[str, np.ndarray], dict[str, list[str]]] | None:
    """Arrays keyed ``block/layer`` (H, Tq, Tk) and optional token labels; pickles are refused."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            maps = {k: np.asarray(npz[k], dtype=float) for k in npz.files if "/" in k and npz[k].ndim == 3}
            tokens = {k: [str(t) for t in npz[k]] for k in ("src_tokens", "tgt_tokens") if k in npz.files}
    except (OSError, ValueError) as err:
        warnings.warn(f"{path}: skipped, not a readable attention map file ({err})", stacklevel=2)
        return None

    def order(key: str) -> tuple:
        # Encoder first, then decoder, then cross attention; layers in numeric order.
        block, _, layer = key.partition("/")
        rank = BLOCK_ORDER.index(block) if block in BLOCK_ORDER else len(BLOCK_ORDER)
        return (rank, block, int(layer) if layer.isdigit() else 0, layer)

    return {k: maps[k] for k in sorted(maps, key=order)}, tokens


def map_figures(
    runs: pd.DataFrame, task: str, budget: FigureBudget, figures_dir: Path, style: FigureStyle | None = None
) -> list:
    """Heatmaps of the first seed of each cell that saved maps, while the report-wide budget lasts."""
    task_runs = runs[runs["task"] == task].sort_values(["cell_label", "seed"])
    candidates = [
        r
        for r in task_runs.to_dict("records")
        if isinstance(r["run_dir"], str) and (Path(r["run_dir"]) / MAPS_FILE).is_file()
    ]
    firsts: dict[str, dict] = {}
    for r in candidates:
        firsts.setdefault(r["cell"], r)
    blocks: list = []
    before = budget.skipped
    for r in firsts.values():
        if budget.left <= 0:
            budget.skipped += 1
            continue
        loaded = _load_maps(Path(r["run_dir"]) / MAPS_FILE)
        if not loaded or not loaded[0]:
            continue
        maps, tokens = loaded
        budget.take()
        title = f"{task}: {r['cell_label']}, seed {r['seed']}"
        path = figures.attention_maps(
            maps, tokens, title, figures_dir / safe_name("maps", task, r["cell_label"]), style=style
        )
        shown = ", ".join(list(maps)[:4])
        blocks.append(
            Figure(
                path,
                f"Attention weights of {r['cell_label']} on one fixed example "
                f"(seed {r['seed']}; rows: {shown}; queries down, keys across)",
            )
        )
    skipped = budget.skipped - before
    if skipped:
        blocks.append(
            Paragraph(
                f"{skipped} more cells saved attention maps; not drawn (cap of "
                f"{MAX_MAP_FIGURES} map figures per report).",
                kind="note",
            )
        )
    return blocks
