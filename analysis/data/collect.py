"""Runs on disk (result.json files, W&B offline runs, the W&B API) -> a ``Runs`` of tidy pandas frames.

The frames and their columns are described in ``analysis.data.runs``; how one result
becomes a row in ``analysis.data.rows``; learning curves from the runs' CSV logs in
``analysis.data.curves``.
A file that cannot be read is skipped with a warning naming it, so one broken
run never hides the rest of a sweep; it is listed in ``Runs.dropped``, as are the
cells of a sweep without a result (``analysis.data.pending``).
"""

from __future__ import annotations

import glob
import json
import warnings
from pathlib import Path
from typing import Any, Iterable, Mapping

from analysis.command.errors import CollectError
from analysis.data.pending import cells_without_result
from analysis.data.rows import BadResult, result_rows
from analysis.data.runs import Runs, build_runs
from analysis.data.wandb_offline import RecordLogError, find_offline_runs, read_wandb_offline_run
from attnlab.run_folders import live_writer, moved_aside

RESULT_FILE = "result.json"
SUMMARY_KEY = "attnlab_result"  # where the training app puts the result dict in the W&B summary


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
        writer = live_writer(file.parent)
        if writer is not None:  # its result is being replaced (a continuation): not a result to compare yet
            reason = f"running: {writer} writes the folder; its result.json is an earlier one"
            unreadable.append({"source": str(file.parent), "run_id": None, "status": "running", "reason": reason})
            continue
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
