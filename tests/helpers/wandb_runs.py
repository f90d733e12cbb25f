"""W&B runs as a test reads them back: the tiny overrides with W&B's logger, and the offline runs of a folder."""

from __future__ import annotations

import time
from pathlib import Path

from analysis.data.wandb_offline import find_offline_runs, read_wandb_offline_run
from tests.helpers.config import TINY

WITH_WANDB = [o for o in TINY if o != "logger=none"] + ["logger=default"]


def offline_runs(folder: Path, wait_s: float = 60) -> dict[str, dict]:
    """{run id: what its offline record log holds}, once W&B's service has written each log to its end."""
    deadline = time.monotonic() + wait_s
    while True:
        runs = [read_wandb_offline_run(p) for p in find_offline_runs([folder])]
        if all(r["finished"] for r in runs) or time.monotonic() > deadline:
            return {r["id"]: r for r in runs}
        time.sleep(0.5)
