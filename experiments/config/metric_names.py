"""The metric names a run logs, read off its task's registry entry: what a callback may monitor and a sweeper
optimise.

Its own module, apart from config/checks.py, so that the sweepers (sweep/optuna_study.py,
hydra_plugins/attnlab_sweeper) ask it without importing the checks and, through them, Lightning's parts.
"""

from __future__ import annotations

from omegaconf import DictConfig

from experiments.config.errors import ConfigError


def logged_metrics(cfg: DictConfig, stage: str = "val") -> set[str]:
    """The metric names a run of ``cfg`` logs: during training and validation (``stage="val"``: what a
    callback can monitor) or into ``result.json``'s ``metrics`` (``stage="result"``: what a sweeper can
    optimise). Read off the task's registry entry (experiments/tasks/registry.py), not a list kept here."""
    from experiments.tasks import TASKS

    stages = {"val": ("train/", "val/"), "result": ("val/", "test/")}
    if stage not in stages:
        raise ConfigError(f"stage={stage!r}: allowed values are {', '.join(stages)}")
    return {m for m in TASKS.declared(cfg.task.name).metrics if m.startswith(stages[stage])}
