"""The report's "How each variant attends": attention statistics against evaluation length, per cell.

Reads ``attention_stats`` from each completed run's result.json (see the result.json
schema in docs/configuration.md). A *cell* is every config key that varies across the task's runs except the seed
(attention, position, and any other factor a sweep varies), so a line never averages two
configurations; seeds of one cell are averaged.

Per task: a figure with the entropy ratio and the mean attended distance of each block
(mean over its layers) and the alignment accuracy of the best-aligned cross layer, against
evaluation length, a line per cell, the training range shaded; and a table per layer at
the longest evaluation length inside the training range and at the longest overall.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np
import pandas as pd

from analysis.report.document.model import Figure, Paragraph, Section, Table, fmt
from analysis.report.figures.figure_canvas import NARROW, finish, panel_grid
from analysis.report.figures.figure_style import FigureStyle, line_id, palette, style_of

if TYPE_CHECKING:
    from matplotlib.figure import Figure as MplFigure

COLUMNS = ["run_id", "task", "cell", "seed", "layer", "block", "length", "stat", "value"]
BLOCKS = ("encoder_self", "decoder_self", "cross")
# config keys that never make two runs different cells
NOT_FACTORS = (
    "config.seed",
    "config.name",
    "config.logger.",
    "config.resume",
    "config.num_threads",
    "config.progress_bar",
    "config.wandb_uploads.",
    "config.hydra",
    "config.fail_at_step",
    "config.eval.",
)
TABLE_STATS = (
    ("entropy_ratio", "H / log n"),
    ("entropy", "H (nats)"),
    ("distance", "E|i−j|"),
    ("offset", "E(j−i)"),
    ("first", "first key"),
    ("self", "own index"),
    ("align_acc", "align. acc"),
    ("align_share", "align. share"),
    ("cut", "cut"),
)


def _result(row: dict[str, Any]) -> dict[str, Any] | None:
    source = Path(str(row.get("source") or ""))
    path = source if source.name == "result.json" else Path(str(row.get("run_dir") or "")) / "result.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def cell_labels(runs: pd.DataFrame) -> pd.Series:
    """One label per run: ``attention+position`` and every other config key that varies between runs of
    one attention and position (seed excluded); a variant's own parameters, present only for it, do not."""
    labels = runs["attention"].astype(str) + "+" + runs["position"].astype(str)
    for column in runs.columns:
        if not column.startswith("config.") or column.startswith(NOT_FACTORS):
            continue
        values = runs[column].map(lambda v: json.dumps(v, sort_keys=True, default=str).strip('"'))
        if values.groupby(labels).nunique().max() > 1:
            labels = labels + f", {column[len('config.') :]}=" + values
    return labels


def attention_frame(runs: pd.DataFrame) -> pd.DataFrame:
    """Long frame of the statistics of every completed run: one row per run, layer, length and statistic."""
    done = runs[runs["status"] == "completed"].copy()
    if done.empty:
        return pd.DataFrame(columns=COLUMNS)
    done["cell"] = cell_labels(done)
    rows = []
    for run in done.to_dict("records"):
        result = _result(run)
        stats = (result or {}).get("attention_stats") or {}
        for layer, by_length in stats.items():
            for length, values in by_length.items():
                if not str(length).isdigit():
                    continue
                for stat, value in values.items():
                    rows.append(
                        {
                            "run_id": run["run_id"],
                            "task": run["task"],
                            "cell": run["cell"],
                            "seed": run["seed"],
                            "layer": layer,
                            "block": layer.split("/")[0],
                            "length": int(length),
                            "stat": stat,
                            "value": math.nan if value is None else float(value),
                        }
                    )
    return pd.DataFrame(rows, columns=COLUMNS)


def best_cross_layer(frame: pd.DataFrame, train: tuple[int, int] | None) -> pd.DataFrame:
    """Per run, the alignment accuracy of the cross layer that aligns best inside the training lengths."""
    align = frame[(frame["block"] == "cross") & (frame["stat"] == "align_acc")].dropna(subset=["value"])
    if align.empty:
        return align
    inside = align if train is None else align[align["length"].between(train[0], train[1])]
    scored = (inside if not inside.empty else align).groupby(["run_id", "layer"])["value"].mean()
    best = scored.groupby(level="run_id").idxmax().map(lambda key: key[1])
    return align[align["layer"] == align["run_id"].map(best)]


def _curves(frame: pd.DataFrame, train: tuple[int, int] | None) -> list[tuple[str, pd.DataFrame]]:
    """(panel title, rows of cell/seed/length/value) for every panel of the figure."""
    panels = []
    for stat, label in (("entropy_ratio", "entropy ratio H / log n"), ("distance", "attended distance E|i−j|")):
        for block in BLOCKS:
            part = frame[(frame["block"] == block) & (frame["stat"] == stat)]
            if not part.empty:  # the block's layers averaged, per run
                part = part.groupby(["cell", "seed", "run_id", "length"], as_index=False)["value"].mean()
                panels.append((f"{label} — {block}", part))
    align = best_cross_layer(frame, train)
    if not align.empty:
        panels.append(("alignment accuracy — best cross layer", align))
    return panels


def _cell_styles(frame: pd.DataFrame, style: FigureStyle, report_labels: Mapping[str, str]) -> dict:
    """(colour, marker, the report's cell label) per label of this section, from the report's cell of its runs."""
    cells = sorted(frame["cell"].unique())
    fallback = palette(cells)
    first_run = frame.drop_duplicates("cell").set_index("cell")["run_id"]
    found = {}
    for cell in cells:
        label = report_labels.get(first_run[cell], cell)
        found[cell] = (*(style.for_label(label) or (fallback[cell], "o")), label)
    return found


def curves_figure(
    frame: pd.DataFrame,
    task: str,
    train: tuple[int, int] | None,
    path: Path | None = None,
    style: FigureStyle | None = None,
    report_labels: Mapping[str, str] | None = None,
    ax=None,
) -> Path | MplFigure | None:
    """``report_labels``: run id -> the report's cell label, so each line has its cell's colour in every figure.

    Saved to ``path`` (returns the path), or the figure (into ``ax``, one axes per panel) without one; None when
    no run recorded the statistics it draws.
    """
    panels = _curves(frame, train)
    if not panels:
        return None
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    style = style_of(style)
    cells = sorted(frame["cell"].unique())
    looks = _cell_styles(frame, style, report_labels or {})
    colors = {c: looks[c][0] for c in cells}
    fig, axes = panel_grid(len(panels), f"{task}: how each variant attends", sharey=False, style=style, ax=ax)
    for ax, (title, data) in zip(axes, panels):
        if train is not None:
            ax.axvspan(train[0], train[1], color="0.88", zorder=0)
        for cell, group in data.groupby("cell", sort=True):
            mean = group.groupby("length")["value"].mean()
            ax.plot(
                mean.index,
                mean.to_numpy(),
                marker=looks[cell][1],
                ms=3,
                color=colors[cell],
                gid=line_id("cell", looks[cell][2]),
            )
        ax.set_title(title if style.width is None else title.replace(" — ", "\n"), fontsize=9)  # narrow panels
        ax.set_xlabel("evaluation length")
        ax.grid(alpha=0.3)
    handles = [Line2D([], [], color=colors[c], marker=looks[c][1], ms=4, lw=2, label=c) for c in cells]
    if train is not None:
        handles.append(Patch(color="0.88", label=f"train lengths {train[0]}–{train[1]}"))
    if style.width is not None and style.width < NARROW:
        fig.legend(handles=handles, loc="outside lower center", fontsize=7, title="cell", title_fontsize=8, ncols=2)
    else:
        fig.legend(handles=handles, loc="outside right upper", fontsize=7, title="cell", title_fontsize=8)
    return finish(fig, path, style)


def _layer_order(layer: str) -> tuple:
    block, _, index = layer.partition("/")
    return (BLOCKS.index(block) if block in BLOCKS else len(BLOCKS), block, int(index) if index.isdigit() else 0)


def layer_tables(frame: pd.DataFrame, train: tuple[int, int] | None) -> list[Section]:
    """A table per layer: each cell at the longest length inside the training range and the longest overall."""
    lengths = sorted(frame["length"].unique())
    inside = [n for n in lengths if train is None or train[0] <= n <= train[1]]
    chosen = list(dict.fromkeys([*(inside[-1:] if inside else []), lengths[-1]]))
    sections = []
    for layer in sorted(frame["layer"].unique(), key=_layer_order):
        part = frame[(frame["layer"] == layer) & frame["length"].isin(chosen)]
        means = part.groupby(["cell", "length", "stat"])["value"].agg(["mean", "count"]).reset_index()
        stats = [
            (s, label)
            for s, label in TABLE_STATS
            if s in set(means["stat"])
            and np.isfinite(means.loc[means["stat"] == s, "mean"]).any()
            and not (s == "cut" and means.loc[means["stat"] == s, "mean"].abs().max() < 1e-6)
        ]
        header = ["cell", "length", *[label for _, label in stats], "seeds"]
        rows = []
        for (cell, length), group in means.groupby(["cell", "length"], sort=True):
            by_stat = dict(zip(group["stat"], group["mean"]))
            where = "" if train is None else (" (train)" if train[0] <= length <= train[1] else " (beyond)")
            seeds = int(group["count"].max())
            rows.append([cell, f"{length}{where}", *[fmt(by_stat.get(s, math.nan)) for s, _ in stats], str(seeds)])
        caption = (
            f"{layer}: means over seeds at evaluation lengths {', '.join(map(str, chosen))}; "
            "H / log n: entropy over log of the keys a query can see (1 = uniform, 0 = one key)"
        )
        sections.append(Section(f"{layer}", [Table(header, rows, caption)], level=4))
    return sections


def _train_range(runs: pd.DataFrame) -> tuple[int, int] | None:
    ranges = [tuple(r) for r in runs["train_lengths"] if isinstance(r, (list, tuple)) and len(r) == 2]
    return max(set(ranges), key=ranges.count) if ranges else None


def attention_section(
    runs: pd.DataFrame, task: str, figures_dir: Path, style: FigureStyle | None = None
) -> list[Section]:
    """The section for one task, or nothing when no run of it recorded attention statistics."""
    task_runs = runs[runs["task"] == task]
    frame = attention_frame(task_runs)
    if frame.empty:
        return []
    train = _train_range(task_runs)
    section = Section(f"How each variant attends — {task}", level=3)
    section.add(
        Paragraph(
            "Statistics of every attention layer over the test set, per evaluation length (experiments: "
            "eval.attention_stats): the entropy of each query's weights over log of the keys it can see, the mean "
            "distance |i−j| it reads at, and, where the task names the source position each output position should "
            "read (copy, reverse, sort), how often the weights peak on it."
        )
    )
    report_labels = dict(zip(task_runs["run_id"], task_runs["cell_label"])) if "cell_label" in task_runs.columns else {}
    path = curves_figure(
        frame,
        task,
        train,
        figures_dir / f"attends-{hashlib.sha1(task.encode()).hexdigest()[:8]}.png",
        style,
        report_labels,
    )
    if path is not None:
        shaded = f"shaded: training lengths {train[0]}–{train[1]}; " if train else ""
        section.add(
            Figure(
                path,
                f"{task}: per block, entropy ratio and attended distance (mean over the block's "
                f"layers and over seeds); alignment accuracy of the cross layer that aligns best "
                f"inside the training lengths; {shaded}a line per cell",
            )
        )
    section.add(*layer_tables(frame, train))
    return [section]
