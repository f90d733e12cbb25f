"""Writing a run's files: atomically, with the permissions the umask gives, and one-line errors.

Every file a run or a benchmark leaves (result.json, run_state.json, checkpoints, bench
JSON) goes through ``atomic_write``: a temp file beside the target, fsync, rename, so a
reader sees the old file or the new one. ``tempfile.mkstemp`` creates the temp file 0600
whatever the umask; the rename would carry that mode over and a teammate on a shared
cluster could not read the results, so the file gets ``0666 & ~umask`` (0644 under 022)
before it is renamed, as ``open()`` would have given it.
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import IO, Any, Callable


class OutputError(OSError):
    """An output could not be written; the message is one line naming the path and the cause."""

    def __str__(self) -> str:
        return str(self.strerror)


def umask_mode() -> int:
    """The mode ``open(path, "w")`` gives a new file under the current umask."""
    mask = os.umask(0)  # the only way to read it is to set it; put it back at once
    os.umask(mask)
    return 0o666 & ~mask


def describe(err: OSError, path: Path | str) -> str:
    """``<path>: no space left on the device`` and the like: what happened, where."""
    if err.errno == errno.ENOSPC:
        cause = "no space left on the device"
    elif err.errno == errno.EDQUOT:
        cause = "disk quota exceeded (no space left for this user)"
    elif err.errno in (errno.EACCES, errno.EPERM):
        cause = "permission denied"
    elif err.errno == errno.EROFS:
        cause = "read-only file system"
    elif err.errno == errno.EFBIG:
        cause = "file too large (the file size limit, ulimit -f, or the file system's)"
    elif err.errno == errno.ENOTDIR:
        cause = "a part of the path is a file, not a folder"
    else:
        cause = (err.strerror or str(err)).lower()
    return f"{path}: {cause}"


def atomic_write(path: Path | str, write: Callable[[IO], None], *, binary: bool = False) -> None:
    """Call ``write(f)`` on a temp file beside ``path``, fsync it, give it the umask's mode, rename it.

    An OSError becomes an ``OutputError`` naming ``path`` ("no space left on the device" for a
    full disk); the temp file is removed and the previous file, if any, stays as it was.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise OutputError(err.errno, describe(err, path)) from err
    guarded = None
    try:
        os.fchmod(fd, umask_mode())
        with os.fdopen(fd, "wb" if binary else "w") as f:
            guarded = _Remembering(f)
            write(guarded)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        # torch.save reports a failed write as RuntimeError("... unexpected pos ..."); the
        # OSError underneath it says what happened.
        cause = err if isinstance(err, OSError) else getattr(guarded, "error", None)
        if cause is not None and cause.errno is not None:
            raise OutputError(cause.errno, describe(cause, path)) from err
        raise


class _Remembering:
    """A file whose ``write`` remembers the OSError it raised, for writers that wrap it."""

    def __init__(self, f: IO) -> None:
        self._f = f
        self.error: OSError | None = None

    def write(self, data):
        try:
            return self._f.write(data)
        except OSError as err:
            self.error = err
            raise

    def __getattr__(self, name: str):
        return getattr(self._f, name)


def blocking_file(path: Path | str) -> Path | None:
    """The file at ``path`` or at its nearest existing ancestor, which keeps a folder from being made there."""
    existing = Path(path)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    return None if existing.is_dir() else existing


def check_output_path(path: Path | str, flag: str) -> None:
    """Refuse, before any work, an output file that cannot be written: ``flag`` names the option.

    Creates the missing parent folders (they would be created at the end anyway) and a probe
    file beside the target, which is removed at once.
    """
    path = Path(path)
    if path.is_dir():
        raise OutputError(errno.EISDIR, f"{flag} {path}: is a folder; give a file name inside it")
    existing = path.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise OutputError(errno.ENOTDIR, f"{flag} {path}: {existing} is a file, not a folder")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise OutputError(
            err.errno,
            f"{flag} {path}: cannot create the folder {path.parent} ({describe(err, path.parent).split(': ', 1)[1]})",
        ) from None
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=path.parent)
    except OSError as err:
        raise OutputError(err.errno, f"{flag} {describe(err, path)}") from None
    os.close(fd)
    os.unlink(probe)


def check_free_space(folder: Path | str, need_bytes: int, what: str) -> None:
    """Refuse to start work whose output (``what``, about ``need_bytes``) cannot fit in ``folder``'s disk."""
    folder = Path(folder)
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    if free < need_bytes:
        raise OutputError(
            errno.ENOSPC,
            f"{folder}: no space left on the device: {what} needs about {_size(need_bytes)} and {_size(free)} are free",
        )


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n / 2**10:.0f} KB"


def save_hydra_config_atomically() -> None:
    """Make Hydra's save of a job's ``.hydra/*.yaml`` whole or absent, as every other file a run writes: a
    full disk or a file size limit (``ulimit -f``: EFBIG) otherwise leaves a cut ``hydra.yaml`` and a
    traceback. The failed save is one line and exit 1. Hydra looks its saver up at each job, so replacing
    it once per process covers every job (the command line, a sweep's cells, a joblib worker's)."""
    import hydra.core.utils as hydra_utils

    if getattr(hydra_utils._save_config, "atomic", False):
        return

    def save(cfg: Any, filename: str, output_dir: Path) -> None:
        from omegaconf import OmegaConf

        text = OmegaConf.to_yaml(cfg)

        def write(f: IO) -> None:
            f.write(text)

        try:
            atomic_write(Path(output_dir) / filename, write)
        except OutputError as err:
            print(f"attnlab: cannot save the run's config: {err}", file=sys.stderr)
            raise SystemExit(1) from None

    save.atomic = True  # type: ignore[attr-defined]
    hydra_utils._save_config = save
