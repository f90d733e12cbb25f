"""``hydra/sweeper=optuna`` (and ``hparams_search=optuna|optuna_grid``): an Optuna study whose trials are
attnlab runs, on current Optuna (>= 4).

    python -m experiments.train -m hparams_search=optuna attention=local position=rope
    python -m experiments.train -m hparams_search=optuna hydra/sweeper/pruner=median hydra.sweeper.n_jobs=2 \\
        hydra/launcher=joblib

- The study lives in the sweep folder (``optuna.journal``, Optuna's journal file) unless
  ``hydra.sweeper.storage`` names another (``sqlite:///study.db``, a journal path). Re-running the command
  loads it: finished trials count against ``n_trials`` and are not run again; a trial a killed sweep left
  running is failed as interrupted and run again with the same parameters.
- Trials run through the configured launcher, ``n_jobs`` at a time.
- Each trial's job reports ``pruning_metric`` after every validation to its trial (experiments/training/pruning.py),
  through the storage; the pruner (``hydra/sweeper/pruner=median``) stops it, and the trial is PRUNED in
  Optuna and ``status: pruned`` with its step in result.json.
- A failed or diverged run is a FAIL trial, not a score; the study's best is over completed trials.
- A seeded sampler replays: trial i is asked by the sampler seeded ``seed + i``, resumed or not.

It lives here because Hydra instantiates sweepers only from the ``hydra_plugins`` package.
"""

# No `from __future__ import annotations`: Hydra's plugin scan executes this module outside
# sys.modules, where dataclasses cannot resolve string annotations.
import importlib.util
import json
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)

# hydra/sweeper/sampler=<name> (conf/hydra/sweeper/sampler/<name>.yaml): the samplers trials are asked with
SAMPLERS = {
    "tpe": "optuna.samplers.TPESampler",
    "random": "optuna.samplers.RandomSampler",
    "grid": "optuna.samplers.GridSampler",
    "cmaes": "optuna.samplers.CmaEsSampler",  # needs the cmaes package (attnlab[optuna])
    "qmc": "optuna.samplers.QMCSampler",
    "gp": "optuna.samplers.GPSampler",  # torch and scipy, which attnlab has
    "nsgaii": "optuna.samplers.NSGAIISampler",
}


@dataclass
class OptunaSweeperConf:
    """The sweeper's options and their defaults, in Hydra's ConfigStore as ``hydra/sweeper/attnlab_optuna`` (not
    ``optuna``: that name is the hydra-optuna-sweeper plugin's). conf/hydra/sweeper/optuna.yaml
    (``hydra/sweeper=optuna``) extends it with a sampler and a pruner from conf/hydra/sweeper/. Values checked
    before the sweep with a one-line error naming the key (experiments/app/sweeper_checks.py) are typed ``Any``."""

    _target_: str = "hydra_plugins.attnlab_sweeper.optuna_sweeper.OptunaSweeper"
    # the sampler and pruner are kept as configs: a sampler is built afresh for each trial (seed + trial index)
    _recursive_: bool = False
    direction: Any = "minimize"
    # true: take a direction against the objective's name (maximize a loss, minimize an accuracy); refused otherwise
    direction_override: bool = False
    study_name: Optional[str] = None
    # null: <sweep dir>/optuna.journal; or a database URL (sqlite:///study.db) or a journal file path
    storage: Optional[str] = None
    # the budget: trials that finish (complete, pruned or failed) count against it
    n_trials: Any = 20
    # trials launched at a time through the configured launcher (hydra/launcher=joblib runs them in parallel)
    n_jobs: Any = 1
    sampler: Any = None
    pruner: Any = None
    # the metric each trial reports after every validation for pruning; null: the objective
    pruning_metric: Optional[str] = None
    # the search space: key -> Optuna distribution (interval, range, choice, tag(log, ...))
    params: Any = field(default_factory=dict)


ConfigStore.instance().store(group="hydra/sweeper", name="attnlab_optuna", node=OptunaSweeperConf, provider="attnlab")


class OptunaSweeper(Sweeper):
    def __init__(
        self,
        direction: str = "minimize",
        study_name: Optional[str] = None,
        storage: Optional[str] = None,
        n_trials: int = 20,
        n_jobs: int = 1,
        sampler: Any = None,
        pruner: Any = None,
        pruning_metric: Optional[str] = None,
        params: Any = None,
        direction_override: bool = False,  # checked before the sweep (experiments/app/sweeper_checks.py)
    ) -> None:
        self.direction = direction
        self.study_name = study_name
        self.storage = storage
        self.n_trials = n_trials
        self.n_jobs = n_jobs
        self.sampler = OmegaConf.to_container(sampler, resolve=True) if sampler is not None else None
        self.pruner = OmegaConf.to_container(pruner, resolve=True) if pruner is not None else None
        self.pruning_metric = pruning_metric
        self.params = dict(params or {})
        self.config: Optional[DictConfig] = None
        self.launcher: Any = None
        self.job_idx = 0

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from experiments.sweep.grid import register_resolvers

        register_resolvers()  # before the launcher's config is resolved
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Any:
        from experiments.sweep.optuna_study import StudyError
        from experiments.training.cell_contract import StudyChangedError

        try:
            study, space, fixed = self._open(arguments)
        except (StudyError, StudyChangedError) as err:  # one line and exit code 2, before any trial
            print(f"attnlab: {err}", file=sys.stderr)
            raise SystemExit(2) from None
        return self._run(study, space, fixed)

    # -- the study -----------------------------------------------------------------------------------
    def _open(self, arguments: list[str]) -> tuple[Any, dict[str, Any], list[str]]:
        from experiments.sweep import optuna_study as s

        space, fixed = s.search_space(self.params, arguments)
        self._prepare(space)
        return self._study(self.study_name, self._settings(space, fixed)), space, fixed

    # where the search space is declared, named when it is refused
    space_key = "hydra.sweeper.params"

    def _prepare(self, space: dict[str, Any]) -> None:
        """Check the study before any trial (one line each) and settle its sampler, budget and storage."""
        import optuna

        from experiments.sweep import optuna_study as s

        assert self.config is not None
        if self.direction not in ("minimize", "maximize"):
            raise s.StudyError(f"hydra.sweeper.direction={self.direction!r}; choose minimize or maximize")
        self.metric = (self.pruning_metric or str(self.config.objective)) if self.pruner else None
        s.check_study(self.config, space, self.n_trials, self.n_jobs, self.metric, self.space_key)
        sampler = self.sampler or {"_target_": SAMPLERS["tpe"], "seed": None}
        target = str(sampler.get("_target_", ""))
        if target not in SAMPLERS.values():
            raise s.StudyError(
                f"hydra.sweeper.sampler._target_={target!r} is not a sampler the sweeper runs; "
                f"choose hydra/sweeper/sampler= one of {', '.join(SAMPLERS)}"
            )
        if target == SAMPLERS["cmaes"] and importlib.util.find_spec("cmaes") is None:
            raise s.StudyError("hydra/sweeper/sampler=cmaes needs the cmaes package: pip install 'attnlab[optuna]'")
        self.sampler = sampler
        if str(sampler.get("_target_", "")).endswith("GridSampler"):
            self.n_trials = min(self.n_trials, s.grid_size(space))  # the grid sampler stops at the grid's size
        # Alembic's migration lines (an RDB storage) and Optuna's per-trial lines say nothing the sweep does not
        logging.getLogger("alembic").setLevel(logging.WARNING)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.spec = s.storage_spec(self.storage, self.config.hydra.sweep.dir)

    def _settings(self, space: dict[str, Any], fixed: list[str], **more: Any) -> dict[str, Any]:
        """What the study's trials are comparable under (experiments/training/cell_contract.py)."""
        from experiments.training.cell_contract import study_settings

        assert self.config is not None
        return study_settings(space, str(self.config.objective), self.direction, fixed, **more)

    def _study(self, name: Optional[str], settings: dict[str, Any]) -> Any:
        """The study of that name in the storage, created, or loaded (a resumed sweep) when its trials were run
        with the same ``settings``: another search space, objective, direction or fixed override is refused
        (``StudyChangedError``, one line), and so is a budget below the trials it has finished."""
        import optuna

        from experiments.sweep import optuna_study as s
        from experiments.training.cell_contract import check_study

        study = optuna.create_study(
            study_name=name, storage=s.open_storage(self.spec), direction=self.direction, load_if_exists=True
        )
        check_study(study, settings, self.n_trials, s.finished(study), self.spec)
        study.set_user_attr(s.PRUNER_ATTR, self.pruner)
        study.set_user_attr(s.METRIC_ATTR, self.metric)
        return study

    def _run(self, study: Any, space: dict[str, Any], fixed: list[str]) -> Any:
        began = time.perf_counter()
        self._tune(study, space, fixed)
        self._write_results(study, time.perf_counter() - began)
        return study

    def _tune(
        self, study: Any, space: dict[str, Any], fixed: list[str], seeds: Optional[list[int]] = None, role: str = ""
    ) -> None:
        """Ask, launch and tell until ``n_trials`` trials of ``study`` have finished; each trial runs once per
        seed of ``seeds`` (its value: the mean over them), or once at the config's seed when None."""
        import optuna

        from experiments.sweep import optuna_study as s

        retried = s.recover_interrupted(study)
        done = s.finished(study)
        log.info(
            "study %s in %s: %d of %d trials finished%s",
            study.study_name,
            self.spec,
            done,
            self.n_trials,
            f"; running interrupted trials {retried} again" if retried else "",
        )
        while done < self.n_trials:
            trials = []
            for _ in range(min(self.n_jobs, self.n_trials - done)):
                study.sampler = s.sampler_for(self.sampler, space, s.asked_index(study))
                trials.append(study.ask(space))
            # telling uses a sampler with no stopping rule: the grid sampler's study.stop() works only in optimize()
            study.sampler = optuna.samplers.RandomSampler()
            jobs = [(t, self._overrides(study, t, fixed, seed, role)) for t in trials for seed in (seeds or [None])]
            returns = self.launcher.launch([o for _, o in jobs], initial_job_idx=self.job_idx)
            self.job_idx += len(jobs)
            for trial in trials:
                self._tell(study, trial, [r for (t, _), r in zip(jobs, returns) if t.number == trial.number])
            done = s.finished(study)

    def _overrides(
        self, study: Any, trial: Any, fixed: list[str], seed: Optional[int] = None, role: str = ""
    ) -> list[str]:
        from experiments.sweep.optuna_study import RETRY_ATTR, trial_folder
        from experiments.training.single_run import hydra_value

        assert self.config is not None
        params = [f"{key}={value}" for key, value in trial.params.items()]
        where = [f"trial.number={trial.number}", f"trial.study={study.study_name}", f"trial.storage='{self.spec}'"]
        # a trial asked again after a kill runs in the interrupted trial's folder, and resumes its checkpoint
        retry_of = trial.user_attrs.get(RETRY_ATTR)
        sweep_dir = self.config.hydra.sweep.dir
        folder = None if retry_of is None else trial_folder(sweep_dir, study.study_name, retry_of, seed)
        return [*fixed, *params, *([f"seed={seed}"] if seed is not None else []), *where,
                *([f"trial.role={role}"] if role else []),
                *([f"hydra.sweep.subdir={hydra_value(folder)}"] if folder else [])]  # fmt: skip

    def _tell(self, study: Any, trial: Any, returns: list[JobReturn]) -> None:
        """The trial's state from its runs' result.json: completed (the objective, averaged over its seeds),
        pruned, or failed."""
        from optuna.trial import TrialState

        assert self.config is not None
        results, folders = [], []
        for ret in returns:
            result: dict[str, Any] = {}
            if ret.hydra_cfg is not None:
                folder = Path(str(ret.hydra_cfg.hydra.runtime.output_dir))
                folders.append(str(folder))
                try:
                    result = json.loads((folder / "result.json").read_text())
                except (OSError, ValueError):
                    result = {}
            if ret.status != JobStatus.COMPLETED and result.get("status") == "completed":
                result = {**result, "status": "failed"}
            results.append(result)
        trial.set_user_attr("folder", folders[0] if len(folders) == 1 else folders)
        statuses = [r.get("status", "failed") for r in results]
        trial.set_user_attr("status", statuses[0] if len(statuses) == 1 else statuses)
        values = [(r.get("metrics") or {}).get(str(self.config.objective)) for r in results]
        if statuses and all(s == "completed" for s in statuses) and all(v is not None for v in values):
            study.tell(trial, sum(float(v) for v in values) / len(values))
        elif "pruned" in statuses:
            pruned = next(r for r in results if r.get("status") == "pruned")
            trial.set_user_attr("pruned_step", (pruned.get("pruned") or {}).get("step"))
            study.tell(trial, state=TrialState.PRUNED)
        else:
            errors = [r.get("error") for r in results if r.get("error")]
            failed = [str(r._return_value) for r in returns if r.status == JobStatus.FAILED]
            error = (errors or failed or [f"{self.config.objective} missing"])[0]
            trial.set_user_attr("error", str(error)[:500])
            study.tell(trial, state=TrialState.FAIL)

    def _write_results(self, study: Any, seconds: float) -> None:
        """``optimization_results.yaml`` (best parameters and value) and ``study.json`` (every trial) in the
        sweep folder."""
        from optuna.trial import TrialState

        from experiments.record.result import write_json_atomic
        from experiments.sweep.optuna_study import INTERRUPTED_ATTR

        assert self.config is not None
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        trials = [t for t in study.get_trials(deepcopy=False) if not t.user_attrs.get(INTERRUPTED_ATTR)]
        counts = {state.name.lower(): sum(t.state == state for t in trials) for state in TrialState}
        record = {
            "study": study.study_name,
            "storage": self.spec,
            "direction": self.direction,
            "objective": str(self.config.objective),
            "counts": {k: v for k, v in counts.items() if v},
            "seconds_this_sweep": seconds,
            "trials": [
                {
                    "number": t.number,
                    "state": t.state.name.lower(),
                    "params": t.params,
                    "value": t.value,
                    "pruned_step": t.user_attrs.get("pruned_step"),
                    "folder": t.user_attrs.get("folder"),
                }
                for t in trials
            ],
        }
        write_json_atomic(sweep_dir / "study.json", record)
        completed = [t for t in trials if t.state == TrialState.COMPLETE]
        summary = ", ".join(f"{n} {k}" for k, n in record["counts"].items())
        if not completed:
            log.warning("study %s: no trial completed (%s); no best parameters", study.study_name, summary)
            return
        best = study.best_trial
        OmegaConf.save(
            OmegaConf.create({"name": "optuna", "best_params": best.params, "best_value": best.value}),
            sweep_dir / "optimization_results.yaml",
        )
        log.info(
            "study %s: %s; best %s=%.4f with %s",
            study.study_name,
            summary,
            self.config.objective,
            best.value,
            best.params,
        )
