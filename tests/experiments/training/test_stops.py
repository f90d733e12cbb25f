"""Every stop says why: a signal exits with the shell's code and keeps a resumable checkpoint; a run cut
short of max_steps records the limit and the step; a resumed run's cost covers all its segments."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from experiments.config.spec import build_spec
from experiments.training.single_run import train
from tests.helpers.cli import train_cli
from tests.helpers.config import TINY, compose
from tests.helpers.env import ONE_THREAD_ENV
from tests.helpers.warm import Started, start_module

# long enough that the run cannot finish between its first checkpoint and the signal
LONG = [*TINY, "trainer.max_steps=100000", "trainer.val_check_interval=1000", "checkpoint_every_n_steps=5"]


def start(args: list[str], out: Path) -> Started | subprocess.Popen:
    """The command from the warm Python, its stdout into ``out`` (a pipe nobody reads would fill and stall a long
    run); each test signals it once its first checkpoint is written."""
    return start_module("experiments.train", *args, env=ONE_THREAD_ENV, stdout=out)


def wait_for(path: Path, proc: subprocess.Popen) -> None:
    deadline = time.time() + 240
    while not path.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert path.exists(), f"{path} did not appear before the run ended: {proc.stderr.read() if proc.poll() else ''}"


@pytest.mark.slow
def test_sigterm_exits_143_in_one_line_and_keeps_a_resumable_checkpoint(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    victim = start([*LONG, f"hydra.run.dir={run_dir}"], tmp_path / "out.txt")
    ckpt = run_dir / "checkpoints" / "last.ckpt"
    wait_for(ckpt, victim)
    victim.send_signal(signal.SIGTERM)
    assert victim.wait(timeout=60) == 143
    lines = victim.stderr.read().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnlab: interrupted by SIGTERM at step "), lines
    kept = torch.load(ckpt, weights_only=True)["global_step"]
    assert kept > 0 and f"its checkpoint of step {kept} is kept" in lines[0]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "failed" and result["stop"]["reason"] == "SIGTERM"
    assert kept <= result["stop"]["step"] < 100000 and result["stop"]["max_steps"] == 100000
    # resumable: the same command with a reachable budget continues from the kept step
    budget = kept + 5
    resumed = train_cli(
        *LONG, f"trainer.max_steps={budget}", f"hydra.run.dir={run_dir}", env=ONE_THREAD_ENV, timeout=240
    )
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming from {ckpt}" in (run_dir / "train.log").read_text()
    assert json.loads((run_dir / "result.json").read_text())["cost"]["steps"] == budget


@pytest.mark.slow
def test_sigterm_in_a_multirun_prints_the_sweep_summary_and_exits_143(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    victim = start(["-m", *LONG, "seed=0,1", f"hydra.sweep.dir={sweep}"], tmp_path / "out.txt")
    deadline = time.time() + 240
    while not list(sweep.glob("*/checkpoints/last.ckpt")) and time.time() < deadline and victim.poll() is None:
        time.sleep(0.05)
    (ckpt,) = sweep.glob("*/checkpoints/last.ckpt")
    victim.send_signal(signal.SIGTERM)
    assert victim.wait(timeout=60) == 143
    out = (tmp_path / "out.txt").read_text()
    # the summary's line for the cell that was stopped, and the report command
    assert any(line.startswith("failed") and "interrupted by SIGTERM" in line for line in out.splitlines()), out
    assert "python -m analysis.report" in out, out
    assert len(list(sweep.glob("*/result.json"))) == 1, "the sweep went on after SIGTERM"


@pytest.mark.parametrize(
    ("limit", "reason"),
    [
        ("+trainer.max_epochs=1", "max_epochs"),
        ("trainer.fast_dev_run=true", "fast_dev_run"),
        # no validation improves val/loss by 10: patience 1 ends the fit at the second one, step 4
        (
            "callbacks=early_stopping callbacks.early_stopping.min_delta=10 callbacks.early_stopping.patience=1",
            "early_stopping",
        ),
    ],
)
def test_a_run_cut_short_records_why_and_at_which_step(limit: str, reason: str, tmp_path: Path) -> None:
    # 64 examples in batches of 8: one epoch is 8 steps, short of the budget of 20
    overrides = [*TINY, "trainer.max_steps=20", *limit.split()]
    result = train(build_spec(compose(overrides)), tmp_path / "run", overrides)
    assert result["status"] == "completed", result.get("error")
    expected_step = {"fast_dev_run": 1, "max_epochs": 64 // 8, "early_stopping": 2 * 2}[reason]
    assert result["stop"] == {"reason": reason, "step": expected_step, "max_steps": 20}
    assert json.loads((tmp_path / "run" / "result.json").read_text())["stop"] == result["stop"]


def test_a_run_that_reaches_its_budget_says_so(tmp_path: Path) -> None:
    overrides = [*TINY, "trainer.max_steps=3"]
    result = train(build_spec(compose(overrides)), tmp_path / "run", overrides)
    assert result["stop"] == {"reason": "max_steps", "step": 3, "max_steps": 3}


def test_max_time_stop_is_recorded(tmp_path: Path) -> None:
    overrides = [*TINY, "trainer.max_steps=100000", "trainer.val_check_interval=1000", "+trainer.max_time={seconds:1}"]
    result = train(build_spec(compose(overrides)), tmp_path / "run", overrides)
    assert result["status"] == "completed", result.get("error")
    assert result["stop"]["reason"] == "max_time" and 0 < result["stop"]["step"] < 100000, result["stop"]


def test_train_seconds_after_a_resume_cover_both_segments(tmp_path: Path) -> None:
    run_dir, ckpt = tmp_path / "run", tmp_path / "run" / "checkpoints" / "last.ckpt"
    every = [*TINY, "checkpoint_every_n_steps=4", "trainer.val_check_interval=4"]

    def clock() -> dict[str, float]:  # what the last checkpoint says the run had spent
        return torch.load(ckpt, weights_only=True)["callbacks"]["attnlab.RunClock"]

    first = train(build_spec(compose([*every, "trainer.max_steps=4"])), run_dir, every)
    spent = clock()
    assert 0 < spent["seconds"] <= first["cost"]["train_seconds"] and spent["segments"] == 1
    began = time.perf_counter()
    second = train(build_spec(compose([*every, "trainer.max_steps=8"])), run_dir, every)
    outside = time.perf_counter() - began  # the second segment, timed around it from outside
    assert second["stop"]["step"] == 8 and second["cost"]["segments"] == 2 and clock()["segments"] == 2
    # the checkpoint at step 8 counts both segments up to it; the run's total is at least that,
    # and at most the first segment's part plus the whole second call
    assert clock()["seconds"] <= second["cost"]["train_seconds"] <= spent["seconds"] + outside
    # the rate is the whole run's: every token trained on, over both segments' seconds
    tokens = second["cost"]["fit_tokens_per_second"] * second["cost"]["train_seconds"]
    assert tokens == pytest.approx(2 * first["cost"]["fit_tokens_per_second"] * first["cost"]["train_seconds"], rel=0.2)


@pytest.mark.slow
def test_sigterm_to_an_ensemble_exits_143_in_one_line(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    victim = start([*LONG, "ensemble.seeds=2", f"hydra.run.dir={run_dir}"], tmp_path / "out.txt")
    wait_for(run_dir / "ensemble" / "checkpoints" / "last.ckpt", victim)
    victim.send_signal(signal.SIGTERM)
    assert victim.wait(timeout=60) == 143
    lines = victim.stderr.read().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attnlab: interrupted by SIGTERM"), lines
    for seed in (0, 1):  # each member's result says it was stopped, and by what
        result = json.loads((run_dir / f"seed={seed}" / "result.json").read_text())
        assert result["status"] == "failed" and "SIGTERM" in result["error"]


def test_an_ensemble_member_records_its_stop_as_its_separate_run(tmp_path: Path) -> None:
    from experiments.ensemble import train_ensemble

    overrides = [*TINY, "trainer.max_steps=3"]
    members = train_ensemble(build_spec(compose([*overrides, "ensemble.seeds=2"])), tmp_path / "ens", overrides)
    alone = train(build_spec(compose([*overrides, "seed=0"])), tmp_path / "alone", overrides)
    assert alone["stop"] == {"reason": "max_steps", "step": 3, "max_steps": 3}
    assert [m["stop"] for m in members] == [alone["stop"]] * 2
    assert [m["stop"]["step"] for m in members] == [m["cost"]["steps"] for m in members]
