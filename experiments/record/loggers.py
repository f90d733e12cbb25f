"""Loggers: CSV always, W&B when enabled, and W&B never able to take a run down."""

from __future__ import annotations

import csv
import logging
from pathlib import Path
from typing import Any

from lightning.fabric.loggers.logger import rank_zero_experiment
from lightning.pytorch.loggers import CSVLogger, WandbLogger
from lightning.pytorch.loggers.csv_logs import ExperimentWriter

log = logging.getLogger("attnlab")


class SafeWandbLogger(WandbLogger):
    """A WandbLogger whose failures (quota, disk, network) warn once and switch it off."""

    broken = False
    # the last step an interrupted attempt of this run logged: W&B keeps that history, so the
    # resumed run does not log those steps a second time
    logged_until: int | None = None

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
            log.warning(
                "W&B failed while %s (%s: %s); continuing with the CSV logger only", what, type(err).__name__, err
            )
            return None

    def log_metrics(self, metrics, step=None) -> None:
        if step is not None and self.logged_until is not None and step <= self.logged_until:
            return
        self._guard("logging metrics", super().log_metrics, metrics, step)

    def log_hyperparams(self, params, *args, **kwargs) -> None:
        self._guard("logging the config", super().log_hyperparams, params, *args, **kwargs)

    def after_save_checkpoint(self, checkpoint_callback) -> None:
        self._guard("recording a checkpoint", super().after_save_checkpoint, checkpoint_callback)

    def finalize(self, status: str) -> None:
        self._guard("finishing", super().finalize, status)


class HistoryWriter(ExperimentWriter):
    """Lightning's CSV writer, except that it appends to the metrics.csv a resumed run already has.

    Lightning deletes that file when the writer starts ("Previous log files ... will be
    deleted"), so a resumed run lost its learning curve up to the interruption. The rows
    after the checkpoint the run resumes from are dropped before training instead
    (``keep_history``); the resumed run logs them again.
    """

    def _check_log_dir_exists(self) -> None:
        if self._fs.isfile(self.metrics_file_path):
            with self._fs.open(self.metrics_file_path, "r", newline="") as f:
                self.metrics_keys = sorted(next(csv.reader(f), []))  # the header new rows must fit


class HistoryCSVLogger(CSVLogger):
    @property
    @rank_zero_experiment
    def experiment(self) -> HistoryWriter:
        if self._experiment is None:
            self._fs.makedirs(self.root_dir, exist_ok=True)
            self._experiment = HistoryWriter(log_dir=self.log_dir)
        return self._experiment


def csv_logger(run_dir: Path, flush_every: int = 1) -> CSVLogger:
    # -> <run_dir>/csv/metrics.csv, the file the report reads learning curves from. Written at every
    # log call (log_every_n_steps), so a killed run loses no logged row.
    return HistoryCSVLogger(save_dir=str(run_dir), name="csv", version="", flush_logs_every_n_steps=flush_every)


def metrics_csv(run_dir: Path) -> Path:
    return Path(run_dir) / "csv" / ExperimentWriter.NAME_METRICS_FILE


def keep_history(path: Path, before_step: int) -> int | None:
    """Keep the rows of ``path`` logged before ``before_step`` (the resumed checkpoint's step), drop the rest.

    Returns the last step the file had logged (None without a file): the interrupted run
    logged up to there, so W&B, which cannot take a step twice, skips up to it.
    """
    path = Path(path)
    if not path.is_file():
        return None
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        header, rows = reader.fieldnames or [], list(reader)
    steps = [_step(r) for r in rows]
    kept = [r for r, step in zip(rows, steps) if step is not None and step < before_step]
    if len(kept) < len(rows):
        from experiments.record.files import atomic_write

        def write(f) -> None:
            writer = csv.DictWriter(f, fieldnames=header, lineterminator="\r\n")
            writer.writeheader()
            writer.writerows(kept)

        atomic_write(path, write)
    known = [s for s in steps if s is not None]
    return max(known) if known else None


def _step(row: dict[str, str]) -> int | None:
    try:
        return int(float(row.get("step") or ""))
    except ValueError:
        return None


def wandb_logger(*, run_id: str, config: dict[str, Any], **settings: Any) -> SafeWandbLogger | None:
    """Start the W&B run now, so a failure to start is caught before training.

    ``run_id``: the run folder's, resumed (``resume="allow"``) by every continuation of the run;
    ``settings``: WandbLogger / ``wandb.init`` keywords (experiments/config/wandb_settings.py).
    """
    try:
        logger = SafeWandbLogger(id=run_id, resume="allow", config=config, reinit="finish_previous", **settings)
        from experiments.record.wandb_tables import define_metrics

        define_metrics(logger.experiment)
        return logger
    except Exception as err:  # noqa: BLE001
        log.warning("W&B could not start (%s: %s); continuing with the CSV logger only", type(err).__name__, err)
        return None
