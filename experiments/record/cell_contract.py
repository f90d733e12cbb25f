"""The contract every path that makes runs keeps: the basic grid, the Optuna, tuned and adaptive sweepers,
the ensemble launcher and ``experiments.run()``.

- *identity*: a run folder belongs to one computation (``experiments.training.folder``): the same one is
  skipped when completed and resumed when not; another is refused in one line, or, in a sweep, retrained
  with the old files moved aside;
- *one writer*: a folder another live process writes is refused (``experiments.training.lock``); in a
  sweep the refused cell is remembered (``BUSY``) and the sweep's summary names it, never counting the
  other process's result as its own;
- *a study* (a sequence of trials, a tuned comparison) belongs to its settings: the search space, the
  objective, its direction and the fixed overrides are recorded with it, and a rerun whose settings differ
  is refused in one line naming the change; a budget below what the study has finished is refused too;
- *every stop is recorded*: the first Ctrl-C or SIGTERM stops the run and a second one, at any delay, waits
  for the result to be written (``stop_guard``); a continuation of a completed run (a raised
  ``trainer.max_steps``) that does not complete leaves the completed result in place.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping, Sequence

from experiments.config.errors import ConfigError

log = logging.getLogger("attnlab")

# -- a study and its settings ----------------------------------------------------------------------
SETTINGS_ATTR = "attnlab_settings"  # the study's user attribute holding the settings it was run with


class StudyChangedError(ConfigError):
    """A study rerun with other settings than those its trials were run with."""


def fixed_settings(overrides: Sequence[str]) -> dict[str, str]:
    """The fixed overrides of a study's trials that change what they compute, by key (``+``/``~`` dropped)."""
    from experiments.training.folder import is_inert

    out = {}
    for item in overrides:
        key, _, value = item.partition("=")
        key = key.lstrip("+~")
        if not is_inert(key):
            out[key] = value
    return out


def study_settings(
    space: Mapping[str, Any], objective: str, direction: str, fixed: Sequence[str], **more: Any
) -> dict[str, Any]:
    """What a study's trials are comparable under, as plain data: the distributions of its search space, its
    objective and direction, the fixed overrides that change the computation, and ``more`` (tuning seeds)."""
    return {
        "search space": {str(k): repr(v) for k, v in sorted(space.items())},
        "objective": str(objective),
        "direction": str(direction),
        "fixed overrides": fixed_settings(fixed),
        **more,
    }


def settings_changes(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """``search space optim.lr FloatDistribution(...) → ...``: each setting that differs, by name."""
    changes = []
    for name in sorted(set(recorded) | set(now)):
        old, new = recorded.get(name), now.get(name)
        if old == new:
            continue
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            for key in sorted(set(old) | set(new)):
                if old.get(key) != new.get(key):
                    changes.append(f"{name} {key} {_shown(old.get(key))} → {_shown(new.get(key))}")
        else:
            changes.append(f"{name} {_shown(old)} → {_shown(new)}")
    return changes


def _shown(value: Any) -> str:
    return "(none)" if value is None else str(value)


def check_study(study: Any, settings: Mapping[str, Any], n_trials: int, finished: int, where: str) -> None:
    """Refuse (``StudyChangedError``, one line) a study rerun with other settings, or with a budget below the
    trials it has finished; a new study records its settings. Optuna itself loads a stored study whatever
    direction is asked for, so a changed direction would silently keep the old one."""
    stored = study.user_attrs.get(SETTINGS_ATTR)
    direction = "maximize" if study.direction.name == "MAXIMIZE" else "minimize"
    # a study written before its settings were recorded is checked for what Optuna keeps: its direction
    changes = settings_changes(stored, settings) if stored is not None else []
    if not changes and direction != settings.get("direction"):
        changes = [f"direction {direction} → {settings.get('direction')}"]
    fix = (
        f"resume it with its own settings, or start a new study: another hydra.sweeper.study_name "
        f"or hydra.sweep.dir (study {study.study_name} in {where})"
    )
    if changes:
        raise StudyChangedError(f"the study's trials were run with other settings: {'; '.join(changes)}; {fix}")
    if finished > n_trials:
        raise StudyChangedError(
            f"hydra.sweeper.n_trials={n_trials} is below the {finished} trials the study has finished; its best "
            f"would be chosen from more trials than the budget says; give n_trials >= {finished}, or {fix}"
        )
    if stored is None:
        study.set_user_attr(SETTINGS_ATTR, dict(settings))
