"""Sweeps through ``hydra/launcher=slurm`` on a real SLURM cluster (one node, this machine, no accounting).

Run with ``make test-cluster`` (root on Debian; see ``tests/cluster/slurm-local``). Each test
submits a sweep of tiny CPU cells as a user would, and compares what the cluster produced
with the basic launcher's run of the same cells on this machine.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.experiments.sweep.test_sweeps import offline_runs
from tests.helpers.env import ENV
from tests.helpers.sweeps import QUIET, cell_with, results

pytestmark = pytest.mark.usefixtures("slurm_cluster")

# One CPU and 1 GB per cell, so the 2-core node runs two cells at once at most.
SLURM = [
    "hydra/launcher=slurm",
    "hydra.launcher.cpus_per_task=1",
    "hydra.launcher.mem_gb=1",
    "hydra.launcher.timeout_min=10",
]
# A cell long enough to be stopped mid-way: checkpoints every 20 steps, validation every 100.
LONG = [
    *(a for a in QUIET if not a.startswith(("trainer.max_steps", "trainer.val_check_interval", "logger="))),
    "trainer.val_check_interval=100",
    "checkpoint_every_n_steps=20",
    "logger=default",
]
METRICS = ("val/loss", "val/token_acc", "test/loss", "test/token_acc", "test/seq_acc")


def sweep_command(sweep_dir: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "experiments.train", "-m", *args, f"hydra.sweep.dir={sweep_dir}"]


def start(tmp_path: Path, name: str, *args: str) -> tuple[subprocess.Popen, Path]:
    """A sweep started in the background; its output goes to ``<name>.log``."""
    sweep_dir = tmp_path / name
    log = open(tmp_path / f"{name}.log", "w")
    proc = subprocess.Popen(
        sweep_command(sweep_dir, *args), cwd=tmp_path, env=ENV, stdout=log, stderr=subprocess.STDOUT, text=True
    )
    proc.log_path = tmp_path / f"{name}.log"
    return proc, sweep_dir


def finish(proc: subprocess.Popen, timeout: float = 600) -> str:
    proc.wait(timeout=timeout)
    return proc.log_path.read_text()


def squeue() -> list[tuple[str, str]]:
    """(job id, state) of every job and array task the cluster knows now."""
    out = subprocess.run(["squeue", "-h", "-r", "-o", "%i|%T"], capture_output=True, text=True, check=True).stdout
    return [tuple(line.split("|")) for line in out.split()]


def job_ids(sweep_dir: Path) -> list[str]:
    """The SLURM job ids of a sweep's cells: submitit names a folder after each."""
    return sorted(p.name for p in (sweep_dir / ".submitit").iterdir() if (p / f"{p.name}_submitted.pkl").exists())


def restarts(job_id: str) -> int:
    out = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, check=True).stdout
    return int(re.search(r"Restarts=(\d+)", out).group(1))


def metrics_of(found: dict[Path, dict]) -> dict[str, dict[str, float]]:
    return {folder.name: {k: r["metrics"][k] for k in METRICS} for folder, r in found.items()}


def wait_for(condition, proc: subprocess.Popen, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"the sweep ended before {what}:\n{proc.log_path.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


# -- a grid: every cell, equal to the basic launcher, failures alone, array_parallelism ----------------------
GRID = ["optim.lr=1e-3,-1,3e-3"]  # optim.lr=-1 fails its config check in the job
CANCELLED = "0.01"  # a fourth cell on SLURM, cancelled while it waits: its job ends without a result


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """The grid on SLURM one cell at a time (array_parallelism=1), squeue watched throughout,
    and the basic launcher's run of the same grid beside it."""
    tmp = tmp_path_factory.mktemp("grid")
    basic, basic_dir = start(tmp, "basic", *QUIET, *GRID)
    slurm, slurm_dir = start(
        tmp, "slurm", *QUIET, f"{GRID[0]},{CANCELLED}", *SLURM, "hydra.launcher.array_parallelism=1"
    )
    seen = []  # the states of the sweep's array tasks, at each look
    cancelled = False
    while slurm.poll() is None:
        array = {job.split("_")[0] for job in job_ids(slurm_dir)} if (slurm_dir / ".submitit").exists() else set()
        seen.append([state for job, state in squeue() if job.split("_")[0] in array])
        if array and not cancelled:  # the last array task is the last value of the sweep
            subprocess.run(["scancel", f"{min(array)}_3"], check=True)
            cancelled = True
        time.sleep(0.3)
    slurm_out, basic_out = finish(slurm), finish(basic)
    return {
        "slurm": (slurm.returncode, slurm_out, slurm_dir),
        "basic": (basic.returncode, basic_out, basic_dir),
        "seen": seen,
    }


def test_grid_cells_complete_and_equal_the_basic_launchers(grid) -> None:
    _, out, slurm_dir = grid["slurm"]
    _, _, basic_dir = grid["basic"]
    on_slurm, on_basic = results(slurm_dir), results(basic_dir)
    assert len(on_slurm) == len(on_basic) == 3, out[-3000:]
    completed = {f.name: r for f, r in on_slurm.items() if r["status"] == "completed"}
    assert sorted(completed) == sorted(f.name for f, r in on_basic.items() if r["status"] == "completed")
    assert sorted(r["config"]["optim.lr"] for r in completed.values()) == [1e-3, 3e-3]
    # same cells, same seeds, one thread each: the same numbers, whichever launcher ran them
    assert metrics_of({f: r for f, r in on_slurm.items() if f.name in completed}) == metrics_of(
        {f: r for f, r in on_basic.items() if f.name in completed}
    )
    assert len(job_ids(slurm_dir)) == 4, "one array task per cell"


def test_a_failing_cell_fails_alone_and_the_sweep_names_it(grid) -> None:
    code, out, slurm_dir = grid["slurm"]
    assert code == 1, out[-3000:]
    failed = {f.name: r for f, r in results(slurm_dir).items() if r["status"] != "completed"}
    assert len(failed) == 1 and all(r["config"]["optim.lr"] == -1 and "optim.lr" in r["error"] for r in failed.values())
    assert "2 completed, 1 failed" in out
    named = out.split("cells that did not complete:")[1].splitlines()[0]
    assert all(name in named for name in failed), named
    # the cancelled cell, which wrote no result, is named too
    assert f"optim.lr={CANCELLED}" in named and "without a result" in named, named


def test_array_parallelism_limits_the_cells_running_at_once(grid) -> None:
    seen = grid["seen"]
    running = [states.count("RUNNING") for states in seen]
    assert max(running) == 1, f"array_parallelism=1 but squeue showed {max(running)} cells running at once"
    # the limit held while others waited: some look saw one running and at least one pending
    assert any(states.count("RUNNING") == 1 and "PENDING" in states for states in seen)


def test_polling_without_accounting_is_quiet(grid) -> None:
    _, out, _ = grid["slurm"]
    assert "Bypassing sacct error" not in out
    assert out.count("sacct is unavailable") == 1


# -- preemption and the time limit ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The basic launcher's uninterrupted runs of the long cell, for any step count asked."""
    tmp = tmp_path_factory.mktemp("reference")
    runs: dict[int, tuple[subprocess.Popen, Path]] = {}

    def run(steps: int) -> subprocess.Popen:
        if steps not in runs:
            runs[steps] = start(tmp, f"steps{steps}", *LONG, "logger=none", f"trainer.max_steps={steps}")
        return runs[steps][0]

    def result(steps: int) -> dict:
        proc, sweep_dir = runs[steps]
        assert proc.wait(timeout=600) == 0, proc.log_path.read_text()[-3000:]
        (found,) = results(sweep_dir).values()
        return found

    run.result = result
    return run


def check_resumed(sweep_dir: Path, out: str, steps: int, expected: dict | None = None) -> dict:
    """The cell completed its ``steps`` by resuming from last.ckpt, in one W&B run, counted once; with ``expected``
    (an uninterrupted run's result), at that run's metrics."""
    ((cell, result),) = results(sweep_dir).items()
    assert result["status"] == "completed", result["error"]
    assert result["cost"]["steps"] == steps
    assert "resuming from" in (cell / "train.log").read_text(), "the requeued job resumed from last.ckpt"
    assert all(math.isfinite(result["metrics"][key]) for key in METRICS), result["metrics"]
    if expected is not None:  # exact resumption: the metrics an uninterrupted run reaches
        for key in METRICS:
            assert result["metrics"][key] == pytest.approx(expected["metrics"][key], abs=1e-6), key
    run_id = json.loads((cell / "run_state.json").read_text())["run_id"]
    assert result["run_id"] == run_id
    assert {run["id"] for run in offline_runs(cell)} == {run_id}, "every attempt logged to the same W&B run"
    assert len(offline_runs(cell)) >= 2
    assert re.search(r"sweep \S+: 1 completed in", out), "the summary counts the cell once"
    return result


def test_a_preempted_cell_resumes_from_last_ckpt_with_an_uninterrupted_runs_metrics(tmp_path: Path, reference) -> None:
    reference(400)
    proc, sweep_dir = start(tmp_path, "preempt", *LONG, "trainer.max_steps=400", *SLURM)
    wait_for(
        lambda: (
            (cell_with(sweep_dir, "trainer.max_steps=400") or tmp_path / "none")
            .joinpath("checkpoints", "last.ckpt")
            .exists()
        ),
        proc,
        "the first checkpoint",
    )
    (job,) = job_ids(sweep_dir)
    subprocess.run(["scontrol", "requeue", job], check=True)  # what a preempting scheduler does
    out = finish(proc)
    assert proc.returncode == 0, out[-3000:]
    assert restarts(job) == 1, "the job ran twice"
    result = check_resumed(sweep_dir, out, 400, reference.result(400))
    print(f"\npreempted cell: resumed, metrics {result['metrics']}")


def test_a_cell_reaching_its_time_limit_is_requeued_by_submitit_and_resumes(tmp_path: Path, reference) -> None:
    # SLURM checks limits every 30 s: with a 2-minute limit and signal_delay_s=30 the USR2
    # warning lands 60-90 s into the job (a 1-minute limit is no shorter test: its warning came 27 s and
    # 35 s into jobs here, whatever the delay, which can be before the cell's first checkpoint). The cell is
    # sized, from this machine's speed on the 400-step reference's steady step time, to need about 120 s of
    # training, so it cannot finish before it (train_seconds would not do: start-up and validation inflate it on
    # a short run, which sized a cell that finished in 35 s once the training step stopped reading the GPU).
    # In the job a step can take twice the reference's (one CPU, shared with what runs beside it): up to 8
    # requeues let such a cell finish instead of failing on submitit's count (a cell needing 4 attempts once
    # failed at max_num_timeout=3). A machine that sped up after the reference was timed (CI runs these tests
    # beside the fast tier, whose load ends) can finish the cell before the warning (5,700 steps in 54 s once):
    # it is sized again at twice the steps.
    # Exact resumption (an uninterrupted run's metrics) is the preempted cell's check above: the same resume
    # from last.ckpt, in a job SLURM stopped; a second uninterrupted run of this length would double the
    # test's two minutes of training.
    reference(400)
    seconds_per_step = reference.result(400)["cost"]["step_ms"] / 1000
    steps = 100 * math.ceil(120 / seconds_per_step / 100)
    limits = ["hydra.launcher.timeout_min=2", "hydra.launcher.signal_delay_s=30", "hydra.launcher.max_num_timeout=8"]
    for attempt in range(3):
        proc, sweep_dir = start(tmp_path, f"timeout{attempt}", *LONG, f"trainer.max_steps={steps}", *SLURM, *limits)
        out = finish(proc)
        assert proc.returncode == 0, out[-3000:]
        (job,) = job_ids(sweep_dir)
        submitit_log = (sweep_dir / ".submitit" / job / f"{job}_0_log.out").read_text()
        if "Caught signal SIGUSR2" in submitit_log or restarts(job):
            break
        steps *= 2  # finished before its time limit's warning
    # submitit caught the warning signal, saved the cell for a rerun and requeued it (SLURM then
    # stops the job at once, before submitit can log the requeue itself)
    assert "Caught signal SIGUSR2" in submitit_log and "this job is timed-out" in submitit_log, submitit_log[-3000:]
    assert "Calling checkpoint method" in submitit_log
    assert restarts(job) >= 1
    result = check_resumed(sweep_dir, out, steps)
    sized = f"{steps} steps (sized {attempt + 1} time(s))"
    print(f"\ntime-limited cell: {sized}, {restarts(job)} requeue(s), metrics {result['metrics']}")


# -- requests the cluster cannot meet ------------------------------------------------------------------------
REFUSED = {  # request -> what its one line says; the first two are checked against sinfo, the last by sbatch
    "hydra.launcher.partition=gpus": "hydra.launcher.partition='gpus' is not a partition",
    "hydra.launcher.gpus_per_node=4": "hydra.launcher.gpus_per_node=4 asks for 4 GPUs",
    "hydra.launcher.constraint=no_such_feature": "sbatch refused the sweep",
}


def test_a_request_the_cluster_cannot_meet_is_one_line_naming_the_key(tmp_path: Path) -> None:
    procs = {}
    for i, request in enumerate(REFUSED):  # all at once: none gets past starting up
        sweep_dir = tmp_path / f"request{i}"
        procs[request] = (
            subprocess.Popen(
                sweep_command(sweep_dir, *QUIET, *SLURM, request),
                cwd=tmp_path,
                env=ENV,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            ),
            sweep_dir,
        )
    for request, (proc, sweep_dir) in procs.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 2, err[-3000:]
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and REFUSED[request] in lines[0], err[-3000:]
        assert "Traceback" not in out + err
        assert not list(sweep_dir.rglob("result.json")), "nothing ran"
