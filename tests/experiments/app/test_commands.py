"""Every command the suite prints pastes into a shell and means what it says; a sweep's closing lines
name each cell by the overrides in which the cells differ; a user's own presets work under -m."""

from __future__ import annotations

import io
import json
import shlex
import sys
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from rich.console import Console

from experiments.app.summary import print_summary
from experiments.sweep.grid import cell_labels
from experiments.training.single_run import resume_command
from tests.helpers.cli import train_cli
from tests.helpers.config import TINY
from tests.helpers.env import environment
from tests.helpers.paths import ROOT

AWKWARD = "runs/it's a b,c=d [x]"  # a space, a quote, Hydra's sweep comma, '=' and brackets


def test_the_resume_command_gives_hydra_the_run_folder_unchanged(tmp_path: Path, monkeypatch) -> None:
    run_dir = tmp_path / AWKWARD
    monkeypatch.setattr(sys, "argv", ["train.py", "attention=local", "optim.lr=1e-3"])
    words = shlex.split(resume_command(run_dir, multirun=False))  # what a shell passes on
    assert words[:3] == ["python", "-m", "experiments.train"]
    assert words[3:5] == ["attention=local", "optim.lr=1e-3"]
    (override,) = OverridesParser.create().parse_overrides([words[5]])  # what Hydra reads
    assert override.key_or_group == "hydra.run.dir" and override.value() == str(run_dir)


def test_the_report_command_of_a_run_pastes(tmp_path: Path) -> None:
    run_dir = tmp_path / AWKWARD
    out = io.StringIO()
    print_summary({"status": "completed", "cost": {}}, run_dir, Console(file=out, width=2000, soft_wrap=True))
    (line,) = [line for line in out.getvalue().splitlines() if line.startswith("report  ")]
    words = shlex.split(line.removeprefix("report  "))
    assert words == ["python", "-m", "analysis.report", str(run_dir), "--out", str(run_dir / "report")]


def test_sweep_cells_are_named_by_the_overrides_that_differ() -> None:
    cells = [
        ["task=reverse", "attention=local", "seed=0"],
        ["task=reverse", "attention=local", "seed=1"],
        ["task=reverse", "attention=multihead", "seed=0", "+trainer.max_time={seconds:1}"],
    ]
    assert cell_labels(cells) == [
        "attention=local seed=0",
        "attention=local seed=1",
        "attention=multihead seed=0 'trainer.max_time={seconds:1}'",
    ]
    assert cell_labels([["task=reverse"]]) == ["task=reverse"] and cell_labels([[]]) == ["defaults"]


@pytest.mark.slow
def test_a_users_own_preset_works_under_multirun(tmp_path: Path) -> None:
    mine = tmp_path / "conf" / "experiment" / "mine.yaml"
    mine.parent.mkdir(parents=True)
    mine.write_text("# @package _global_\nname: mine\noptim:\n  lr: 0.002\n")
    sweep = tmp_path / "sweep"
    env = environment(OMP_NUM_THREADS="1")
    done = train_cli(
        *["--config-dir", str(mine.parent.parent), "-m"],
        *["experiment=mine", "seed=0,1", *TINY, "trainer.max_steps=1", f"hydra.sweep.dir={sweep}"],
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    results = [json.loads(p.read_text()) for p in sweep.glob("*/result.json")]
    assert sorted(r["seed"] for r in results) == [0, 1]
    assert all(r["status"] == "completed" and r["config"]["optim.lr"] == 0.002 for r in results), results
