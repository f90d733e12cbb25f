"""The time and tokens of a run across its segments: a run interrupted and resumed is one run.

``RunClock`` keeps, in every checkpoint, the seconds and tokens the run had spent when the checkpoint was
written; a resumed fit adds its own segment to them, so ``cost.train_seconds`` and the rates computed from it
cover the whole run, not only the last segment. The work of an interrupted segment after its last
checkpoint is done again and counted once, where it is redone.
"""

from __future__ import annotations

import time
from typing import Any

import lightning as L


class RunClock(L.Callback):
    def __init__(self) -> None:
        self.before: dict[str, float] = {"seconds": 0.0, "tokens": 0.0, "segments": 0}
        self._start: float | None = None
        self._module: Any = None

    @property
    def state_key(self) -> str:
        return "attnlab.RunClock"  # one per trainer; a stable key across renames of the class

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start, self._module = time.perf_counter(), pl_module

    def segment_tokens(self) -> float:
        """The tokens this segment trained on (the module counts from 0 at each start)."""
        seen = getattr(self._module, "tokens_seen", 0)
        return float(seen.sum()) if hasattr(seen, "sum") else float(seen)

    def state_dict(self) -> dict[str, float]:
        # called when a checkpoint is written: what the run had spent up to that checkpoint
        elapsed = time.perf_counter() - self._start if self._start is not None else 0.0
        return {
            "seconds": self.before["seconds"] + elapsed,
            "tokens": self.before["tokens"] + self.segment_tokens(),
            "segments": self.before["segments"] + 1,
        }

    def load_state_dict(self, state_dict: dict[str, float]) -> None:
        self.before = {key: state_dict.get(key, 0) for key in ("seconds", "tokens", "segments")}
