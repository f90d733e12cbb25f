"""Loggers: CSV always, W&B when enabled, and W&B never able to take a run down."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from lightning.pytorch.loggers import CSVLogger, WandbLogger

log = logging.getLogger("attnlab")


class SafeWandbLogger(WandbLogger):
    """A WandbLogger whose failures (quota, disk, network) warn once and switch it off."""

    broken = False

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # Lightning always passes ``anonymous`` (None unless asked), which W&B now warns is
        # ignored; the suite never asks for it, so it is not passed at all.
        if self._wandb_init.get("anonymous") is None:
            self._wandb_init.pop("anonymous", None)

    def _guard(self, what: str, fn, *args, **kwargs) -> Any:
        if self.broken:
            return None
        try:
            return fn(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - any W&B failure must leave the run going
            self.broken = True
            log.warning("W&B failed while %s (%s: %s); continuing with the CSV logger only",
                        what, type(err).__name__, err)
            return None

    def log_metrics(self, metrics, step=None) -> None:
        self._guard("logging metrics", super().log_metrics, metrics, step)

    def log_hyperparams(self, params, *args, **kwargs) -> None:
        self._guard("logging the config", super().log_hyperparams, params, *args, **kwargs)

    def after_save_checkpoint(self, checkpoint_callback) -> None:
        self._guard("recording a checkpoint", super().after_save_checkpoint, checkpoint_callback)

    def finalize(self, status: str) -> None:
        self._guard("finishing", super().finalize, status)


def csv_logger(run_dir: Path) -> CSVLogger:
    # -> <run_dir>/csv/metrics.csv, the file the report reads learning curves from
    return CSVLogger(save_dir=str(run_dir), name="csv", version="")


def wandb_logger(*, run_dir: Path, run_id: str, group: str, tags: list[str], config: dict[str, Any],
                 mode: str, project: str, entity: str | None, **init: Any) -> SafeWandbLogger | None:
    """Start the W&B run now, so a failure to start is caught before training.

    ``init``: any other keyword of WandbLogger / ``wandb.init`` (job_type, notes, ...), from ``logger.wandb``.
    """
    try:
        logger = SafeWandbLogger(project=project, entity=entity, group=group, tags=tags, mode=mode,
                                 save_dir=str(run_dir), id=run_id, resume="allow", config=config,
                                 reinit="finish_previous", **init)
        from experiments.wandb_tables import define_metrics

        define_metrics(logger.experiment)
        return logger
    except Exception as err:  # noqa: BLE001
        log.warning("W&B could not start (%s: %s); continuing with the CSV logger only", type(err).__name__, err)
        return None
