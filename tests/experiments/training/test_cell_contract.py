"""The cell contract (experiments/training/cell_contract.py) outside training: a study belongs to its settings, and
a tuned comparison never pools the final seeds of two best configurations."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import mean

import pytest

from experiments.training.cell_contract import StudyChangedError, check_study, study_settings

LR = "optim.lr"


def _study(direction: str = "minimize"):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(storage=optuna.storages.InMemoryStorage(), direction=direction)


def _settings(low: float = 1e-4, direction: str = "minimize", fixed=("trainer.max_steps=2",), **more):
    from optuna.distributions import FloatDistribution

    return study_settings({LR: FloatDistribution(low, 1e-2, log=True)}, "val/loss", direction, list(fixed), **more)


@pytest.mark.parametrize(
    "now, said",
    [
        (_settings(low=1e-5), "search space optim.lr FloatDistribution(high=0.01, log=True, low=0.0001"),
        (_settings(direction="maximize"), "direction minimize → maximize"),
        (_settings(fixed=("trainer.max_steps=4",)), "fixed overrides trainer.max_steps 2 → 4"),
        (_settings(tuning_seeds=[0, 1]), "tuning_seeds [0] → [0, 1]"),
    ],
)
def test_a_study_rerun_with_other_settings_is_refused_naming_the_change(now, said) -> None:
    study = _study()
    check_study(study, _settings(tuning_seeds=[0]), n_trials=3, finished=0, where="mem")
    with pytest.raises(StudyChangedError, match="run with other settings") as refused:
        check_study(study, now if "tuning_seeds" in now else {**now, "tuning_seeds": [0]}, 3, 2, "mem")
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_inert_overrides_and_a_raised_budget_keep_the_study() -> None:
    study = _study()
    check_study(study, _settings(fixed=("trainer.max_steps=2", "num_threads=1")), 3, 0, "mem")
    # threads, logging and a raised n_trials change no trial's computation: the study resumes
    check_study(study, _settings(fixed=("trainer.max_steps=2", "num_threads=4", "logger=none")), 10, 3, "mem")


def test_a_budget_below_the_finished_trials_is_refused() -> None:
    study = _study()
    check_study(study, _settings(), 5, 0, "mem")
    with pytest.raises(StudyChangedError, match=r"n_trials=2 is below the 5 trials the study has finished"):
        check_study(study, _settings(), 2, 5, "mem")


def test_a_study_stored_before_settings_were_recorded_is_checked_for_its_direction_and_space() -> None:
    from optuna.distributions import FloatDistribution

    # Optuna loads a stored study whatever direction is asked and keeps its own (checked here by hand)
    study = _study("minimize")
    study.tell(study.ask({LR: FloatDistribution(1e-4, 1e-2, log=True)}), 1.0)
    with pytest.raises(StudyChangedError, match="direction minimize → maximize"):
        check_study(study, _settings(direction="maximize"), 5, 1, "mem")
    # its trial's own distribution is its search space
    with pytest.raises(StudyChangedError, match=r"search space optim.lr .*low=0.0001.* → .*low=1e-05"):
        check_study(study, _settings(low=1e-5), 5, 1, "mem")
    check_study(study, _settings(), 5, 1, "mem")  # the same space: resumed, and its settings recorded
    with pytest.raises(StudyChangedError, match="fixed overrides trainer.max_steps 2 → 4"):
        check_study(study, _settings(fixed=("trainer.max_steps=4",)), 5, 1, "mem")


def test_a_tuned_rerun_with_a_new_best_never_pools_the_old_bests_final_seeds(tmp_path: Path) -> None:
    """The case the issue reports: n_trials raised, a new best, its final seeds beside the old best's."""
    from analysis.report.sections.tuned import load
    from tests.helpers.results import result_dict, write_result

    sweep = tmp_path / "sweep"
    study = "s__all"
    new_best, old_best = {LR: 0.0007, "optim.warmup_steps": 0}, {LR: 0.00125, "optim.warmup_steps": 250}
    scores = {"new": (new_best, [3.40, 3.45]), "old": (old_best, [3.50, 3.51])}
    for name, (params, values) in scores.items():
        for i, value in enumerate(values):
            result = result_dict("reverse", "soft", "none", 1000 + i, metrics={"test/loss": value})
            result["config"].update({"trial.study": study, "trial.role": "tuned", **params})
            result["run_id"] = f"{name}-{i}"
            write_result(sweep / f"{name}_{i}", result)
    record = {
        "cells": [{"cell": "all", "study": study, "best_params": new_best, "trials": []}],
        "compare_on": "test/loss",
        "compare_direction": "minimize",
        "direction": "minimize",
        "objective": "val/loss",
    }
    (sweep / "tuned.json").write_text(json.dumps(record))
    _, (cell,) = load(sweep)
    assert cell.tuned_seeds == [1000, 1001]
    assert mean(cell.tuned) == pytest.approx((3.40 + 3.45) / 2)  # the new best's two seeds, not all four
