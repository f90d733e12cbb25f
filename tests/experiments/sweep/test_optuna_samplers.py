"""hydra/sweeper/sampler=<name>: every sampler the sweeper runs, each asking a small study, and an unknown one
refused in one line that names the allowed values."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from tests.helpers.paths import CONF
from tests.helpers.studies import LR, composed, load, sweep

optuna = pytest.importorskip("optuna")

SAMPLER_DIR = CONF / "hydra" / "sweeper" / "sampler"
NEW = ["cmaes", "qmc", "gp", "nsgaii"]


def test_the_configs_and_the_sweepers_mapping_name_the_same_samplers() -> None:
    from hydra_plugins.attnlab_sweeper.optuna_sweeper import SAMPLERS

    assert {p.stem for p in SAMPLER_DIR.glob("*.yaml")} == set(SAMPLERS)
    for name, target in SAMPLERS.items():
        assert composed("hparams_search=optuna", f"hydra/sweeper/sampler={name}").hydra.sweeper.sampler._target_ == (
            target
        )


@pytest.mark.parametrize("name", NEW)
def test_each_new_sampler_asks_a_two_trial_study(name: str) -> None:
    """Asked as the sweeper asks (a sampler built afresh for each trial), two trials complete inside the space."""
    from optuna.distributions import FloatDistribution, IntDistribution

    from experiments.sweep.optuna_study import sampler_for

    node = OmegaConf.to_container(OmegaConf.load(SAMPLER_DIR / f"{name}.yaml"))
    node["seed"] = 11
    space = {
        "optim.lr": FloatDistribution(1e-4, 1e-2, log=True),
        "optim.warmup_steps": IntDistribution(0, 350, step=50),
    }
    study = optuna.create_study()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Optuna's experimental-feature warnings
        for i in range(2):
            study.sampler = sampler_for(node, space, i)
            trial = study.ask(space)
            study.tell(trial, (np.log10(trial.params["optim.lr"]) + 3) ** 2)
    assert type(study.sampler).__name__ == node["_target_"].rsplit(".", 1)[1]
    done = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    assert len(done) == 2
    for trial in done:
        assert 1e-4 <= trial.params["optim.lr"] <= 1e-2 and trial.params["optim.warmup_steps"] in range(0, 400, 50)


def test_qmc_walks_one_sequence_across_the_sweepers_fresh_samplers() -> None:
    """Each trial's QMC sampler is built afresh: with one seed for them all, trials 1..3 are the first three
    points of the scrambled Sobol sequence scipy draws for that seed (trial 0 infers the space, at random)."""
    from optuna.distributions import FloatDistribution
    from scipy.stats import qmc

    from experiments.sweep.optuna_study import sampler_for

    node = {"_target_": "optuna.samplers.QMCSampler", "seed": 3, "scramble": True}
    space = {"a": FloatDistribution(0, 1), "b": FloatDistribution(0, 1)}
    study = optuna.create_study()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(4):
            study.sampler = sampler_for(node, space, i)
            trial = study.ask(space)
            study.tell(trial, trial.params["a"])
    asked = [[t.params["a"], t.params["b"]] for t in study.trials[1:]]
    np.testing.assert_allclose(asked, qmc.Sobol(2, scramble=True, seed=3).random(3))


def _prepare(target: str) -> None:
    from experiments.sweep.optuna_study import search_space
    from hydra_plugins.attnlab_sweeper.optuna_sweeper import OptunaSweeper

    cfg = composed("hparams_search=optuna", "hydra.sweep.dir=unused")
    sweeper = OptunaSweeper(sampler=OmegaConf.create({"_target_": target, "seed": None}), params={})
    sweeper.config = cfg
    sweeper._prepare(search_space(cfg.hydra.sweeper.params, [])[0])


def test_an_unknown_sampler_is_refused_in_one_line_naming_the_allowed() -> None:
    from experiments.app.preflight import PreflightError, preflight
    from experiments.sweep.optuna_study import StudyError

    with pytest.raises(StudyError) as err:
        _prepare("optuna.samplers.BruteForceSampler")
    message = str(err.value)
    assert "\n" not in message and "BruteForceSampler" in message
    assert message.endswith("one of tpe, random, grid, cmaes, qmc, gp, nsgaii"), message
    _prepare("optuna.samplers.CmaEsSampler")  # a known one passes

    # a config group that does not exist: Hydra's refusal, one line listing the configs
    with pytest.raises(PreflightError) as err:
        preflight(["-m", "hparams_search=optuna", "hydra/sweeper/sampler=cmaess"])
    message = str(err.value)
    assert "\n" not in message and "cmaess" in message
    assert all(f"; {name};" in message for name in ["cmaes", "gp", "grid", "nsgaii", "qmc", "random", "tpe"])


@pytest.mark.slow
def test_a_cmaes_sweep_runs_two_trials(tmp_path: Path) -> None:
    sweep_dir = tmp_path / "s"
    proc = sweep(tmp_path, sweep_dir, "hydra/sweeper/sampler=cmaes", "hydra.sweeper.sampler.seed=5", LR,
                 "hydra.sweeper.n_trials=2")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    trials = load(sweep_dir).trials
    assert [t.state.name for t in trials] == ["COMPLETE", "COMPLETE"]
    assert json.loads((sweep_dir / "study.json").read_text())["counts"] == {"complete": 2}
    assert len(list(sweep_dir.rglob("result.json"))) == 2
