"""``train/loss`` is logged only at the steps Lightning writes (experiments/training/step_logging.py).

The reference is the same fit with the loss logged at every step, Lightning's default: the rows the
logger receives, the loss the progress line reads at the logging and last steps, and a fit a callback
stops at a step that was not to be logged must all be the same.
"""

from __future__ import annotations

import csv
from pathlib import Path

import lightning as L
import pytest
import torch
from lightning.pytorch.loggers import CSVLogger

from experiments.config.spec import build_spec
from experiments.training import build
from experiments.training.step_logging import logs_this_step
from tests.helpers.config import TINY, compose

EVERY, STEPS = 3, 10  # the last step (10) is no multiple of EVERY


class StopAfter(L.Callback):
    """Stops the fit in ``on_train_batch_end`` once ``step`` steps are done (as Lightning's Timer does)."""

    def __init__(self, step: int | None) -> None:
        self.step = step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            trainer.should_stop = True


class ReadAtLogSteps(L.Callback):
    """The training loss in ``callback_metrics`` where the progress line reads it, and every step's loss."""

    def __init__(self) -> None:
        self.read: dict[int, float] = {}
        self.losses: dict[int, float] = {}

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        self.losses[step] = float(outputs["loss"])
        if step % EVERY == 0 or step == trainer.max_steps:
            self.read[step] = float(trainer.callback_metrics["train/loss"])


def fit(folder: Path, stop: int | None, min_steps: int | None = None) -> tuple[dict[int, float], ReadAtLogSteps]:
    """(train/loss rows the CSV logger received by step, the reader) of a small fit."""
    L.seed_everything(0)
    parts = build.assemble(build_spec(compose([*TINY, "model.dropout=0.0"])), folder, run_id="x")
    reader = ReadAtLogSteps()
    trainer = L.Trainer(
        max_steps=STEPS,
        min_steps=min_steps,
        log_every_n_steps=EVERY,
        logger=CSVLogger(folder, name="csv", version=""),
        callbacks=[StopAfter(stop), reader],
        limit_val_batches=0,
        num_sanity_val_steps=0,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(parts.module, datamodule=parts.datamodule)
    with open(folder / "csv" / "metrics.csv") as handle:
        rows = {int(r["step"]): float(r["train/loss"]) for r in csv.DictReader(handle) if r.get("train/loss")}
    return rows, reader


@pytest.mark.parametrize(
    ("stop", "min_steps"),
    [(None, None), (5, None), (5, STEPS)],
    ids=["to the last step", "stopped at a step not logged", "asked to stop there before min_steps"],
)
def test_what_is_logged_equals_logging_every_step(
    stop: int | None, min_steps: int | None, tmp_path: Path, monkeypatch
) -> None:
    """With min_steps unmet, Lightning goes on after a callback's stop: the loss logged at the end of the
    stopped step must not shadow the later steps' (it is logged in the training step's own entry)."""
    calls: list[int] = []
    log = L.LightningModule.log

    def counted(module, name, *args, **kwargs):  # noqa: ANN001 - Lightning's signature
        if name == "train/loss":
            calls.append(module.trainer.global_step)
        return log(module, name, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(L.LightningModule, "log", counted)
        rows, reader = fit(tmp_path / "sparse", stop, min_steps)
    with monkeypatch.context() as m:
        m.setattr("experiments.training.step_logging.logs_this_step", lambda trainer: True)
        every_step_rows, every_step_reader = fit(tmp_path / "every", stop, min_steps)
    assert rows == every_step_rows and rows, (rows, every_step_rows)
    assert reader.read == every_step_reader.read and reader.read
    # and each row is the loss of the step it is written at (Lightning numbers rows from 0)
    assert rows == {step - 1: reader.losses[step] for step in reader.losses if step - 1 in rows}
    # the loss is logged once per row Lightning writes, and at the last step for the progress line, at no other
    # step (the point of the rule)
    last_unwritten = STEPS in reader.losses and STEPS - 1 not in rows
    assert len(calls) == len(rows) + last_unwritten, (calls, rows)
    if stop is not None:  # Lightning writes the step a callback stopped the fit at
        assert stop - 1 in rows, rows
    if min_steps is not None:  # ... and went on to min_steps, writing every step after the stop
        assert max(rows) == STEPS - 1 and all(step in rows for step in range(stop - 1, STEPS)), rows
    assert STEPS in reader.read or stop is not None  # the progress line's last step: that step's own loss


class _Trainer:
    def __init__(self, every: int, step: int, max_steps: int = 100, fast_dev_run: bool = False) -> None:
        self.log_every_n_steps, self.global_step, self.max_steps = every, step, max_steps
        self.fast_dev_run, self.should_stop = fast_dev_run, False


def test_the_logged_steps_are_lightnings_and_the_last() -> None:
    """Lightning writes when (steps done + 1) % log_every_n_steps == 0; 0 writes never (then every step
    keeps callback_metrics as before); fast_dev_run writes every step; no trainer, every step."""
    assert [s for s in range(10) if logs_this_step(_Trainer(4, s, max_steps=10))] == [3, 7, 9]
    assert all(logs_this_step(_Trainer(0, s)) for s in range(5))
    assert all(logs_this_step(_Trainer(50, s, fast_dev_run=True)) for s in range(5))
    stopping = _Trainer(50, 7)
    stopping.should_stop = True
    assert logs_this_step(stopping) and logs_this_step(None)
    assert [s for s in range(6) if logs_this_step(_Trainer(2, s, max_steps=-1))] == [1, 3, 5]


def test_the_ensemble_logs_at_the_same_steps(tmp_path: Path) -> None:
    """The batched model's training step follows the same rule (a member's rows are compared with its run's
    in tests/experiments/ensemble)."""
    from experiments.ensemble.module import EnsembleModule

    trainer = _Trainer(EVERY, 0, max_steps=STEPS)
    logged: list[int] = []

    class Probe(EnsembleModule):
        global_step = property(lambda self: trainer.global_step)

        def log(self, name, value, *args, **kwargs):  # noqa: ANN001 - Lightning's signature
            logged.append(trainer.global_step)

    spec = build_spec(compose([*TINY, "model.dropout=0.0"]))
    modules = [build.assemble(spec, tmp_path, run_id="x").module for _ in range(2)]
    ens = Probe(modules, [0, 1], grad_clip=None, log_every=EVERY)
    ens._trainer = trainer
    src, tgt = torch.randint(4, 10, (2, 4, 5)), torch.randint(4, 10, (2, 4, 6))
    inputs = {"src": src, "tgt_in": tgt[..., :-1]}
    batch = {"inputs": inputs, "targets": tgt[..., 1:], "tokens": torch.ones(2, dtype=torch.long)}
    for step in range(STEPS):
        trainer.global_step = step
        ens.training_step(batch, step)
    assert logged == [s for s in range(STEPS) if logs_this_step(_Trainer(EVERY, s, max_steps=STEPS))] == [2, 5, 8, 9]
