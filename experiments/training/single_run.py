"""One configuration trained as one run, and the record of a run that the members of an ensemble
(``experiments.ensemble``) share: its identity across resumes, its config and hash, the result that says
``failed`` until the run proves otherwise, and what it reports to a sweeper. ``python -m experiments.train``
is the command line around it."""

from __future__ import annotations

import logging
import os
import re
import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from hydra.utils import get_original_cwd

from attnlab.stops import describe as describe_stop
from experiments.config.spec import Spec
from experiments.config.unused import record_unused
from experiments.record.files import OutputError, check_free_space
from experiments.record.loggers import keep_history, metrics_csv
from experiments.record.result import (
    SCHEMA,
    command_line,
    environment,
    now_iso,
    read_result,
    variant_references,
    write_json_atomic,
)
from experiments.record.tensorboard_logger import record_objective
from experiments.training import build, lightning_parts, outcome, stops
from experiments.training import folder as run_folder
from experiments.training.cell_contract import completed, continues_completed, stop_guard, write_ending, writing
from experiments.training.checkpointing import checkpoint_bytes, checkpoint_step
from experiments.training.quiet import quiet_library_warnings, quiet_lightning_info
from experiments.training.run_checkpoint import evaluation_record

log = logging.getLogger("attnlab")
RESULT = "result.json"
BAD_OBJECTIVE = 1e9  # what a failed or diverged trial reports to a hyperparameter search


def is_rank_zero() -> bool:
    """Whether this process is global rank 0, before a Trainer exists to say so."""
    env = os.environ
    if "RANK" in env:  # torchrun
        return int(env["RANK"]) == 0
    if int(env.get("LOCAL_RANK", 0)) or int(env.get("NODE_RANK", 0)):  # Lightning's ranks > 0
        return False
    if int(env.get("SLURM_NTASKS", 1)) > 1:  # one SLURM task per device
        return int(env.get("SLURM_PROCID", 0)) == 0
    return True


def run_identity(run_dir: Path, cfg_hash: str, flat: dict[str, Any] | None = None) -> str:
    """Keep the run id of the folder's run while the folder holds its computation, so W&B resumes the same run:
    an interrupted run, and a continuation with another budget (``trainer.max_steps`` raised) alike."""
    from experiments.training.folder import computation_hash

    previous = read_result(run_dir / RESULT) or {}
    state = read_result(run_dir / "run_state.json") or {}
    computed = computation_hash(flat) if flat is not None else None
    for source in (state, previous):
        same = source.get("config_hash") == cfg_hash or (
            computed is not None and source.get("computation_hash", _computation_of(source)) == computed
        )
        if same and source.get("run_id"):
            return source["run_id"]
    run_id = uuid.uuid4().hex[:12]
    if is_rank_zero():
        state = {"run_id": run_id, "config_hash": cfg_hash, "computation_hash": computed}
        write_json_atomic(run_dir / "run_state.json", state)
    return run_id


def _computation_of(record: dict[str, Any]) -> str | None:
    """The computation hash of a result's config (a run_state.json written before it held one has none)."""
    from experiments.training.folder import computation_hash

    config = record.get("config")
    return computation_hash(config) if isinstance(config, dict) else None


def quiet_lightning_handlers() -> None:
    """Lightning adds its own console handler; under Hydra the root handlers already print and
    write ``train.log``, so keep one copy of each line."""
    root = logging.getLogger()
    if root.handlers:
        for name in ("lightning.pytorch", "lightning.fabric", "lightning"):
            logging.getLogger(name).handlers.clear()
        # a profiler's report is what the user asked for (+trainer.profiler=simple): it goes where the
        # run's lines go, although Lightning's own logger, without its handler, no longer prints
        profilers = logging.getLogger("lightning.pytorch.profilers")
        profilers.handlers[:] = root.handlers
        profilers.propagate = False
    quiet_lightning_info()


def new_result(
    spec: Spec, run_dir: Path, overrides: list[str], run_id: str, cfg_hash: str | None = None
) -> dict[str, Any]:
    """A result that says ``failed`` until the run proves otherwise; ``cfg_hash``: another hash than the spec's
    (an evaluation records its checkpoint's)."""
    return {
        "schema": SCHEMA,
        "run_id": run_id,
        "sweep": spec.run.name,
        "status": "failed",
        "error": None,
        **spec.names(),
        "seed": spec.run.seed,
        "arch": spec.model.arch,
        "overrides": overrides,
        "config": spec.run.flat_config(),
        "config_hash": cfg_hash or spec.run.config_hash,
        "metrics": {},
        "by_length": {},
        "cost": {},
        "env": {},
        "started_at": now_iso(),
        "finished_at": None,
        "command": command_line(),
        "train_lengths": None,
        "run_dir": str(run_dir),
        # the variant of each role that has its own, e.g. "local(mode=predictive,window=4)";
        # null where the role uses ``attention``
        **spec.model.role_labels(),
    }


def objective(result: dict[str, Any], metric: str = "val/loss") -> float:
    """What a sweeper optimises; a failed or diverged run reports a bad value instead of raising."""
    value = result.get("metrics", {}).get(metric)
    if result.get("status") != "completed" or value is None:
        return BAD_OBJECTIVE
    return float(value)


def train(spec: Spec, run_dir: Path, overrides: list[str], *, sweep_cell: bool = False) -> dict[str, Any]:
    """Run one configuration (its spec, ``experiments.config.spec.build_spec``); returns the result dict (also
    written to ``run_dir/result.json``).

    The cell contract (experiments/training/cell_contract.py): one process writes a folder at a time, and the
    folder's checkpoint is resumed only by the same computation (experiments/training/folder.py): another one
    is refused with a ``RunFolderError`` before any work, or, as a ``sweep_cell``, trains afresh with the old
    files moved aside; a second Ctrl-C does not interrupt the recording of the first.
    """
    # DDP ranks > 0 write under their rank 0's lock
    with writing(run_dir, sweep_cell=sweep_cell, enabled=is_rank_zero()), stop_guard():
        return _train(spec, run_dir, overrides, sweep_cell)


def _train(spec: Spec, run_dir: Path, overrides: list[str], sweep_cell: bool) -> dict[str, Any]:
    began = time.perf_counter()
    quiet_library_warnings()
    quiet_lightning_handlers()
    run = spec.run
    flat, cfg_hash = run.flat_config(), run.config_hash
    done = completed(run.resume, run_dir, cfg_hash)
    if done:
        return done
    claim = run_folder.claim(run, run_dir, sweep_cell=sweep_cell, rank_zero=is_rank_zero())
    # a continuation (trainer.max_steps raised) of a completed run keeps that result until it completes
    keep = claim.resume_from is not None and continues_completed(run_dir, flat)
    result = new_result(spec, run_dir, overrides, run_identity(run_dir, cfg_hash, flat))
    if claim.record(run_dir):  # where a changed cell's (or resume=never's) old files went, and why
        result["previous_run"] = claim.record(run_dir)
    trainer = wandb = None
    try:
        parts = build.assemble(spec, run_dir, run_id=result["run_id"], overrides=overrides)
        trainer, module, datamodule, wandb = parts.trainer, parts.module, parts.datamodule, parts.wandb
        _record_parts(spec, result, parts)
        resume_from = claim.resume_from  # only ever a checkpoint of this computation
        # every checkpoint records the computation that wrote it, for the next run's comparison
        # and what rebuilds it for evaluation alone (python -m experiments.evaluate)
        record = {**run_folder.run_record(flat, cfg_hash), **evaluation_record(spec.task, result["run_id"])}
        _prepare_fit(spec, result, parts, run_dir, resume_from, record)
        train_seconds, compile_seconds = _fit(trainer, module, datamodule, resume_from)
        pruned = _record_stop(spec, result, trainer)
        if pruned is not None:  # the study's pruner stopped it: no test, a pruned trial
            result.update(status="pruned", pruned=pruned, error=f"pruned at step {pruned['step']}")
            result["metrics"] = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
            result["cost"].update(outcome.cost(trainer, module, train_seconds, compile_seconds))
            outcome.release_ddp_ranks(trainer)
            _finish(result, trainer, wandb, run_dir, began, keep)
            return result
        tested = lightning_parts.tested_checkpoint(spec.eval, trainer)  # None: the final weights
        evaluate(spec, result, parts, run_dir, tested, lambda: outcome.final_validation(trainer, module, datamodule))
        result["cost"].update(outcome.cost(trainer, module, train_seconds, compile_seconds))  # peak memory: test's too
        result["cost"]["compile_mode"] = spec.model.compile_mode if spec.model.compile else None
        if getattr(module, "flex_options", None):
            result["kernel_options"] = module.flex_options  # chosen on the device at fit start
    except BaseException as err:  # noqa: BLE001 - every ending is recorded
        outcome.release_ddp_ranks(trainer)
        result.update(outcome.describe_failure(err, trainer, run_dir))
        if stops.signal_of(err):
            result["resume"] = resume_command(run_dir, sweep_cell, overrides)
            if trainer is not None:
                result["stop"] = stops.record(stops.signal_of(err), trainer.global_step, stops.budget(spec.trainer))
        if not isinstance(err, Exception):
            _finish(result, trainer, wandb, run_dir, began, keep)
            raise
    outcome.release_ddp_ranks(trainer)
    _finish(result, trainer, wandb, run_dir, began, keep)
    return result


def _record_parts(spec: Spec, result: dict[str, Any], parts: build.Parts) -> None:
    """What the assembled run is, into its result: its training lengths and parameters, the kernel each layer
    trains on where the run trains (and why where flex could not serve it), its unused settings (e.g. cross
    attention on a decoder) and the papers of the variants it uses."""
    datamodule = parts.datamodule
    result["train_lengths"] = list(getattr(datamodule, "train_lengths", []) or []) or None
    result["cost"]["params"] = parts.params
    longest = datamodule.longest_sequence() if hasattr(datamodule, "longest_sequence") else None
    result["kernels"] = parts.module.model.kernel_plan(cuda=build.trains_on_cuda(spec.trainer), keys=longest)
    record_unused(result, parts.module.model.unused_settings())
    result["references"] = variant_references(spec.used_variants(result["unused"]))


def _prepare_fit(
    spec: Spec, result: dict[str, Any], parts: build.Parts, run_dir: Path, resume_from: str | None, record: dict
) -> None:
    """Before the fit: ``record`` in every checkpoint, the warm start (``run.init_from``), room for a checkpoint,
    and the logged history kept up to the checkpoint a run resumes from."""
    run, trainer, module, wandb = spec.run, parts.trainer, parts.module, parts.wandb
    trainer.callbacks.append(run_folder.record_callback(record))
    if run.init_from is not None and not resume_from:  # resuming continues the warm-started run
        from experiments.training.warm_start import warm_start

        result["init_from"] = warm_start(module, run.init_from)
        log.info("starting from the weights of %s (step %d)", run.init_from, result["init_from"]["step"])
    elif run.init_from is not None:  # the warm start happened in the run's first segment
        result["init_from"] = (read_result(run_dir / RESULT) or {}).get("init_from")
    if not spec.trainer.get("fast_dev_run") and not resume_from:
        # a disk too small for one checkpoint fails now, not at the first checkpoint
        check_free_space(run_dir / "checkpoints", checkpoint_bytes(module), "a checkpoint")
    if resume_from:
        log.info("resuming from %s", resume_from)
    if trainer.is_global_zero:
        # metrics.csv keeps the rows before the checkpoint; W&B (the same run id) keeps what it logged
        logged = keep_history(metrics_csv(run_dir), checkpoint_step(resume_from) if resume_from else 0)
        if wandb is not None and resume_from:
            wandb.logged_until = logged


def _fit(trainer, module, datamodule, resume_from: str | None) -> tuple[float, float | None]:
    """Lightning's fit: (its seconds, the part of them spent compiling: model.compile's graphs, forward, backward
    and the evaluation's, and flex's kernels without it; None where torch keeps no count); an interrupted fit
    raises KeyboardInterrupt."""
    from experiments.model.compiling import compile_seconds_so_far, compiled_since

    compiled_before = compile_seconds_so_far()
    start = time.perf_counter()
    trainer.fit(module, datamodule=datamodule, ckpt_path=resume_from)
    train_seconds = time.perf_counter() - start
    compile_seconds = compiled_since(compiled_before)
    if trainer.interrupted:
        raise KeyboardInterrupt("training was interrupted")
    return train_seconds, compile_seconds


def _record_stop(spec: Spec, result: dict[str, Any], trainer) -> dict[str, Any] | None:
    """Why the fit ended, into ``result["stop"]``: the budget reached, or the limit that ended it first (max_time,
    early stopping, ...), or an Optuna pruner; returns the pruner's record, None when no pruner stopped it."""
    from experiments.training.pruning import pruned_step

    pruned = pruned_step(trainer.callbacks)
    result["stop"] = (
        stops.record("pruned", pruned["step"], stops.budget(spec.trainer))
        if pruned is not None
        else stops.stop_after_fit(trainer, stops.budget(spec.trainer))
    )
    if result["stop"]["reason"] != stops.BUDGET:
        log.info("%s", describe_stop(result["stop"]))
    return pruned


def evaluate(
    spec: Spec,
    result: dict[str, Any],
    parts: Any,
    run_dir: Path,
    tested: str | None,
    final_validation: Callable[[], dict[str, float]],
) -> None:
    """What every trained run records after training, into ``result``: the validation (of the best
    weights ``tested``, else ``final_validation()``), the test, per-length metrics, attention
    statistics and maps. A separate run and each ensemble member (``experiments.ensemble.run``) alike."""
    trainer, module, datamodule = parts.trainer, parts.module, parts.datamodule
    if tested is None:
        val = final_validation()
    else:
        log.info("testing the best weights (eval.checkpoint=best): %s", tested)
        result["tested_checkpoint"] = (
            str(Path(tested).relative_to(run_dir)) if Path(tested).is_relative_to(run_dir) else tested
        )
        val = outcome.scalar_metrics(trainer.validate(module, datamodule=datamodule, ckpt_path=tested, verbose=False))
    test = outcome.scalar_metrics(trainer.test(module, datamodule=datamodule, ckpt_path=tested, verbose=False))
    result["metrics"] = {**val, **test, **module.bleu_scores()}
    record_objective(
        trainer.loggers, result["metrics"], spec.run.objective, trainer.global_step
    )  # TensorBoard's hp_metric
    result["by_length"] = module.length_metrics()
    result["cost"]["test_seconds"] = module.test_seconds
    if module.evaluation.attention_stats:
        result["cost"]["attention_stats_seconds"] = module.stats_seconds
        if trainer.is_global_zero:
            result["attention_stats"] = outcome.save_attention_stats(module, run_dir)
    if spec.eval.attention_maps and trainer.is_global_zero:
        maps_to_wandb = lightning_parts.wandb_upload(spec.trainer, "attention_maps")
        outcome.save_attention_maps(module, datamodule, run_dir, parts.wandb if maps_to_wandb else None)
    result["status"] = "completed"


def train_in_child(spec: Spec, run_dir: Path, overrides: list[str], threads: int) -> dict[str, Any]:
    """A DDP cell of a multirun, run as a single run of its own in the cell's folder.

    Lightning starts ranks > 0 by re-running the command line, which in a multirun is
    the whole sweep, and its watchdog kills the launching process when a rank dies.
    A child single run gives the ranks a command that is this cell alone, and the sweep
    outlives whatever happens to the cell.
    """
    cfg_hash = spec.run.config_hash
    done = completed(spec.run.resume, run_dir, cfg_hash)
    if done:
        return done
    # a changed cell's old files move aside here; the child then finds a folder of its own computation
    claim = run_folder.claim(spec.run, run_dir, sweep_cell=True)
    quoted = str(run_dir).replace("'", "\\'")  # a quoted override value may hold "=" and ","
    command = [
        sys.executable,
        "-m",
        "experiments.train",
        *overrides,
        f"hydra.run.dir='{quoted}'",
        "hydra.output_subdir=null",
        f"num_threads={threads}",
    ]
    started = time.time()
    log.info("DDP cell: running it as a single run in %s", run_dir)
    code = subprocess.run(command, cwd=get_original_cwd(), check=False).returncode
    result = read_result(run_dir / RESULT)
    if result is None or (run_dir / RESULT).stat().st_mtime < started:
        result = new_result(spec, run_dir, overrides, run_identity(run_dir, cfg_hash))
        result.update(
            error=f"the DDP run exited with code {code} before writing its result",
            finished_at=now_iso(),
            env=environment("unknown"),
        )
        write_json_atomic(run_dir / RESULT, result)
    if claim.record(run_dir):  # the sweep's summary lists the cell as retrained
        result["previous_run"] = claim.record(run_dir)
        write_json_atomic(run_dir / RESULT, result)
    return result


def _finish(result: dict[str, Any], trainer, wandb, run_dir: Path, began: float, keep_completed: bool = False) -> None:
    result["finished_at"] = now_iso()
    result["cost"]["wall_seconds"] = time.perf_counter() - began
    result["env"] = environment(outcome.device_name(trainer))
    if trainer is not None and "steps" not in result["cost"]:
        result["cost"]["steps"] = int(trainer.global_step)
    rank_zero = trainer.is_global_zero if trainer is not None else is_rank_zero()
    if rank_zero:
        try:
            write_ending(run_dir, result, keep_completed, write_json_atomic)
        except OutputError as err:
            result["result_unwritten"] = str(err)  # said once, by hydra_entry
        outcome.close_wandb(wandb, result)


def resume_command(run_dir: Path, multirun: bool, overrides: list[str] | None = None) -> str:
    """The command that resumes this run: a single run in its own folder (each new one gets a
    new timestamped folder), a sweep as it was (its cells' folders are fixed); ``experiments.run()``'s
    call (``overrides`` given, and no Hydra command line ran)."""
    from hydra.core.hydra_config import HydraConfig

    if overrides is not None and not HydraConfig.initialized():
        return f"experiments.run({overrides!r}, run_dir={str(run_dir)!r})"
    # the folder now holds this run's own checkpoint, which the default (resume=auto) finds
    args = [a for a in sys.argv[1:] if not a.startswith(("resume=", "ckpt_path="))]
    if not multirun:
        args = [a for a in args if not a.startswith("hydra.run.dir=")] + [f"hydra.run.dir={hydra_value(run_dir)}"]
    return shlex.join(["python", "-m", "experiments.train", *args])  # quoted for the shell: it pastes


def hydra_value(value: object) -> str:
    """``value`` as an override's value that Hydra reads back unchanged: quoted when it holds a character
    Hydra's grammar gives a meaning to (a space, ``,`` for a sweep, ``=``, brackets, ``$``, quotes)."""
    text = str(value)
    if re.fullmatch(r"[\w./:@+-]+", text):
        return text
    return "'" + text.replace("'", "\\'") + "'"
