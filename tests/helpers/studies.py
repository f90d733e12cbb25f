"""Optuna and tuned sweeps as a test makes them: ``hparams_search=optuna`` in a process of its own, its study
loaded back, the config the sweeper composes, and a tuned sweep's folder written without training."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from hydra import compose as hydra_compose
from hydra import initialize_config_dir

from experiments.config.schema import register_configs
from tests.helpers.config import TINY
from tests.helpers.env import ENV
from tests.helpers.paths import CONF
from tests.helpers.results import result_dict, write_result
from tests.helpers.warm import run_module

# a trial in seconds: one thread, no logger, no warm-up
QUICK = [*TINY, "num_threads=1", "logger=none", "optim.warmup_steps=0"]
LR = "optim.lr=tag(log, interval(1e-4, 1e-2))"


def sweep(tmp_path: Path, sweep_dir: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m experiments.train -m hparams_search=optuna`` of quick trials into ``sweep_dir``."""
    return run_module(
        "experiments.train", "-m", "hparams_search=optuna", *QUICK, *args, f"hydra.sweep.dir={sweep_dir}",
        cwd=tmp_path, env=ENV, timeout=300,
    )  # fmt: skip


def load(sweep_dir: Path, name: str = "default_reverse_multihead_sinusoidal"):
    """The Optuna study ``name`` from the sweep folder's storage."""
    import optuna

    from experiments.sweep.optuna_study import open_storage, storage_spec

    return optuna.load_study(study_name=name, storage=open_storage(storage_spec(None, sweep_dir)))


def composed(*overrides: str):
    """The composed config with its ``hydra`` node, as the sweeper reads it."""
    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides), return_hydra_config=True)


def tuned_sweep(root: Path, scores: dict[str, dict[str, list[float]]]) -> Path:
    """A tuned sweep's folder without training: ``tuned.json`` and one result.json per final seed, each cell's
    test/loss at its tuned configuration and at the shared defaults (``scores[cell][role]``)."""
    sweep = root / "tuned_sweep"
    cells = []
    for attention, by_role in scores.items():
        study = f"s__attention_{attention}"
        cells.append(
            {
                "cell": f"attention={attention}",
                "study": study,
                "best_params": {"optim.lr": 0.002},
                "trials": [{"number": 0, "state": "complete", "params": {"optim.lr": 0.002}, "value": 2.0}],
            }
        )
        for role, values in by_role.items():
            for i, value in enumerate(values):
                result = result_dict("reverse", attention, "none", 1000 + i, metrics={"test/loss": value})
                result["config"].update({"trial.study": study, "trial.role": role})
                if role == "tuned":  # the cell's best configuration, not the shared defaults
                    result["config"]["optim.lr"] = 0.002
                result["run_id"] = f"{attention}-{role}-{i}"
                write_result(sweep / f"{attention}_{role}_{i}", result)
    record = {
        "cells": cells,
        "compare_on": "test/loss",
        "compare_direction": "minimize",
        "direction": "minimize",
        "objective": "val/loss",
        "n_trials": 1,
        "tuning_seeds": [0],
        "final_seeds": [1000, 1001, 1002],
    }
    (sweep / "tuned.json").write_text(json.dumps(record))
    return sweep
