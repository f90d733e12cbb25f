"""Nothing lost (experiments/training/cell_contract.py): each fault a run meets leaves a result that says what
happened, and never replaces a better one; the report reads a folder as what it is."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnlab.run_folders import LOCK
from tests.helpers.cli import train_cli
from tests.helpers.config import TINY
from tests.helpers.env import ENV, LIMITED_FILES_ENV
from tests.helpers.warm import Started, start_module

QUICK = [*TINY, "num_threads=1", "logger=csv", "optim.warmup_steps=0"]
LONG = ["trainer.max_steps=100000", "trainer.val_check_interval=20", "checkpoint_every_n_steps=10"]


def _train(run_dir: Path, *overrides: str) -> Started | subprocess.Popen:
    """The run started in the background from the warm Python, Ctrl-C as a terminal sends it; each test signals
    it once it is at work (a checkpoint written, a continuation's fit begun)."""
    return start_module(
        "experiments.train", *QUICK, *overrides, f"hydra.run.dir={run_dir}", cwd=run_dir.parent, env=ENV
    )


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 240) -> None:
    began = time.time()
    while not path.exists():
        assert proc.poll() is None, f"the run ended before {path} appeared: {proc.communicate()[1][-2000:]}"
        assert time.time() - began < timeout, f"{path} did not appear"
        time.sleep(0.05)


@pytest.mark.slow
# the handler's any-delay rule itself: tests/experiments/training/test_stop_guard.py
@pytest.mark.parametrize("delay", [0.01])
def test_a_second_ctrl_c_at_any_delay_leaves_an_interrupted_result(tmp_path: Path, delay: float) -> None:
    run_dir = tmp_path / "run"
    proc = _train(run_dir, *LONG)
    _wait_for(run_dir / "checkpoints" / "last.ckpt", proc)
    proc.send_signal(signal.SIGINT)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=240)
    # 130 (handled) or killed by SIGINT itself (a second Ctrl-C after the record was written): both read as Ctrl-C
    assert proc.returncode in (130, -signal.SIGINT), err[-2000:]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "failed" and result["interrupted"] and result["stop"]["reason"] == "SIGINT"
    assert "experiments.train" in result["resume"] and f"hydra.run.dir={run_dir}" in result["resume"]
    assert "Traceback" not in err, err[-2000:]


@pytest.mark.slow
def test_sigterm_during_a_continuation_keeps_the_completed_result(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first = _train(run_dir)
    first.communicate(timeout=240)
    assert first.returncode == 0
    completed = json.loads((run_dir / "result.json").read_text())
    # a write a kill cut short: the next writer of the folder removes it
    partial = run_dir / "checkpoints" / ".last.ckpt.k1ll3d.tmp"
    partial.write_bytes(b"cut")
    proc = _train(run_dir, "trainer.max_steps=100000")  # a raised budget: the same computation continues
    began = time.time()
    while "resuming from" not in (run_dir / "train.log").read_text():  # the fit of the continuation has begun
        assert proc.poll() is None and time.time() - began < 240, proc.communicate()[1][-2000:]
        time.sleep(0.05)
    time.sleep(2.0)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=240)
    assert proc.returncode == 143
    kept = json.loads((run_dir / "result.json").read_text())
    assert kept == completed, "the completed result stays until the continuation completes"
    ending = json.loads((run_dir / "continuation.json").read_text())
    assert ending["status"] == "failed" and ending["stop"]["reason"] == "SIGTERM"
    assert ending["config"]["trainer.max_steps"] == 100000
    assert not partial.exists()


def test_the_report_leaves_out_a_run_whose_folder_a_live_process_writes(tmp_path: Path) -> None:
    from analysis.data.collect import collect
    from tests.helpers.results import result_dict, write_result

    for seed in (0, 1):
        write_result(tmp_path / f"s{seed}", result_dict("reverse", "soft", "none", seed, metrics={"test/loss": 1.0}))
    # seed 1's folder is being extended by a live process (this one): its result.json is an earlier one
    (tmp_path / "s1" / LOCK).write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}))
    runs = collect([tmp_path])
    assert list(runs.runs["seed"]) == [0]
    (running,) = runs.dropped[runs.dropped["status"] == "running"].itertuples(index=False)
    assert running.source == str(tmp_path / "s1") and f"process {os.getpid()}" in running.reason


def test_a_lock_left_by_a_killed_writer_does_not_hide_its_result(tmp_path: Path) -> None:
    from analysis.data.collect import collect
    from tests.helpers.results import result_dict, write_result

    write_result(tmp_path / "s0", result_dict("reverse", "soft", "none", 0, metrics={"test/loss": 1.0}))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / "s0" / LOCK).write_text(json.dumps({"pid": int(dead.stdout), "host": socket.gethostname()}))
    assert list(collect([tmp_path]).runs["seed"]) == [0]


def test_a_completed_run_without_metrics_csv_is_named_in_a_note(tmp_path: Path) -> None:
    import pandas as pd

    from analysis.data.curves import learning_curves, without_curves

    logged, bare = tmp_path / "logged", tmp_path / "bare"
    (logged / "csv").mkdir(parents=True)
    (logged / "csv" / "metrics.csv").write_text("step,val/loss\n10,2.0\n20,1.5\n")
    bare.mkdir()
    frame = pd.DataFrame(
        {
            "run_id": ["a", "b"],
            "task": "reverse",
            "attention": "soft",
            "position": "none",
            "seed": [0, 1],
            "status": "completed",
            "run_dir": [str(logged), str(bare)],
            "cell": "c",
        }
    )
    curves = learning_curves(frame)
    assert set(curves["run_id"]) == {"a"}
    assert without_curves(curves, frame) == [str(bare)]


def test_a_partial_write_is_removed_when_the_folder_is_taken(tmp_path: Path) -> None:
    from experiments.training.cell_contract import writing

    (tmp_path / "checkpoints").mkdir()
    kept = [tmp_path / "checkpoints" / "last.ckpt", tmp_path / "result.json"]
    cut = [tmp_path / "checkpoints" / ".last.ckpt.a1b2c3.tmp", tmp_path / ".result.json.x9y8.tmp"]
    for path in kept + cut:
        path.write_bytes(b"x")
    with writing(tmp_path):
        assert [p.exists() for p in kept + cut] == [True, True, False, False]


@pytest.mark.slow
def test_under_a_file_size_limit_hydras_config_is_whole_or_absent(tmp_path: Path) -> None:
    import yaml

    run_dir = tmp_path / "run"
    command = [sys.executable, "-m", "experiments.train", *QUICK, f"hydra.run.dir={run_dir}"]
    # 4 KiB: the resolved config (hydra.yaml is larger) cannot be written whole
    proc = subprocess.run(
        ["bash", "-c", 'ulimit -f 4 && exec "$@"', "bash", *command],
        cwd=tmp_path, env=LIMITED_FILES_ENV, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    # refused by the preflight (the limit is below Hydra's config files) or, past it, when the write fails
    assert lines[-1].startswith("attnlab: "), proc.stderr[-2000:]
    assert "file too large" in lines[-1] or "file size limit (ulimit -f)" in lines[-1], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    for saved in (run_dir / ".hydra").glob("*"):
        assert not saved.name.endswith(".tmp")
        yaml.safe_load(saved.read_text())  # whole: a cut file would not parse, or lack its last key
    if (run_dir / ".hydra" / "hydra.yaml").exists():
        assert "hydra" in yaml.safe_load((run_dir / ".hydra" / "hydra.yaml").read_text())


@pytest.mark.parametrize("previous", [None, b"the previous figure"])
def test_a_report_file_cut_by_a_file_size_limit_is_whole_or_absent(tmp_path: Path, previous: bytes | None) -> None:
    import errno

    from analysis.report.figures.figure_canvas import save

    class CutFigure:
        """A figure whose write stops part-way, as the kernel stops one at ``ulimit -f`` (EFBIG)."""

        def savefig(self, path, **_: object) -> None:
            Path(path).write_bytes(b"\x89PNG half")
            raise OSError(errno.EFBIG, "File too large", str(path))

        def set_layout_engine(self, *_: object) -> None:
            pass

    target = tmp_path / "figure.png"
    if previous is not None:
        target.write_bytes(previous)
    with pytest.raises(OSError):
        save(CutFigure(), target)  # type: ignore[arg-type]
    assert (target.read_bytes() if target.exists() else None) == previous
    assert list(tmp_path.iterdir()) == ([target] if previous is not None else [])


@pytest.mark.slow
def test_a_killed_tuning_trial_resumes_from_its_checkpoint_in_its_own_folder(tmp_path: Path) -> None:
    from experiments.training.checkpointing import checkpoint_step

    sweep_dir = tmp_path / "sweep"
    args = ["-m", "hparams_search=tuned", *QUICK,
            "hydra.sweeper.n_trials=1", "hydra.sweeper.final_seeds=[1000]", "trainer.max_steps=200",
            "trainer.val_check_interval=50", "checkpoint_every_n_steps=10",
            f"hydra.sweep.dir={sweep_dir}"]  # fmt: skip
    proc = start_module("experiments.train", *args, cwd=tmp_path, env=ENV, stdout=Path(os.devnull))
    began = time.time()
    while not list(sweep_dir.glob("*/checkpoints/last.ckpt")):
        assert proc.poll() is None and time.time() - began < 240, "the trial wrote no checkpoint"
        time.sleep(0.05)
    proc.kill()  # SIGKILL: no Python ending runs, the trial stays RUNNING in the study
    proc.wait()
    (trial_dir,) = [p.parent.parent for p in sweep_dir.glob("*/checkpoints/last.ckpt")]
    killed_at = checkpoint_step(trial_dir / "checkpoints" / "last.ckpt")
    rerun = train_cli(*args, cwd=tmp_path, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    made = [p.parent for p in sweep_dir.glob("*/result.json")]
    tuning = [d for d in made if "trial.role=tuning" in (d / ".hydra" / "overrides.yaml").read_text()]
    assert tuning == [trial_dir], "the trial asked again runs in the killed trial's folder, no orphan beside it"
    assert f"resuming from {trial_dir / 'checkpoints' / 'last.ckpt'}" in (trial_dir / "train.log").read_text()
    result = json.loads((trial_dir / "result.json").read_text())
    assert result["status"] == "completed" and result["cost"]["steps"] == 200 and killed_at > 0


# a sweep's writer of cell 1: it holds the cell's lock and finishes the cell while the second sweep runs
OTHER_SWEEP = """
import json, os, pathlib, socket, sys, time
cell = pathlib.Path(sys.argv[1])
(cell / ".attnlab.lock").write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}))
print("locked", flush=True)
while not (cell.parent / "multirun.yaml").exists():
    time.sleep(0.05)
(cell / "result.json").write_text(json.dumps({"status": "completed", "metrics": {}, "overrides": []}))
time.sleep(600)
"""


@pytest.mark.slow
def test_a_second_sweep_into_one_folder_refuses_each_busy_cell_and_says_so(tmp_path: Path) -> None:
    sweep_dir = tmp_path / "sweep"
    (sweep_dir / "1").mkdir(parents=True)
    other = subprocess.Popen(
        [sys.executable, "-c", OTHER_SWEEP, str(sweep_dir / "1")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "locked"
        proc = train_cli(
            "-m",
            *QUICK,
            "attention=soft,linear,multihead",
            "hydra.sweep.subdir=${hydra.job.num}",
            f"hydra.sweep.dir={sweep_dir}",
            env=ENV,
            cwd=tmp_path,
            timeout=600,
        )
    finally:
        other.kill()
        other.wait()
    said = proc.stdout + proc.stderr
    assert proc.returncode == 1, said[-3000:]
    assert f"being written by process {other.pid}" in said
    assert "1 busy, 2 completed" in said, said[-3000:]
    assert (
        f"busy       another process writes this cell; run the sweep again once it has ended  {sweep_dir / '1'}" in said
    )
