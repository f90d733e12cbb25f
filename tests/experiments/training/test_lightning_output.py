"""Lightning's own output where the user asked for it: a profiler's report on the console and in train.log,
a profiler given by its class, and the run's settings in the TensorBoard and CSV loggers."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from experiments.config.spec import build_spec
from experiments.training.lightning_parts import check_trainer_key
from experiments.training.single_run import train
from tests.helpers.cli import train_cli
from tests.helpers.config import TINY, compose
from tests.helpers.env import ONE_THREAD_ENV


@pytest.mark.slow
def test_a_profiler_prints_its_report(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    done = train_cli(*TINY, "+trainer.profiler=simple", f"hydra.run.dir={run_dir}", env=ONE_THREAD_ENV, timeout=240)
    assert done.returncode == 0, done.stderr
    assert "FIT Profiler Report" in done.stdout, done.stdout
    assert "FIT Profiler Report" in (run_dir / "train.log").read_text()


def test_a_profiler_given_by_its_class_is_accepted() -> None:
    check_trainer_key("profiler", {"_target_": "lightning.pytorch.profilers.SimpleProfiler", "extended": False})


def test_tensorboard_and_csv_receive_the_runs_settings(tmp_path: Path) -> None:
    overrides = [*TINY, "logger=[csv,tensorboard]", "optim.lr=0.002"]
    result = train(build_spec(compose(overrides)), tmp_path / "run", overrides)
    assert result["status"] == "completed", result.get("error")
    written = sorted((tmp_path / "run").rglob("hparams.yaml"))
    assert len(written) == 2, written  # one per logger
    for path in written:
        hparams = yaml.safe_load(path.read_text())
        # the run's own record of its config is the reference
        assert hparams["optim.lr"] == result["config"]["optim.lr"] == 0.002, path
        assert hparams["attention.name"] == result["config"]["attention.name"], path
