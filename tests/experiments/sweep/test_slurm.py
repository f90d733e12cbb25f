"""The SLURM launcher's pieces without a cluster: what a cell asks for, the checks against what
``sinfo`` reports, and quiet polling where ``sacct`` has no accounting (tests/cluster/ runs them
on a real cluster)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from experiments.sweep import slurm
from experiments.sweep.slurm import (
    ClusterRequestError,
    Node,
    check_request,
    gpus_to_request,
    parse_gres_gpus,
    parse_sinfo,
    squeue_states,
)
from tests.helpers.sweeps import hydra_config

SINFO = """gpu|64|512000|gpu:a100:4(S:0-1)
gpu|64|512000|gpu:a100:4(S:0-1)
cpu*|32|128000|(null)
cpu*|32|128000|(null)
cpu*|32|128000|(null)
big|128|1024000+|gpu:2,shard:8
"""
NODES = parse_sinfo(SINFO)


@pytest.mark.parametrize(
    "gres, gpus",
    [
        ("(null)", 0),
        ("gpu:4", 4),
        ("gpu:a100:4(S:0-1)", 4),
        ("gpu:2,shard:8", 2),
        ("gpu:a100:2,gpu:v100:1", 3),
        ("shard:8", 0),
    ],
)
def test_gpus_are_read_from_any_gres_spelling(gres, gpus) -> None:
    assert parse_gres_gpus(gres) == gpus


def test_sinfo_lines_become_nodes_with_the_default_partition_marked() -> None:
    assert len(NODES) == 6
    assert NODES[0] == Node("gpu", False, 64, 512000, 4)
    assert NODES[2] == Node("cpu", True, 32, 128000, 0)
    assert NODES[5] == Node("big", False, 128, 1024000, 2)


@pytest.mark.parametrize(
    "request_, named",
    [
        (
            {"partition": "gpus"},
            "hydra.launcher.partition='gpus' is not a partition of this cluster; choose one of "
            "['big', 'cpu', 'gpu']; did you mean 'gpu'?",
        ),
        (
            {"gpus_per_node": 1},
            "hydra.launcher.gpus_per_node=1 asks for 1 GPUs per node; no node of partition 'cpu' has more than 0",
        ),
        ({"partition": "gpu", "gpus_per_node": 8}, "no node of partition 'gpu' has more than 4"),
        ({"partition": "gpu", "gpus_per_task": 2, "tasks_per_node": 4}, "hydra.launcher.gpus_per_task=2 asks for 8"),
        (
            {"cpus_per_task": 8, "tasks_per_node": 8},
            "cpus_per_task=8 x tasks_per_node=8 asks for 64 CPUs per node; no node of partition 'cpu' has more than 32",
        ),
        ({"mem_gb": 200}, "hydra.launcher.mem_gb=200 is more memory than any node of partition 'cpu' has (125.0 GB)"),
        ({"partition": "gpu", "nodes": 3}, "hydra.launcher.nodes=3 is more nodes than partition 'gpu' has (2)"),
    ],
)
def test_a_request_no_node_can_meet_names_the_key(request_, named) -> None:
    with pytest.raises(ClusterRequestError) as err:
        check_request(request_, NODES)
    assert named in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "request_",
    [
        {},
        {"partition": "gpu", "gpus_per_node": 4, "cpus_per_task": 16, "tasks_per_node": 4, "mem_gb": 500},
        {"cpus_per_task": 32, "mem_gb": 125, "nodes": 3},
        {"partition": "big", "gpus_per_node": 2},
    ],
)
def test_a_request_some_node_can_meet_passes(request_) -> None:
    check_request(request_, NODES)


def test_nothing_is_judged_without_sinfo() -> None:
    check_request({"partition": "anything", "gpus_per_node": 99}, [])


def test_gpus_are_requested_only_for_a_gpu_trainer(monkeypatch) -> None:
    monkeypatch.setattr(slurm, "cluster_nodes", lambda: [n for n in NODES if n.partition == "cpu"])
    assert gpus_to_request("cpu", 1) is None and gpus_to_request("cpu", 4) is None
    assert gpus_to_request("gpu", 2) == 2 and gpus_to_request("cuda", 1) == 1
    assert gpus_to_request("auto", 2) is None, "auto on a cluster without GPUs runs on CPUs"
    monkeypatch.setattr(slurm, "cluster_nodes", lambda: NODES)
    assert gpus_to_request("auto", 2) == 2 and gpus_to_request("cpu", 2) is None
    assert gpus_to_request("gpu", "auto") is None, "a device list or 'auto' leaves the request to the user"


def test_the_slurm_launcher_config_asks_gpus_from_the_trainer(monkeypatch) -> None:
    monkeypatch.setattr(slurm, "cluster_nodes", lambda: [])
    assert hydra_config(["hydra/launcher=slurm"]).hydra.launcher.gpus_per_node is None
    assert (
        hydra_config(["hydra/launcher=slurm", "trainer=ddp", "trainer.accelerator=cpu"]).hydra.launcher.gpus_per_node
        is None
    )
    assert hydra_config(["hydra/launcher=slurm", "trainer=gpu", "trainer.devices=2"]).hydra.launcher.gpus_per_node == 2
    assert hydra_config(["hydra/launcher=slurm", "hydra.launcher.gpus_per_node=3"]).hydra.launcher.gpus_per_node == 3


def test_squeue_lines_give_each_array_tasks_state() -> None:
    out = "12_0|COMPLETED\n12_1|RUNNING\n12_[2-3%1]|PENDING\n13|REQUEUED\n\n"
    assert squeue_states(out) == {"12_0": "COMPLETED", "12_1": "RUNNING", "12_[2-3%1]": "PENDING", "13": "REQUEUED"}


def fake_commands(folder: Path, squeue_out: str) -> None:
    """sacct as on a cluster without accounting; squeue printing ``squeue_out``."""
    for name, body in (
        ("sacct", 'echo "Slurm accounting storage is disabled" >&2; exit 1'),
        ("squeue", f"printf '{squeue_out}'"),
    ):
        script = folder / name
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(0o755)


def test_without_accounting_jobs_are_followed_with_squeue_after_one_note(tmp_path, monkeypatch, caplog) -> None:
    pytest.importorskip("submitit")
    fake_commands(tmp_path, "7_0|COMPLETED\\n7_1|RUNNING\\n")  # 7_2: cancelled while waiting, not listed
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    watcher_class = slurm._quiet_watcher_class()
    monkeypatch.setattr(watcher_class, "use_squeue", False)
    watcher = watcher_class(delay_s=600)
    with caplog.at_level(logging.INFO, logger="attnlab"):
        for _ in range(5):
            watcher.update()
        states = [watcher.get_state(job, mode="cache") for job in ("7_0", "7_1")]
    assert states == ["UNKNOWN", "UNKNOWN"], "nothing registered yet: nothing asked"
    for job in ("7_0", "7_1", "7_2"):
        watcher.register_job(job)
    with caplog.at_level(logging.INFO, logger="attnlab"):
        for _ in range(5):
            watcher.update()
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == 1 and "sacct is unavailable" in notes[0] and "accounting storage is disabled" in notes[0]
    assert watcher.get_state("7_0", mode="cache") == "COMPLETED" and watcher.is_done("7_0", mode="cache")
    assert watcher.get_state("7_1", mode="cache") == "RUNNING" and not watcher.is_done("7_1", mode="cache")
    assert watcher.is_done("7_2", mode="cache"), "a registered job squeue no longer lists has ended"
    assert watcher.get_state("7_2", mode="cache") == slurm.NOT_LISTED
    assert watcher.num_calls == 6, "one sacct call, then squeue on each of the five polls"
