"""Everything that runs: model assembly, tasks, training, sweeps, benchmarks.

``run(overrides, run_dir=...)`` trains one configuration from Python and returns its result.
"""

from __future__ import annotations

from typing import Any


def run(overrides=(), run_dir=None) -> dict[str, Any]:
    """``experiments.app.api.run``: imported on first use, so ``import experiments`` stays light."""
    from experiments.app.api import run as _run

    return _run(overrides, run_dir=run_dir)


__all__ = ["run"]
