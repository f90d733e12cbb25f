"""Where derived files (trained tokenizers) are kept: beside the data, else in the run's folder.

A cache entry is named by a hash of everything it was derived from, so a changed
input file or parameter simply misses the cache. Writes go to a temporary name
and are renamed, so parallel runs never read a half-written file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path, PurePath
from typing import Any, Callable

from experiments.tasks.base import refuse


def inside(base: Path, name: str, key: str) -> Path:
    """``base / name``, refusing a configured name that would leave ``base``."""
    pure = PurePath(str(name))
    if not str(name) or pure.is_absolute() or ".." in pure.parts:
        raise refuse(key, name, f"it must be a relative folder name inside {str(base)!r}, without '..' components")
    path = base / pure
    if not path.resolve().is_relative_to(base.resolve()):
        raise refuse(key, name, f"it resolves to {str(path.resolve())!r}, outside {str(base)!r}")
    return path


def input_hash(files: list[Path], params: dict[str, Any]) -> str:
    """A short hash of the files' identities (path, size, mtime) and the parameters."""
    identity = [[str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns] for f in files]
    text = json.dumps({"files": identity, "params": params}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def find(folders: list[Path], filename: str) -> Path | None:
    for folder in folders:
        if (folder / filename).is_file():
            return folder / filename
    return None


def marked_read_only(folder: Path) -> bool:
    """True when the nearest existing folder carries no write permission bit at all.

    Root can write anywhere, so ``os.access`` says yes even for a data folder its
    owner marked read-only; the permission bits say what the owner meant.
    """
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    return not existing.stat().st_mode & 0o222


def store(folders: list[Path], filename: str, write: Callable[[Path], None]) -> Path | None:
    """Write into the first folder that accepts it; ``None`` when none does (read-only everywhere)."""
    for folder in folders:
        if marked_read_only(folder):
            continue
        temporary = folder / f".{filename}.{os.getpid()}.tmp"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            write(temporary)
            os.replace(temporary, folder / filename)
            return folder / filename
        except OSError:
            with contextlib.suppress(OSError):
                temporary.unlink(missing_ok=True)
    return None
