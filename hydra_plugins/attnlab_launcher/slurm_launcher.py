"""attnlab's SLURM launcher: Hydra's submitit launcher, checked, quiet, and robust to lost jobs.

It lives here because Hydra instantiates launchers only from the ``hydra_plugins`` package;
the pieces it uses, and what they change, are in ``experiments/sweep/slurm.py``.
"""

from __future__ import annotations

import contextlib
import io
import logging
import sys
from pathlib import Path

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus

try:
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher as HydraSlurmLauncher
except ImportError:
    # attnlab[slurm] is not installed: this module then defines no launcher (Hydra's plugin scan
    # stays quiet) and hydra/launcher=slurm is refused in one line (experiments/config/extras.py)
    BaseQueueConf = HydraSlurmLauncher = object
from omegaconf import OmegaConf

# attnlab's own modules are imported by the methods that run: Hydra imports this module in every Hydra app of the
# environment when it scans for plugins, where attnlab must cost nothing (and may not even be importable).

log = logging.getLogger("attnlab")


class SubmissionRefused(SystemExit):
    """sbatch refused the sweep; the one-line reason is printed before this ends the process."""


class SlurmLauncher(HydraSlurmLauncher):
    def __call__(self, *args, **kwargs):
        from experiments.sweep.grid import register_resolvers

        # what a SLURM job runs first: it resolves the cell's folder (hydra.sweep.subdir) next
        register_resolvers()
        return super().__call__(*args, **kwargs)

    def launch(self, job_overrides, initial_job_idx: int):
        import submitit

        from experiments.sweep.slurm import LOST, install_quiet_watcher

        install_quiet_watcher()
        LOST.clear()
        executor = self._executor()
        # the arguments Hydra's launcher gives each job (see BaseSubmititLauncher.__call__)
        args = [
            (
                list(overrides),
                "hydra.sweep.dir",
                initial_job_idx + i,
                f"job_id_for_{initial_job_idx + i}",
                Singleton.get_state(),
            )
            for i, overrides in enumerate(job_overrides)
        ]
        for i, overrides in enumerate(job_overrides):
            log.info("\t#%d : %s", initial_job_idx + i, " ".join(overrides))
        refusal = io.StringIO()
        try:
            with contextlib.redirect_stderr(refusal):  # submitit prints sbatch's stderr before raising
                jobs = executor.map_array(self, *zip(*args))
        except submitit.core.utils.FailedJobError as err:
            lines = [line for line in (str(err) or refusal.getvalue()).splitlines() if line.strip()]
            print(
                f"attnlab: sbatch refused the sweep: {lines[-1].strip() if lines else err!r} "
                "(see hydra.launcher.* in conf/hydra/launcher/slurm.yaml)",
                file=sys.stderr,
            )
            raise SubmissionRefused(2) from None
        log.info("submitted job array %s (%d cells)", jobs[0].job_id.split("_")[0], len(jobs))
        return [self._outcome(job, list(overrides)) for job, overrides in zip(jobs, job_overrides)]

    def _executor(self):
        """The executor Hydra's launcher builds: the same parameters, under the same names."""
        import submitit

        params = dict(self.params)
        executor = submitit.AutoExecutor(
            folder=params.pop("submitit_folder"), cluster="slurm", slurm_max_num_timeout=params.pop("max_num_timeout")
        )
        base = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(**{k if k in base else f"slurm_{k}": v for k, v in params.items()})
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        return executor

    @staticmethod
    def _outcome(job, overrides: list[str]) -> JobReturn:
        """The job's JobReturn; a job that ended without one is named and counts as failed."""
        from submitit.core.utils import UncompletedJobError

        from experiments.sweep.slurm import LOST

        try:
            return job.results()[0]
        except UncompletedJobError:
            state = job.watcher.get_state(job.job_id, mode="cache")
            cell = " ".join(overrides) or "defaults"
            LOST.append(f"{cell}: job {job.job_id} ended ({state}) without a result (log: {job.paths.stdout})")
            log.error(
                "cell %s: SLURM job %s ended (%s) without a result; see %s", cell, job.job_id, state, job.paths.stdout
            )
            from experiments.training.single_run import BAD_OBJECTIVE

            return JobReturn(overrides=overrides, status=JobStatus.COMPLETED, _return_value=BAD_OBJECTIVE)
