"""The shipped studies (conf/experiment/study/): each composes, its claims parse and name cells of its own grid,
and the length-generalisation study runs end to end at a tiny budget into a claims table."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from omegaconf import OmegaConf

from analysis.claims.evaluate import VERDICTS
from analysis.claims.evaluate import evaluate as evaluate_claims
from analysis.data.collect import collect
from attnlab.claims import parse_claims
from experiments.config.schema import register_configs
from experiments.config.spec import grid_spec
from experiments.sweep.grid import grid_values
from tests.helpers.cli import train_cli
from tests.helpers.config import TINY
from tests.helpers.paths import CONF

STUDIES = sorted(
    p.relative_to(CONF / "experiment").with_suffix("").as_posix()
    for p in (CONF / "experiment" / "study").glob("*.yaml")
)


def study_config(study: str, extra: list[str] = ()):
    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=[f"experiment={study}", *extra], return_hydra_config=True)


def test_there_are_studies() -> None:
    assert {"study/length_generalization", "study/vaswani_pe", "study/vaswani_heads"} <= set(STUDIES)


@pytest.mark.parametrize("study", STUDIES)
def test_study_composes_and_its_claims_name_cells_of_its_grid(study: str) -> None:
    from experiments.config.checks import check_config

    cfg = study_config(study)
    assert cfg.name == "study_" + study.split("/")[1]
    claims = parse_claims(OmegaConf.to_container(cfg.claims, resolve=True))
    assert claims and all(c.source and c.paper for c in claims), "a study says where its claims come from"
    grid = {k.removesuffix(".name"): v for k, v in grid_values(grid_spec(cfg))}
    if str(cfg.hydra.sweeper.get("_target_", "")).endswith(".TunedSweeper"):
        # a tuned comparison's runs carry their role (experiments/config/schema.py TrialConf.role): a claim
        # pins the tuned cells or the defaults by it; the grid's seeds are replaced by tuning and final seeds
        grid["trial.role"] = ["tuning", "tuned", "default"]
        grid["seed"] = [str(s) for s in cfg.hydra.sweeper.final_seeds]
    assert len(grid.get("seed", [])) >= (1 if "trial.role" in grid else 3), "a study has at least 3 seeds per cell"
    for claim in claims:
        for key, value in (*claim.a, *(claim.b or ()), *claim.filters):
            assert key in grid, f"{claim.name}: {key} is not swept by {study}"
            assert str(value) in grid[key], f"{claim.name}: {key}={value} is not in the grid {grid[key]}"
    # every cell of the grid composes and passes the checks run before training
    keys = [k for k in grid if k not in ("seed", "trial.role")]
    for values in itertools.product(*(grid[k] for k in keys)):
        override = [f"{'attention.num_heads' if k == 'attention.num_heads' else k}={v}" for k, v in zip(keys, values)]
        cell = study_config(study, override)
        check_config(OmegaConf.masked_copy(cell, [k for k in cell if k != "hydra"]))


@pytest.mark.slow
def test_length_generalisation_study_runs_end_to_end_into_its_claims(tmp_path: Path) -> None:

    sweep = tmp_path / "sweep"
    args = [
        "-m",
        "experiment=study/length_generalization",
        *TINY,
        "num_threads=1",
        "seed=0,1",
        f"hydra.sweep.dir={sweep}",
    ]
    proc = train_cli(*args, cwd=tmp_path, timeout=480)
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = collect(sweep)
    assert len(runs) == 4 * 2 and (runs.runs["status"] == "completed").all()
    results = evaluate_claims(runs)
    cfg = study_config("study/length_generalization")
    assert results["claim"].tolist() == [c["name"] for c in OmegaConf.to_container(cfg.claims)]
    assert set(results["verdict"]) <= set(VERDICTS)
    two_sided = results["b"].notna()
    assert (results.loc[two_sided, "a_n"] == 2).all() and (results.loc[two_sided, "b_n"] == 2).all()
    # a ratio claim counts the runs whose denominator is not zero (two training steps may score 0)
    assert (results.loc[~two_sided, "a_n"] <= 2).all()
