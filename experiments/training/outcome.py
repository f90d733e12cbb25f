"""Reading out one run after it trained or failed: final metrics, cost, the failure described in one
line, attention exports, the W&B summary and close, and the release of the DDP ranks Lightning started."""

from __future__ import annotations

import errno
import logging
import resource
import subprocess
import traceback
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.pytorch.utilities.exceptions import SIGTERMException

from experiments.training.callbacks import LastValidation, StepTimer
from experiments.training.clock import RunClock
from experiments.training.module import DivergedError, TransformerModule

log = logging.getLogger("attnlab")


def release_ddp_ranks(trainer: L.Trainer | None) -> None:
    """Wait for the DDP ranks Lightning started from this process, then stop watching them.

    Lightning's watchdog kills this process when a rank it started ends with a non-zero
    code, and Lightning itself kills the ranks when training raises; once they are reaped
    and forgotten, the failure is recorded here instead of taking the process down.
    """
    procs = getattr(getattr(getattr(trainer, "strategy", None), "launcher", None), "procs", None)
    if not procs:
        return
    for proc in procs:
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    procs.clear()  # the watchdog holds this same list: an empty one means nothing left to watch


def final_validation(trainer: L.Trainer, module: TransformerModule, datamodule) -> dict[str, float]:
    """Validation metrics of the final weights, without validating them twice.

    Lightning validates at the last step when max_steps is a multiple of the interval;
    otherwise (or after resuming a run that had already reached it) a fresh pass runs.
    """
    last = next((c for c in trainer.callbacks if isinstance(c, LastValidation)), None)
    if last is not None and last.step == trainer.global_step and last.metrics:
        return dict(last.metrics)
    return scalar_metrics(trainer.validate(module, datamodule=datamodule, verbose=False))


def scalar_metrics(outputs: list[dict[str, Any]]) -> dict[str, float]:
    merged: dict[str, float] = {}
    for out in outputs or []:
        for key, value in out.items():
            merged[key.split("/dataloader_idx")[0]] = float(value)
    return merged


def peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB -> MB (Linux)


def cost(
    trainer: L.Trainer, module: TransformerModule, train_seconds: float, compile_seconds: float | None = None
) -> dict[str, Any]:
    """``train_seconds`` is the whole fit (compilation, validation, checkpoints included), over every
    segment of a resumed run (``run_clock.RunClock``), and ``fit_tokens_per_second`` its rate;
    ``tokens_per_second`` is the steady state: the tokens of the timed steps after warm-up over their
    time (``callbacks.StepTimer``)."""
    world = max(trainer.world_size, 1)
    clock = next((c for c in trainer.callbacks if isinstance(c, RunClock)), None)
    before = clock.before if clock is not None else {"seconds": 0.0, "tokens": 0.0, "segments": 0}
    train_seconds += before["seconds"]
    tokens = (int(module.tokens_seen) + int(before["tokens"])) * world
    timer = next((c for c in trainer.callbacks if isinstance(c, StepTimer)), None)
    steps = timer.summary() if timer is not None else {}
    steady = steps.pop("steady_tokens_per_second", None)
    return {
        # the time of one training step, robust to warm-up and to a loaded machine (callbacks.StepTimer)
        **steps,
        "train_seconds": train_seconds,
        "compile_seconds": compile_seconds,
        "tokens_per_second": steady * world if steady is not None else None,
        "fit_tokens_per_second": tokens / train_seconds if train_seconds > 0 else None,
        "peak_memory_mb": peak_memory_mb(module.device),
        "steps": int(trainer.global_step),
        "segments": int(before["segments"]) + 1,  # 1: trained in one go; more: resumed
        "world_size": int(trainer.world_size),
        "threads": torch.get_num_threads(),
    }


def device_name(trainer: L.Trainer | None) -> str:
    if trainer is not None and trainer.strategy.root_device.type == "cuda":
        return torch.cuda.get_device_name(trainer.strategy.root_device)
    return "cpu"


def describe_failure(err: BaseException, trainer: L.Trainer | None, run_dir: Path) -> dict[str, Any]:
    from experiments.config.errors import user_error_types

    if isinstance(err, DivergedError):
        return {"status": "diverged", "error": str(err), "diverged_at_step": err.step}
    if isinstance(err, user_error_types()):
        return {"status": "failed", "error": str(err), "user_error": True}
    output = output_problem(err)
    if output is not None:  # a full disk, an unwritable folder: one line, no traceback to write there
        return {"status": "failed", "error": output, "output_error": True}
    if isinstance(err, KeyboardInterrupt) or isinstance(err.__context__, KeyboardInterrupt):
        # Lightning turns Ctrl-C inside fit/validate/test into sys.exit(1)
        return {"status": "failed", "error": interruption(trainer, run_dir, "Ctrl-C (SIGINT)"), "interrupted": True}
    if isinstance(err, SIGTERMException):
        return {"status": "failed", "error": interruption(trainer, run_dir, "SIGTERM"), "interrupted": True}
    if isinstance(err, SystemExit):
        # SIGTERM (Lightning) or a SLURM time limit / preemption (submitit requeues, then exits):
        # the requeued job finds this result unfinished and resumes from checkpoints/last.ckpt.
        return {
            "status": "failed",
            "error": "interrupted: the process was told to stop (SIGTERM, or SLURM "
            "requeued the job); running the cell again resumes it from checkpoints/last.ckpt",
        }
    (run_dir / "error.log").write_text("".join(traceback.format_exception(err)))
    log.error("run failed: %s: %s (traceback in %s)", type(err).__name__, err, run_dir / "error.log")
    return {"status": "failed", "error": f"{type(err).__name__}: {err}"}


def interruption(trainer: L.Trainer | None, run_dir: Path, how: str) -> str:
    """``interrupted by Ctrl-C (SIGINT) at step 37/100; its checkpoint of step 30 is kept (<path>)``."""
    from experiments.training.checkpointing import checkpoint_step

    where = f" at step {trainer.global_step}/{trainer.max_steps}" if trainer is not None else " before training"
    ckpt = run_dir / "checkpoints" / "last.ckpt"
    try:
        kept = f"its checkpoint of step {checkpoint_step(ckpt)} is kept ({ckpt})"
    except (OSError, RuntimeError, KeyError):
        kept = "no checkpoint was written yet"
    return f"interrupted by {how}{where}; {kept}"


def output_problem(err: BaseException) -> str | None:
    """``<path>: no space left on the device`` when writing an output failed (disk, permissions), else None."""
    from experiments.record.files import describe

    for cause in (err, err.__cause__, err.__context__):
        if isinstance(cause, OSError) and cause.errno is not None and cause.errno in OUTPUT_ERRNOS:
            return str(cause) if type(cause).__name__ == "OutputError" else describe(cause, cause.filename or "?")
    return None


OUTPUT_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EACCES, errno.EROFS, errno.EPERM)
STATS_FILE = "attention_stats.npz"


def save_attention_stats(module: TransformerModule, run_dir: Path) -> dict[str, Any]:
    """The summary for result.json; the per-head arrays go to attention_stats.npz beside it."""
    summary, heads = module.attention_statistics()
    if heads:
        np.savez_compressed(run_dir / STATS_FILE, **{k: v.astype(np.float32) for k, v in heads.items()})
    return summary


def save_attention_maps(module: TransformerModule, datamodule, run_dir: Path, wandb) -> None:
    maps = module.attention_maps(datamodule.example())
    arrays = {k: v.numpy().astype(np.float32) for k, v in maps.items()}
    np.savez_compressed(run_dir / "attention_maps.npz", **arrays)
    if wandb is None or getattr(wandb, "broken", False):
        return
    try:
        import wandb as wb

        images = {f"attention/{k}": wb.Image(_heatmap(v[0]), caption=f"{k} head 0") for k, v in arrays.items()}
        wandb.experiment.log(images)
    except Exception as err:  # noqa: BLE001 - pictures are optional
        log.warning("could not log attention maps to W&B: %s", err)


def _heatmap(weights: np.ndarray) -> np.ndarray:
    """(Tq, Tk) weights -> an 8-bit grey image, brightest = most attended."""
    top = float(weights.max()) or 1.0
    return (255 * np.clip(weights / top, 0, 1)).astype(np.uint8)


def close_wandb(wandb, result: dict[str, Any]) -> None:
    """Put the whole result into the W&B summary and finish the run (one W&B run per job)."""
    if wandb is None:
        return
    try:
        if not getattr(wandb, "broken", False):
            from experiments.record.wandb_tables import log_result

            run = wandb.experiment
            if result["status"] == "completed":
                log_result(run, result)
            run.summary["attnlab_result"] = {k: v for k, v in result.items() if k != "config"}
            for key, value in result.get("metrics", {}).items():
                run.summary[key] = value
            for key, value in result.get("cost", {}).items():  # the dashboard's cost panels
                if isinstance(value, (int, float)):
                    run.summary[f"cost/{key}"] = value
            run.summary["status"] = result["status"]
            if result.get("run_dir"):
                from experiments.record.wandb_run import log_artifacts

                log_artifacts(run, result, Path(result["run_dir"]), checkpoint=getattr(wandb, "log_checkpoint", False))
        import wandb as wb

        wb.finish(exit_code=0 if result["status"] == "completed" else 1)
    except Exception as err:  # noqa: BLE001
        log.warning("W&B could not finish the run (%s); the result file is unaffected", err)
