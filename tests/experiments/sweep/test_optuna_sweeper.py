"""hydra/sweeper=optuna (hydra_plugins/attnlab_sweeper): current Optuna, a study that resumes, pruning,
failed trials as failures, and the one-line refusals before any trial."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest
import tomllib

from tests.helpers.paths import ROOT
from tests.helpers.studies import LR, QUICK, composed, load, sweep

RANDOM = ["hydra/sweeper/sampler=random", "hydra.sweeper.sampler.seed=7"]


# -- the extra -------------------------------------------------------------------------------------
def test_the_optuna_extra_resolves_optuna_4_or_later() -> None:
    from packaging.requirements import Requirement
    from packaging.version import Version

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["optuna"]
    (optuna,) = [Requirement(r) for r in extra if Requirement(r).name == "optuna"]
    assert not any(Requirement(r).name == "hydra-optuna-sweeper" for r in extra), "it pins optuna < 3"
    # the specifier admits no release before 4 and admits the installed one, which is 4 or later
    assert not any(optuna.specifier.contains(v) for v in ("2.10.1", "3.6.1", "3.99"))
    installed = metadata.version("optuna")
    assert optuna.specifier.contains(installed) and Version(installed) >= Version("4")


# -- refusals before any trial ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "overrides, cli, said",
    [
        ([], ["optim.lrr=choice(0.1,0.2)"], "hydra.sweeper.params.optim.lrr: no config has the key"),
        (["hydra.sweeper.n_trials=0"], [], "hydra.sweeper.n_trials=0: the budget must be an integer of at least 1"),
        ([], ["optim.lr=0.001", "optim.warmup_steps=0"], "hydra.sweeper.params: the search space is empty"),
        (["objective=val/bleu"], [], "objective='val/bleu': the task never logs it"),
        (["hydra/sweeper/pruner=median", "hydra.sweeper.pruning_metric=test/loss"], [], "not logged at validation"),
    ],
)
def test_a_study_that_cannot_run_is_refused_by_name(overrides: list[str], cli: list[str], said: str) -> None:
    from experiments.sweep.optuna_study import StudyError, check_study, search_space

    cfg = composed("hparams_search=optuna", *overrides)
    sweeper = cfg.hydra.sweeper
    space, _ = search_space(sweeper.params, cli)
    metric = (sweeper.pruning_metric or cfg.objective) if sweeper.get("pruner") else None
    with pytest.raises(StudyError, match=said.replace("(", r"\(").replace("[", r"\[")):
        check_study(cfg, space, sweeper.n_trials, sweeper.n_jobs, metric)
    shipped = composed("hparams_search=optuna")  # the shipped study passes the same check
    check_study(shipped, search_space(shipped.hydra.sweeper.params, [])[0], 20, 1, "val/token_acc")


def test_the_search_space_reads_hydras_sweep_syntax() -> None:
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    from experiments.sweep.optuna_study import grid, search_space

    params = {"optim.lr": "tag(log, interval(1e-4, 1e-2))", "optim.warmup_steps": "range(0, 400, step=50)"}
    space, fixed = search_space(params, ["seed=3", "model.d_model=32,64"])
    assert space["optim.lr"] == FloatDistribution(1e-4, 1e-2, log=True)
    # Python's range: the stop is excluded, 350 is the last value
    assert space["optim.warmup_steps"] == IntDistribution(0, 350, step=50)
    assert space["model.d_model"] == CategoricalDistribution([32, 64]) and fixed == ["seed=3"]
    assert grid({"w": space["optim.warmup_steps"]}) == {"w": list(range(0, 400, 50))}
    # a value on the command line takes its key out of the space
    assert set(search_space(params, ["optim.lr=0.001"])[0]) == {"optim.warmup_steps"}


def test_an_objective_the_task_never_logs_stops_the_sweep_in_one_line(tmp_path: Path, monkeypatch, capfd) -> None:
    from tests.helpers.sweeps import refused_in_process

    args = ["hparams_search=optuna", *QUICK, "objective=val/bleu", "hydra.sweeper.n_trials=2"]
    code, stderr, _ = refused_in_process(tmp_path, monkeypatch, capfd, *args)
    assert code == 2
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "objective='val/bleu'" in lines[0] and "val/token_acc" in lines[0], stderr
    assert not list(tmp_path.rglob("result.json")), "no trial ran"


# -- resume ----------------------------------------------------------------------------------------
def asked_params(n: int) -> list[float]:
    """The learning rates a random sampler seeded 7 + i asks for trial i, from Optuna alone: the replay contract."""
    import optuna
    from optuna.distributions import FloatDistribution

    out = []
    for i in range(n):
        study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=7 + i))
        out.append(study.ask({"optim.lr": FloatDistribution(1e-4, 1e-2, log=True)}).params["optim.lr"])
    return out


@pytest.mark.slow
def test_a_killed_study_resumes_without_repeating_a_finished_trial(tmp_path: Path) -> None:
    from optuna.trial import TrialState

    from experiments.sweep.optuna_study import sampler_for, search_space

    sweep_dir = tmp_path / "s"
    first = sweep(tmp_path, sweep_dir, *RANDOM, LR, "hydra.sweeper.n_trials=2")
    assert first.returncode == 0, first.stderr[-2000:]
    before = {p: json.loads(p.read_text())["started_at"] for p in sweep_dir.rglob("result.json")}
    assert len(before) == 2
    # what a sweep killed during its third trial leaves: that trial RUNNING in the storage
    study = load(sweep_dir)
    space, _ = search_space({}, [LR])
    study.sampler = sampler_for({"_target_": "optuna.samplers.RandomSampler", "seed": 7}, space, 2)
    killed = study.ask(space)
    second = sweep(tmp_path, sweep_dir, *RANDOM, LR, "hydra.sweeper.n_trials=4")
    assert second.returncode == 0, second.stderr[-2000:]
    after = {p: json.loads(p.read_text())["started_at"] for p in sweep_dir.rglob("result.json")}
    assert {p: after[p] for p in before} == before, "a finished trial ran again"
    assert len(after) == 4, "the interrupted trial and the fourth ran, nothing else"
    trials = load(sweep_dir).trials
    assert trials[killed.number].state == TrialState.FAIL
    done = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(done) == 4
    # the same trials as an uninterrupted seeded study: the interrupted one again with its parameters
    assert sorted(t.params["optim.lr"] for t in done) == pytest.approx(sorted(asked_params(4)))
    assert len({t.params["optim.lr"] for t in done}) == 4
    assert killed.params in [t.params for t in done[2:]]
    record = json.loads((sweep_dir / "study.json").read_text())
    assert record["counts"] == {"complete": 4}


# -- pruning and failure ---------------------------------------------------------------------------
@pytest.mark.slow
def test_a_pruned_trial_is_recorded_as_pruned_with_its_step(tmp_path: Path) -> None:
    from optuna.trial import TrialState

    sweep_dir = tmp_path / "s"
    # every loss is above the threshold: the pruner stops each trial at its first validation (step 2 of 6)
    proc = sweep(
        tmp_path, sweep_dir, *RANDOM, LR, "hydra.sweeper.n_trials=2", "trainer.max_steps=6",
        "+hydra.sweeper.pruner._target_=optuna.pruners.ThresholdPruner", "+hydra.sweeper.pruner.upper=1e-3",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = [json.loads(p.read_text()) for p in sorted(sweep_dir.rglob("result.json"))]
    assert [r["status"] for r in results] == ["pruned", "pruned"]
    assert all(r["pruned"]["step"] == 2 and r["cost"]["steps"] == 2 for r in results)
    assert all(not any(k.startswith("test/") for k in r["metrics"]) for r in results), "a pruned trial is not tested"
    for trial in load(sweep_dir).trials:
        assert trial.state == TrialState.PRUNED and list(trial.intermediate_values) == [2]
        assert trial.intermediate_values[2] == pytest.approx(
            next(r for r in results if r["config"]["trial.number"] == trial.number)["pruned"]["value"]
        )


@pytest.mark.slow
def test_a_failed_run_is_a_failed_trial_not_a_score(tmp_path: Path) -> None:
    from optuna.trial import TrialState

    sweep_dir = tmp_path / "s"
    proc = sweep(tmp_path, sweep_dir, "hydra/sweeper/sampler=grid", "optim.lr=0.001,-1", "optim.warmup_steps=0")
    assert proc.returncode == 1, "a trial failed: the exit code says so"
    trials = {t.params["optim.lr"]: t for t in load(sweep_dir, "default_reverse_multihead_sinusoidal").trials}
    assert trials[-1].state == TrialState.FAIL and trials[-1].value is None
    assert "optim.lr" in trials[-1].user_attrs["error"]
    assert trials[0.001].state == TrialState.COMPLETE
    assert load(sweep_dir).best_trial.params == {"optim.lr": 0.001}


def test_sweeper_config_keeps_the_meaning_of_the_shipped_searches() -> None:
    cfg = composed("hparams_search=optuna", "seed=3")
    sweeper = cfg.hydra.sweeper
    assert sweeper._target_ == "hydra_plugins.attnlab_sweeper.optuna_sweeper.OptunaSweeper"
    assert sweeper.sampler._target_ == "optuna.samplers.TPESampler" and sweeper.sampler.seed == 3
    assert sweeper.get("pruner") is None, "no pruning unless asked"
    grid = composed("hparams_search=optuna_grid").hydra.sweeper
    assert grid.sampler._target_ == "optuna.samplers.GridSampler" and dict(grid.params) == {
        "optim.lr": "choice(3e-4, 1e-3, 3e-3)"
    }


@pytest.mark.parametrize("kind", ["journal", "sqlite"])
def test_a_study_in_either_storage_survives_reopening(tmp_path: Path, kind: str) -> None:
    """optuna 2.10's storage ended in an AssertionError under SQLAlchemy 2; a study must outlive its process."""
    import optuna

    from experiments.sweep.optuna_study import open_storage, storage_spec

    spec = f"sqlite:///{tmp_path / 'study.db'}" if kind == "sqlite" else storage_spec(None, tmp_path)
    study = optuna.create_study(study_name="s", storage=open_storage(spec))
    trial = study.ask({"x": optuna.distributions.FloatDistribution(0.0, 1.0)})
    study.tell(trial, 0.25)
    again = optuna.load_study(study_name="s", storage=open_storage(spec))  # a fresh storage object, as a resume
    assert [(t.state.name, t.value, t.params) for t in again.trials] == [("COMPLETE", 0.25, trial.params)]
