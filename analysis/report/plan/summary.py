"""The answer first: per task, the cells ranked by the main metric inside the training range and beyond it.

The procedure, stated again under every summary table:

- **Main metric.** The first per-length metric in ``MAIN_METRICS`` that the task
  reports (classification ``acc``, language modelling ``bpc``, sequence tasks
  ``token_acc``), as its in-range and beyond-range aggregates
  (analysis.data.ranges). A task without per-length results (or without a training
  range) is ranked on the whole test set by the first of ``WHOLE_SET_METRICS``
  it reports, in one column.
- **Per column**, over the completed seeds of each cell: mean and 95%
  t-interval; the best cell is the one with the best mean (direction from the
  metric's name); cells with equal means share the rank and are all marked best.
- **Indistinguishable from the best.** Every other cell is compared with the
  best by Welch's t-test (two-sided); the p-values of one column are
  Holm-corrected together. A cell whose corrected p is at least ``ALPHA`` is
  marked as not significantly different from the best; the others are
  significantly worse. Samples without spread on both sides have no t
  statistic: equal means count as p = 1, different means as p = 0. A side with
  fewer than two seeds gets no test, and the summary says so.
- **A winner** is named only when one cell has the best mean and every other
  cell is significantly worse. A tie (two cells sharing the best mean, or a
  cell not significantly different from the best) names no winner: the answer
  says which cells tie and which cell merely has the best mean; so does a
  column in which one seed per cell allows no test.

Cells are the report's cells: ``cell`` / ``cell_label`` when the runs frame has
them (the configuration minus seed), otherwise (attention, position). The answer, the
table and the procedure are written out by ``analysis.report.front.summary_text``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd

from analysis.data.ranges import BEYOND_RANGE, IN_RANGE, SCOPE_TEXT, describe, range_metric, train_range
from analysis.report.document.model import Cell, Table, fmt
from analysis.stats import inference

MAIN_METRICS = ("acc", "bpc", "token_acc", "seq_acc", "loss")
WHOLE_SET_METRICS = (
    "test/bleu",
    "test/chrf",
    "test/acc",
    "test/bpc",
    "test/token_acc",
    "test/seq_acc",
    "test/loss",
    "val/loss",
)
ALPHA = inference.ALPHA
RANK_COLUMNS = ["key", "label", "n", "mean", "ci_half", "rank", "best", "p", "p_holm", "tie", "worse"]


# ---------------------------------------------------------------- cells


def cell_keys(frame: pd.DataFrame) -> list[str]:
    """The columns that name a cell: ``cell`` when the frame has it, otherwise attention and position."""
    return ["cell"] if "cell" in frame.columns else ["attention", "position"]


def cell_label(frame: pd.DataFrame, key: tuple) -> str:
    """A readable name of one cell (``cell_label`` when present, otherwise ``attention+position``)."""
    if "cell_label" in frame.columns:
        labels = frame.loc[frame["cell"] == key[0], "cell_label"].dropna()
        if len(labels):
            return str(labels.iloc[0])
    return "+".join(str(k) for k in key)


def _key(value) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def by_key(ranking: pd.DataFrame) -> dict[tuple, pd.Series]:
    """Rows of a ranking keyed by cell (a dict: pandas would turn tuple keys into a MultiIndex)."""
    return {row["key"]: row for _, row in ranking.iterrows()}


# ---------------------------------------------------------------- the test against the best


def welch_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Welch p of a vs b; NaN with fewer than two values on a side; p = 1 / 0 for spread-free samples."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 2 or len(b) < 2:
        return math.nan
    if a.var() == 0.0 and b.var() == 0.0:
        # No spread on either side: t is 0/0 or ±inf; scipy gives NaN for equal means.
        return 1.0 if a.mean() == b.mean() else 0.0
    return float(inference.welch(a, b)["p"])


def rank_cells(frame: pd.DataFrame, metric: str, alpha: float = ALPHA) -> pd.DataFrame:
    """One row per cell with a completed value of ``metric``, best first.

    Columns: key (tuple), label, n, mean, ci_half, rank (1 = best; equal means share
    a rank), best, p and p_holm (Welch against the best cell, Holm over the
    column), tie (not significantly different from the best), worse
    (significantly worse). ``frame``: the runs of one task.
    """
    better = inference.direction(metric) or "higher"
    keys = cell_keys(frame)
    done = inference.completed(frame, metric)
    rows = []
    for key, group in done.groupby(keys, sort=True):
        values = group[metric].to_numpy(float)
        mean, half, n = inference.mean_ci(values)
        rows.append(
            {
                "key": _key(key),
                "label": cell_label(frame, _key(key)),
                "n": n,
                "mean": mean,
                "ci_half": half,
                "values": values,
            }
        )
    if not rows:
        return pd.DataFrame(columns=RANK_COLUMNS)
    table = pd.DataFrame(rows)
    table = table.sort_values(["mean", "label"], ascending=[better == "lower", True], kind="stable")
    table = table.reset_index(drop=True)
    signed = table["mean"] if better == "lower" else -table["mean"]
    table["rank"] = signed.rank(method="min").astype(int)
    table["best"] = table["rank"] == 1  # equal means share the best rank: no label order picks one of them
    best_values = table.loc[0, "values"]
    p = [math.nan] + [welch_p(v, best_values) for v in table["values"].iloc[1:]]
    table["p"] = p
    table["p_holm"] = [math.nan, *inference.holm(p[1:])] if len(p) > 1 else [math.nan]
    tested = np.isfinite(table["p_holm"].to_numpy(float))
    table["tie"] = tested & (table["p_holm"] >= alpha)
    table["worse"] = tested & (table["p_holm"] < alpha)
    return table[RANK_COLUMNS]


# ---------------------------------------------------------------- what to rank


@dataclass
class Column:
    """One ranked column of a summary: a metric over one length range (or the whole test set)."""

    metric: str
    title: str
    scope_text: str
    ranking: pd.DataFrame


@dataclass
class TaskSummary:
    task: str
    main: str  # the per-length metric name (token_acc), or the whole-set metric
    columns: list[Column] = field(default_factory=list)
    train: tuple[int, int] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def order(self) -> list[tuple]:
        """Cell keys in table order: by the last column's rank (beyond range when present), then the first's."""
        if not self.columns:
            return []
        ranks = [{k: r["rank"] for k, r in by_key(c.ranking).items()} for c in self.columns]
        keys = list(dict.fromkeys(k for c in self.columns for k in c.ranking["key"]))
        worst = len(keys) + 1
        return sorted(keys, key=lambda k: tuple(r.get(k, worst) for r in reversed(ranks)))

    def labels(self) -> dict[tuple, str]:
        """Cell key -> readable label."""
        return {k: lab for c in self.columns for k, lab in zip(c.ranking["key"], c.ranking["label"])}


def _finite(frame: pd.DataFrame, metric: str) -> bool:
    return metric in frame.columns and bool(
        np.isfinite(inference.completed(frame, metric)[metric].to_numpy(float)).any()
    )


def common_train_range(frame: pd.DataFrame) -> tuple[int, int] | None:
    """The training range most runs of the task share (the report states it)."""
    ranges = [r for r in (train_range(v) for v in frame["train_lengths"]) if r is not None]
    return max(set(ranges), key=ranges.count) if ranges else None


def summarise_task(
    frame: pd.DataFrame, by_length: pd.DataFrame, task: str, main: str | None = None
) -> TaskSummary | None:
    """The ranked columns of one task; None when the task has no metric with a direction to rank by."""
    runs = frame[frame["task"] == task]
    train = common_train_range(runs)
    lengths = sorted(by_length.loc[by_length["task"] == task, "length"].unique().tolist())
    candidates = [main] if main else list(MAIN_METRICS)
    for name in candidates:
        scoped = [(scope, range_metric(scope, name)) for scope in (IN_RANGE, BEYOND_RANGE)]
        present = [(scope, m) for scope, m in scoped if _finite(runs, m)]
        if not present:
            continue
        summary = TaskSummary(task, name, train=train)
        for scope, metric in present:
            summary.columns.append(
                Column(metric, SCOPE_TEXT[scope], describe(scope, lengths, train), rank_cells(runs, metric))
            )
        if len(present) == 1 and present[0][0] == IN_RANGE:
            summary.notes.append(
                f"No evaluation length of {task} lies beyond its training range "
                f"({describe(IN_RANGE, lengths, train)}), so there is no beyond-range column."
            )
        return summary
    whole = [main] if main else list(WHOLE_SET_METRICS)
    for metric in whole:
        if _finite(runs, metric) and inference.direction(metric):
            summary = TaskSummary(task, metric, train=train)
            summary.columns.append(
                Column(metric, "whole test set", "no per-length evaluation", rank_cells(runs, metric))
            )
            summary.notes.append(
                f"{task} reports no per-length results with a training range, so its cells "
                f"are ranked by {metric} over the whole test set."
            )
            return summary
    return None


def figure_data(frame: pd.DataFrame, by_length: pd.DataFrame, summary: TaskSummary) -> pd.DataFrame:
    """Per-length values of the main metric for completed runs, with a ``label`` column in the table's order."""
    done = frame[(frame["task"] == summary.task) & (frame["status"] == "completed")]
    keys = cell_keys(done)
    label_of = summary.labels()
    runs_label = {
        run: label_of.get(_key(tuple(row) if len(keys) > 1 else row[0]))
        for run, row in zip(done["run_id"], done[keys].itertuples(index=False, name=None))
    }
    data = by_length[(by_length["metric"] == summary.main) & by_length["run_id"].isin(runs_label)]
    data = data[np.isfinite(data["value"].to_numpy(float))].copy()
    data["label"] = data["run_id"].map(runs_label)
    return data.dropna(subset=["label"])


# ---------------------------------------------------------------- hooks for the report


def by_importance(metrics: Sequence[str]) -> list[str]:
    """Metrics in reading order: the range aggregates of the main metrics, other range aggregates, test, the rest."""

    def rank(name: str) -> tuple:
        scope, _, base = name.partition("/")
        if scope in (IN_RANGE, BEYOND_RANGE):
            main = MAIN_METRICS.index(base) if base in MAIN_METRICS else len(MAIN_METRICS)
            return (0, main, scope != IN_RANGE, name)
        if name in WHOLE_SET_METRICS:
            return (1, WHOLE_SET_METRICS.index(name), False, name)
        return (2 if name.startswith("test") else 3, 0, False, name)

    return sorted(metrics, key=rank)


def summaries_frame(summaries: Sequence[TaskSummary]) -> pd.DataFrame:
    """The numbers behind the summary tables, one row per (task, column, cell), for summary.csv."""
    parts = []
    for summary in summaries:
        for column in summary.columns:
            part = column.ranking.drop(columns=["key"]).assign(
                task=summary.task, metric=column.metric, scope=column.title
            )
            parts.append(part)
    columns = ["task", "metric", "scope", *[c for c in RANK_COLUMNS if c != "key"]]
    return pd.concat(parts, ignore_index=True)[columns] if parts else pd.DataFrame(columns=columns)


def per_length_table(frame: pd.DataFrame, by_length: pd.DataFrame, summary: TaskSummary) -> Table | None:
    """The main metric at every evaluation length (mean ± CI, n), a row per cell in the summary's order."""
    data = figure_data(frame, by_length, summary)
    if data.empty:
        return None
    lengths = sorted(int(n) for n in data["length"].unique())
    train = summary.train
    labels = summary.labels()
    rows = []
    for key in summary.order:
        cells = data[data["label"] == labels[key]]
        row: list = [labels[key]]
        for n in lengths:
            mean, half, count = inference.mean_ci(cells.loc[cells["length"] == n, "value"])
            spread = f" ± {fmt(half)}" if count > 1 else ""
            row.append(Cell(f"{fmt(mean)}{spread} (n={count})") if count else Cell("—", kind="missing"))
        rows.append(row)
    marked = [f"{n} †" if train and n > train[1] else str(n) for n in lengths]
    return Table(
        ["cell", *marked],
        rows,
        caption=f"{summary.task}: {summary.main} per evaluation length, mean ± 95% CI over seeds; "
        "† beyond the training range",
    )
