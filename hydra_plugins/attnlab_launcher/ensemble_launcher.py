"""``hydra/launcher=ensemble``: a sweep's ``seed=`` values of one cell trained as one seed ensemble.

    python -m experiments.train -m experiment=quick seed=0,1,2,3,4 hydra/launcher=ensemble

The sweep's jobs that differ only in ``seed`` form a group; each group runs as one job that
trains its seeds as one batched model (``ensemble.seeds``, experiments/ensemble). Each member
writes the folder its own job would have written, so the sweep's folders, their
``result.json`` and a later rerun (with this launcher or any other) are those of the same sweep
run job by job: a completed seed is skipped, an interrupted group resumes from its shared
checkpoint in ``<first member's folder>/ensemble/``. Groups run one after another in this
process, as Hydra's basic launcher runs jobs; ``max_members`` splits a larger group (GPU memory).

It lives here because Hydra instantiates launchers only from the ``hydra_plugins`` package.
"""

# No `from __future__ import annotations`: Hydra's plugin scan executes this module outside
# sys.modules, where dataclasses cannot resolve string annotations.
import copy
import json
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, run_job, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

log = logging.getLogger(__name__)


@dataclass
class EnsembleLauncherConf:
    """The launcher's options and their defaults, in Hydra's ConfigStore as ``hydra/launcher/attnlab_ensemble``
    (conf/hydra/launcher/ensemble.yaml, ``hydra/launcher=ensemble``, extends it)."""

    _target_: str = "hydra_plugins.attnlab_launcher.ensemble_launcher.EnsembleLauncher"
    # the most seeds in one ensemble (GPU memory; null: every seed of a cell); more form further groups
    max_members: Optional[int] = None


# under attnlab's own name: a plugin's entry is in every Hydra app of the environment, and must not take another's
ConfigStore.instance().store(
    group="hydra/launcher", name="attnlab_ensemble", node=EnsembleLauncherConf, provider="attnlab"
)


class GroupingError(ValueError):
    """The sweep cannot be grouped as asked; raised before any job runs."""


@dataclass
class Job:
    """One job of the sweep as Hydra's basic launcher would run it."""

    idx: int  # hydra.job.num
    overrides: list[str]
    config: DictConfig  # its sweep config, hydra.job.num and id set
    seed: int
    folder: str  # the job's output folder, absolute


def override_key(override: str) -> str:
    return override.lstrip("+~").split("=", 1)[0]


def group_jobs(jobs: list[Job], max_members: int | None) -> list[list[Job]]:
    """The jobs that differ only in their ``seed`` override, in sweep order, each group at most
    ``max_members`` long; a seed repeated within a cell starts a group of its own."""
    groups: dict[tuple[str, ...], list[list[Job]]] = {}
    order: list[list[Job]] = []
    for job in jobs:
        key = tuple(o for o in job.overrides if override_key(o) != "seed")
        chunks = groups.setdefault(key, [])
        last = chunks[-1] if chunks else None
        if last is None or len(last) == (max_members or sys.maxsize) or job.seed in {j.seed for j in last}:
            last = []
            chunks.append(last)
            order.append(last)
        last.append(job)
    return order


def check_job(job: Job) -> None:
    ensemble = job.config.get("ensemble") or {}
    for key, alone in (("seeds", 1), ("member_seeds", None), ("member_dirs", None)):
        if ensemble.get(key) != alone:
            raise GroupingError(
                f"hydra/launcher=ensemble groups the sweep's seed= values itself; job #{job.idx} also sets "
                f"ensemble.{key}={ensemble.get(key)}. Drop one of them: either sweep seed= with this "
                "launcher, or set ensemble.seeds=N per cell with any launcher"
            )


def check_group_trainer(job: Job) -> None:
    """The trainer keys of a group trained as one ensemble, checked as ``ensemble.seeds=N`` checks them."""
    from experiments.config.errors import ConfigError
    from experiments.ensemble.trainer_keys import check_trainer_keys

    try:
        check_trainer_keys(job.config.trainer)
    except ConfigError as err:
        raise GroupingError(f"hydra/launcher=ensemble trains job #{job.idx}'s seeds as one model: {err}") from None


def save_job_record(job: Job) -> None:
    """The ``.hydra/config.yaml`` and ``overrides.yaml`` a member's own job would have written
    (the group's job writes its own, with the ensemble's settings, in the first member's folder)."""
    subdir = job.config.hydra.output_subdir
    if subdir is None:
        return
    folder = Path(job.folder) / str(subdir)
    folder.mkdir(parents=True, exist_ok=True)
    task = copy.deepcopy(job.config)
    with open_dict(task):
        del task["hydra"]
    OmegaConf.save(task, folder / "config.yaml")
    OmegaConf.save(OmegaConf.create(list(job.overrides)), folder / "overrides.yaml")


def member_returns(ret: JobReturn, group: list[Job]) -> list[JobReturn]:
    """One JobReturn per job of the group, as if each had run alone: its overrides, its folder and
    the objective of its own result (an optimisation sweeper reads one value per job)."""
    out = []
    for job in group:
        each = copy.copy(ret)
        each.overrides = list(job.overrides)
        each.working_dir = job.folder
        if ret.status == JobStatus.COMPLETED:
            each.return_value = member_objective(job)
        out.append(each)
    return out


def member_objective(job: Job) -> float:
    from experiments.training.single_run import BAD_OBJECTIVE, objective

    try:
        result = json.loads((Path(job.folder) / "result.json").read_text())
    except (OSError, ValueError):
        return BAD_OBJECTIVE  # the member wrote no result: the group job failed before it
    return objective(result, str(job.config.objective))


class EnsembleLauncher(Launcher):
    def __init__(self, max_members: int | None = None) -> None:
        super().__init__()
        self.max_members = max_members
        self.config: DictConfig | None = None
        self.task_function: TaskFunction | None = None
        self.hydra_context: HydraContext | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from experiments.sweep.grid import register_resolvers

        register_resolvers()  # _job resolves each job's folder (hydra.sweep.subdir)
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def _job(self, idx: int, overrides: Sequence[str]) -> Job:
        assert self.hydra_context is not None and self.config is not None
        config = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
        with open_dict(config):
            config.hydra.job.id = idx
            config.hydra.job.num = idx
        # the folder run_job would give this job (hydra.sweep.dir / hydra.sweep.subdir), whose
        # subdir reads the job's own hydra node (its override_dirname or num)
        HydraConfig.instance().set_config(config)
        folder = os.path.abspath(
            os.path.join(
                str(OmegaConf.select(config, "hydra.sweep.dir")), str(OmegaConf.select(config, "hydra.sweep.subdir"))
            )
        )
        return Job(idx, list(overrides), config, int(config.seed), folder)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        setup_globals()
        assert self.config is not None and self.hydra_context is not None and self.task_function is not None
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        jobs = [self._job(initial_job_idx + i, overrides) for i, overrides in enumerate(job_overrides)]
        try:
            if self.max_members is not None and (not isinstance(self.max_members, int) or self.max_members < 2):
                raise GroupingError(
                    f"hydra.launcher.max_members={self.max_members} is not allowed; it must be an integer "
                    ">= 2, or null for every seed of a cell in one ensemble"
                )
            for job in jobs:
                check_job(job)
            groups = group_jobs(jobs, self.max_members)
            for group in groups:
                if len(group) > 1:  # one batched model: every trainer key passed, handled or refused
                    check_group_trainer(group[0])
        except GroupingError as err:
            print(f"attnlab: {err}", file=sys.stderr)  # one line, before any job has run
            raise SystemExit(2) from None
        log.info("Launching %d jobs locally as %d seed ensembles and single runs", len(jobs), len(groups))
        returns: dict[int, JobReturn] = {}
        for group in groups:
            first = group[0]
            shown = " ".join(filter_overrides([o for o in first.overrides if override_key(o) != "seed"]))
            if len(group) == 1:
                log.info("\t#%d : %s", first.idx, " ".join(filter_overrides(first.overrides)))
                config = first.config
            else:
                seeds = [j.seed for j in group]
                log.info("\t#%s : %s seed=%s (one ensemble)", ",".join(str(j.idx) for j in group), shown, seeds)
                for job in group[1:]:
                    save_job_record(job)
                config = copy.deepcopy(first.config)
                with open_dict(config):
                    config.ensemble.seeds = len(group)
                    config.ensemble.member_seeds = seeds
                    config.ensemble.member_dirs = [j.folder for j in group]
            ret = run_job(
                hydra_context=self.hydra_context,
                task_function=self.task_function,
                config=config,
                job_dir_key="hydra.sweep.dir",
                job_subdir_key="hydra.sweep.subdir",
            )
            for job, each in zip(group, member_returns(ret, group) if len(group) > 1 else [ret]):
                returns[job.idx] = each
            configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        return [returns[job.idx] for job in jobs]
