"""Sweeps on SLURM: what a cell asks the cluster for, checks before submitting, and quiet waiting.

``hydra/launcher=slurm`` uses ``hydra_plugins.attnlab_launcher.slurm_launcher.SlurmLauncher``
(Hydra finds launchers only in the ``hydra_plugins`` package), Hydra's submitit launcher
with three changes, made of the pieces here:

- a request the cluster cannot meet (an unknown partition, more GPUs, CPUs or memory
  than any node of the partition has) stops the sweep in one line naming the key,
  before anything is submitted (:func:`check_request`, called from ``experiments.sweep.grid``);
  whatever ``sbatch`` still refuses is reported the same way, without submitit's traceback;
- on a cluster without accounting (``sacct`` answers nothing) the jobs are followed with
  ``squeue``, after one note, instead of a ``Bypassing sacct error`` warning per poll;
- a cell whose job ended without a result (cancelled, killed for memory, out of
  requeues) is named in the sweep summary and counts as failed, instead of stopping
  the sweep with a traceback while other cells still run (:data:`LOST`).

Timeouts and preemption are submitit's: ``signal_delay_s`` before the time limit SLURM sends
USR2, submitit requeues the job (the launcher's ``checkpoint``: the same cell again) and the
cell resumes from ``checkpoints/last.ckpt`` under the same W&B run (experiments/train.py).
"""

from __future__ import annotations

import difflib
import logging
import re
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("attnlab")
GPU_ACCELERATORS = ("gpu", "cuda")

LOST: list[str] = []  # cells of the current sweep whose job ended without a result, for the summary


class ClusterRequestError(ValueError):
    """A request the cluster cannot meet; the message names the launcher key, the value and the limit."""


# -- what a cell asks for ------------------------------------------------------------------------------
def gpus_to_request(accelerator: str, devices: Any) -> int | None:
    """GPUs per node for a cell: ``trainer.devices`` when the trainer runs on GPUs, else none.

    ``accelerator=auto`` (trainer=ddp) asks for GPUs only on a cluster that has some, so
    a CPU grid submits no ``--gpus-per-node`` at all (SLURM refuses a GPU request on a
    cluster without GPUs: "Invalid generic resource (gres) specification").
    """
    accelerator = str(accelerator).lower()
    if accelerator not in (*GPU_ACCELERATORS, "auto") or not isinstance(devices, int) or devices < 1:
        return None
    if accelerator == "auto" and not any(node.gpus for node in cluster_nodes()):
        return None
    return devices


# -- what the cluster has ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Node:
    partition: str
    default: bool  # the cluster's default partition
    cpus: int
    memory_mb: int
    gpus: int


def parse_gres_gpus(gres: str) -> int:
    """GPUs in a node's gres string: 'gpu:4', 'gpu:a100:4(S:0-1)', 'gpu:2,shard:8', '(null)'."""
    total = 0
    for item in gres.split(","):
        match = re.match(r"gpu(?::[^:(]+)?:(\d+)", item.strip())
        if match:
            total += int(match.group(1))
    return total


def parse_sinfo(text: str) -> list[Node]:
    """Lines of ``sinfo -h -N -o '%P|%c|%m|%G'`` -> one Node per node and partition."""
    nodes = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 4 or not parts[0]:
            continue
        partition, cpus, memory, gres = parts
        try:
            nodes.append(
                Node(
                    partition.rstrip("*"),
                    partition.endswith("*"),
                    int(cpus.rstrip("+")),
                    int(memory.rstrip("+")),
                    parse_gres_gpus(gres),
                )
            )
        except ValueError:
            continue  # a node line sinfo could not fill in (down, unknown): not evidence either way
    return nodes


def cluster_nodes() -> list[Node]:
    """The nodes ``sinfo`` reports; empty when it is missing or does not answer."""
    if shutil.which("sinfo") is None:
        return []
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%P|%c|%m|%G"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return parse_sinfo(out)


def check_request(launcher: Mapping[str, Any], nodes: list[Node]) -> None:
    """Refuse, in one line naming the key, what no node of the chosen partition can give."""
    if not nodes:
        return  # nothing known about the cluster: sbatch will judge
    partitions = sorted({n.partition for n in nodes})
    partition = launcher.get("partition")
    if partition is not None:
        if str(partition) not in partitions:
            near = difflib.get_close_matches(str(partition), partitions, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise ClusterRequestError(
                f"hydra.launcher.partition={partition!r} is not a partition of this "
                f"cluster; choose one of {partitions}{hint}"
            )
        chosen = [n for n in nodes if n.partition == str(partition)]
    else:
        chosen = [n for n in nodes if n.default]
        partition = chosen[0].partition if chosen else None
    if not chosen:
        return  # no default partition: sbatch asks for one
    where = f"partition {partition!r}"
    tasks = int(launcher.get("tasks_per_node") or 1)
    wanted_nodes = int(launcher.get("nodes") or 1)
    if wanted_nodes > len(chosen):
        raise ClusterRequestError(f"hydra.launcher.nodes={wanted_nodes} is more nodes than {where} has ({len(chosen)})")
    gpus = launcher.get("gpus_per_node")
    if gpus is None and launcher.get("gpus_per_task"):
        gpus, key = int(launcher["gpus_per_task"]) * tasks, "gpus_per_task"
    else:
        key = "gpus_per_node"
    most = max(n.gpus for n in chosen)
    if gpus and int(gpus) > most:
        raise ClusterRequestError(
            f"hydra.launcher.{key}={launcher.get(key)} asks for {gpus} GPUs per node; "
            f"no node of {where} has more than {most}"
        )
    cpus = launcher.get("cpus_per_task")
    most = max(n.cpus for n in chosen)
    if cpus and int(cpus) * tasks > most:
        raise ClusterRequestError(
            f"hydra.launcher.cpus_per_task={cpus} x tasks_per_node={tasks} asks for "
            f"{int(cpus) * tasks} CPUs per node; no node of {where} has more than {most}"
        )
    mem_gb = launcher.get("mem_gb")
    most = max(n.memory_mb for n in chosen)
    if mem_gb and float(mem_gb) * 1024 > most:
        raise ClusterRequestError(
            f"hydra.launcher.mem_gb={mem_gb} is more memory than any node of {where} has ({most / 1024:.1f} GB)"
        )


# -- following the jobs ---------------------------------------------------------------------------------
NOT_LISTED = "no longer listed by squeue"


def squeue_states(text: str) -> dict[str, str]:
    """Lines of ``squeue -h -r --states=all -o '%i|%T'`` -> {job id: state}; '12_3' for an array task."""
    states = {}
    for line in text.splitlines():
        job_id, _, state = line.strip().partition("|")
        if job_id and state:
            states[job_id] = state
    return states


def _quiet_watcher_class():
    from submitit.slurm.slurm import SlurmInfoWatcher

    class QuietWatcher(SlurmInfoWatcher):
        """submitit's watcher, falling back to ``squeue`` where ``sacct`` has no accounting to read.

        submitit asks ``sacct`` for the jobs' states on every poll and warns on each failure;
        without accounting that is one warning every few seconds for the whole sweep. The
        first failure here gives one note; from then on ``squeue`` answers, which knows
        running, pending and recently ended jobs (MinJobAge, 300 s by default).
        """

        use_squeue = False

        def update(self) -> None:
            if self.use_squeue or not _update_from_sacct(self):
                _update_from_squeue(self)

    return QuietWatcher


def _update_from_sacct(watcher) -> bool:
    """One poll of ``sacct``, as submitit's own watcher makes it; False where sacct failed, after one note: from
    then on every watcher of the class asks ``squeue``."""
    command = watcher._make_command()
    if command is None:
        return True
    watcher._num_calls += 1
    try:
        watcher._output = subprocess.check_output(command, shell=False, stderr=subprocess.PIPE)
    except (OSError, subprocess.CalledProcessError) as err:
        reason = getattr(err, "stderr", b"") or str(err).encode()
        reason = reason.decode(errors="replace").strip().splitlines()[-1:] or [""]
        log.info("sacct is unavailable here (%s); following the jobs with squeue", reason[0])
        type(watcher).use_squeue = True
        watcher._delay_s = min(watcher._delay_s, 60)  # squeue is cheap: look at least every minute
        return False
    watcher._info_dict.update(watcher.read_info(watcher._output))
    _finish_update(watcher)
    return True


def _update_from_squeue(watcher) -> None:
    """One poll of ``squeue`` for the watcher's registered jobs that have not finished."""
    ids = sorted({x.split("_")[0] for x in watcher._registered - watcher._finished})
    if not ids:
        return
    watcher._num_calls += 1
    try:
        out = subprocess.run(
            ["squeue", "-h", "-r", "--states=all", "-o", "%i|%T", "-j", ",".join(ids)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return  # the controller did not answer this time; the result files still say when a job ends
    states = squeue_states(out)
    for job_id in watcher._registered - watcher._finished:
        # squeue lists every job the controller holds, pending ones included; one it no
        # longer lists has ended (a waiting array task cancelled, or past MinJobAge)
        state = states.get(job_id, NOT_LISTED)
        watcher._info_dict[job_id] = {"JobID": job_id, "State": state}
    _finish_update(watcher)


def _finish_update(watcher) -> None:
    """After a poll: when it was made, and which registered jobs it found done."""
    watcher._last_status_check = time.time()
    for job_id in watcher._registered - watcher._finished:
        if watcher.is_done(job_id, mode="cache"):
            watcher._finished.add(job_id)


def install_quiet_watcher() -> None:
    """Make every SlurmJob of this process follow its state with :class:`QuietWatcher`."""
    from submitit.slurm.slurm import SlurmJob

    if type(SlurmJob.watcher).__name__ != "QuietWatcher":
        SlurmJob.watcher = _quiet_watcher_class()(delay_s=SlurmJob.watcher._delay_s)
