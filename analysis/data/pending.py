"""Cells without a result: run folders whose run has not written one (still running, or stopped for good), and
the cells of a sweep's grid that have no folder yet.

The statistics read ``result.json`` files only, so a cell without one would be
missing from the report without a word. Each such cell is a ``Runs.dropped`` row
(``analysis.data.runs``) with one of these statuses:

- ``running``: the folder's lock (``LOCK``, a pid and a host, written by the run
  that writes the folder) names a live process of this machine, or a process on
  another machine, which cannot be checked from here;
- ``no result``: a run started in the folder (``RUN_MARKERS``) and wrote no
  result: its process has ended (killed, out of memory), or, without a lock,
  the run may still be going; the reason says when the folder was last written;
- ``not started``: a cell of a Hydra sweep's grid (``multirun.yaml``: the basic
  sweeper's ``hydra.sweeper.params`` and the command line's overrides, expanded
  as Hydra expands them) that no folder under the sweep holds: the sweep is
  still running, or stopped before it.

A folder inside another run folder (an earlier run moved aside) is not a cell of its own. An ensemble's cell
folder (``ensemble.seeds=N``: Hydra's ``.hydra/`` and the members' shared ``ensemble/`` folder, each member
in ``seed=<s>/`` below it) is neither a run nor a cell without a result: its members are the runs, each
judged on its own, by the lock of the shared folder, which their one process holds.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from attnlab.run_folders import LOCK, process_alive  # the writer's {"pid": .., "host": ..} while it runs

RESULT_FILE = "result.json"
RUN_MARKERS = ("run_state.json", ".hydra/overrides.yaml")  # what a run writes into its folder when it starts
ENSEMBLE_SHARED = "ensemble"  # an ensemble's shared folder (checkpoint, batched log, lock) beside its members
MEMBER_PREFIX = "seed="  # an ensemble member's folder under its cell folder: seed=<s>
MULTIRUN_FILE = "multirun.yaml"  # Hydra writes it into a sweep's folder before the first cell
BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


def _is_run_folder(folder: Path) -> bool:
    if is_ensemble_cell(folder):
        return False
    return (folder / RESULT_FILE).is_file() or any((folder / m).is_file() for m in RUN_MARKERS)


def is_ensemble_cell(folder: Path) -> bool:
    """Whether ``folder`` holds an ensemble's members rather than a run: no result or run state of its own, and
    the members' shared folder or a member's ``seed=<s>/`` below it. (Under hydra/launcher=ensemble the
    shared folder sits in the first member's own run folder, which has a run state: that one is a run.)"""
    if (folder / RESULT_FILE).is_file() or (folder / "run_state.json").is_file():
        return False
    if (folder / ENSEMBLE_SHARED).is_dir():
        return True
    return any(p.is_dir() and p.name.startswith(MEMBER_PREFIX) for p in _children(folder))


def _children(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError:
        return []


def _age(folder: Path) -> str:
    """How long ago anything in the folder was last written: ``12 s``, ``3 min``, ``5 h``."""
    times = [p.stat().st_mtime for p in folder.rglob("*") if p.is_file()]
    seconds = max(0.0, time.time() - max(times, default=folder.stat().st_mtime))
    for unit, size in (("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def folder_state(folder: Path, lock_folder: Path | None = None) -> tuple[str, str]:
    """(status, reason) of a run folder that holds no result; ``lock_folder``: where its writer's lock lies, when
    not in the folder itself (an ensemble member's, in its cell's shared folder)."""
    try:
        holder = json.loads(((lock_folder or folder) / LOCK).read_text())
    except (OSError, ValueError):
        holder = None
    last = f"last written {_age(folder)} ago"
    if isinstance(holder, Mapping) and isinstance(holder.get("pid"), int):
        pid, host = holder["pid"], holder.get("host")
        if host not in (None, socket.gethostname()):
            return "running", f"running on {host} (process {pid}; {last}), or stopped there without a result"
        if process_alive(pid):
            return "running", f"running (process {pid}; {last}); its result is not written yet"
        return "no result", f"no result: its process {pid} ended without writing one (killed?); {last}"
    return "no result", f"no result.json: still running, or stopped without writing one (killed, out of memory); {last}"


def unfinished_folders(roots: Iterable[Path]) -> list[dict[str, Any]]:
    """One row (source, run_id, status, reason) per run folder under ``roots`` with no result.json."""
    rows, seen = [], set()
    for root in roots:
        if not root.is_dir():
            continue
        markers = [p for m in RUN_MARKERS for p in root.rglob(m.split("/")[-1])]
        for marker in sorted(markers):
            folder = marker.parent.parent if marker.parent.name == ".hydra" else marker.parent
            if folder in seen or (folder / RESULT_FILE).is_file():
                continue
            seen.add(folder)
            nested = any(_is_run_folder(up) for up in folder.parents if up == root or root in up.parents)
            if nested or not any((folder / m).is_file() for m in RUN_MARKERS):
                continue  # an earlier run kept inside another run's folder, or not a run folder at all
            if is_ensemble_cell(folder):
                if not _members(folder):  # stopped before its members' folders were made: the cell says it
                    status, reason = folder_state(folder, folder / ENSEMBLE_SHARED)
                    rows.append({"source": str(folder), "run_id": None, "status": status, "reason": reason})
                continue
            lock = folder.parent / ENSEMBLE_SHARED if is_ensemble_cell(folder.parent) else None
            status, reason = folder_state(folder, lock)
            rows.append({"source": str(folder), "run_id": None, "status": status, "reason": reason})
    return rows


def _members(cell: Path) -> list[Path]:
    """The member folders under an ensemble's cell folder that a run has started in."""
    return [p for p in _children(cell) if p.name.startswith(MEMBER_PREFIX) and _is_run_folder(p)]


def _overrides(folder: Path) -> frozenset[str] | None:
    """The overrides that made the run in ``folder``: Hydra's record, else its result's."""
    try:
        listed = yaml.safe_load((folder / ".hydra" / "overrides.yaml").read_text())
    except (OSError, yaml.YAMLError):
        try:
            listed = json.loads((folder / RESULT_FILE).read_text()).get("overrides")
        except (OSError, ValueError, AttributeError):
            return None
    return frozenset(str(o) for o in listed) if isinstance(listed, list) else None


def grid(multirun: Mapping[str, Any]) -> list[list[str]] | None:
    """The override list of every cell of a basic sweeper's grid, as Hydra expands it; None for another sweeper
    (Optuna chooses its trials as it goes) or a grid that cannot be expanded here."""
    hydra = multirun.get("hydra") or {}
    sweeper = hydra.get("sweeper") or {}
    if sweeper.get("_target_") != BASIC_SWEEPER:
        return None
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    params = [f"{k}={v}" for k, v in (sweeper.get("params") or {}).items()]
    task = [str(o) for o in (hydra.get("overrides") or {}).get("task") or []]
    try:
        overrides = OverridesParser.create().parse_overrides(params + task)
        return [cell for batch in BasicSweeper.split_arguments(overrides, None) for cell in batch]
    except (HydraException, ValueError):  # e.g. glob(), which needs the config's option lists
        return None


def unstarted_cells(roots: Iterable[Path]) -> list[dict[str, Any]]:
    """One row per cell of a sweep's grid (``multirun.yaml`` under ``roots``) that no run folder holds."""
    rows = []
    for root in roots:
        if not root.is_dir():
            continue
        for manifest in sorted(root.rglob(MULTIRUN_FILE)):
            try:
                cells = grid(yaml.safe_load(manifest.read_text()) or {})
            except (OSError, yaml.YAMLError):
                cells = None
            if not cells:
                continue
            sweep = manifest.parent
            # a cell is named by the overrides in which the grid's cells differ (attention=soft seed=2)
            keys = {o.split("=", 1)[0] for cell in cells for o in cell}
            varying = {k for k in keys if len({o for cell in cells for o in cell if o.split("=", 1)[0] == k}) > 1}
            present = {_overrides(p.parent) for p in sweep.rglob(RESULT_FILE)}
            present |= {_overrides(p.parent.parent) for p in sweep.rglob("overrides.yaml") if p.parent.name == ".hydra"}
            for cell in cells:
                if frozenset(cell) not in present:
                    rows.append(
                        {
                            "source": f"{sweep} [{' '.join(o for o in cell if o.split('=', 1)[0] in varying)}]",
                            "run_id": None,
                            "status": "not started",
                            "reason": "not started: the sweep is still running, or stopped before this cell",
                        }
                    )
    return rows


def cells_without_result(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """Every cell under the sweep folders that the statistics cannot include because it has no result."""
    roots = [Path(p) for p in paths]
    return [*unfinished_folders(roots), *unstarted_cells(roots)]
