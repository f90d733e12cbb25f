"""Read a W&B offline run folder (``offline-run-<date>-<id>/``) without a W&B server.

An offline run keeps everything in ``run-<id>.wandb``: a record log in the
LevelDB log layout. After a 7-byte file header (``:W&B``, magic 0xBEE1, version)
the file is a sequence of 32 KiB blocks; each block holds chunks with a 7-byte
header (CRC-32, length, type). A record that does not fit in one block is split
into FIRST / MIDDLE / LAST chunks, and a block tail shorter than a chunk header
is zero padding. Every record is a ``wandb_internal_pb2.Record`` protobuf; the
run, config, summary and history records carry what the analysis needs.

A run that was killed leaves a truncated log: reading stops at the first bad
chunk with a warning, and the records before it are kept.
"""

from __future__ import annotations

import json
import struct
import warnings
import zlib
from pathlib import Path
from typing import Any, Iterable, Iterator

FILE_MAGIC = b":W&B"
FILE_HEADER = struct.Struct("<4sHB")  # magic, 0xBEE1, version
LOG_MAGIC = 0xBEE1
CHUNK_HEADER = struct.Struct("<IHB")  # crc32, length, type
BLOCK_SIZE = 32 * 1024
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


class RecordLogError(ValueError):
    """A chunk of the record log is corrupt or cut short."""


def _chunks(data: bytes) -> Iterator[tuple[int, bytes]]:
    """Yield (type, payload) for every chunk after the file header."""
    pos = FILE_HEADER.size
    while pos < len(data):
        left_in_block = BLOCK_SIZE - pos % BLOCK_SIZE
        if left_in_block < CHUNK_HEADER.size:
            pos += left_in_block  # block tail too short for a header: padding
            continue
        if pos + CHUNK_HEADER.size > len(data):
            raise RecordLogError(f"chunk header cut short at byte {pos}")
        crc, length, kind = CHUNK_HEADER.unpack_from(data, pos)
        if crc == 0 and length == 0 and kind == 0:
            # A preallocated, never-written tail reads as zeros: the log ends here.
            return
        start = pos + CHUNK_HEADER.size
        payload = data[start : start + length]
        if len(payload) != length:
            raise RecordLogError(f"chunk at byte {pos} cut short ({len(payload)} of {length} bytes)")
        # The checksum covers the type byte and the payload, as in the LevelDB log.
        if zlib.crc32(payload, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF != crc:
            raise RecordLogError(f"checksum mismatch in chunk at byte {pos}")
        yield kind, payload
        pos = start + length


def iter_record_bytes(path: str | Path) -> Iterator[bytes]:
    """Yield each serialised record of a ``.wandb`` log, joining split records."""
    data = Path(path).read_bytes()
    if len(data) < FILE_HEADER.size:
        raise RecordLogError(f"{path}: file too short for a W&B header")
    magic, log_magic, _version = FILE_HEADER.unpack_from(data, 0)
    if magic != FILE_MAGIC or log_magic != LOG_MAGIC:
        raise RecordLogError(f"{path}: not a W&B record log (header {data[:7]!r})")
    pending: bytes | None = None
    for kind, payload in _chunks(data):
        if kind == FULL:
            yield payload
        elif kind == FIRST:
            pending = payload
        elif kind in (MIDDLE, LAST) and pending is not None:
            pending += payload
            if kind == LAST:
                yield pending
                pending = None
        else:
            raise RecordLogError(f"{path}: unexpected chunk type {kind}")


def _json_value(value_json: str) -> Any:
    try:
        return json.loads(value_json)
    except ValueError:
        return value_json


def _key_path(item: Any) -> list[str]:
    """A config/summary/history item names its key either flat (``key``) or as a path (``nested_key``)."""
    return list(item.nested_key) if item.nested_key else [item.key]


def _set_path(tree: dict[str, Any], path: list[str], value: Any) -> None:
    for part in path[:-1]:
        child = tree.get(part)
        if not isinstance(child, dict):
            child = tree[part] = {}
        tree = child
    tree[path[-1]] = value


def _remove_path(tree: dict[str, Any], path: list[str]) -> None:
    for part in path[:-1]:
        tree = tree.get(part)
        if not isinstance(tree, dict):
            return
    tree.pop(path[-1], None)


def _apply_updates(tree: dict[str, Any], record_part: Any) -> None:
    for item in record_part.update:
        _set_path(tree, _key_path(item), _json_value(item.value_json))
    for item in record_part.remove:
        _remove_path(tree, _key_path(item))


def _log_file(run_dir: Path) -> Path | None:
    logs = sorted(run_dir.glob("run-*.wandb"))
    return logs[0] if logs else None


def read_wandb_offline_run(run_dir: str | Path) -> dict[str, Any]:
    """Read one offline run folder.

    Returns ``dict(id, group, tags, config, summary, history, metrics, project, exit_code, finished, path,
    job_type, artifacts)``; ``artifacts``: [{"name", "type", "files"}] of the artifacts the run logged;
    ``metrics`` holds the metric definitions (``define_metric``): {name or glob: {"step_metric", "summary"}};
    ``config`` drops W&B's own ``_wandb`` entry and ``history`` is a list of logged rows.
    ``finished`` says the log holds the exit record: W&B's service writes the log after
    ``wandb.finish()`` returns, so a run still being written (or killed) reads as unfinished.
    ``files/wandb-summary.json``, when present, is the final summary and wins over the log.
    """
    # Imported here: protobuf classes are only needed for W&B folders, and import slowly.
    from wandb.proto import wandb_internal_pb2

    run_dir = Path(run_dir)
    run: dict[str, Any] = {
        "id": run_dir.name.rsplit("-", 1)[-1],
        "group": None,
        "tags": [],
        "project": None,
        "config": {},
        "summary": {},
        "history": [],
        "metrics": {},
        "exit_code": None,
        "finished": False,
        "path": str(run_dir),
        "job_type": None,
        "artifacts": [],
    }
    log = _log_file(run_dir)
    if log is not None:
        try:
            for raw in iter_record_bytes(log):
                record = wandb_internal_pb2.Record()
                record.ParseFromString(raw)
                _apply_record(run, record)
        except RecordLogError as err:
            warnings.warn(f"{log}: {err}; keeping the records before it", stacklevel=2)
    summary_file = run_dir / "files" / "wandb-summary.json"
    if summary_file.is_file():
        try:
            run["summary"].update(json.loads(summary_file.read_text()))
        except ValueError as err:
            warnings.warn(f"{summary_file}: unreadable ({err}); using the record log", stacklevel=2)
    if log is None and not summary_file.is_file():
        raise RecordLogError(f"{run_dir}: no run-*.wandb log and no files/wandb-summary.json")
    run["config"] = {k: v for k, v in run["config"].items() if not k.startswith("_wandb")}
    return run


def _apply_record(run: dict[str, Any], record: Any) -> None:
    kind = record.WhichOneof("record_type")
    if kind == "run":
        r = record.run
        run["id"] = r.run_id or run["id"]
        run["group"] = r.run_group or None
        run["tags"] = list(r.tags)
        run["project"] = r.project or None
        run["job_type"] = r.job_type or None
        _apply_updates(run["config"], r.config)
        _apply_updates(run["summary"], r.summary)
    elif kind == "config":
        _apply_updates(run["config"], record.config)
    elif kind == "summary":
        _apply_updates(run["summary"], record.summary)
    elif kind == "history":
        row: dict[str, Any] = {}
        for item in record.history.item:
            row["/".join(_key_path(item))] = _json_value(item.value_json)
        if record.history.HasField("step"):
            row.setdefault("_step", record.history.step.num)
        run["history"].append(row)
    elif kind == "metric":
        m = record.metric
        summary = [f.name for f, value in m.summary.ListFields() if value] if m.HasField("summary") else []
        run["metrics"][m.name or m.glob_name] = {"step_metric": m.step_metric or None, "summary": summary}
    elif kind == "artifact":
        a = record.artifact
        run["artifacts"].append({"name": a.name, "type": a.type, "files": [e.path for e in a.manifest.contents]})
    elif kind == "exit":
        run["exit_code"] = record.exit.exit_code
        run["finished"] = True


def find_offline_runs(paths: Iterable[str | Path]) -> list[Path]:
    """Every ``offline-run-*`` folder under the given paths (a path may itself be one)."""
    found: set[Path] = set()
    for path in map(Path, paths):
        if path.is_dir() and path.name.startswith("offline-run-"):
            found.add(path.resolve())
        elif path.is_dir():
            found.update(p.resolve() for p in path.rglob("offline-run-*") if p.is_dir())
    return sorted(found)
