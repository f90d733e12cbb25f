"""``ensemble.seeds=N``: the seeds ``seed .. seed+N-1`` of one cell trained in one process, one result each.

Each member is first assembled exactly as its separate run would be (``build.assemble`` with its
seed: same weights, same data order), then the members train together as one batched model
(``experiments.ensemble.module``) with one shared checkpoint, and finally each member is
evaluated by its own assembled run, so its validation, test, per-length and attention results
come from the same code as a separate run's, and its folder holds an ordinary ``result.json``
(plus ``ensemble``: how many members, which one it was, the process's shared time).

Layout under the run (or cell) folder::

    seed=<s>/result.json ...     one folder per member, as a separate run with that seed writes it
    ensemble/checkpoints/last.ckpt   the members' shared checkpoint (resume continues every member)
    ensemble/csv/metrics.csv     the batched training's log
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from pathlib import Path
from typing import Any

import torch

from experiments.config.spec import Spec
from experiments.ensemble.capability import ensemble_problem
from experiments.ensemble.fit import fit_members
from experiments.ensemble.members import (
    SHARED,
    Member,
    any_result,
    member_dirs,
    member_overrides,
    member_seeds,
    member_spec,
    without_wandb,
)
from experiments.record.at_step import AtStep
from experiments.record.result import environment, now_iso, write_json_atomic

log = logging.getLogger("attnlab")


def train_ensemble(
    spec: Spec,
    run_dir: Path,
    overrides: list[str],
    callbacks: list[Any] | None = None,
    *,
    sweep_cell: bool = False,
) -> list[dict[str, Any]]:
    """Train the members of the run's ``spec`` (``ensemble.seeds`` of them; ``experiments.config.spec.build_spec``)
    in ``run_dir``; their results, by seed order.

    As a single run (experiments/single_run.train): one process writes the ensemble at a time (the lock of
    its shared folder, experiments/training/lock.py), and its folders are resumed only by the same computation
    (experiments/ensemble/folder.py): another one raises ``RunFolderError`` before any work, or, as a
    ``sweep_cell``, trains afresh with the old files moved aside.
    """
    from experiments.training.cell_contract import stop_guard, writing

    try:
        with contextlib.ExitStack() as held:
            # refusals name the folder the user gave
            held.enter_context(writing(run_dir / SHARED, sweep_cell=sweep_cell, named=run_dir))
            for folder in member_dirs(spec, run_dir, member_seeds(spec)):  # each member's folder is a run folder
                held.enter_context(writing(folder, sweep_cell=sweep_cell))
            held.enter_context(stop_guard())
            return _train_ensemble(spec, run_dir, overrides, callbacks or [], sweep_cell)
    finally:
        with contextlib.suppress(OSError):  # nothing was trained batched (refused, or the fallback): no empty folder
            (run_dir / SHARED).rmdir()


def _train_ensemble(
    spec: Spec, run_dir: Path, overrides: list[str], callbacks: list[Any], sweep_cell: bool
) -> list[dict[str, Any]]:
    from experiments.ensemble.folder import claim_ensemble
    from experiments.ensemble.memory import check_memory
    from experiments.training.cell_contract import completed
    from experiments.training.quiet import quiet_library_warnings
    from experiments.training.single_run import new_result, quiet_lightning_handlers, run_identity

    began = time.perf_counter()
    quiet_library_warnings()
    quiet_lightning_handlers()
    seeds = member_seeds(spec)
    dirs = member_dirs(spec, run_dir, seeds)
    fresh = not any_result(dirs)
    if len(seeds) > 1 and fresh:
        # first: even resolving 1000 members' configs takes seconds; with no member's result yet, all N train
        check_memory(spec, len(seeds))
    results: dict[int, dict[str, Any]] = {}
    waiting = []  # (index, seed, folder, spec) of each member not completed yet
    for index, (seed, mdir) in enumerate(zip(seeds, dirs)):
        mspec = member_spec(spec, seed)
        done = completed(spec.run.resume, mdir, mspec.run.config_hash)
        if done:
            results[seed] = done
        else:
            waiting.append((index, seed, mdir, mspec))
    if not waiting:
        return [results[s] for s in seeds]
    if not fresh and len(waiting) > 1:  # the completed members stay out of the batched model
        check_memory(spec, len(seeds), to_train=len(waiting))
    # before anything is written: another computation is refused, or (a sweep cell) moved aside
    claim = claim_ensemble(
        run_dir / SHARED,
        [(mdir, mspec.run.flat_config()) for _, _, mdir, mspec in waiting],
        [seed for _, seed, *_ in waiting],
        resume=spec.run.resume,
        sweep_cell=sweep_cell,
    )
    todo: list[Member] = []
    for index, seed, mdir, mspec in waiting:
        mdir.mkdir(parents=True, exist_ok=True)
        mover = member_overrides(overrides, seed)
        result = new_result(mspec, mdir, mover, run_identity(mdir, mspec.run.config_hash))
        result["ensemble"] = {"members": len(seeds), "index": index, "seeds": seeds, "folder": str(run_dir / SHARED)}
        moved = claim.members.get(mdir)
        if moved is not None and moved.record(mdir):  # where its old files went, and why
            result["previous_run"] = moved.record(mdir)
        todo.append(Member(seed, mspec, mdir, mover, result))
    for member, result in zip(todo, _train_members(spec, run_dir, todo, began, callbacks, claim.resume_from)):
        results[member.seed] = result
    return [results[s] for s in seeds]


def _train_members(
    spec: Spec, run_dir: Path, todo: list[Member], began: float, callbacks: list[Any], resume_from: str | None
) -> list[dict[str, Any]]:
    from experiments.config.unused import record_unused
    from experiments.record.result import variant_references
    from experiments.training import build, outcome

    try:
        for m in todo:
            m.parts = build.assemble(without_wandb(m.spec), m.run_dir, run_id=m.result["run_id"])
    except Exception as err:  # noqa: BLE001 - a config error fails every member alike
        return [_finish(m, outcome.describe_failure(err, None, m.run_dir), began) for m in todo]
    problem = ensemble_problem(todo[0].parts.module, spec) if len(todo) > 1 else "one member left to train"
    if problem is not None:
        return _separately(todo, problem)
    for m in todo:
        m.result["train_lengths"] = list(getattr(m.parts.datamodule, "train_lengths", []) or []) or None
        m.result["cost"]["params"] = m.parts.params
        # as a separate run records it: the settings its built model did not use (e.g. pooling on seq2seq)
        record_unused(m.result, m.parts.module.model.unused_settings())
        m.result["references"] = variant_references(m.spec.used_variants(m.result["unused"]))
    ensemble, trainer = None, None
    try:
        ensemble, trainer, train_seconds, validation = fit_members(spec, run_dir / SHARED, todo, callbacks, resume_from)
    except BaseException as err:  # noqa: BLE001 - every ending is recorded, in every member
        failure = outcome.describe_failure(err, trainer, run_dir / SHARED)
        out = [_finish(m, failure, began, trainer) for m in todo]
        if not isinstance(err, Exception):
            raise
        return out
    shared = (time.perf_counter() - began) / len(todo)
    out = []
    for index, m in enumerate(todo):
        out.append(_evaluate_member(m, ensemble, index, trainer, train_seconds, shared, validation.records[index]))
    return out


def _evaluate_member(
    m: Member, ensemble, index: int, fit_trainer, train_seconds: float, shared_seconds: float, record
) -> dict[str, Any]:
    """Member ``index`` evaluated by its own run (as ``experiments.app.train.train`` evaluates a separate run).

    ``record`` (``validation.MemberRecord``) holds what its validations during training found: their
    history, logged here at a separate run's steps; its last one, which is the final validation when
    it saw the final weights; and its best weights, tested under ``eval.checkpoint=best``.
    """
    from experiments.training import build, outcome
    from experiments.training.single_run import evaluate

    began = time.perf_counter()
    result = m.result
    steps = ensemble.member_steps(index, int(fit_trainer.global_step))
    tokens = int(ensemble.tokens_seen[index])
    _record_member_cost(result, fit_trainer, ensemble.members, steps, tokens, train_seconds)
    _record_member_stop(m, fit_trainer, record, steps)
    if int(ensemble.diverged_at[index]) >= 0:
        value = "nan"
        result.update(status="diverged", error=f"loss became {value} at step {steps}", diverged_at_step=steps)
        return _finish(m, {}, began, None, shared_seconds)
    trainer = wandb = None
    try:
        parts = build.assemble(m.spec, m.run_dir, run_id=result["run_id"])
        trainer, module, datamodule, wandb = parts.trainer, parts.module, parts.datamodule, parts.wandb
        ensemble.load_member_into(module.model, index)
        # as a single run's fit start does (the batched step itself runs every layer on its math path)
        module.choose_flex_options(fit_trainer.strategy.root_device, str(fit_trainer.precision))
        module.tokens_seen = tokens
        per_epoch = max(fit_trainer.num_training_batches, 1)
        _log_history(trainer, ensemble.loss_history, record.history, index, per_epoch)
        # the final validation and the test are logged at the member's last step and epoch, as a separate run's
        # are (this Trainer never fit a step: Lightning would log them at step 0, epoch 0); a fit that ends
        # mid-epoch counts that epoch as completed, so the epoch after it is the epochs begun
        epoch = -(-steps // per_epoch)
        trainer.loggers = [AtStep(logger, steps, epoch) for logger in trainer.loggers]
        tested = record.best_path if m.spec.eval.checkpoint == "best" else None
        last = record.last if record.last is not None and record.last[0] == steps else None

        def final_validation() -> dict[str, float]:
            # the final weights were validated at their last step already, or are validated now
            return dict(last[1]) if last is not None else outcome.final_validation(trainer, module, datamodule)

        evaluate(m.spec, result, parts, m.run_dir, tested, final_validation)
        result["cost"]["peak_memory_mb"] = outcome.peak_memory_mb(module.device)
        if module.flex_options:
            result["kernel_options"] = module.flex_options  # chosen on the device, as a single run records them
    except Exception as err:  # noqa: BLE001 - recorded in this member; the others go on
        result.update(outcome.describe_failure(err, trainer, m.run_dir))
    return _finish(m, {}, began, trainer, shared_seconds, wandb)


def _record_member_cost(
    result: dict[str, Any], fit_trainer, n: int, steps: int, tokens: int, train_seconds: float
) -> None:
    """The member's cost: its share of the batched training (``n`` members shared every step)."""
    from experiments.training.callbacks import StepTimer

    timer = next((c for c in fit_trainer.callbacks if isinstance(c, StepTimer)), None)
    step_ms = timer.summary().get("step_ms") if timer is not None else None
    result["cost"].update(
        {
            "train_seconds": train_seconds / n,
            "step_ms": step_ms / n if step_ms else None,
            "steps": steps,
            "tokens_per_second": tokens / (train_seconds / n) if train_seconds > 0 else None,
            "threads": torch.get_num_threads(),
            "world_size": 1,
            "segments": _segments(fit_trainer),  # 1: trained in one go; more: resumed
        }
    )
    result["ensemble"].update({"train_seconds": train_seconds, "step_ms": step_ms})


def _record_member_stop(m: Member, fit_trainer, record, steps: int) -> None:
    """Why the member stopped, at its own step, as its separate run would record it."""
    from experiments.training import stops

    result = m.result
    budget = stops.budget(m.spec.trainer)
    result["stop"] = {**stops.stop_after_fit(fit_trainer, budget), "step": steps}
    if record.stopped_at is not None:
        result["ensemble"]["stopped_early"] = record.reason
        result["stop"] = stops.record("early_stopping", steps, budget)


def _segments(trainer) -> int:
    from experiments.training.clock import RunClock

    clock = next((c for c in trainer.callbacks if isinstance(c, RunClock)), None)
    return int(clock.before["segments"]) + 1 if clock is not None else 1


def _log_history(
    trainer,
    losses: list[tuple[int, list[float | None]]],
    validations: list[tuple[int, dict]],
    index: int,
    batches_per_epoch: int,
) -> None:
    """The member's training-loss curve and its validations during training, at the steps its separate
    run logs them, into its own CSV and W&B logs (in step order: W&B drops a step older than the last),
    each with the epoch its separate run's row carries (Lightning adds it to every logged row)."""
    rows = [(step, 0, {"train/loss": values[index]}) for step, values in losses if values[index] is not None]
    rows += [(step, 1, metrics) for step, metrics in validations]
    for step, _, metrics in sorted(rows, key=lambda row: row[:2]):
        # a row's step is the batch it was logged at (see EnsembleModule.training_step and validate)
        row = {**metrics, "epoch": step // batches_per_epoch}
        for logger in trainer.loggers:
            logger.log_metrics(row, step=step)
    for logger in trainer.loggers:
        logger.save()


def _finish(
    m: Member, update: dict[str, Any], began: float, trainer=None, shared_seconds: float = 0.0, wandb=None
) -> dict[str, Any]:
    from experiments.training import outcome

    result = m.result
    result.update(update)
    result["finished_at"] = now_iso()
    # the member's share of the process's time before evaluation, then its own evaluation
    result["cost"]["wall_seconds"] = shared_seconds + time.perf_counter() - began
    result["env"] = environment(outcome.device_name(trainer))
    write_json_atomic(m.run_dir / "result.json", result)
    outcome.close_wandb(wandb, result)
    return result


def _separately(todo: list[Member], problem: str) -> list[dict[str, Any]]:
    """The fallback: each member trained as its own run, one after another, with a note why."""
    from experiments.training.single_run import train

    log.warning("ensemble.seeds: %s; training the %d seeds one after another", problem, len(todo))
    out = []
    for m in todo:
        result = train(m.spec, m.run_dir, m.overrides)
        result["ensemble"] = {**m.result["ensemble"], "fallback": problem}
        write_json_atomic(m.run_dir / "result.json", result)
        out.append(result)
    return out


def ensemble_entry(spec: Spec, run_dir: Path, overrides: list[str], multirun: bool) -> float:
    """What ``experiments.train`` does for a run with ``ensemble.seeds`` > 1: train, report, return the objective."""
    from experiments.config.errors import user_error_types
    from experiments.training.single_run import BAD_OBJECTIVE, objective

    try:
        results = train_ensemble(spec, run_dir, overrides, sweep_cell=multirun)
    except user_error_types() as err:  # the folder is another process's, or holds another computation
        print(f"attnlab: {err}", file=sys.stderr)
        if multirun:
            return BAD_OBJECTIVE
        sys.exit(2)
    for r in results:
        line = f"seed={r['seed']}: {r['status']}" + (f" ({r.get('error')})" if r["status"] != "completed" else "")
        log.info("%s  (result: %s)", line, Path(r["run_dir"]) / "result.json")
    failed = [r for r in results if r["status"] != "completed"]
    if failed and not multirun:
        for r in failed:
            print(f"attnlab: seed={r['seed']} {r['status']}: {r.get('error')}", file=sys.stderr)
        sys.exit(2 if any(r.get("user_error") for r in failed) else 1)
    values = [objective(r, spec.run.objective) for r in results]
    return sum(values) / len(values)
