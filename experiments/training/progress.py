"""The terminal progress bar of a run: global step out of trainer.max_steps, loss, steps/s, time left.

Lightning's bars count batches per epoch (``Epoch 0/-2`` when training is bounded by
steps) and show the logger version (``v_num``). A run here is counted in optimiser steps,
so this bar is one line over the whole run. The loss is read only at the steps Lightning
logs (every ``trainer.log_every_n_steps``): reading it on every step would wait for the
GPU on every step.
"""

from __future__ import annotations

import time

from lightning.pytorch.callbacks.progress import ProgressBar


def loss_at_log_step(trainer, every: int) -> float | None:
    """``train/loss`` when this step is one Lightning logs, else None (no device sync in between)."""
    if trainer.global_step % every != 0 and trainer.global_step != trainer.max_steps:
        return None
    loss = trainer.callback_metrics.get("train/loss")
    return None if loss is None else float(loss)


class StepProgressBar(ProgressBar):
    """A rich bar: ``step 120/1000 ━━━━━━  loss 2.314 · 14.2 steps/s · 0:01:02 left``."""

    def __init__(self, every: int = 50) -> None:
        super().__init__()
        self.every = max(every, 1)
        self._enabled = True
        self._progress = None
        self._task = None
        self._loss = "-"

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def on_train_start(self, trainer, pl_module) -> None:
        if not self._enabled or not trainer.is_global_zero:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._progress = Progress(
            TextColumn("step"),
            MofNCompleteColumn(),
            BarColumn(),
            TextColumn("loss {task.fields[loss]} · {task.fields[rate]} steps/s ·"),
            TimeRemainingColumn(),
            TextColumn("left"),
            transient=False,
        )
        self._progress.start()
        self._task = self._progress.add_task(
            "train", total=trainer.max_steps, completed=trainer.global_step, loss=self._loss, rate="-"
        )
        self._since = (time.perf_counter(), trainer.global_step)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self._progress is None:
            return
        loss = loss_at_log_step(trainer, self.every)
        fields = {}
        if loss is not None:
            self._loss = f"{loss:.4f}"
            began, first = self._since
            now = time.perf_counter()
            if trainer.global_step > first and now > began:
                fields["rate"] = f"{(trainer.global_step - first) / (now - began):.1f}"
            self._since = (now, trainer.global_step)
        self._progress.update(self._task, completed=trainer.global_step, loss=self._loss, **fields)

    def _stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def on_train_end(self, trainer, pl_module) -> None:
        self._stop()

    def on_exception(self, trainer, pl_module, exception) -> None:
        self._stop()
