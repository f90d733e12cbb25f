"""An ensemble member is evaluated by a Trainer of its own that never fit a step (experiments/ensemble/run.py);
through ``AtStep`` (experiments/record/at_step.py) its validation and test rows land where Lightning itself logs
them after a fit of that many steps. The reference is Lightning's own rows, not attnlab's code."""

from __future__ import annotations

import csv
from pathlib import Path

import lightning as L
from lightning.pytorch.demos.boring_classes import BoringModel
from lightning.pytorch.loggers import CSVLogger

from experiments.record.at_step import AtStep

STEPS, PER_EPOCH = 7, 4  # the fit ends mid-way through its second epoch


class Logged(BoringModel):
    def validation_step(self, batch, batch_idx):
        self.log("val/loss", self.step(batch))

    def test_step(self, batch, batch_idx):
        self.log("test/loss", self.step(batch))


def trainer(tmp_path: Path, name: str, **kwargs) -> L.Trainer:
    return L.Trainer(
        logger=CSVLogger(tmp_path, name=name, version=""),
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=2,
        limit_test_batches=2,
        **kwargs,
    )


def evaluated_rows(t: L.Trainer, model: Logged) -> list[dict[str, str]]:
    """The rows of a ``validate`` then a ``test``, their empty cells dropped."""
    L.seed_everything(1)  # BoringModel draws its data when a loader is made: the same batches each time
    t.validate(model, verbose=False)
    L.seed_everything(2)
    t.test(model, verbose=False)
    with open(Path(t.loggers[0].log_dir) / "metrics.csv") as handle:
        rows = [{k: v for k, v in row.items() if v != ""} for row in csv.DictReader(handle)]
    return rows[-2:]


def test_a_trainer_that_never_fit_logs_at_the_given_step_and_epoch(tmp_path: Path) -> None:
    L.seed_everything(0)
    model = Logged()
    fitted = trainer(tmp_path, "fitted", max_steps=STEPS, limit_train_batches=PER_EPOCH, check_val_every_n_epoch=99)
    fitted.fit(model)
    assert fitted.global_step == STEPS
    reference = evaluated_rows(fitted, model)
    fresh = trainer(tmp_path, "fresh")
    # as experiments/ensemble/run.py wraps a member's loggers: a fit that ends mid-epoch counts that epoch
    fresh.loggers = [AtStep(logger, STEPS, -(-STEPS // PER_EPOCH)) for logger in fresh.loggers]
    mine = evaluated_rows(fresh, model)
    assert [set(row) for row in reference] == [{"val/loss", "epoch", "step"}, {"test/loss", "epoch", "step"}]
    assert mine == reference
    assert reference[0]["step"] == str(STEPS)
    # without the wrapper the same evaluation lands at step 0, epoch 0: the difference the wrapper exists for
    plain = evaluated_rows(trainer(tmp_path, "plain"), model)
    assert [(row["step"], row["epoch"]) for row in plain] == [("0", "0"), ("0", "0")]
