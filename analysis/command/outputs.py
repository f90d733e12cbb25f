"""Where the analysis writes: output paths checked before any work, and write errors as one line.

A report that reads a sweep and draws its figures for a minute, then finds that
``--out`` is a file, is a minute lost; a full disk ends in ``OSError 28``. Both
become an ``AnalysisError`` here, which the command lines print as one line and
exit 2 (``analysis.command.errors.run_cli``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path
from typing import Iterator

from analysis.command.errors import AnalysisError

# Write errors that are the place's fault, not the program's: said in one line.
PLACE_ERRORS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large (the file size limit, ulimit -f)",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EFBIG: "file too large",  # the file size limit (ulimit -f)
}
REMEDY = {
    errno.ENOSPC: "free some space or write elsewhere",
    errno.EDQUOT: "free some space or write elsewhere",
    errno.EFBIG: "raise the file size limit (ulimit -f) or write elsewhere",
}


class OutputError(AnalysisError):
    """An output path that cannot be written: not a folder, not writable, or the disk is full."""


def _probe(folder: Path, option: str, shown: Path) -> None:
    """Write and remove a small file in ``folder``: the only test that holds for root and odd file systems."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise OutputError(f"{option} {shown}: cannot write there ({err.strerror or err})") from None


def check_out_dir(path: str | Path, option: str = "--out") -> None:
    """``path`` is, or can be made, a writable folder; nothing is left behind by the check."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{option} {path} is a file, not a folder; give a folder for the outputs")
    created = []
    for folder in (*reversed(path.parents), path):
        if folder.exists():
            if not folder.is_dir():
                raise OutputError(f"{option} {path}: {folder} is a file, not a folder")
            continue
        try:
            folder.mkdir()
        except OSError as err:
            _remove(created)
            raise OutputError(f"{option} {path}: cannot create {folder} ({err.strerror or err})") from None
        created.append(folder)
    try:
        _probe(path, option, path)
    finally:
        _remove(created)


def check_out_file(path: str | Path, option: str) -> None:
    """``path`` can be written as a file: its folder exists and is writable, and it is not a folder."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{option} {path} is a folder; give a file name")
    folder = path.parent
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise OutputError(f"{option} {path}: the folder {folder} {what}")
    _probe(folder, option, path)


def _remove(created: list[Path]) -> None:
    for folder in reversed(created):
        with contextlib.suppress(OSError):
            folder.rmdir()


@contextlib.contextmanager
def writing(where: str | Path) -> Iterator[None]:
    """Turn a full disk (or a read-only, forbidden place, a file size limit) met while writing under ``where``
    into one line. The files written there meanwhile are removed then: the one cut at the limit, and the others
    of an output that is not whole; what was there before and left untouched stays."""
    before = _files(Path(where))
    try:
        yield
    except OSError as err:
        reason = PLACE_ERRORS.get(err.errno)
        if reason is None:
            raise
        path = err.filename or where
        removed = _remove_written(Path(where), before)
        said = f"; the {removed} file(s) it had written are removed" if removed else ""
        raise OutputError(f"{reason} writing {path}{said}; {REMEDY.get(err.errno, 'write elsewhere')}") from None


def _files(where: Path) -> dict[Path, tuple[int, int]]:
    """(modification time, size) of each file at or under ``where``."""
    paths = [where] if where.is_file() else (p for p in where.rglob("*") if p.is_file())
    out = {}
    for path in paths:
        with contextlib.suppress(OSError):
            stat = path.stat()
            out[path] = (stat.st_mtime_ns, stat.st_size)
    return out


def _remove_written(where: Path, before: dict[Path, tuple[int, int]]) -> int:
    """Remove the files at or under ``where`` that are new or changed since ``before``; how many."""
    removed = 0
    for path, state in _files(where).items():
        if before.get(path) != state:
            with contextlib.suppress(OSError):
                path.unlink()
                removed += 1
    return removed


@contextlib.contextmanager
def whole_or_absent(path: str | Path) -> Iterator[Path]:
    """A temp path beside ``path`` to write to, renamed to ``path`` when the block ends and removed when it
    raises: a write cut short (a full disk, a file size limit) leaves the previous file or none, never a part."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


__all__ = ["OutputError", "check_out_dir", "check_out_file", "whole_or_absent", "writing"]
