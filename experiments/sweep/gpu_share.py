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

Compiling once per sweep, not once per cell (``share_compile_cache``): every cell of a multirun on
one machine directs Inductor's FX graph and AOTAutograd caches and Triton's kernel cache to
``<sweep dir>/.compile_cache/``, where flex's kernel-option probe also keeps its choices
(``variants.flex_options``), so the cells after the first load what it compiled. With K cells per
GPU each process starts ``cores / K`` compile workers (Inductor's default is one per core, up to 32,
in every process). A SLURM sweep, whose cells run on several machines, keeps torch's own caches.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from experiments.config.spec import Spec, freeze, thaw

log = logging.getLogger("attnlab")
SLOTS_DIR = ".gpu_slots"
#: the folder under a sweep's where its cells share compiled graphs and kernels
COMPILE_CACHE = ".compile_cache"
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


def on_held_gpu(spec: Spec) -> Spec:
    """The run's spec with ``trainer.devices`` the GPU this job holds (``shared_gpu``), if any; the recorded config
    keeps the configured value, as the Trainer's other runtime keywords do."""
    devices = spec.trainer.get("devices")
    held = trainer_devices(devices)
    if held is devices:
        return spec
    return replace(spec, trainer=replace(spec.trainer, node=freeze({**thaw(spec.trainer.node), "devices": held})))


def compile_workers(jobs_per_gpu: int, cores: int | None = None) -> int:
    """Inductor compile workers for one of ``jobs_per_gpu`` processes sharing this machine's cores."""
    cores = cores if cores is not None else len(os.sched_getaffinity(0))
    return max(1, cores // max(jobs_per_gpu, 1))


@contextlib.contextmanager
def share_compile_cache(sweep_dir: Path, jobs_per_gpu: int = 1) -> Iterator[dict[str, str]]:
    """For the ``with`` block, point this process's compile caches at ``<sweep_dir>/.compile_cache/`` (and, for
    K > 1 cells per GPU, its compile workers at cores / K); yields the environment it set, restored after."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    root = Path(sweep_dir) / COMPILE_CACHE
    env = {
        "TORCHINDUCTOR_CACHE_DIR": str(root / "inductor"),
        "TRITON_CACHE_DIR": str(root / "triton"),
        "TORCHINDUCTOR_FX_GRAPH_CACHE": "1",
        "TORCHINDUCTOR_AUTOGRAD_CACHE": "1",
    }
    # Inductor reads its settings when it is imported, which a joblib worker did for an earlier job.
    settings = {(inductor_config, "fx_graph_cache"): True, (functorch_config, "enable_autograd_cache"): True}
    if jobs_per_gpu > 1:
        env["TORCHINDUCTOR_COMPILE_THREADS"] = str(compile_workers(jobs_per_gpu))
        settings[(inductor_config, "compile_threads")] = compile_workers(jobs_per_gpu)
    saved_env = {name: os.environ.get(name) for name in env}
    saved = {key: getattr(*key) for key in settings}
    os.environ.update(env)
    for (module, name), value in settings.items():
        setattr(module, name, value)
    try:
        yield env
    finally:
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        for (module, name), value in saved.items():
            setattr(module, name, value)


@contextlib.contextmanager
def shared_gpu(spec: Spec, hydra_cfg: Any, multirun: bool) -> Iterator[int | None]:
    """A GPU slot for this job when ``jobs_per_gpu`` > 1 in a multirun on GPUs; otherwise nothing changes.
    Every cell of a multirun on one machine shares the sweep's compile caches (``share_compile_cache``).
    ``hydra_cfg``: Hydra's own config of this job (its sweep folder and job number)."""
    k = int(spec.sweep.jobs_per_gpu or 1)
    gpu_trainer = on_gpu(spec.trainer.node)
    with contextlib.ExitStack() as stack:
        if multirun and "SLURM_JOB_ID" not in os.environ:
            stack.enter_context(share_compile_cache(Path(hydra_cfg.sweep.dir), k if gpu_trainer else 1))
        with _gpu_slot(gpu_trainer, hydra_cfg, multirun, k) as gpu:
            yield gpu


@contextlib.contextmanager
def _gpu_slot(gpu_trainer: bool, hydra_cfg: Any, multirun: bool, k: int) -> Iterator[int | None]:
    if (
        not multirun or k <= 1 or not gpu_trainer or os.environ.get("LOCAL_RANK") or torch.cuda.device_count() < 1
    ):  # no GPU visible: the run's own checks refuse it, with a result
        yield None
        return
    with claim_gpu(Path(hydra_cfg.sweep.dir), int(hydra_cfg.job.num), k) as gpu:
        yield gpu
