"""A trial's pruning: after each validation, report the study's pruning metric to the trial in the study's
storage, and stop training when the study's pruner says so.

The sweeper (hydra_plugins/attnlab_sweeper) passes the storage, the study and the trial's number as
``trial.*`` overrides and keeps the pruner and the metric in the study's attributes, so a job reaches its
trial from any launcher's process (joblib's workers, a SLURM node sharing the storage).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from lightning.pytorch import Callback

log = logging.getLogger("attnlab")


class TrialPruning(Callback):
    """Reports ``metric`` at each validation's step; ``pruned`` holds the step, metric and value once pruned."""

    def __init__(self, storage: str, study_name: str, number: int) -> None:
        import optuna
        from hydra.utils import instantiate

        from experiments.training.study_storage import METRIC_ATTR, PRUNER_ATTR, open_storage

        backend = open_storage(storage)
        # the sweeper's pruner, rebuilt here: Optuna keeps a study's pruner in the process, not the storage
        attrs = backend.get_study_user_attrs(backend.get_study_id_from_name(study_name))
        pruner = instantiate(attrs[PRUNER_ATTR]) if attrs.get(PRUNER_ATTR) else optuna.pruners.NopPruner()
        self.metric: str | None = attrs.get(METRIC_ATTR)
        self.study = optuna.load_study(study_name=study_name, storage=backend, pruner=pruner)
        trial_id = backend.get_trial_id_from_study_id_trial_number(self.study._study_id, number)
        self.trial = optuna.Trial(self.study, trial_id)
        self.pruned: dict[str, Any] | None = None
        self._reported: set[int] = set()

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if self.metric is None or trainer.sanity_checking or not trainer.is_global_zero:
            return
        value = trainer.callback_metrics.get(self.metric)
        step = int(trainer.global_step)
        if value is None or step in self._reported:  # a second validation at one step reports once
            return
        value = float(value)
        self._reported.add(step)
        if not math.isfinite(value):
            return  # the divergence check ends this run as diverged, a failed trial
        self.trial.report(value, step)
        if self.trial.should_prune():
            self.pruned = {"step": step, "metric": self.metric, "value": value}
            log.info("trial %d pruned at step %d (%s %.4f)", self.trial.number, step, self.metric, value)
            trainer.should_stop = True


def pruning_callback(trial: Mapping[str, Any]) -> TrialPruning | None:
    """The callback of a job the sweeper started as a trial of a study (``trial``: the config's number, study
    and storage); None for any other run."""
    if trial.get("number") is None:
        return None
    return TrialPruning(str(trial["storage"]), str(trial["study"]), int(trial["number"]))


def pruned_step(callbacks: list[Any]) -> dict[str, Any] | None:
    """Where and why a pruning callback among ``callbacks`` stopped the run; None when none did."""
    for callback in callbacks:
        if isinstance(callback, TrialPruning) and callback.pruned is not None:
            return callback.pruned
    return None
