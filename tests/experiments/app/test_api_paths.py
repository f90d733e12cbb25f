"""Every setting the Python API accepts takes effect: ``run()`` trains ``ensemble.seeds`` as the command line does
and refuses, in one line, what only a sweep takes (a launcher, a sweeper, hparams_search, a swept value),
pointing to ``experiments.multirun``, which runs the multirun as ``python -m experiments.train -m`` does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.app.preflight import PreflightError
from tests.helpers.cli import train_cli
from tests.helpers.config import TINY


@pytest.mark.parametrize(
    "override",
    [
        "hydra/launcher=joblib",
        "hparams_search=tuned",
        "hydra/sweeper=optuna",
        "hydra/sweeper=adaptive",
        "hydra.sweeper.n_trials=3",
        "hydra.launcher.n_jobs=2",
        "attention=soft,local",
    ],
)
def test_run_refuses_what_only_a_sweep_takes_and_points_to_multirun(override: str, tmp_path: Path) -> None:
    from experiments import run

    with pytest.raises(PreflightError, match=r"run\(\) would ignore .* experiments\.multirun\(") as refused:
        run([*TINY, override], run_dir=tmp_path / "run")
    assert str(refused.value).startswith(f"{override}: ") and "\n" not in str(refused.value)
    assert not (tmp_path / "run").exists()


def test_multirun_refuses_bad_input_in_one_line_before_anything_starts(tmp_path: Path) -> None:
    from experiments import multirun

    with pytest.raises(PreflightError, match=r"did you mean 'soft'"):
        multirun(["attention=sofft,local"], sweep_dir=tmp_path / "sweep")
    assert not (tmp_path / "sweep").exists()


@pytest.mark.slow
def test_run_trains_ensemble_seeds_as_the_command_line_does(tmp_path: Path) -> None:
    from experiments import run

    overrides = [*TINY, "task=reverse", "num_threads=1", "seed=3", "ensemble.seeds=2"]
    proc = train_cli(*overrides, f"hydra.run.dir={tmp_path / 'cli'}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    api = run(overrides, run_dir=tmp_path / "api")
    assert isinstance(api, list) and [r["seed"] for r in api] == [3, 4]
    for result in api:
        folder = f"seed={result['seed']}"
        assert result == json.loads((tmp_path / "api" / folder / "result.json").read_text())
        cli = json.loads((tmp_path / "cli" / folder / "result.json").read_text())
        assert result["status"] == cli["status"] == "completed"
        assert result["config_hash"] == cli["config_hash"]
        assert result["metrics"] == pytest.approx(cli["metrics"], rel=1e-6)


@pytest.mark.slow
def test_multirun_runs_the_multirun_and_returns_its_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from experiments import multirun

    monkeypatch.chdir(tmp_path)
    folder = multirun([*TINY, "task=reverse", "num_threads=1", "position=sinusoidal,rope", "name=api_sweep"])
    assert folder == tmp_path / "multirun" / "api_sweep"
    results = [json.loads(p.read_text()) for p in sorted(folder.glob("*/result.json"))]
    assert sorted(r["position"] for r in results) == ["rope", "sinusoidal"]
    assert all(r["status"] == "completed" for r in results)
