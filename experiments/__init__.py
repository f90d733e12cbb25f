"""Everything that runs: model assembly, tasks, training, sweeps, benchmarks.

``run(overrides, run_dir=...)`` trains one configuration from Python and returns its result;
``multirun(overrides)`` runs a sweep as ``python -m experiments.train -m`` does and returns its folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def run(overrides=(), run_dir=None) -> dict[str, Any] | list[dict[str, Any]]:
    """``experiments.app.api.run``: imported on first use, so ``import experiments`` stays light."""
    from experiments.app.api import run as _run

    return _run(overrides, run_dir=run_dir)


def multirun(overrides=(), sweep_dir=None) -> Path:
    """``experiments.app.api.multirun``: imported on first use, as ``run``."""
    from experiments.app.api import multirun as _multirun

    return _multirun(overrides, sweep_dir=sweep_dir)


__all__ = ["multirun", "run"]
