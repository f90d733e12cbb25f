"""What a run folder holds besides its run, known to the runs that write it and the analysis that reads it."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

# earlier runs of the folder, moved aside (resume=never, a sweep cell whose configuration changed):
# previous/<time>/ holds one whole run folder each, never a run of the folder's current computation
PREVIOUS = "previous"
LOCK = ".attnlab.lock"  # the pid and host of the process now writing the folder (experiments/training/lock.py)
RUN_FILES = ("result.json", "run_state.json")  # what makes the folder above previous/ a run folder
# evaluations of a run's checkpoint (python -m experiments.evaluate) go to <run>/eval/<time>/, each recorded in
# evaluation.json: result.json's schema, marked by its "evaluation" entry, and never read as another seed of the run
EVAL_DIR = "eval"
EVALUATION = "evaluation.json"


def moved_aside(result_file: Path, root: Path) -> bool:
    """Whether ``result_file``, found under ``root``, is an earlier run kept in a run folder's ``previous/``."""
    result_file, root = Path(result_file), Path(root)
    for folder in result_file.parents:
        if folder == root or root not in folder.parents:
            return False
        if folder.name == PREVIOUS and any((folder.parent / name).exists() for name in RUN_FILES):
            return True
    return False


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (a lock's holder); another user's process counts as alive."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def live_writer(folder: Path) -> str | None:
    """Who writes ``folder`` now, by its lock (``process 123``, ``process 123 on node7``); None when no live
    process does (no lock, or its process has ended). A result in a folder with a live writer is being
    replaced (a continuation, a resumed run): the report leaves it out as running."""
    try:
        holder = json.loads((Path(folder) / LOCK).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return "a process writing its lock"  # being written this instant, or damaged
    pid = holder.get("pid") if isinstance(holder, dict) else None
    host = holder.get("host") if isinstance(holder, dict) else None
    if not isinstance(pid, int):
        return "another process"
    if host not in (None, socket.gethostname()):
        return f"process {pid} on {host}"  # another machine's process cannot be checked from here
    return f"process {pid}" if process_alive(pid) else None
