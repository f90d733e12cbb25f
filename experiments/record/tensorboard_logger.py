"""TensorBoard for a run: one event file from the first training step to the test, and ``hp_metric`` the run's
objective, written beside the hyper-parameters, so TensorBoard's HParams tab compares runs by what was optimised.

Lightning's TensorBoardLogger writes ``hp_metric = -1`` with the hyper-parameters when it starts (its
``default_hp_metric``) and closes its writer at the end of ``fit``, so the test opens a second event file. This
one writes the hyper-parameters once, with the objective (``record_objective``), and keeps its writer open
until then.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping

from lightning.pytorch.loggers import TensorBoardLogger

HP_METRIC = "hp_metric"  # the metric TensorBoard's HParams tab shows for a run


class RunTensorBoardLogger(TensorBoardLogger):
    """Lightning's TensorBoardLogger (every keyword of it), except that the end of ``fit`` only flushes: the writer
    closes when the objective is written, or when the run fails."""

    def __init__(self, *args: Any, default_hp_metric: bool = False, **kwargs: Any) -> None:
        # the -1 placeholder would be the first hparams record of the event file; the objective replaces it
        super().__init__(*args, default_hp_metric=default_hp_metric, **kwargs)

    def finalize(self, status: str) -> None:
        if status == "success":
            if self._experiment is not None:
                self.experiment.flush()
            self.save()  # hparams.yaml, as Lightning's own finalize
            return
        super().finalize(status)

    def record_objective(self, value: float, step: int | None = None) -> None:
        """The run's hyper-parameters with ``hp_metric = value``, into the event file of its curves; then close it."""
        self.log_hyperparams(self.hparams, {HP_METRIC: value}, step=step)
        super().finalize("success")


def record_objective(loggers: Iterable[Any], metrics: Mapping[str, Any], objective: str, step: int) -> None:
    """``hp_metric`` = ``metrics[objective]`` (the metric a sweep optimises, ``objective`` in the config) in each
    TensorBoard logger; none without a finite value (a run that diverged compares with nothing)."""
    value = metrics.get(objective)
    if value is None or not math.isfinite(float(value)):
        return
    for logger in loggers:
        if isinstance(logger, RunTensorBoardLogger):
            logger.record_objective(float(value), step=step)
