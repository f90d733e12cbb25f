"""In-range and beyond-range aggregates of the per-length metrics: length generalisation as two numbers per run.

A run trained on lengths ``train_lengths = [low, high]`` and evaluated per length
(``by_length``) gets, for every per-length metric ``m`` (``token_acc``, ``seq_acc``,
``acc``, ``loss``, ``bpc`` ...):

- ``test_in_range/m``: the mean of ``m`` over the evaluation lengths with low <= L <= high;
- ``test_beyond_range/m``: the mean over the evaluation lengths L > high.

Each evaluation length counts once (an unweighted mean over lengths), so a length
with more tokens does not dominate. Lengths below the training range belong to
neither (no task evaluates there by default; they stay in the per-length data).
A character LM trains on one context (``low == high``): in range is that context,
beyond range the longer ``eval_contexts``. A translation task's lengths are the
source-length buckets of its files; usually every test bucket lies inside the
training range, and the beyond-range aggregate is then absent (NaN), not zero.
A run without ``train_lengths`` or ``by_length`` gets neither aggregate.

The all-lengths metric the training app logs (``test/token_acc``, weighted by
tokens over every length) stays in the frame as it was.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pandas as pd

IN_RANGE = "test_in_range"
BEYOND_RANGE = "test_beyond_range"
SCOPES = (IN_RANGE, BEYOND_RANGE)
SCOPE_TEXT = {IN_RANGE: "in range", BEYOND_RANGE: "beyond range"}


def range_metric(scope: str, metric: str) -> str:
    """``test_in_range/token_acc``: the W&B-style section/name form, so ``stats.direction`` reads the name."""
    if scope not in SCOPES:
        raise ValueError(f"scope={scope!r} is not a length range; choose one of {list(SCOPES)}")
    return f"{scope}/{metric}"


def train_range(value: Any) -> tuple[int, int] | None:
    """``train_lengths`` of one run as (low, high); None when the run has none or it is malformed."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return None
    try:
        low, high = int(value[0]), int(value[1])
    except (TypeError, ValueError):
        return None
    return (low, high) if low <= high else None


def length_scope(length: int, train: tuple[int, int] | None) -> str | None:
    """IN_RANGE, BEYOND_RANGE, or None (below the training range, or no range known)."""
    if train is None:
        return None
    if train[0] <= length <= train[1]:
        return IN_RANGE
    return BEYOND_RANGE if length > train[1] else None


def range_aggregates(runs: pd.DataFrame, by_length: pd.DataFrame) -> pd.DataFrame:
    """One row per run_id with a column per (scope, per-length metric) that has at least one length."""
    ranges = {run_id: train_range(value) for run_id, value in zip(runs["run_id"], runs["train_lengths"])}
    if by_length.empty:
        return pd.DataFrame(index=pd.Index([], name="run_id"))
    scoped = by_length.assign(
        scope=[length_scope(int(n), ranges.get(r)) for r, n in zip(by_length["run_id"], by_length["length"])]
    )
    scoped = scoped[scoped["scope"].notna() & np.isfinite(scoped["value"].to_numpy(float))]
    if scoped.empty:
        return pd.DataFrame(index=pd.Index([], name="run_id"))
    # One value per (run, length, metric) already; the mean over lengths weights each length once.
    means = scoped.groupby(["run_id", "scope", "metric"])["value"].mean()
    wide = means.unstack(["scope", "metric"])
    wide.columns = [range_metric(scope, metric) for scope, metric in wide.columns]
    return wide[sorted(wide.columns)]


def with_range_metrics(
    runs: pd.DataFrame, by_length: pd.DataFrame, metrics: Sequence[str]
) -> tuple[pd.DataFrame, list[str]]:
    """The runs frame with the range aggregates as metric columns (after the other metrics) and the new metric list.

    A metric name the results already carry is left alone, so a run that logged
    its own ``test_in_range/...`` is never overwritten.
    """
    wide = range_aggregates(runs, by_length)
    added = [c for c in wide.columns if c not in runs.columns]
    if not added:
        return runs, list(metrics)
    values = wide[added].reindex(runs["run_id"].to_numpy())
    out = runs.copy()
    after = [c for c in out.columns if c in metrics]
    at = out.columns.get_loc(after[-1]) + 1 if after else len(out.columns)
    for offset, name in enumerate(added):
        out.insert(at + offset, name, values[name].to_numpy(dtype=float))
    return out, sorted([*metrics, *added])


def lengths_in(scope: str, lengths: Sequence[int], train: tuple[int, int] | None) -> list[int]:
    """The evaluation lengths that make up ``scope`` for this training range, ascending."""
    return sorted(n for n in set(int(x) for x in lengths) if length_scope(n, train) == scope)


def describe(scope: str, lengths: Sequence[int], train: tuple[int, int] | None) -> str:
    """``lengths 8, 12 (training lengths 2–12)``: what one range aggregate averages."""
    chosen = lengths_in(scope, lengths, train)
    shown = ", ".join(map(str, chosen)) if chosen else "none"
    if train is None:
        return f"lengths {shown}"
    trained = f"{train[0]}" if train[0] == train[1] else f"{train[0]}–{train[1]}"
    return f"lengths {shown} (trained on {trained})"
