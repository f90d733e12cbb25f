"""result.json (schema 1): building, hashing and writing it atomically."""

from __future__ import annotations

import json
import math
import platform
import socket
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from attnlab.bibliography import lookup
from attnlab.flatten import flatten  # noqa: F401  (experiments.record.result.flatten stays importable; train.py uses it)
from experiments.config.hashing import HASH_EXCLUDE_PREFIXES, config_hash  # noqa: F401  (their old home)

SCHEMA = 1
# pruned: a study's trial stopped early by its pruner (result.json "pruned" says at which step)
STATUSES = ("completed", "diverged", "failed", "pruned")
PACKAGES = (
    "torch",
    "lightning",
    "hydra-core",
    "wandb",
    "pandas",
    "numpy",
    "torchmetrics",
    "tokenizers",
    "sacrebleu",
    "attnlab",
)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def git_sha() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def environment(device: str) -> dict[str, Any]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {
        "torch": versions.get("torch"),
        "device": device,
        "git_sha": git_sha(),
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "packages": versions,
    }


def variant_references(used: dict[str, list[str]]) -> list[dict[str, Any]]:
    """The BibTeX entries of the papers each registry entry a run used declared at registration.

    ``used``: registry kind (attention, position, task) -> names. The keys each entry declared
    are looked up in the one bibliography (attnlab.bibliography) and recorded as BibTeX in
    result.json, so the report never needs to import a variant; a key not there stops the run
    before training, naming it.
    """
    from experiments.tasks import TASKS
    from variants import ATTENTION, POSITION

    registries = {"attention": ATTENTION, "position": POSITION, "task": TASKS}
    found = []
    for kind, names in used.items():
        for name in dict.fromkeys(names):
            if name in registries[kind]:
                bibtex = lookup(registries[kind].references(name), f"{kind}={name}")
                found.append({"registry": kind, "name": name, "bibtex": bibtex})
    return found


def _finite(value: Any) -> Any:
    """NaN/inf are not JSON: store them as null so every reader can parse the file."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def write_json_atomic(path: Path, payload: dict[str, Any]) -> None:
    """Write to a temp file in the same folder, fsync, rename: readers see the old file or the new one.

    The file gets the mode the umask gives (experiments.record.files.atomic_write); an OSError becomes
    a one-line ``OutputError`` naming the path (a full disk: "no space left on the device").
    """
    from experiments.record.files import atomic_write

    atomic_write(path, lambda f: json.dump(_finite(payload), f, indent=2, sort_keys=False, default=str))


def read_result(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def command_line() -> str:
    return " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])
