"""Why a run stopped, at which step, and the exit code that says it.

A run stops at ``trainer.max_steps`` (its budget), or short of it: by a signal (Ctrl-C, SIGTERM from
SLURM, ``timeout`` or a scheduler), or by a limit the user set besides the budget
(``+trainer.max_time``, ``+trainer.max_epochs``, ``trainer.fast_dev_run``, early stopping).
``result.json`` records it as ``"stop": {"reason": "max_time", "step": 230, "max_steps": 100000}`` and
the report never compares a run cut short as if it had its full budget.
"""

from __future__ import annotations

from typing import Any

from attnlab.stops import BUDGET
from experiments.config.spec import TrainerSpec

# the shell's codes for a process ended by the signal: 128 + its number
EXIT_CODES = {"SIGINT": 130, "SIGTERM": 143}


def signal_of(err: BaseException) -> str | None:
    """``SIGINT`` (Ctrl-C) or ``SIGTERM`` when ``err`` is how the signal ended the run, else None.

    Lightning turns Ctrl-C inside fit/validate/test into ``sys.exit(1)`` raised while handling the
    KeyboardInterrupt, and SIGTERM into ``SIGTERMException`` (a SystemExit with no code, which would exit 0).
    """
    from lightning.pytorch.utilities.exceptions import SIGTERMException  # not at import: preflight runs first

    for cause in (err, err.__context__):
        if isinstance(cause, SIGTERMException):
            return "SIGTERM"
        if isinstance(cause, KeyboardInterrupt):
            return "SIGINT"
    return None


def exit_code(err: BaseException) -> int | None:
    """130 for Ctrl-C, 143 for SIGTERM, None for any other ending."""
    name = signal_of(err)
    return EXIT_CODES[name] if name else None


def budget(trainer: TrainerSpec) -> int:
    """The configured ``trainer.max_steps`` (-1: none); Lightning's own is 1 under fast_dev_run."""
    return trainer.max_steps


def record(reason: str, step: int, max_steps: int) -> dict[str, Any]:
    return {"reason": reason, "step": int(step), "max_steps": int(max_steps)}


def stop_after_fit(trainer: Any, max_steps: int) -> dict[str, Any]:
    """Why a fit that returned normally ended: ``max_steps`` when it reached the budget, else the limit that
    ended it first (``early_stopping``, ``max_time``, ``max_epochs``, ``fast_dev_run``, or ``callback``:
    a callback of the user's set ``trainer.should_stop``)."""
    from lightning.pytorch.callbacks import EarlyStopping, Timer

    step = int(trainer.global_step)
    if max_steps > 0 and step >= max_steps and not trainer.fast_dev_run:
        return record(BUDGET, step, max_steps)
    reason = "callback"
    if trainer.fast_dev_run:
        reason = "fast_dev_run"
    elif any(isinstance(c, EarlyStopping) and _early_stopped(c) for c in trainer.callbacks):
        reason = "early_stopping"
    elif any(isinstance(c, Timer) and (c.time_remaining() or 0) <= 0 for c in trainer.callbacks):
        reason = "max_time"
    elif trainer.max_epochs not in (None, -1) and trainer.current_epoch >= trainer.max_epochs:
        reason = "max_epochs"
    return record(reason, step, max_steps)


def _early_stopped(callback: Any) -> bool:
    # stopped_epoch stays 0 when the stop falls in the first epoch (runs count steps, not epochs)
    reason = getattr(callback, "stopping_reason", None)
    return reason.value != 0 if reason is not None else callback.stopped_epoch > 0
