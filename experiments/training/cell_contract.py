"""The contract every path that makes runs keeps: the basic grid, the Optuna, tuned and adaptive sweepers,
the ensemble launcher and ``experiments.run()`` (each trains through ``single_run.train`` or
``ensemble.train_ensemble``, which hold a cell's folder here).

- *identity*: a run folder belongs to one computation (``experiments.training.folder``): the same one is
  skipped when completed and resumed when not; another is refused in one line, or, in a sweep, retrained
  with the old files moved aside;
- *one writer*: a folder another live process writes is refused (``experiments.training.lock``); in a
  sweep the refused cell is remembered (``BUSY``) and the sweep's summary names it, never counting the
  other process's result as its own; the temp files of a write a kill cut short are removed by the next
  writer;
- *a study* (Optuna's, each cell's of a tuned comparison) belongs to its settings: the search space, the
  objective, its direction and the fixed overrides are recorded with it, and a rerun whose settings differ
  is refused in one line naming the change; a budget below what the study has finished is refused too
  (an adaptive sequence's state is refused alike by its fingerprint, ``experiments.sweep.adaptive``);
- *every stop is recorded*: the first Ctrl-C stops the run and a second one, at any delay, waits for the
  result to be written (``stop_guard``); a continuation of a completed run (a raised ``trainer.max_steps``)
  that does not complete leaves the completed result in place.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

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
    known = stored
    if known is None:  # written before settings were recorded: its trials' distributions are its search space
        asked = [t.distributions for t in study.get_trials(deepcopy=False) if t.distributions]
        known = {"search space": {k: repr(v) for k, v in sorted(asked[0].items())}} if asked else {}
    # what was recorded is compared (a study from before a setting was recorded is not refused for lacking it)
    changes = settings_changes(known, {k: settings.get(k) for k in known})
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


# -- a cell's folder -------------------------------------------------------------------------------
RESULT = "result.json"
# what a continuation that did not complete records, beside the completed result it leaves in place
CONTINUATION = "continuation.json"
# the cells of this process's sweep that another live process was writing: refused, named by the summary
BUSY: list[str] = []


def completed(resume: str, run_dir: Path, cfg_hash: str) -> dict[str, Any] | None:
    """The folder's result when it already completed with the same config (and ``resume`` is auto): the run is
    skipped. ``skipped`` marks it for the caller; the file is not rewritten."""
    from experiments.record.result import read_result

    done = read_result(run_dir / RESULT)
    if resume == "auto" and done and done.get("status") == "completed" and done.get("config_hash") == cfg_hash:
        log.info("already completed with the same config (%s); skipping", run_dir / RESULT)
        done["skipped"] = True
        return done
    return None


@contextlib.contextmanager
def writing(
    run_dir: Path, *, sweep_cell: bool = False, enabled: bool = True, named: Path | None = None
) -> Iterator[None]:
    """Hold the folder's lock for the block (``experiments.training.lock``). A sweep cell that another live
    process writes is refused as any run is, and remembered in ``BUSY`` for the sweep's summary. Holding the
    lock, the temp files of a write that a kill cut short (``.last.ckpt.<random>.tmp``) are nobody's: removed."""
    from experiments.training.lock import FolderBusyError, one_writer

    with contextlib.ExitStack() as held:
        try:
            held.enter_context(one_writer(run_dir, enabled=enabled, named=named))
        except FolderBusyError:
            if sweep_cell:
                BUSY.append(str(named or run_dir))
            raise
        if enabled:
            remove_partial_writes(run_dir)
        yield


def remove_partial_writes(run_dir: Path) -> list[Path]:
    """Remove the temp files ``experiments.record.files.atomic_write`` leaves when its process is killed
    mid-write (``.<name>.<random>.tmp`` in the folder and its ``checkpoints/``); call it holding the lock."""
    removed = []
    for folder in (run_dir, run_dir / "checkpoints"):
        for path in folder.glob(".*.tmp") if folder.is_dir() else ():
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                removed.append(path)
    if removed:
        log.info("removed %d partial file(s) of a killed write: %s", len(removed), ", ".join(p.name for p in removed))
    return removed


def continues_completed(run_dir: Path, flat: Mapping[str, Any]) -> bool:
    """Whether this run (its flat config) continues a completed run of the same computation (``trainer.max_steps``
    raised): that completed result must stay in place until the continuation completes."""
    from experiments.record.result import read_result
    from experiments.training.folder import Held, computation_hash, conflict

    done = read_result(run_dir / RESULT) or {}
    config = done.get("config")
    if done.get("status") != "completed" or not isinstance(config, dict):
        return False
    # compared as the folder's claim compares: a result records null for the settings its model did not use
    held = Held(RESULT, computation_hash(config), config, None, tuple(done.get("unused") or ()))
    return not conflict(held, flat)


def write_ending(
    run_dir: Path, result: dict[str, Any], keep_completed: bool, write: Callable[[Path, dict], None]
) -> Path:
    """Write a run's result where the contract puts it: ``result.json``, unless a continuation of a completed
    run ended short of completing, whose record goes to ``continuation.json`` beside the completed result."""
    target = run_dir / RESULT
    if keep_completed and result.get("status") != "completed":
        target = run_dir / CONTINUATION
        log.info("the completed result stays in %s; this continuation's ending is in %s", run_dir / RESULT, target)
    elif keep_completed:
        with contextlib.suppress(FileNotFoundError):
            (run_dir / CONTINUATION).unlink()
    write(target, result)
    return target


# -- stops -----------------------------------------------------------------------------------------
_STOP = {"stopping": False, "hold": False}


def exit_after_stop() -> None:
    """Say that this process ends after a run stopped by a signal (the command line): further Ctrl-C are then
    noted rather than raised until it has exited, so no traceback (an atexit handler's) follows a result."""
    _STOP["hold"] = True


def _on_sigint(signum: int, frame: Any) -> None:
    if _STOP["stopping"]:
        print("attnlab: stopping already; the run's result is being written", file=sys.stderr)
        return
    _STOP["stopping"] = True
    raise KeyboardInterrupt


@contextlib.contextmanager
def stop_guard() -> Iterator[None]:
    """The first Ctrl-C stops the block (a KeyboardInterrupt, as Python's own handler raises); a second one,
    at any delay, is noted and does not interrupt the recording of the first. The previous handler comes back
    when the block ends, unless the process is ending after the stop (``exit_after_stop``)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread receives signals
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN:  # started with Ctrl-C ignored (nohup, a background job): it stays so
        yield
        return
    _STOP["stopping"] = False
    signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield
    finally:
        if not (_STOP["stopping"] and _STOP["hold"]):
            signal.signal(signal.SIGINT, previous)
