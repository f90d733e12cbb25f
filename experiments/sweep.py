"""Sweep bookkeeping: a Hydra callback that reports failed cells through the exit code.

Jobs of a multirun never raise (each records its failure in its result.json), so
the sweep goes on. At the end of the multirun the callback, which runs in the
launching process whatever the launcher, reads the results of this sweep's jobs
and remembers whether any did not complete; ``train.main`` turns that into the
process exit code.
"""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

log = logging.getLogger("attnlab")
_LAST: dict[str, Any] = {"failed": 0, "ran": False}


class SweepSummary(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _LAST.update(failed=0, ran=True, started=time.time())

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        sweep_dir = Path(config.hydra.sweep.dir)
        counts: dict[str, int] = {}
        bad = []
        for path in sorted(sweep_dir.rglob("result.json")):
            if path.stat().st_mtime < _LAST.get("started", 0):
                continue  # an earlier sweep's cell that this one skipped or did not touch
            try:
                status = json.loads(path.read_text()).get("status", "failed")
            except (OSError, ValueError):
                status = "failed"
            counts[status] = counts.get(status, 0) + 1
            if status != "completed":
                bad.append(f"{path.parent.name}: {status}")
        _LAST["failed"] = len(bad)
        summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no results written"
        log.info("sweep %s: %s", sweep_dir, summary)
        if bad:
            log.warning("cells that did not complete: %s", "; ".join(bad))


def exit_code_for_last_multirun() -> int:
    return 1 if _LAST["ran"] and _LAST["failed"] else 0
