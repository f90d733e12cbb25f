"""Small Lightning callbacks the training app adds."""
from __future__ import annotations

import logging
import statistics
import time

import lightning as L

log = logging.getLogger("attnlab")


class PlainProgress(L.Callback):
    """Plain log lines instead of a progress bar when stdout is not a terminal."""

    def __init__(self, every: int = 50) -> None:
        self.every = max(every, 1)
        self.start = time.perf_counter()
        self._since = (self.start, 0)

    def on_train_start(self, trainer, pl_module) -> None:
        self.start = time.perf_counter()
        self._since = (self.start, trainer.global_step)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        from experiments.progress import loss_at_log_step

        step = trainer.global_step
        if step % self.every == 0 or step == trainer.max_steps:
            loss = loss_at_log_step(trainer, self.every)  # read only at logged steps: no per-step sync
            loss_txt = f"{loss:.4f}" if loss is not None else "-"
            now, (began, first) = time.perf_counter(), self._since
            rate = (step - first) / (now - began) if step > first and now > began else None
            pace = f", {rate:.1f} steps/s, {(trainer.max_steps - step) / rate:.0f}s left" if rate else ""
            self._since = (now, step)
            log.info("step %d/%d train/loss %s (%.1fs%s)", step, trainer.max_steps, loss_txt,
                     now - self.start, pace)

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking:
            return
        shown = {k: f"{float(v):.4f}" for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
        log.info("step %d validation %s", trainer.global_step, shown)


class InjectedFault(RuntimeError):
    """Raised on purpose by ``fail_at_step`` (tests of failure handling)."""


class FailAtStep(L.Callback):
    """Raise at a given training step: exercises the failure and resume paths."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if trainer.global_step == self.step:
            raise InjectedFault(f"fail_at_step={self.step}: injected failure")


class LastValidation(L.Callback):
    """Remembers the step and metrics of the latest validation during fit.

    When that validation ran at the final step, its metrics are the final ones and
    the training app need not validate the same weights a second time.
    """

    def __init__(self) -> None:
        self.step: int | None = None
        self.metrics: dict[str, float] = {}

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking:
            return
        self.step = trainer.global_step
        self.metrics = {key.split("/dataloader_idx")[0]: float(value)
                        for key, value in trainer.callback_metrics.items() if key.startswith("val/")}


class StepTimer(L.Callback):
    """Milliseconds per training step: the median over the steps after the first warm-up ones.

    A step is one training batch from ``on_train_batch_start`` to ``on_train_batch_end``:
    forward, backward and the optimiser step, without data loading, validation or
    checkpointing. The first steps pay for lazy initialisation, allocator growth and
    compilation, and a loaded machine makes single steps slow, so the report uses the median
    of the rest. On CUDA both ends synchronise, or the clock would time kernel launches only.
    """

    WARMUP_STEPS = 10

    def __init__(self) -> None:
        self.times_ms: list[float] = []
        self._start: float | None = None

    @staticmethod
    def _sync(pl_module) -> None:
        if pl_module.device.type == "cuda":
            import torch

            torch.cuda.synchronize(pl_module.device)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._sync(pl_module)
        self._start = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self._start is None:
            return
        self._sync(pl_module)
        self.times_ms.append((time.perf_counter() - self._start) * 1000)
        self._start = None

    def summary(self) -> dict[str, float | int | None]:
        """``step_ms`` (median after warm-up; None before any step) and ``step_ms_steps`` (steps behind it)."""
        return step_time_summary(self.times_ms, self.WARMUP_STEPS)


def step_time_summary(times_ms: list[float], warmup: int) -> dict[str, float | int | None]:
    """The median of ``times_ms`` without the first ``warmup`` (at most half of them, so a short run keeps some)."""
    kept = times_ms[min(warmup, len(times_ms) // 2):]
    if not kept:
        return {"step_ms": None, "step_ms_steps": 0}
    return {"step_ms": float(statistics.median(kept)), "step_ms_steps": len(kept)}
