"""Throughput over the training steps since the last logging step, for every logger at ``log_every_n_steps``.

The names follow Lightning's ThroughputMonitor (``batches_per_sec``; its ``items`` are tokens here) under
``throughput/``. ThroughputMonitor itself synchronises the device at every step; these come from the step
timer (experiments/training/callbacks.py), which reads its CUDA events at the logging steps only. A step is a
training batch from forward to optimiser step: data loading, validation and checkpointing are not in it, so
the rates are the model's, not the whole loop's.
"""

from __future__ import annotations

from typing import Any

PREFIX = "throughput/"
STEP_MS = PREFIX + "step_ms"  # mean milliseconds per step over the window
BATCHES_PER_SEC = PREFIX + "batches_per_sec"
TOKENS_PER_SEC = PREFIX + "tokens_per_sec"  # the tokens the model saw (source and target, no padding)


def window_metrics(times_ms: list[float], tokens: float | None) -> dict[str, float]:
    """The rates of one window of steps: ``times_ms`` each step's time, ``tokens`` all of theirs (None: unknown)."""
    total_ms = sum(times_ms)
    if not times_ms or total_ms <= 0:
        return {}
    metrics = {STEP_MS: total_ms / len(times_ms), BATCHES_PER_SEC: len(times_ms) / (total_ms / 1000)}
    if tokens:
        metrics[TOKENS_PER_SEC] = tokens / (total_ms / 1000)
    return metrics


def is_logging_step(trainer: Any) -> bool:
    """Whether Lightning writes its loggers after this training batch (``log_every_n_steps``), as its own
    monitors (LearningRateMonitor, ThroughputMonitor) ask; False for a stand-in trainer without loggers."""
    connector = getattr(trainer, "_logger_connector", None)
    return connector is not None and bool(trainer.loggers) and connector.should_update_logs
