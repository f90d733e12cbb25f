"""The one private Lightning attribute the ensemble writes (experiments/ensemble/run.py, the step of each
member's final validation and test logs) is still where Lightning reads it."""

from __future__ import annotations

import inspect

import lightning as L
from lightning.pytorch.trainer.connectors.logger_connector import logger_connector


def test_the_logged_step_of_a_validate_or_test_is_the_epoch_loops_batches_that_stepped() -> None:
    trainer = L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False)
    assert isinstance(trainer.fit_loop.epoch_loop._batches_that_stepped, int)
    # the logger connector's default step is this counter (a metric named "step" aside)
    source = inspect.getsource(logger_connector._LoggerConnector.log_metrics)
    assert "step = self.trainer.fit_loop.epoch_loop._batches_that_stepped" in source
