"""Several cells of a sweep at once on each GPU: ``jobs_per_gpu=K``.

A small model leaves a GPU idle most of the time (a step is mostly Python and kernel
launches), so K processes sharing it finish a grid about K times sooner until the GPU is
busy. With ``hydra/launcher=joblib`` each job claims one of K slots on one of the visible
GPUs before it builds anything:

- the slot is a lock file under ``<sweep dir>/.gpu_slots/``, held while the job runs, so at
  most K jobs use a GPU at any time, whatever ``hydra.launcher.n_jobs`` is (a job finding
  every slot taken waits for one);
- job ``n`` tries slot ``n mod (K x GPUs)`` first, on GPU ``slot mod GPUs``: round-robin;
- the job's process is pinned there (``torch.cuda.set_device`` and the trainer's device
  list; a joblib worker has CUDA initialised by its previous job, so CUDA_VISIBLE_DEVICES
  would not move it) and its caching allocator is capped at 1/K of the GPU's memory
  (``torch.cuda.set_per_process_memory_fraction``): one cell that outgrows its share fails
  with an out-of-memory error of its own instead of starving the others.

Each process computes exactly what it would alone (the GPU's kernels do not depend on
which other processes share it), so results equal running the cells one after another.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger("attnlab")
SLOTS_DIR = ".gpu_slots"
_PINNED: dict[str, int | None] = {"gpu": None}


def on_gpu(trainer: Any) -> bool:
    """Whether the trainer config trains on CUDA (``gpu``/``cuda``, or ``auto`` where CUDA is visible)."""
    accelerator = str(trainer.get("accelerator", "cpu"))
    return accelerator in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.device_count() > 0)


def slot_order(job_num: int, jobs_per_gpu: int, gpus: int) -> list[tuple[int, int]]:
    """(slot, gpu) in the order job ``job_num`` tries them: its round-robin slot first."""
    slots = jobs_per_gpu * gpus
    first = job_num % slots
    return [((first + i) % slots, (first + i) % slots % gpus) for i in range(slots)]


@contextlib.contextmanager
def claim_gpu(sweep_dir: Path, job_num: int, jobs_per_gpu: int, poll_seconds: float = 0.5) -> Iterator[int]:
    """Hold one of ``jobs_per_gpu`` slots of a visible GPU for the ``with`` block; yields the GPU index."""
    gpus = torch.cuda.device_count()
    if gpus < 1:
        raise RuntimeError(f"jobs_per_gpu={jobs_per_gpu} needs a visible CUDA device; none is visible")
    folder = Path(sweep_dir) / SLOTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    held = None
    while held is None:
        for slot, gpu in slot_order(job_num, jobs_per_gpu, gpus):
            handle = open(folder / f"slot{slot}.lock", "w")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            held = (handle, gpu)
            break
        else:
            time.sleep(poll_seconds)  # more jobs at once than K x GPUs: wait for a cell to finish
    handle, gpu = held
    try:
        torch.cuda.set_device(gpu)
        torch.cuda.set_per_process_memory_fraction(1.0 / jobs_per_gpu, gpu)
        _PINNED["gpu"] = gpu
        log.info(
            "job %d on GPU %d (one of %d cells at once there, %.0f%% of its memory each)",
            job_num,
            gpu,
            jobs_per_gpu,
            100.0 / jobs_per_gpu,
        )
        yield gpu
    finally:
        _PINNED["gpu"] = None
        with contextlib.suppress(RuntimeError):
            torch.cuda.set_per_process_memory_fraction(1.0, gpu)  # the worker's next job sets its own
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def trainer_devices(devices: Any) -> Any:
    """The trainer's ``devices``: the GPU this job holds, if any, else the configured value."""
    gpu = _PINNED["gpu"]
    return [gpu] if gpu is not None else devices


@contextlib.contextmanager
def shared_gpu(cfg: Any, hydra_cfg: Any, multirun: bool) -> Iterator[int | None]:
    """A GPU slot for this job when ``jobs_per_gpu`` > 1 in a multirun on GPUs; otherwise nothing changes."""
    k = int(cfg.get("jobs_per_gpu", 1) or 1)
    if (
        not multirun
        or k <= 1
        or not on_gpu(cfg.trainer)
        or os.environ.get("LOCAL_RANK")
        or torch.cuda.device_count() < 1
    ):  # no GPU visible: the run's own checks refuse it, with a result
        yield None
        return
    with claim_gpu(Path(hydra_cfg.sweep.dir), int(hydra_cfg.job.num), k) as gpu:
        yield gpu
