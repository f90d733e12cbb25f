"""``jobs_per_gpu``: K cells at once per GPU, each pinned to one GPU with 1/K of its memory, results
as if run one after another."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
import torch

from experiments.config.spec import build_spec
from experiments.sweep import gpu_share
from tests.helpers.cli import train_cli
from tests.helpers.config import TINY
from tests.helpers.paths import ROOT


@pytest.fixture
def fake_gpus(monkeypatch):
    """Two visible GPUs on a CPU machine: what each job asked CUDA for."""
    asked: list[tuple[str, int, float | None]] = []
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", lambda gpu: asked.append(("device", gpu, None)))
    monkeypatch.setattr(
        torch.cuda, "set_per_process_memory_fraction", lambda fraction, gpu: asked.append(("memory", gpu, fraction))
    )
    return asked


def test_jobs_are_pinned_round_robin_with_a_share_of_memory_each(tmp_path, fake_gpus) -> None:
    k, gpus = 2, 2
    with (
        gpu_share.claim_gpu(tmp_path, 0, k) as a,
        gpu_share.claim_gpu(tmp_path, 1, k) as b,
        gpu_share.claim_gpu(tmp_path, 2, k) as c,
        gpu_share.claim_gpu(tmp_path, 3, k) as d,
    ):
        assert [a, b, c, d] == [n % gpus for n in range(4)]  # round-robin over the visible GPUs
        assert gpu_share.trainer_devices(1) == [d]  # Lightning trains on the held GPU, not on GPU 0
        # set_device then a memory share of 1/K, on the same GPU, for every job
        pinned = [(gpu, frac) for kind, gpu, frac in fake_gpus if kind == "memory"]
        assert pinned == [(n % gpus, 1 / k) for n in range(4)]
        assert [gpu for kind, gpu, _ in fake_gpus if kind == "device"] == [n % gpus for n in range(4)]
    assert gpu_share.trainer_devices(1) == 1  # released: the configured devices again


def test_a_job_finding_every_slot_taken_waits_for_one(tmp_path, fake_gpus) -> None:
    got: list[int] = []

    def fifth() -> None:
        with gpu_share.claim_gpu(tmp_path, 4, 2, poll_seconds=0.05) as gpu:
            got.append(gpu)

    with gpu_share.claim_gpu(tmp_path, 0, 2), gpu_share.claim_gpu(tmp_path, 2, 2):
        with gpu_share.claim_gpu(tmp_path, 1, 2), gpu_share.claim_gpu(tmp_path, 3, 2) as freed:
            waiter = threading.Thread(target=fifth)
            waiter.start()
            time.sleep(0.3)
            assert not got, "two cells already run on each GPU; a fifth must wait"
        waiter.join(timeout=10)
    assert got == [freed]  # the slot that came free, on its GPU


def test_a_cpu_trainer_or_a_single_job_per_gpu_claims_nothing(tmp_path, fake_gpus) -> None:
    from omegaconf import OmegaConf

    from tests.helpers.config import compose

    hydra_cfg = OmegaConf.create({"sweep": {"dir": str(tmp_path)}, "job": {"num": 0}})
    for overrides, multirun in (
        (["jobs_per_gpu=2"], True),
        (["trainer=gpu"], True),
        (["trainer=gpu", "jobs_per_gpu=2"], False),
    ):
        with gpu_share.shared_gpu(build_spec(compose(overrides)), hydra_cfg, multirun) as gpu:
            assert gpu is None, overrides
    assert not fake_gpus
    with gpu_share.shared_gpu(build_spec(compose(["trainer=gpu", "jobs_per_gpu=2"])), hydra_cfg, True) as gpu:
        assert gpu == 0 and fake_gpus[-1] == ("memory", 0, 0.5)


def multirun(sweep_dir: Path, *args: str) -> dict[str, dict]:
    # two cells: with two jobs at a time, both run at once
    overrides = [*TINY, "trainer.max_steps=6", "num_threads=1", "attention=soft,multihead", "position=rope"]
    proc = train_cli("-m", *overrides, *args, f"hydra.sweep.dir={sweep_dir}", cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = [json.loads(p.read_text()) for p in sweep_dir.rglob("result.json")]
    return {f"{r['attention']}+{r['position']}": r for r in results}


@pytest.mark.slow
def test_cells_run_two_at_a_time_equal_the_cells_run_one_after_another(tmp_path) -> None:
    # One intra-op thread each: a CPU reduction over more threads adds in another order; on a GPU
    # each process's kernels are the same whatever shares the device.
    alone = multirun(tmp_path / "sequential")
    shared = multirun(tmp_path / "two", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "jobs_per_gpu=2")
    assert len(alone) == 2 and alone.keys() == shared.keys()
    for cell, result in alone.items():
        assert result["status"] == shared[cell]["status"] == "completed"
        assert result["metrics"] == shared[cell]["metrics"], cell
        assert result["config_hash"] == shared[cell]["config_hash"], "jobs_per_gpu must not name a different cell"
