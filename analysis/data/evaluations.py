"""Evaluations of trained runs' checkpoints (``python -m experiments.evaluate``), read as evaluations.

An evaluation writes ``evaluation.json`` (``attnlab.run_folders.EVALUATION``) into ``<run>/eval/<time>/``:
result.json's schema with an ``evaluation`` entry (the checkpoint, its step and hash, the overrides). The
collector (``analysis.data.collect``) reads ``result.json`` files only, so an evaluation is never counted as
another seed of its run; here each becomes a row tagged ``kind="evaluation"`` that keeps its run's ``run_id``
(join it with ``collect(...).runs``), and its per-length rows, with the columns ``analysis.data.rows`` gives a run:

    ev = collect_evaluations("multirun/quick")
    ev.by_length.pivot_table(index=["attention", "length"], columns="metric", values="value")
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import pandas as pd

from analysis.command.errors import CollectError
from analysis.data.rows import BY_LENGTH_COLUMNS, result_rows
from attnlab.run_folders import EVALUATION, moved_aside

KIND = "evaluation"
# what an evaluation adds to a run's columns: which weights it measured and what it changed
EVALUATION_COLUMNS = ["kind", "evaluation_id", "checkpoint", "checkpoint_step", "checkpoint_sha256", "eval_overrides"]


@dataclass
class Evaluations:
    """``runs``: one row per evaluation; ``by_length``: one row per (evaluation, length, metric)."""

    runs: pd.DataFrame
    by_length: pd.DataFrame


def find_evaluations(paths: Iterable[str | Path] | str | Path) -> list[Path]:
    """Every evaluation.json under the folders (or the files themselves), but those kept in a ``previous/``."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    found: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise CollectError(f"path {str(raw)!r} does not exist; give a sweep or run folder, or an {EVALUATION}")
        if path.is_file():
            found.add(path.resolve())
        else:
            found.update(p.resolve() for p in path.rglob(EVALUATION) if not moved_aside(p, path))
    return sorted(found)


def collect_evaluations(paths: Iterable[str | Path] | str | Path) -> Evaluations:
    """The evaluations under ``paths`` as frames; a file that is not a readable evaluation is skipped with a
    warning naming it."""
    rows, lengths = [], []
    for file in find_evaluations(paths):
        try:
            result = json.loads(file.read_text())
            evaluation = result.get("evaluation") if isinstance(result, dict) else None
            if not isinstance(evaluation, dict):
                raise ValueError("no 'evaluation' entry: not written by python -m experiments.evaluate")
            row, by_length = result_rows(result, file.parent, file)
        except (OSError, ValueError) as err:
            warnings.warn(f"{file}: skipped, not a readable evaluation ({err})", stacklevel=2)
            continue
        row.pop("stop", None)
        tags = {
            "kind": KIND,
            "evaluation_id": evaluation.get("id"),
            "checkpoint": evaluation.get("checkpoint"),
            "checkpoint_step": evaluation.get("step"),
            "checkpoint_sha256": evaluation.get("sha256"),
            "eval_overrides": list(evaluation.get("overrides") or []),
        }
        rows.append({**tags, **row})
        lengths += [{**r, "kind": KIND, "evaluation_id": tags["evaluation_id"]} for r in by_length]
    return Evaluations(
        runs=pd.DataFrame(rows, columns=None if rows else EVALUATION_COLUMNS),
        by_length=pd.DataFrame(lengths, columns=[*BY_LENGTH_COLUMNS, "kind", "evaluation_id"]),
    )
