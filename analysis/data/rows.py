"""One schema-1 result dict -> its row of the runs frame and its per-length rows (``analysis.data.runs``).

A metric keeps its own name as a column (``test/token_acc``) unless that would shadow a
fixed or prefixed column; cost, config and env keys are flattened under ``cost.``,
``config.`` and ``env.``. A setting the run's model did not use (``unused`` in
result.json) is read as missing, so it never makes a factor or a cell.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

from attnlab.flatten import flatten

SCHEMA = 1
# pruned: a study's trial stopped early by its pruner (result.json "pruned" says at which step)
STATUSES = ("completed", "diverged", "failed", "pruned")
ID_COLUMNS = ["run_id", "sweep", "status", "error", "task", "attention", "position", "seed", "arch"]
TRAILING_COLUMNS = [
    "run_dir",
    "source",
    "started_at",
    "finished_at",
    "overrides",
    "command",
    "config_hash",
    "train_lengths",
    "references",
    "unused",
    "kernels",
]
BY_LENGTH_COLUMNS = ["run_id", "task", "attention", "position", "seed", "length", "metric", "value"]
REQUIRED = ("run_id", "status", "task", "attention", "position", "seed")
PREFIXES = ("config.", "cost.", "env.")


class BadResult(ValueError):
    """A result dict that does not follow schema 1."""


def _number(value: Any) -> float:
    """Metrics are floats; the writer stores NaN/inf as null, which reads back as NaN."""
    try:
        return float(value) if value is not None else math.nan
    except (TypeError, ValueError):
        return math.nan


def unused_settings(result: Mapping[str, Any]) -> dict[str, Any]:
    """{config key: value asked} of the settings the run's model did not use (``experiments.config.unused``); {} for
    results written before runs recorded them."""
    unused = result.get("unused")
    if isinstance(unused, Mapping):
        return {str(k): v for k, v in unused.items()}
    if isinstance(unused, (list, tuple)):
        return {str(k): None for k in unused}
    return {}


def _without_unused(config: Mapping[str, Any], unused: Mapping[str, Any]) -> dict[str, Any]:
    """The flattened config with each unused key null and its sub-keys gone: what the model computed."""

    def under(key: str) -> bool:
        return any(key.startswith(u + ".") for u in unused)

    kept = {k: v for k, v in config.items() if not under(k)}
    kept.update({u: None for u in unused})
    return kept


def _metric_column(name: str) -> str:
    """A metric keeps its own name unless that would shadow a fixed or prefixed column."""
    clashes = name in ID_COLUMNS or name in TRAILING_COLUMNS or name.startswith(PREFIXES)
    return f"metrics.{name}" if clashes else name


def _checked_seed(result: Any) -> int:
    """The result's seed, once the dict is checked to be a schema-1 result with every required key."""
    if not isinstance(result, Mapping):
        raise BadResult(f"expected a JSON object, got {type(result).__name__}")
    if result.get("schema") != SCHEMA:
        raise BadResult(f"schema={result.get('schema')!r} is not supported; expected {SCHEMA}")
    missing = [k for k in REQUIRED if result.get(k) is None]
    if missing:
        raise BadResult(f"missing keys {missing}")
    if result["status"] not in STATUSES:
        raise BadResult(f"status={result['status']!r}; expected one of {list(STATUSES)}")
    try:
        return int(result["seed"])
    except (TypeError, ValueError):
        raise BadResult(f"seed={result['seed']!r} is not an integer") from None


def _identity(result: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The ID_COLUMNS: names as text, the seed as an integer."""
    row: dict[str, Any] = {k: result.get(k) for k in ID_COLUMNS}
    row["seed"] = seed
    for key in ("task", "attention", "position", "arch", "sweep", "run_id"):
        row[key] = None if row[key] is None else str(row[key])
    return row


def _measured(result: Mapping[str, Any], unused: Mapping[str, Any]) -> dict[str, Any]:
    """The metrics (floats, under their own names), then ``cost.*``, ``config.*`` (unused settings null) and
    ``env.*``, the package versions in one ``env.packages`` cell."""
    metrics = (result.get("metrics") or {}).items()
    row: dict[str, Any] = {_metric_column(str(name)): _number(value) for name, value in metrics}
    row.update(flatten(result.get("cost") or {}, "cost."))
    config = flatten(result.get("config") or {}, "")
    row.update({f"config.{k}": v for k, v in _without_unused(config, unused).items()})
    env = dict(result.get("env") or {})
    packages = env.pop("packages", None) or {}
    row.update(flatten(env, "env."))
    row["env.packages"] = dict(packages)  # one cell: the versions are read together for provenance
    return row


def _provenance(
    result: Mapping[str, Any], run_dir: Path | None, source: Path | str, unused: Mapping[str, Any]
) -> dict[str, Any]:
    """The TRAILING_COLUMNS: where the run was read from, when and how it ran, what it used and left unused."""
    return dict(
        run_dir=None if run_dir is None else str(run_dir),
        source=str(source),
        started_at=result.get("started_at"),
        finished_at=result.get("finished_at"),
        overrides=list(result.get("overrides") or []),
        command=result.get("command"),
        config_hash=result.get("config_hash"),
        train_lengths=result.get("train_lengths"),
        # the BibTeX of the variants the run used, as registered (analysis.paper.bibliography); None before
        # runs recorded them
        references=result.get("references"),
        unused=unused,
        # the kernels the run's attention layers trained on, each once ("sdpa (head dim 8 < 16, ...)"
        # where flex could not serve a layer); None before runs recorded them
        kernels="; ".join(sorted(set(map(str, (result.get("kernels") or {}).values())))) or None,
    )


def _length_rows(result: Mapping[str, Any], row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The by_length rows (BY_LENGTH_COLUMNS): one per evaluation length and metric."""
    by_length = []
    for length, values in (result.get("by_length") or {}).items():
        for metric, value in (values or {}).items():
            try:
                length_int = int(length)
            except ValueError:
                raise BadResult(f"by_length key {length!r} is not an integer length") from None
            by_length.append(
                {
                    "run_id": row["run_id"],
                    "task": row["task"],
                    "attention": row["attention"],
                    "position": row["position"],
                    "seed": row["seed"],
                    "length": length_int,
                    "metric": metric,
                    "value": _number(value),
                }
            )
    return by_length


def result_rows(
    result: Mapping[str, Any], run_dir: Path | None, source: Path | str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The runs-frame row and the by_length rows of one schema-1 result dict."""
    row = _identity(result, _checked_seed(result))
    unused = unused_settings(result)
    row.update(_measured(result, unused))
    row.update(_provenance(result, run_dir, source, unused))
    # why the run stopped; not a column: build_runs sets a run cut short of its budget aside
    row["stop"] = result.get("stop")
    return row, _length_rows(result, row)
