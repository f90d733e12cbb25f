"""The column types of the runs frames, as a pandas user expects them and as parquet keeps them.

- times (``started_at``, ``finished_at``) are datetimes: UTC-aware where the run recorded an offset
  (the training app writes UTC), naive where every run recorded none;
- a setting, cost or environment column whose values are all integers is a nullable integer (``Int64``),
  so a key some runs lack is ``<NA>`` rather than turning the column into float64 with NaN;
- variant names (``task``, ``attention``, ``position``, ``arch``) are categories, their levels sorted;
- a factor column of numbers (``attention.window``) is Int64 or float64, cell ids and labels text.

So that parquet can write every column (``parquet_safe``), an empty mapping (``config.logger`` under
``logger=none``) is None and a column mixing kinds (``trainer.devices``: ``auto`` and ``1``) is text. A cell
that holds a dict (``env.packages``, ``unused``) comes back from parquet as a struct: every key that any run
has, None where this run has none.

Only whole columns change type; a column holding another kind anywhere (a float ``1.0``, a list) keeps
the type pandas gives it. ``runs.to_parquet(path)`` and ``pd.read_parquet(path)`` keep all three.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pandas as pd

from analysis.data.rows import PREFIXES

TIME_COLUMNS = ("started_at", "finished_at")
CATEGORY_COLUMNS = ("task", "attention", "position", "arch")
TEXT_COLUMNS = ("cell", "cell_label")  # made as objects (analysis.data.cells); text as parquet reads them back


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63


def integer_columns(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> list[str]:
    """The prefixed columns whose every present value, in the rows as read, is an int (never a bool or float).

    Read from the rows, not the frame: pandas has already made ``4`` and ``None`` into ``4.0`` and NaN,
    and a float setting that happens to be whole (``optim.grad_clip=1.0``) must stay a float.
    """
    out = []
    for column in columns:
        if not column.startswith(PREFIXES):
            continue
        present = [row[column] for row in rows if row.get(column) is not None]
        if present and all(_is_int(v) for v in present):
            out.append(column)
    return out


def _parsed(value: Any, source: Any) -> datetime | None:
    if value is None or (isinstance(value, float) and value != value):
        return None
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        warnings.warn(f"{source}: time {value!r} is not ISO 8601; read as missing", stacklevel=4)
        return None


def times(values: pd.Series, sources: pd.Series) -> pd.Series:
    """ISO 8601 text -> datetimes: UTC when any run recorded an offset (a run without one is read as UTC, as the
    training app writes), naive when none did."""
    parsed = [_parsed(v, s) for v, s in zip(values, sources)]
    aware = any(p is not None and p.tzinfo is not None for p in parsed)
    return pd.Series(pd.to_datetime(parsed, utc=aware), index=values.index, name=values.name)


def _number_kind(values: pd.Series) -> str | None:
    """``Int64`` for an object column of ints (and missing values), ``float64`` for one of numbers, else None."""
    present = [v for v in values if v is not None and not (isinstance(v, float) and v != v)]
    if not present or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in present):
        return None
    return "Int64" if all(_is_int(v) for v in present) else "float64"


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return "dict" if isinstance(value, dict) else "list" if isinstance(value, (list, tuple)) else "text"


def parquet_safe(values: pd.Series) -> pd.Series | None:
    """An object column that parquet cannot hold as it is, made so; None when it can.

    Only empty mappings (``config.logger`` under ``logger=none``: parquet has no struct without fields) become
    None; a column mixing kinds (``trainer.devices``: ``auto`` and ``1``) becomes text, containers as JSON.
    """
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, dict) and not v for v in present):
        return pd.Series([None] * len(values), index=values.index, dtype=object, name=values.name)
    if len({_kind(v) for v in present}) < 2:
        return None
    text = [v if v is None or isinstance(v, str) else json.dumps(v, sort_keys=True, default=str) for v in values]
    return pd.Series(text, index=values.index, dtype="str", name=values.name)  # str: as parquet reads it back


def typed(frame: pd.DataFrame, rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """``frame`` (one row per run of ``rows``, by ``run_id``) with its times as datetimes, its integer columns
    (``integer_columns``, built from the values as read) and its factor columns of numbers as ``Int64`` or
    float64, cell ids and labels as text, and the variant names as categories."""
    out = frame.copy()
    for column in TIME_COLUMNS:
        if column in out.columns:
            out[column] = times(out[column], out["source"] if "source" in out.columns else out[column])
    by_id = {row["run_id"]: row for row in rows}
    for column in integer_columns(rows, [c for c in out.columns if isinstance(c, str)]):
        values = [by_id[run_id].get(column) for run_id in out["run_id"]]
        out[column] = pd.array(values, dtype="Int64")
    for column in out.columns:  # a factor column (analysis.data.cells) holds the runs' values as objects
        if out[column].dtype != object:
            continue
        kind = _number_kind(out[column])
        if kind is not None:
            out[column] = out[column].astype(kind)
            continue
        safe = parquet_safe(out[column])
        if safe is not None:
            out[column] = safe
    for column in TEXT_COLUMNS:
        if column in out.columns:
            out[column] = out[column].astype("str")
    return categories(out)


def categories(frame: pd.DataFrame) -> pd.DataFrame:
    """The variant-name columns as categories with sorted levels, so a groupby lists them in name order."""
    out = frame.copy()
    for column in CATEGORY_COLUMNS:
        if column in out.columns:
            names = sorted({str(v) for v in out[column] if isinstance(v, str)})
            out[column] = pd.Categorical(out[column], categories=names)
    return out
