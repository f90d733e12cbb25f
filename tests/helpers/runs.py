"""A training run in this process, as ``python -m experiments.train`` makes it from the same overrides."""

from __future__ import annotations

from pathlib import Path

from experiments.training.single_run import train
from tests.helpers.config import compose


def run(overrides: list[str], run_dir: Path) -> dict:
    """The result.json dict of one run of ``overrides`` into ``run_dir``."""
    return train(compose(overrides), run_dir, overrides)
