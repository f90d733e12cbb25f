"""Small Lightning callbacks the training app adds."""

from __future__ import annotations

import logging
import statistics
import time
from typing import Any

import lightning as L
import torch

from experiments.record.throughput import is_logging_step, window_metrics

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
        from experiments.training.progress import loss_at_log_step

        step = trainer.global_step
        if step % self.every == 0 or step == trainer.max_steps:
            loss = loss_at_log_step(trainer, self.every)  # read only at logged steps: no per-step sync
            loss_txt = f"{loss:.4f}" if loss is not None else "-"
            now, (began, first) = time.perf_counter(), self._since
            rate = (step - first) / (now - began) if step > first and now > began else None
            pace = f", {rate:.1f} steps/s, {(trainer.max_steps - step) / rate:.0f}s left" if rate else ""
            self._since = (now, step)
            log.info("step %d/%d train/loss %s (%.1fs%s)", step, trainer.max_steps, loss_txt, now - self.start, pace)

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
        self.metrics = {
            key.split("/dataloader_idx")[0]: float(value)
            for key, value in trainer.callback_metrics.items()
            if key.startswith("val/")
        }


class StepTimer(L.Callback):
    """Milliseconds per training step: the median over the steps after the first warm-up ones.

    A step is one training batch from ``on_train_batch_start`` to ``on_train_batch_end``:
    forward, backward and the optimiser step, without data loading, validation or
    checkpointing. The first steps pay for lazy initialisation, allocator growth and
    compilation, and a loaded machine makes single steps slow, so the report uses the median
    of the rest.

    On CUDA the ends are CUDA events recorded in the stream, so the host never waits for the
    GPU inside a step (a synchronisation before and after every step would keep the host from
    running ahead and leave a small model's GPU idle); the events are read in batches, every
    ``read_every`` steps (the trainer's ``log_every_n_steps``), at one synchronisation each.
    The tokens each timed step saw are kept as device tensors and read once, in ``summary``.

    At Lightning's logging steps it logs ``throughput/*`` over the steps since the last one to every logger
    (experiments/record/throughput.py); the events and the token counter are read there, and nowhere else.
    """

    WARMUP_STEPS = 10

    def __init__(self, read_every: int | None = None) -> None:
        self.times_ms: list[float] = []
        self.read_every = read_every
        self._start: Any = None
        self._pending: list[tuple[Any, Any]] = []  # CUDA (start, end) events not read yet
        self._tokens: list[tuple[Any, Any]] = []  # (tokens_seen before, after) each timed step
        self._logged = 0  # the steps (of times_ms) before the last logging step

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._tokens.append((getattr(pl_module, "tokens_seen", 0), None))
        if pl_module.device.type == "cuda":
            self._start = torch.cuda.Event(enable_timing=True)
            self._start.record()
        else:
            self._start = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self._start is None:
            return
        self._tokens[-1] = (self._tokens[-1][0], getattr(pl_module, "tokens_seen", 0))
        if isinstance(self._start, float):
            self.times_ms.append((time.perf_counter() - self._start) * 1000)
        else:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self._pending.append((self._start, end))
            every = self.read_every or max(int(getattr(trainer, "log_every_n_steps", 50) or 50), 1)
            if len(self._pending) >= every:
                self._read_events()
        self._start = None
        if is_logging_step(trainer):
            self._log_throughput(pl_module)

    def _log_throughput(self, pl_module) -> None:
        """``throughput/*`` of the steps since the last logging step, logged with this step's metrics."""
        self._read_events()
        window = self.times_ms[self._logged :]
        timed = [pair for pair in self._tokens if pair[1] is not None][self._logged : len(self.times_ms)]
        self._logged = len(self.times_ms)
        tokens = _floats((timed[-1][1] - timed[0][0],))[0] if timed else None  # one read: tokens_seen grows
        metrics = window_metrics(window, tokens)
        if metrics:
            pl_module.log_dict(metrics, on_step=True, on_epoch=False)

    def on_train_end(self, trainer, pl_module) -> None:
        self._read_events()

    def _read_events(self) -> None:
        """One synchronisation (on the last end event) for every pending step."""
        if not self._pending:
            return
        self._pending[-1][1].synchronize()
        self.times_ms += [start.elapsed_time(end) for start, end in self._pending]
        self._pending.clear()

    def summary(self) -> dict[str, float | int | None]:
        """``step_ms`` (median after warm-up; None before any step), ``step_ms_steps`` (steps behind it)
        and ``steady_tokens_per_second``: the tokens of those steps over their summed time (this process)."""
        self._read_events()
        found = step_time_summary(self.times_ms, self.WARMUP_STEPS)
        timed = [pair for pair in self._tokens if pair[1] is not None][: len(self.times_ms)]
        first = len(self.times_ms) - int(found["step_ms_steps"])
        kept_ms = sum(self.times_ms[first:])
        tokens = sum(after - before for before, after in zip(*(_floats(side) for side in zip(*timed[first:]))))
        found["steady_tokens_per_second"] = tokens / (kept_ms / 1000) if kept_ms > 0 and tokens > 0 else None
        return found


def _floats(values: tuple[Any, ...]) -> list[float]:
    """Numbers and device counters as floats, read in one transfer; a counter with one entry per ensemble
    member counts the tokens of all of them (the step's)."""
    out = [0.0 if isinstance(v, torch.Tensor) else float(v) for v in values]
    where = [i for i, v in enumerate(values) if isinstance(v, torch.Tensor)]
    if where:
        read = torch.stack([values[i].detach().double().sum() for i in where]).cpu().tolist()
        for i, value in zip(where, read):
            out[i] = value
    return out


def step_time_summary(times_ms: list[float], warmup: int) -> dict[str, float | int | None]:
    """The median of ``times_ms`` without the first ``warmup`` (at most half of them, so a short run keeps some)."""
    kept = times_ms[min(warmup, len(times_ms) // 2) :]
    if not kept:
        return {"step_ms": None, "step_ms_steps": 0}
    return {"step_ms": float(statistics.median(kept)), "step_ms_steps": len(kept)}
