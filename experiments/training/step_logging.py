"""The training loss is logged at the steps Lightning writes to its loggers, not at every step.

``self.log`` is Lightning's most expensive call in a step: each one moves its result entry to the
value's device and walks the entry's state (about 1.6% of an ``experiment=shakespeare_char`` step on
CPU), and a value logged at a step Lightning does not write is only replaced by the next one. So a
training step logs ``train/loss`` where Lightning writes the step's metrics (every
``trainer.log_every_n_steps``, and a step at which the fit was told to stop), at the last step (the
progress line reads it there), and at every step of ``fast_dev_run``, with ``log_every_n_steps=0``
or outside a Trainer.

Between those steps ``trainer.callback_metrics["train/loss"]`` holds the last logged step's loss: a
callback that monitors the training loss (``callbacks.early_stopping.monitor=train/loss``) reads it
as often as the loggers receive it.

A callback may stop the fit in its ``on_train_batch_end``, after the step chose not to log; Lightning
then writes that step's metrics. ``log_if_stopped``, called from the module's own ``on_train_batch_end``
(which Lightning runs after every callback's, before it writes), logs the step's loss then, so what is
written at that step is that step's loss and never the last logged one's.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

#: the hook whose result entry holds the training loss (Lightning keys logged values by hook and name)
STEP_HOOK = "training_step"
TRAIN_LOSS = "train/loss"


def logs_this_step(trainer: Any) -> bool:
    """Whether the training step about to finish logs its loss (see the module's docstring)."""
    if trainer is None:
        return True
    every = int(trainer.log_every_n_steps or 0)
    if every <= 0 or trainer.fast_dev_run or trainer.should_stop:
        return True
    step = trainer.global_step + 1  # this step, counted as Lightning counts the steps it writes
    return step % every == 0 or 0 < trainer.max_steps <= step


def log_step_loss(module: Any, loss: Tensor) -> Tensor | None:
    """From ``module``'s training step: log ``loss`` as ``train/loss`` when this step logs it; else return it
    (detached), for ``log_if_stopped`` at the step's end."""
    if logs_this_step(module._trainer):
        module.log(TRAIN_LOSS, loss)
        return None
    return loss.detach()


def log_if_stopped(module: Any, unlogged: Tensor | None) -> None:
    """From ``module``'s ``on_train_batch_end``: log ``unlogged`` (this step's loss that ``log_step_loss`` did not
    log, else None) in the training step's entry when a callback has just stopped the fit."""
    if unlogged is None or not module.trainer.should_stop:
        return
    hook = module._current_fx_name  # Lightning's record of the running hook, which names the entry
    module._current_fx_name = STEP_HOOK
    try:
        module.log(TRAIN_LOSS, unlogged)
    finally:
        module._current_fx_name = hook
