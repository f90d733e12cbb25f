"""Reading the text files a user names: plain or ``.gz``, UTF-8, checked before training."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from experiments.tasks.base import TaskConfigError


def file_error(key: str, path: Path, why: str) -> TaskConfigError:
    return TaskConfigError(f"task.{key}={str(path)!r} cannot be used: {why}")


def read_text(key: str, path: Path) -> str:
    """The whole file as text (``.gz`` decompressed); missing, empty and binary files are refused."""
    if not path.exists():
        raise file_error(key, path, "no such file")
    if not path.is_file():
        raise file_error(key, path, "it is not a regular file")
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    except (OSError, EOFError, zlib.error) as error:
        raise file_error(key, path, f"it could not be read ({error})") from None
    if not raw.strip():
        raise file_error(key, path, "the file is empty (or only whitespace); give a UTF-8 text file")
    nul = raw.find(b"\0")
    if nul >= 0:
        raise file_error(key, path, f"it looks binary (a NUL byte at offset {nul}); give a UTF-8 text file")
    try:
        return raw.decode("utf-8-sig")  # a leading byte-order mark is not part of the text
    except UnicodeDecodeError as error:
        raise file_error(key, path, f"it is not UTF-8 text (invalid byte at offset {error.start})") from None


def read_lines(key: str, path: Path) -> list[str]:
    """One entry per line, without line endings; only ``\\n`` ends a line (as ``wc -l`` counts)."""
    lines = read_text(key, path).split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


def read_parallel(src_key: str, src: Path, tgt_key: str, tgt: Path) -> tuple[list[str], list[str]]:
    """Two line-aligned files; different line counts are refused with both names and counts."""
    src_lines, tgt_lines = read_lines(src_key, src), read_lines(tgt_key, tgt)
    if len(src_lines) != len(tgt_lines):
        raise TaskConfigError(
            f"task.{src_key}={str(src)!r} has {len(src_lines)} lines but task.{tgt_key}={str(tgt)!r} has "
            f"{len(tgt_lines)}; parallel files must have one sentence per line, line for line"
        )
    return src_lines, tgt_lines
