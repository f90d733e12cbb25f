"""``python -m experiments.train``: one run, one result.json.

Compose the config, check it, seed, build the task and the model, fit, test,
write ``result.json`` into the run's output directory. A run always leaves a
result: ``completed``, ``diverged`` (NaN/inf loss) or ``failed`` (with the error).
This module is the command line; the run itself is ``experiments.training.single_run.train``.

    python -m experiments.train task=reverse attention=local position=relative seed=1 trainer.max_steps=300
    python -m experiments.train -m experiment=quick
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from experiments.app.preflight import CONF
from experiments.config.errors import user_error_types
from experiments.config.schema import register_configs
from experiments.record.files import OutputError
from experiments.record.result import read_result
from experiments.sweep.grid import register_resolvers, set_threads, threads_per_process

if TYPE_CHECKING:
    from experiments.config.spec import Spec

log = logging.getLogger("attnlab")

# The run of one configuration and what the entry reports of it, still reachable here by name
# (experiments.app.train.train); imported on first use, because they import Lightning and torch._dynamo
# (seconds) and --version, --help and a refused command line need neither.
_FROM_SINGLE_RUN = ("BAD_OBJECTIVE", "RESULT", "is_rank_zero", "objective", "resume_command", "train", "train_in_child")


def __getattr__(name: str) -> Any:
    if name in _FROM_SINGLE_RUN:
        from experiments.training import single_run

        return getattr(single_run, name)
    if name == "shared_gpu":
        from experiments.sweep.gpu_share import shared_gpu

        return shared_gpu
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def runs_ranks_by_rerunning(trainer: DictConfig) -> bool:
    """Whether Lightning would start DDP ranks > 0 by re-running this command line."""
    from experiments.training.build import cluster_starts_ranks

    strategy = str(trainer.strategy)
    return "ddp" in strategy and not any(m in strategy for m in ("spawn", "fork")) and not cluster_starts_ranks()


def refused(err: BaseException, multirun: bool, code: int = 2) -> float:
    """One line for a run that cannot go on: a sweep's cell reports the bad objective, a single run exits ``code``."""
    from experiments.training.single_run import BAD_OBJECTIVE

    print(f"attnlab: {err}", file=sys.stderr)
    if multirun:
        return BAD_OBJECTIVE
    sys.exit(code)


# The configs by their file path beside the installed packages: a relative config_path would import the module
# ``conf``, which a user's own conf/ package in the current folder hides (python -m puts that folder first).
@hydra.main(config_path=str(CONF), config_name="config", version_base="1.3")
def hydra_entry(cfg: DictConfig) -> float:
    from experiments.config.spec import build_spec
    from experiments.sweep.gpu_share import on_held_gpu, shared_gpu
    from experiments.training.single_run import is_rank_zero, objective, train, train_in_child

    hc = HydraConfig.get()
    run_dir = Path(hc.runtime.output_dir)
    overrides = list(hc.overrides.task)
    multirun = hc.mode == RunMode.MULTIRUN
    threads = threads_per_process(hc.launcher, cfg.trainer, cfg.num_threads)
    try:
        spec = build_spec(cfg)  # once; a refusal of its checks is recorded where the run records its ending
    except user_error_types() as err:  # a per-role variant that names no attention type
        return refused(err, multirun)
    # the seeds of this cell batched in this process (experiments/ensemble), by ensemble.seeds=N or
    # by hydra/launcher=ensemble, which sets the members' seeds and folders
    if cfg.ensemble.seeds != 1 or cfg.ensemble.member_seeds is not None or cfg.ensemble.member_dirs is not None:
        return _ensemble(cfg, spec, run_dir, overrides, multirun, threads)
    if multirun and runs_ranks_by_rerunning(cfg.trainer):
        result = train_in_child(spec, run_dir, overrides, threads)
    else:
        set_threads(threads)
        try:
            with shared_gpu(spec, hc, multirun):  # jobs_per_gpu > 1: this job's GPU slot
                result = train(on_held_gpu(spec), run_dir, overrides, sweep_cell=multirun)
        except OutputError as err:  # run_state.json could not be written: nothing has started
            return refused(err, multirun, code=1)
        except user_error_types() as err:  # the folder is another process's, or holds another computation
            return refused(err, multirun)
        except (KeyboardInterrupt, SystemExit) as err:
            stopped_by_signal(err, run_dir, multirun)
            raise
    if not is_rank_zero():
        # Rank 0 reports and sets the exit code. A rank > 0 exiting non-zero would make
        # Lightning's watchdog kill rank 0 before it writes the result.
        return objective(result, cfg.objective)
    report_ending(result, run_dir, multirun, resume=cfg.resume)
    return objective(result, cfg.objective)


def report_ending(result: dict[str, Any], run_dir: Path, multirun: bool, resume: str | None) -> None:
    """Rank 0's ending of one run: a line on stderr for a run that did not complete (with how to resume a failed
    one that left a checkpoint; a single run then exits 2 or 1), else where its result is and, for a single run,
    the closing summary."""
    from experiments.training.single_run import RESULT, resume_command

    status = result["status"]
    if status not in ("completed", "pruned") or result.get("result_unwritten"):  # pruned: the study's own stop
        if result.get("result_unwritten"):
            message = f"{status}, but the result could not be written: {result['result_unwritten']}"
            if result.get("error"):
                message = f"{status}: {result['error']}; the result could not be written either"
        else:
            message = f"{status}: {result.get('error')}  (result: {run_dir / RESULT})"
        if (
            status == "failed"
            and not result.get("user_error")
            and resume
            and (run_dir / "checkpoints" / "last.ckpt").exists()
        ):
            message += f"; resume: {resume_command(run_dir, multirun)}"
        print(f"attnlab: {message}", file=sys.stderr)
        if not multirun:
            # One line for the user; the traceback, if any, is in error.log beside the result.
            sys.exit(2 if result.get("user_error") else 1)
    elif multirun:
        log.info("result: %s", run_dir / RESULT)
    else:
        from experiments.app.summary import print_summary

        log.info("result: %s", run_dir / RESULT)
        print_summary(result, run_dir)


def _ensemble(cfg: DictConfig, spec: Spec, run_dir: Path, overrides: list[str], multirun: bool, threads: int) -> float:
    """The seeds of this cell batched in this process (``experiments.ensemble``); the objective of its members."""
    from experiments.config.checks import check_ensemble
    from experiments.ensemble import ensemble_entry

    try:
        check_ensemble(cfg)  # also in the preflight; here for a caller that skips it
    except user_error_types() as err:
        refused(err, multirun=False)
    set_threads(threads)
    try:
        return ensemble_entry(spec, run_dir, overrides, multirun)
    except (KeyboardInterrupt, SystemExit) as err:
        from experiments.ensemble.members import member_dirs, member_seeds
        from experiments.training.stops import exit_code

        if exit_code(err) is not None:  # not ensemble_entry's own exit after its one line
            # the members share one fit: the first member's result says where it stopped
            stopped_by_signal(err, run_dir, multirun, member_dirs(spec, run_dir, member_seeds(spec))[0])
        raise


def stopped_by_signal(err: BaseException, run_dir: Path, multirun: bool, result_dir: Path | None = None) -> None:
    """The run was told to stop: one line (where it stopped, what is kept, how to go on); then, for
    Ctrl-C or SIGTERM, exit 130 or 143, the shell's codes for those signals, for the whole sweep too
    (a sweep's summary first). Any other exit goes on as it was raised."""
    from experiments.training.single_run import RESULT, is_rank_zero, resume_command
    from experiments.training.stops import exit_code

    if is_rank_zero():
        said = (read_result((result_dir or run_dir) / RESULT) or {}).get("error") or "interrupted"
        print(f"attnlab: {said}; resume: {resume_command(run_dir, multirun)}", file=sys.stderr)
    code = exit_code(err)
    if code is None:
        return
    if multirun:
        from experiments.sweep.grid import summarise_interrupted_sweep

        summarise_interrupted_sweep()  # Hydra's on_multirun_end never runs after an exception
    sys.exit(code)


def version() -> str:
    """attnlab's version: the installed distribution's, else pyproject.toml's (a source checkout)."""
    from importlib import metadata

    try:
        return metadata.version("attnlab")
    except metadata.PackageNotFoundError:
        import tomllib

        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        return tomllib.loads(pyproject.read_text())["project"]["version"]


def main() -> None:
    if "--version" in sys.argv[1:]:
        # Hydra's own --version names Hydra's version
        print(f"attnlab {version()} (hydra-core {__import__('hydra').__version__})")
        sys.exit(0)
    register_configs()
    register_resolvers()
    os.environ.setdefault("WANDB_SILENT", "true")
    from experiments.app.preflight import AlreadyCompleted, PreflightError, preflight
    from experiments.sweep.grid import exit_code_for_last_multirun

    if os.environ.get("LOCAL_RANK") in (None, "0"):  # DDP ranks > 0 re-run an already checked command
        try:
            preflight(sys.argv[1:])
        except AlreadyCompleted as done:  # nothing to do, and nothing could be written there
            print(f"attnlab: {done}", file=sys.stderr)
            sys.exit(0)
        except ValueError as err:
            if not isinstance(err, (PreflightError, *user_error_types())):
                raise
            print(f"attnlab: {err}", file=sys.stderr)
            sys.exit(2)
    from experiments.training.cell_contract import exit_after_stop

    exit_after_stop()  # the process ends after a run a signal stopped: a further Ctrl-C is noted, not raised
    hydra_entry()
    sys.exit(exit_code_for_last_multirun())


def command() -> None:
    """``python -m experiments.train`` and ``attnlab-train``: ``main`` in a process of its own, which ends
    without the interpreter's second of teardown once the command is done (``experiments.app.quick_exit``)."""
    from experiments.app.quick_exit import run_then_exit

    run_then_exit(main)


if __name__ == "__main__":
    command()
