"""One writer per run folder: a lock file holding the writer's pid and host, created atomically.

A second process on a folder whose writer is alive is refused in one line; a lock whose process is gone
(killed, the machine rebooted) is taken over with a line saying so. The lock is removed on every exit
that runs Python's ``finally`` (success, an error, Ctrl-C, ``sys.exit``); after SIGKILL it stays and the
next run takes it over.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sys
from pathlib import Path
from typing import Iterator

from attnlab.run_folders import LOCK, process_alive
from experiments.config.errors import ConfigError

log = logging.getLogger("attnlab")


class FolderBusyError(ConfigError):
    """Another live process writes this run folder."""


def _create(path: Path) -> bool:
    """Create the lock with this process's pid and host; False if a lock is already there."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        json.dump({"pid": os.getpid(), "host": socket.gethostname()}, f)
    return True


def _holder(path: Path) -> dict | None:
    try:
        holder = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}  # being written this instant, or damaged: read as a holder we cannot name
    return holder if isinstance(holder, dict) else {}


def check_free(run_dir: Path, named: Path | None = None) -> None:
    """Raise ``FolderBusyError`` when a live process holds the folder's lock (nothing is taken). ``named``: the
    folder the user gave, named in the refusal when the lock lies in a folder below it (an ensemble's)."""
    holder = _holder(run_dir / LOCK)
    if holder is not None:
        _refuse_live(run_dir, holder, named)


def _refuse_live(run_dir: Path, holder: dict, named: Path | None = None) -> None:
    """Raise unless ``holder`` is a process of this host that has ended."""
    pid, host = holder.get("pid"), holder.get("host")
    here = host == socket.gethostname()
    if not isinstance(pid, int) or not here or process_alive(pid):
        who = f"process {pid} on {host}" if isinstance(pid, int) else "another process"
        gone = "" if here or not isinstance(pid, int) else f"; if it has ended, remove {run_dir / LOCK}"
        raise FolderBusyError(
            f"{named or run_dir} is being written by {who}{gone}; one process writes a run folder at a time: "
            "wait for it, or run in another folder"
        )


def acquire(run_dir: Path, named: Path | None = None) -> Path:
    """Take the folder's lock or raise ``FolderBusyError`` (one line: who holds it, what to do)."""
    path = run_dir / LOCK
    for _ in range(3):  # a lock released or taken over between our looks: look again
        if _create(path):
            return path
        holder = _holder(path)
        if holder is None:
            continue
        _refuse_live(run_dir, holder, named)
        pid, host = holder.get("pid"), holder.get("host")
        # the holder is gone: move its lock out of the way under a name of our own, so that of two
        # processes taking over at once only one removes it
        stale = path.with_name(f"{LOCK}.stale.{os.getpid()}")
        try:
            path.rename(stale)
        except FileNotFoundError:
            continue
        if _holder(stale) != holder:  # another process's fresh lock moved by mistake: put it back
            os.replace(stale, path)
            continue
        stale.unlink()
        print(
            f"attnlab: taking over the lock of {run_dir}: its process {pid} on {host} is no longer running",
            file=sys.stderr,
        )
    raise FolderBusyError(f"{run_dir}: could not take its lock {path}; another process keeps taking it")


def _held_here(path: Path) -> bool:
    holder = _holder(path)
    return bool(holder) and holder.get("pid") == os.getpid() and holder.get("host") == socket.gethostname()


def release(path: Path) -> None:
    """Remove the lock if it is still this process's."""
    if _held_here(path):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


@contextlib.contextmanager
def one_writer(run_dir: Path, enabled: bool = True, named: Path | None = None) -> Iterator[None]:
    """Hold ``run_dir``'s lock for the block (``enabled=False``: a DDP rank > 0, whose rank 0 holds it)."""
    if not enabled or _held_here(run_dir / LOCK):  # a folder this process already writes (an ensemble's member)
        yield
        return
    created = not run_dir.exists()
    run_dir.mkdir(parents=True, exist_ok=True)
    path = acquire(run_dir, named)
    try:
        yield
    finally:
        release(path)
        if created:  # a folder made only to hold the lock (work refused before it wrote): no empty folder left
            with contextlib.suppress(OSError):
                run_dir.rmdir()
