"""Runs on disk (result.json files, W&B offline runs, the W&B API) -> tidy pandas frames.

``Runs.runs`` has one row per run: identity columns, every metric under its own
name (``test/token_acc``) and its in-range and beyond-range aggregates
(``test_in_range/token_acc``, ``test_beyond_range/token_acc``; see analysis.data.ranges),
``cost.*``, ``config.*`` and ``env.*`` columns.
``Runs.by_length`` is long: one row per (run, evaluation length, metric).
Every run belongs to a cell (``analysis.data.cells``): ``cell``, ``cell_label`` and one
column per factor, so your own pandas analysis groups as the report does
(``runs.runs.groupby(["task", "cell"])``); ``Runs.factors`` names the factors.
The same configuration and seed read twice (two folders holding one run) is
kept once, with a warning; the copies left out are in ``Runs.duplicates``.
A file that cannot be read is skipped with a warning naming it, so one broken
run never hides the rest of a sweep.

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

import glob
import json
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from analysis.command.errors import CollectError
from analysis.data.cells import assign_cells, drop_duplicate_runs, format_value, is_missing
from analysis.data.pending import cells_without_result
from analysis.data.ranges import with_range_metrics
from analysis.data.wandb_offline import RecordLogError, find_offline_runs, read_wandb_offline_run
from common.flatten import flatten
from common.run_folders import moved_aside
from common.stops import describe, stopped_short

SCHEMA = 1
# pruned: a study's trial stopped early by its pruner (result.json "pruned" says at which step)
STATUSES = ("completed", "diverged", "failed", "pruned")
RESULT_FILE = "result.json"
SUMMARY_KEY = "attnlab_result"  # where the training app puts the result dict in the W&B summary
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
DROPPED_COLUMNS = ["source", "run_id", "status", "reason"]
BY_LENGTH_COLUMNS = ["run_id", "task", "attention", "position", "seed", "length", "metric", "value"]
CURVE_COLUMNS = ["run_id", "task", "attention", "position", "seed", "step", "metric", "value"]
REQUIRED = ("run_id", "status", "task", "attention", "position", "seed")
_PREFIXES = ("config.", "cost.", "env.")


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


class BadResult(ValueError):
    """A result dict that does not follow schema 1."""


# ---------------------------------------------------------------- one result -> rows


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
    clashes = name in ID_COLUMNS or name in TRAILING_COLUMNS or name.startswith(_PREFIXES)
    return f"metrics.{name}" if clashes else name


def result_rows(
    result: Mapping[str, Any], run_dir: Path | None, source: Path | str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The runs-frame row and the by_length rows of one schema-1 result dict."""
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
        seed = int(result["seed"])
    except (TypeError, ValueError):
        raise BadResult(f"seed={result['seed']!r} is not an integer") from None

    row: dict[str, Any] = {k: result.get(k) for k in ID_COLUMNS}
    row["seed"] = seed
    for key in ("task", "attention", "position", "arch", "sweep", "run_id"):
        row[key] = None if row[key] is None else str(row[key])
    for name, value in (result.get("metrics") or {}).items():
        row[_metric_column(str(name))] = _number(value)
    row.update(flatten(result.get("cost") or {}, "cost."))
    unused = unused_settings(result)
    config = flatten(result.get("config") or {}, "")
    row.update({f"config.{k}": v for k, v in _without_unused(config, unused).items()})
    env = dict(result.get("env") or {})
    packages = env.pop("packages", None) or {}
    row.update(flatten(env, "env."))
    row["env.packages"] = dict(packages)  # one cell: the versions are read together for provenance
    row.update(
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
    # why the run stopped; not a column: build_runs sets a run cut short of its budget aside
    row["stop"] = result.get("stop")

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
                    "seed": seed,
                    "length": length_int,
                    "metric": metric,
                    "value": _number(value),
                }
            )
    return row, by_length


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


def build_runs(
    records: list[tuple[dict[str, Any], list[dict[str, Any]]]], unreadable: list[dict[str, Any]] | None = None
) -> Runs:
    """Frames from (row, by_length rows) pairs, in a stable column order: identity, metrics, cost, config, env.

    ``unreadable``: ``DROPPED_COLUMNS`` rows for files that were skipped, listed first in ``Runs.dropped``.
    """
    records = _dedupe(records)
    # a run cut short of its budget (max_time, early stopping, a signal) is never compared as if it had it:
    # left out, with its reason, before it can make factors (its max_time would be one) or cells
    short = []
    for row, _ in records:
        stop = row.pop("stop", None)
        if row["status"] == "completed" and stopped_short({"stop": stop}):
            short.append(
                {"source": row["source"], "run_id": row["run_id"], "status": "stopped", "reason": describe(stop)}
            )
    set_aside = {r["run_id"] for r in short}
    records = [(row, lengths) for row, lengths in records if row["run_id"] not in set_aside]
    rows = [row for row, _ in records]
    by_length = [b for _, lengths in records for b in lengths]
    fixed = set(ID_COLUMNS) | set(TRAILING_COLUMNS)
    metric_names = sorted({k for r in rows for k in r if k not in fixed and not k.startswith(_PREFIXES)})
    by_prefix = {p: sorted({k for r in rows for k in r if k.startswith(p)}) for p in _PREFIXES}
    columns = ID_COLUMNS + metric_names + by_prefix["cost."] + by_prefix["config."] + by_prefix["env."]
    columns += TRAILING_COLUMNS
    runs = pd.DataFrame(rows, columns=columns)
    # which metrics each run reported itself (a NaN there is the run's, not a column it lacks)
    runs["_metrics"] = [[m for m in metric_names if m in row] for row in rows]
    runs["seed"] = runs["seed"].astype("int64")
    for name in metric_names:
        runs[name] = runs[name].astype("float64")
    runs = runs.sort_values(["task", "attention", "position", "seed", "run_id"], kind="stable")
    runs, factors = assign_cells(runs.reset_index(drop=True))
    runs, duplicates = drop_duplicate_runs(runs)
    unused = varied_unused(rows)
    for key, values in unused.items():
        warnings.warn(
            f"{key} was given {len(values)} values ({', '.join(values)}) in runs whose model does not use "
            "it; it is not a factor, and runs that differ only there are one cell",
            stacklevel=3,
        )
    dropped = pd.DataFrame([*(unreadable or []), *short, *_left_out(runs, metric_names)], columns=DROPPED_COLUMNS)
    runs = runs.drop(columns="_metrics")
    for dup in duplicates.itertuples(index=False):
        warnings.warn(
            f"{dup.source}: the same configuration and seed as run {dup.duplicate_of!r} "
            f"(cell {dup.cell_label}, seed {dup.seed}); counted once",
            stacklevel=3,
        )
    lengths = pd.DataFrame(by_length, columns=BY_LENGTH_COLUMNS)
    lengths = lengths.astype({"seed": "int64", "length": "int64", "value": "float64"})
    lengths = lengths[lengths["run_id"].isin(set(runs["run_id"]))]
    lengths["cell"] = lengths["run_id"].map(dict(zip(runs["run_id"], runs["cell"])))
    runs, metric_names = with_range_metrics(runs.reset_index(drop=True), lengths, metric_names)  # test_in_range/...
    return Runs(
        runs,
        lengths.reset_index(drop=True),
        metric_names,
        factors,
        duplicates.drop(columns="_metrics").reset_index(drop=True),
        dropped,
        unused,
    )


# ---------------------------------------------------------------- result.json files


def _expand(paths: Iterable[str | Path]) -> list[Path]:
    """Each path is a folder, a file or a glob pattern; one that matches nothing is an error."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    expanded: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.exists():
            expanded.append(path)
            continue
        matches = sorted(glob.glob(str(raw), recursive=True))
        if not matches:
            raise CollectError(
                f"sweep path {str(raw)!r} does not exist and matches no files; "
                "give a sweep folder, a result.json or a glob pattern"
            )
        expanded.extend(Path(m) for m in matches)
    return expanded


def find_results(paths: Iterable[str | Path]) -> list[Path]:
    """Every result.json under the paths (recursively), each once."""
    found: set[Path] = set()
    for path in _expand(paths):
        if path.is_file() and path.name == RESULT_FILE:
            found.add(path.resolve())
        elif path.is_dir():
            # earlier runs a folder keeps under previous/ are not runs of the sweep
            found.update(p.resolve() for p in path.rglob(RESULT_FILE) if p.is_file() and not moved_aside(p, path))
    return sorted(found)


def collect(paths: Iterable[str | Path]) -> Runs:
    """Read every result.json under the sweep folders (or glob patterns) into a ``Runs``; the cells without one
    (still running, stopped, not started: ``analysis.data.pending``) are listed in ``Runs.dropped``."""
    records, unreadable = [], []
    for file in find_results(paths):
        try:
            row, lengths = result_rows(json.loads(file.read_text()), file.parent, file)
        except (OSError, ValueError) as err:  # JSONDecodeError and BadResult are ValueErrors
            warnings.warn(f"{file}: skipped, not a readable result ({err})", stacklevel=2)
            unreadable.append(
                {"source": str(file), "run_id": None, "status": None, "reason": f"not a readable result ({err})"}
            )
            continue
        records.append((row, lengths))
    return build_runs(records, unreadable + cells_without_result(_expand(paths)))


# ---------------------------------------------------------------- W&B


def _summary_result(summary: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """The result dict from a W&B summary (a nested dict or a JSON string).

    The training app leaves the config out of the summary (it is the run's W&B
    config already), so the W&B config fills ``config`` when the result has none.
    """
    value = summary.get(SUMMARY_KEY)
    if isinstance(value, str):
        value = json.loads(value)
    if value is None:
        raise BadResult(f"no {SUMMARY_KEY!r} in the run summary (the run did not finish, or is still being written)")
    if not isinstance(value, Mapping):
        raise BadResult(f"{SUMMARY_KEY!r} is a {type(value).__name__}, expected a dict")
    result = dict(value)
    if not result.get("config"):
        result["config"] = {k: v for k, v in config.items() if not str(k).startswith("_")}
    return result


def _wandb_run_dir(offline_dir: Path) -> Path:
    """The training app keeps ``wandb/`` inside the run's output folder; otherwise the W&B folder is all we have."""
    parent = offline_dir.parent
    return parent.parent if parent.name == "wandb" else offline_dir


def collect_wandb_offline(paths: Iterable[str | Path]) -> Runs:
    """Read every W&B offline run folder under the paths, building rows from the ``attnlab_result`` summary."""
    records, unreadable = [], []
    for offline_dir in find_offline_runs(_expand(paths)):
        try:
            run = read_wandb_offline_run(offline_dir)
            result = _summary_result(run["summary"], run["config"])
            row, lengths = result_rows(result, _wandb_run_dir(offline_dir), offline_dir)
        except (OSError, ValueError, RecordLogError) as err:
            warnings.warn(f"{offline_dir}: skipped ({err})", stacklevel=2)
            unreadable.append({"source": str(offline_dir), "run_id": None, "status": None, "reason": str(err)})
            continue
        records.append((row, lengths))
    return build_runs(records, unreadable)


def collect_wandb_api(project: str, entity: str | None = None, filters: Mapping[str, Any] | None = None) -> Runs:
    """Read runs from the W&B server (needs network and a login), e.g. ``filters={"group": "ablation"}``."""
    if not isinstance(project, str) or not project.strip() or "/" in project:
        raise CollectError(f"project={project!r} must be a W&B project name without '/'; pass the entity separately")
    if entity is not None and (not isinstance(entity, str) or not entity.strip()):
        raise CollectError(f"entity={entity!r} must be a non-empty string or None")
    if filters is not None and not isinstance(filters, Mapping):
        raise CollectError(f"filters={filters!r} must be a dict of W&B run filters (MongoDB style) or None")
    import wandb  # only here: the online API is optional and slow to import

    path = f"{entity}/{project}" if entity else project
    records = []
    for run in wandb.Api().runs(path=path, filters=dict(filters or {})):
        try:
            # A server run has no local folder: no run_dir, so no CSV learning curves.
            result = _summary_result(dict(run.summary), dict(run.config))
            row, lengths = result_rows(result, None, run.url or f"{path}/{run.id}")
        except ValueError as err:
            warnings.warn(f"W&B run {path}/{run.id}: skipped ({err})", stacklevel=2)
            continue
        records.append((row, lengths))
    return build_runs(records)


# ---------------------------------------------------------------- learning curves


def _metrics_csv(run_dir: Path) -> Path | None:
    """Lightning's CSVLogger writes csv/metrics.csv, or csv/version_N/metrics.csv when versioned."""
    direct = run_dir / "csv" / "metrics.csv"
    if direct.is_file():
        return direct
    versioned = sorted((run_dir / "csv").glob("*/metrics.csv"))
    return versioned[-1] if versioned else None


def learning_curves(runs: Runs | pd.DataFrame) -> pd.DataFrame:
    """Long frame (run_id, task, attention, position, seed, step, metric, value, cell) from each run's CSV log."""
    frame = runs.runs if isinstance(runs, Runs) else runs
    parts = []
    for run in frame.itertuples(index=False):
        if not isinstance(run.run_dir, str) or not run.run_dir:
            continue
        csv = _metrics_csv(Path(run.run_dir))
        if csv is None:
            continue
        try:
            log = pd.read_csv(csv)
        except (OSError, ValueError) as err:
            warnings.warn(f"{csv}: skipped, not a readable CSV log ({err})", stacklevel=2)
            continue
        if "step" not in log.columns:
            warnings.warn(f"{csv}: skipped, no 'step' column (columns: {list(log.columns)})", stacklevel=2)
            continue
        metric_columns = [c for c in log.columns if c not in ("step", "epoch")]
        # Lightning rows are sparse (each logs a few metrics): melt, then drop the empty cells.
        long = log.melt(id_vars=["step"], value_vars=metric_columns, var_name="metric", value_name="value")
        long["value"] = pd.to_numeric(long["value"], errors="coerce")
        long = long.dropna(subset=["value"])
        for key in ("run_id", "task", "attention", "position", "seed"):
            long[key] = getattr(run, key)
        long["cell"] = getattr(run, "cell", None)
        parts.append(long)
    if not parts:
        return pd.DataFrame(
            {c: pd.Series(dtype="float64" if c == "value" else "object") for c in [*CURVE_COLUMNS, "cell"]}
        )
    curves = pd.concat(parts, ignore_index=True)[[*CURVE_COLUMNS, "cell"]]
    return curves.astype({"step": "int64", "seed": "int64", "value": "float64"})
