"""The frames of a sweep's runs (``Runs``), built from the rows of its result files (``analysis.data.rows``).

``Runs.runs`` has one row per run: identity columns, every metric under its own
name (``test/token_acc``) and its in-range and beyond-range aggregates
(``test_in_range/token_acc``, ``test_beyond_range/token_acc``; see analysis.data.ranges),
``cost.*``, ``config.*`` and ``env.*`` columns. Columns are typed (``analysis.data.dtypes``): times are
datetimes, integer settings nullable ``Int64``, variant names categories, so ``runs.runs.to_parquet(path)``
keeps them.
``Runs.by_length`` is long: one row per (run, evaluation length, metric).
Every run belongs to a cell (``analysis.data.cells``): ``cell``, ``cell_label`` and one
column per factor, so your own pandas analysis groups as the report does
(``runs.runs.groupby(["task", "cell"])``); ``Runs.factors`` names the factors.
The same configuration and seed read twice (two folders holding one run) is
kept once, with a warning; the copies left out are in ``Runs.duplicates``.

``Runs.dropped`` says what the statistics leave out, one row per file or run
(``source``, ``run_id``, ``status``, ``reason``): files that are not a readable
result (truncated, ``[]``, ``{}``), cells without a result (a run still running or
stopped without writing one, a cell of a sweep's grid not started yet:
``analysis.data.pending``), failed runs, and completed runs with a NaN
metric (named in ``reason``). Failed and NaN runs stay in ``Runs.runs`` (their
status and errors are shown); unreadable files are not there.
A setting the run's model did not use (``unused`` in result.json, e.g. the cross
attention of a decoder-only model) is read as missing, so it never makes a factor
or a cell; ``Runs.unused`` names each such setting whose asked values differed
(the grid varied something no model read). Results written before ``unused``
existed count every setting as used.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from analysis.data.cells import assign_cells, drop_duplicate_runs, format_value, is_missing
from analysis.data.dtypes import categories, typed
from analysis.data.ranges import with_range_metrics
from analysis.data.rows import BY_LENGTH_COLUMNS, ID_COLUMNS, PREFIXES, TRAILING_COLUMNS
from attnlab.stops import describe, stopped_short

DROPPED_COLUMNS = ["source", "run_id", "status", "reason"]


@dataclass
class Runs:
    """One row per run in ``runs``; per-length evaluations in ``by_length``; ``metrics`` names the metric columns.

    ``factors`` are the config keys that vary (``analysis.data.cells``); ``duplicates``
    the runs read twice and left out, with the run kept in ``duplicate_of``; ``dropped``
    what the statistics leave out (``DROPPED_COLUMNS``: unreadable files, failed runs, NaN
    metrics); ``unused`` {config key: the values asked} for settings that varied but that no
    run's model used.
    """

    runs: pd.DataFrame
    by_length: pd.DataFrame
    metrics: list[str] = field(default_factory=list)
    factors: list[str] = field(default_factory=list)
    duplicates: pd.DataFrame = field(default_factory=pd.DataFrame)
    dropped: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=DROPPED_COLUMNS))
    unused: dict[str, list[str]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.runs)


def _dedupe(records: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> list[tuple[dict, list]]:
    """Two files with one run_id (a copied run folder) would count one seed twice: keep the first."""
    seen: dict[str, str] = {}
    kept = []
    for row, lengths in records:
        if row["run_id"] in seen:
            warnings.warn(
                f"{row['source']}: run_id {row['run_id']!r} already read from {seen[row['run_id']]}; "
                "skipping the duplicate",
                stacklevel=3,
            )
            continue
        seen[row["run_id"]] = row["source"]
        kept.append((row, lengths))
    return kept


def _left_out(runs: pd.DataFrame, metric_names: list[str]) -> list[dict[str, Any]]:
    """The runs the statistics leave out: failed or diverged, or completed with a NaN metric of its own."""
    left = []
    for row in runs.to_dict("records"):
        if row["status"] != "completed":
            left.append(
                {
                    "source": row["source"],
                    "run_id": row["run_id"],
                    "status": row["status"],
                    "reason": f"{row['status']}: {row['error']}" if row.get("error") else row["status"],
                }
            )
            continue
        own = set(row.get("_metrics") or ())
        nan = [m for m in metric_names if m in own and is_missing(row.get(m))]
        if nan:
            left.append(
                {
                    "source": row["source"],
                    "run_id": row["run_id"],
                    "status": row["status"],
                    "reason": f"NaN metric(s): {', '.join(nan)}",
                }
            )
    return left


def varied_unused(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """{config key: the values asked} for each unused setting that was given more than one value."""
    asked: dict[str, set[str]] = {}
    for row in rows:
        if row["status"] == "failed":
            continue
        for key, value in (row.get("unused") or {}).items():
            asked.setdefault(key, set()).add(format_value(value))
    return {k: sorted(v) for k, v in sorted(asked.items()) if len(v) > 1}


def _set_aside_short(
    records: list[tuple[dict[str, Any], list[dict[str, Any]]]],
) -> tuple[list[tuple[dict[str, Any], list[dict[str, Any]]]], list[dict[str, Any]]]:
    """The records without the runs cut short of their budget (max_time, early stopping, a signal), and those runs'
    ``DROPPED_COLUMNS`` rows with the reason; every row's ``stop`` is taken out (it is not a column).

    A run cut short is never compared as if it had its budget: it leaves before it can make factors (its max_time
    would be one) or cells.
    """
    short = []
    for row, _ in records:
        stop = row.pop("stop", None)
        if row["status"] == "completed" and stopped_short({"stop": stop}):
            short.append(
                {"source": row["source"], "run_id": row["run_id"], "status": "stopped", "reason": describe(stop)}
            )
    set_aside = {r["run_id"] for r in short}
    return [(row, lengths) for row, lengths in records if row["run_id"] not in set_aside], short


def _runs_frame(rows: list[dict[str, Any]]) -> tuple[pd.DataFrame, list[str]]:
    """One row per run in a stable column order (identity, metrics, cost, config, env, trailing), sorted by task,
    variant and seed, with ``_metrics`` (the metrics each run reported itself); and the metric names."""
    fixed = set(ID_COLUMNS) | set(TRAILING_COLUMNS)
    metric_names = sorted({k for r in rows for k in r if k not in fixed and not k.startswith(PREFIXES)})
    by_prefix = {p: sorted({k for r in rows for k in r if k.startswith(p)}) for p in PREFIXES}
    columns = ID_COLUMNS + metric_names + by_prefix["cost."] + by_prefix["config."] + by_prefix["env."]
    columns += TRAILING_COLUMNS
    runs = pd.DataFrame(rows, columns=columns)
    # which metrics each run reported itself (a NaN there is the run's, not a column it lacks)
    runs["_metrics"] = [[m for m in metric_names if m in row] for row in rows]
    runs["seed"] = runs["seed"].astype("int64")
    for name in metric_names:
        runs[name] = runs[name].astype("float64")
    runs = runs.sort_values(["task", "attention", "position", "seed", "run_id"], kind="stable")
    return runs.reset_index(drop=True), metric_names


def _lengths_frame(by_length: list[dict[str, Any]], runs: pd.DataFrame) -> pd.DataFrame:
    """The by_length rows of the runs kept, typed, each with its run's cell."""
    lengths = pd.DataFrame(by_length, columns=BY_LENGTH_COLUMNS)
    lengths = lengths.astype({"seed": "int64", "length": "int64", "value": "float64"})
    lengths = lengths[lengths["run_id"].isin(set(runs["run_id"]))]
    lengths["cell"] = lengths["run_id"].map(dict(zip(runs["run_id"], runs["cell"])))
    return lengths


def _warn_unused(unused: dict[str, list[str]]) -> None:
    # stacklevel 4: the warning names the caller of build_runs' caller, as build_runs' own warnings do
    for key, values in unused.items():
        warnings.warn(
            f"{key} was given {len(values)} values ({', '.join(values)}) in runs whose model does not use "
            "it; it is not a factor, and runs that differ only there are one cell",
            stacklevel=4,
        )


def _warn_duplicates(duplicates: pd.DataFrame) -> None:
    for dup in duplicates.itertuples(index=False):
        warnings.warn(
            f"{dup.source}: the same configuration and seed as run {dup.duplicate_of!r} "
            f"(cell {dup.cell_label}, seed {dup.seed}); counted once",
            stacklevel=4,
        )


def build_runs(
    records: list[tuple[dict[str, Any], list[dict[str, Any]]]], unreadable: list[dict[str, Any]] | None = None
) -> Runs:
    """Frames from (row, by_length rows) pairs, in a stable column order: identity, metrics, cost, config, env.

    ``unreadable``: ``DROPPED_COLUMNS`` rows for files that were skipped, listed first in ``Runs.dropped``.
    """
    records, short = _set_aside_short(_dedupe(records))
    rows = [row for row, _ in records]
    by_length = [b for _, lengths in records for b in lengths]
    runs, metric_names = _runs_frame(rows)
    runs, factors = assign_cells(runs)
    runs, duplicates = drop_duplicate_runs(runs)
    unused = varied_unused(rows)
    _warn_unused(unused)
    dropped = pd.DataFrame([*(unreadable or []), *short, *_left_out(runs, metric_names)], columns=DROPPED_COLUMNS)
    runs = runs.drop(columns="_metrics")
    _warn_duplicates(duplicates)
    lengths = _lengths_frame(by_length, runs)
    runs, metric_names = with_range_metrics(runs.reset_index(drop=True), lengths, metric_names)  # test_in_range/...
    return Runs(
        typed(runs, rows),  # datetimes, Int64 settings, categories (analysis.data.dtypes)
        categories(lengths.reset_index(drop=True)),
        metric_names,
        factors,
        duplicates.drop(columns="_metrics").reset_index(drop=True),
        dropped,
        unused,
    )
