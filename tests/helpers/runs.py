"""A training run in this process, as ``python -m experiments.train`` makes it from the same overrides."""

from __future__ import annotations

from pathlib import Path

from experiments.config.spec import build_spec
from experiments.training.single_run import train
from tests.helpers.config import compose


def run(overrides: list[str], run_dir: Path) -> dict:
    """The result.json dict of one run of ``overrides`` into ``run_dir``."""
    return train(build_spec(compose(overrides)), run_dir, overrides)
