"""The callback that times attnlab's training in blocks and runs the plain loop's blocks between them.

Both loops live in one process and take turns: ``block`` steps of attnlab's fit, then ``block`` steps of
the plain loop, and so on, so whatever else the machine does meanwhile slows both alike. An attnlab block
runs from one block boundary's ``on_train_batch_start`` to the next one's: every hook, logger, progress
line, data fetch and checkpoint of those steps is inside it. A block that held a validation is not a
step measurement; the validation is timed on its own (``on_validation_start`` to ``on_validation_end``)
and the plain loop evaluates right after it, on the same weights' worth of work.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import lightning as L
import torch

from experiments.bench._loop_plain import PlainLoop

#: the plain loop the next probe interleaves; the bench sets it before calling attnlab's entry, which
#: builds the probe from config (``+callbacks.loop_probe``), where an object cannot be passed
PLAIN: PlainLoop | None = None
#: the times of the latest probe's fit, for the bench to read after attnlab's entry returns
LAST: FitTimes | None = None


@dataclass
class FitTimes:
    """When attnlab's fit reached its landmarks (on the plain loop's clock) and what its blocks took."""

    first_step: float | None = None
    train_end: float | None = None
    steps_ms: list[float] = field(default_factory=list)  # the mean step of each clean block
    evals: list[float] = field(default_factory=list)
    plain_seconds: float = 0.0  # the plain loop's time inside the fit, taken out of attnlab's whole run


class LoopProbe(L.Callback):
    def __init__(self, block: int) -> None:
        if PLAIN is None:
            raise RuntimeError("LoopProbe needs experiments.bench._loop_probe.PLAIN set by the loop bench")
        global LAST
        self.block, self.plain, self.times = max(int(block), 1), PLAIN, FitTimes()
        self.clock = PLAIN.clock  # one clock for both sides
        LAST = self.times
        self._block_start: float | None = None
        self._block_steps = 0
        self._dirty = False  # a validation ran inside the current block
        self._eval_start = 0.0

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, idx: int) -> None:
        device = pl_module.device
        if self.times.first_step is None:
            self.times.first_step = self.clock()
        step = trainer.global_step
        if self._block_start is not None and step % self.block == 0 and step > self._block_steps:
            _sync(device)
            if not self._dirty:
                self.times.steps_ms.append((self.clock() - self._block_start) * 1000 / self.block)
            began = self.clock()
            self.plain.block(self.block)
            self.times.plain_seconds += self.clock() - began
            self._block_start = None
        if self._block_start is None and step % self.block == 0:
            _sync(device)
            self._block_start, self._block_steps, self._dirty = self.clock(), step, False

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        self._dirty = True
        _sync(pl_module.device)
        self._eval_start = self.clock()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or trainer.state.fn != "fit":
            return  # the final validation after the fit belongs to the test phase
        _sync(pl_module.device)
        self.times.evals.append(self.clock() - self._eval_start)
        began = self.clock()
        self.plain.evaluate()
        self.times.plain_seconds += self.clock() - began

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        _sync(pl_module.device)
        self.times.train_end = self.clock()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
