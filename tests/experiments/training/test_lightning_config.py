"""Lightning's Trainer, callbacks and loggers come from config: any Trainer keyword, early stopping,
the best checkpoint, the learning rate monitor, TensorBoard. Expected values come from Lightning's
own objects, the schedule's formula and the checkpoint files, never from attnlab's code."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pandas as pd
import pytest
import torch
from lightning.pytorch import Callback
from lightning.pytorch.profilers import SimpleProfiler

from experiments.config.spec import build_spec
from experiments.training.build import assemble
from experiments.training.single_run import train
from tests.helpers.config import TINY, compose

# a tiny run (2 steps, no loggers); a test's own overrides come after, and the later one wins
SHORT = TINY


class Scramble(Callback):
    """Replaces every weight with noise at ``step``: the validations after it are worse than the one before."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            with torch.no_grad():
                for p in pl_module.model.parameters():
                    p.copy_(torch.randn_like(p) * 5)


def test_trainer_keywords_the_old_schema_refused_reach_the_trainer(tmp_path: Path) -> None:
    cfg = compose(
        [
            *SHORT,
            "optim.grad_clip=0.5",  # trainer.gradient_clip_val follows it; set beside it, it is refused
            "trainer.accumulate_grad_batches=3",
            "+trainer.profiler=simple",
            "trainer.detect_anomaly=true",
            "trainer.gradient_clip_algorithm=value",
        ]
    )
    trainer = assemble(build_spec(cfg), tmp_path, run_id="x").trainer
    assert trainer.gradient_clip_val == 0.5 and trainer.gradient_clip_algorithm == "value"
    assert trainer.accumulate_grad_batches == 3
    assert isinstance(trainer.profiler, SimpleProfiler)
    assert trainer._detect_anomaly is True


def test_optim_grad_clip_still_sets_the_trainers_clipping(tmp_path: Path) -> None:
    trainer = assemble(build_spec(compose([*SHORT, "optim.grad_clip=0.25"])), tmp_path, run_id="x").trainer
    assert trainer.gradient_clip_val == 0.25


def test_early_stopping_stops_a_run(tmp_path: Path) -> None:
    # min_delta larger than any change of the loss: the second validation is "no improvement"
    args = [
        *SHORT,
        "trainer.max_steps=40",
        "trainer.val_check_interval=2",
        "callbacks=early_stopping",
        "callbacks.early_stopping.patience=1",
        "callbacks.early_stopping.min_delta=100",
    ]
    result = train(build_spec(compose(args)), tmp_path / "run", args)
    assert result["status"] == "completed", result["error"]
    assert result["cost"]["steps"] == 4  # validations at steps 2 and 4, then stopped


def test_best_checkpoint_weights_are_tested(tmp_path: Path) -> None:
    """The weights are scrambled after the first validation: the best are those of step 3, not the last."""
    base = [
        *SHORT,
        "trainer.max_steps=9",
        "trainer.val_check_interval=3",
        "callbacks=best_checkpoint",
        "+callbacks.scramble._target_=tests.experiments.training.test_lightning_config.Scramble",
        "+callbacks.scramble.step=3",
    ]
    best = train(build_spec(compose([*base, "eval.checkpoint=best"])), tmp_path / "best", base)
    last = train(build_spec(compose(base)), tmp_path / "last", base)
    assert best["status"] == last["status"] == "completed"
    assert best["tested_checkpoint"] == "checkpoints/best-step3.ckpt"
    state = torch.load(tmp_path / "best" / best["tested_checkpoint"], weights_only=True)
    score = next(s["best_model_score"] for k, s in state["callbacks"].items() if "val/loss" in k)
    # the re-validated best weights give the score their checkpoint recorded; the final weights are worse
    assert best["metrics"]["val/loss"] == pytest.approx(float(score), rel=1e-5)
    assert last["metrics"]["val/loss"] > best["metrics"]["val/loss"] + 1
    assert last["metrics"]["test/loss"] > best["metrics"]["test/loss"] + 1


def test_learning_rate_is_logged_by_the_schedule(tmp_path: Path) -> None:
    args = [
        *SHORT,
        "trainer.max_steps=6",
        "trainer.log_every_n_steps=1",
        "logger=csv",
        "callbacks=lr_monitor",
        "optim.lr=0.01",
        "optim.warmup_steps=3",
        "optim.schedule=inverse_sqrt",
    ]
    result = train(build_spec(compose(args)), tmp_path / "run", args)
    assert result["status"] == "completed", result["error"]
    log = pd.read_csv(tmp_path / "run" / "csv" / "metrics.csv")
    # one column per parameter group of AdamW: the weights that decay (pg1) and those that do not (pg2)
    for column in ("lr-AdamW/pg1", "lr-AdamW/pg2"):
        lr = log.dropna(subset=[column]).set_index("step")[column]
        assert sorted(lr.index) == list(range(6))
        for step, value in lr.items():
            # linear warm-up over 3 steps, then lr * sqrt(warmup / (step + 1)) (Vaswani et al.)
            expected = 0.01 * ((step + 1) / 3 if step < 3 else math.sqrt(3 / (step + 1)))
            assert value == pytest.approx(expected, rel=1e-6), (column, step)


@pytest.mark.skipif(
    not any(importlib.util.find_spec(m) for m in ("tensorboard", "tensorboardX")),
    reason="TensorBoard is not installed (pip install 'attnlab[tensorboard]')",
)
def test_tensorboard_and_csv_loggers_at_once(tmp_path: Path) -> None:
    args = [*SHORT, "logger=[csv,tensorboard]"]
    result = train(build_spec(compose(args)), tmp_path / "run", args)
    assert result["status"] == "completed", result["error"]
    assert list((tmp_path / "run" / "tensorboard").rglob("events.out.tfevents.*"))
    assert (tmp_path / "run" / "csv" / "metrics.csv").exists()


def test_logger_none_and_callbacks_none_leave_no_logs_and_no_checkpoints(tmp_path: Path) -> None:
    args = [*SHORT, "logger=none", "callbacks=none"]
    result = train(build_spec(compose(args)), tmp_path / "run", args)
    assert result["status"] == "completed", result["error"]
    assert not (tmp_path / "run" / "csv").exists() and not (tmp_path / "run" / "checkpoints").exists()
    assert result["cost"]["step_ms"] is not None  # attnlab's own callbacks stay (own_callbacks)
