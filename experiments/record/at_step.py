"""A logger that writes every row at a given step and epoch: a run's evaluation by a Trainer that did not train it.

Lightning logs the rows of ``validate`` and ``test`` at the step and epoch of the Trainer that runs them (its
fit loop's count of optimizer steps, and ``current_epoch``). An ensemble member is evaluated by a Trainer of
its own that never fit a step, so its rows would land at step 0; through this logger they land at the step
and epoch its separate run logs them at, through each logger's public ``log_metrics(metrics, step)``.
"""

from __future__ import annotations

from argparse import Namespace
from typing import Any

from lightning.pytorch.loggers import Logger


class AtStep(Logger):
    """``logger``, with every row logged at ``step``; a row that carries Lightning's ``epoch`` column gets
    ``epoch`` instead. Everything else (hyperparameters, checkpoints, saving, closing) goes to ``logger``."""

    def __init__(self, logger: Logger, step: int, epoch: int) -> None:
        super().__init__()
        self.logger, self.step, self.epoch = logger, int(step), int(epoch)

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        if "epoch" in metrics:  # Lightning adds it to a row it logs at its own step
            metrics = {**metrics, "epoch": self.epoch}
        self.logger.log_metrics(metrics, step=self.step)

    def log_hyperparams(self, params: dict[str, Any] | Namespace, *args: Any, **kwargs: Any) -> None:
        self.logger.log_hyperparams(params, *args, **kwargs)

    def log_graph(self, model: Any, input_array: Any = None) -> None:
        self.logger.log_graph(model, input_array)

    def after_save_checkpoint(self, checkpoint_callback: Any) -> None:
        self.logger.after_save_checkpoint(checkpoint_callback)

    def save(self) -> None:
        self.logger.save()

    def finalize(self, status: str) -> None:
        self.logger.finalize(status)

    @property
    def name(self) -> str | None:
        return self.logger.name

    @property
    def version(self) -> int | str | None:
        return self.logger.version

    @property
    def save_dir(self) -> str | None:
        return self.logger.save_dir

    @property
    def root_dir(self) -> str | None:
        return self.logger.root_dir

    @property
    def log_dir(self) -> str | None:
        return self.logger.log_dir

    @property
    def group_separator(self) -> str:
        return self.logger.group_separator

    @property
    def experiment(self) -> Any:
        return self.logger.experiment
