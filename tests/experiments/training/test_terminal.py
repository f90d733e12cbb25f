"""What a run shows while it trains: the global step out of max_steps, the loss, steps/s and time left."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from experiments.training.progress import StepProgressBar, loss_at_log_step
from tests.helpers.cli import train_cli
from tests.helpers.config import TINY
from tests.helpers.env import environment


@pytest.mark.slow
def test_the_bar_counts_global_steps_and_shows_loss_rate_and_time_left(tmp_path) -> None:
    overrides = [*TINY, "trainer.max_steps=10", "trainer.log_every_n_steps=5", "progress_bar=true"]
    env = environment(COLUMNS="160")
    proc = train_cli(*overrides, f"hydra.run.dir={tmp_path}", env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    bar = next(line for line in proc.stdout.splitlines() if line.startswith("step "))
    assert re.fullmatch(r"step 10/10 \S+ loss \d+\.\d{4} · \d+\.\d steps/s · \d+:\d\d:\d\d left", bar.strip()), bar
    assert "Epoch" not in proc.stdout and "v_num" not in proc.stdout


class CountingMetrics(dict):
    reads = 0

    def get(self, key, default=None):
        CountingMetrics.reads += 1
        return super().get(key, default)


def test_the_loss_is_read_only_at_logged_steps() -> None:
    """Reading the loss waits for the device; the bar reads it every log_every_n_steps, not every step."""
    trainer = SimpleNamespace(
        global_step=0, max_steps=20, callback_metrics=CountingMetrics({"train/loss": 1.5}), is_global_zero=True
    )
    bar = StepProgressBar(every=5)
    bar.on_train_start(trainer, None)
    for step in range(1, 21):
        trainer.global_step = step
        bar.on_train_batch_end(trainer, None, None, None, step - 1)
    bar.on_train_end(trainer, None)
    assert CountingMetrics.reads == 4  # steps 5, 10, 15, 20
    trainer.global_step = 7
    assert loss_at_log_step(trainer, 5) is None
