"""Every ``trainer.*`` key takes effect in an ensemble or is refused before any work
(experiments/ensemble/trainer_keys.py): none is silently ignored."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from experiments.bench.ensemble_equality import differences
from experiments.config.errors import ConfigError
from experiments.ensemble import trainer_keys
from experiments.ensemble.trainer_keys import check_trainer_keys
from tests.experiments.ensemble.test_ensemble import ensemble, separate
from tests.helpers.config import TINY, compose
from tests.helpers.paths import ROOT
from tests.helpers.sweeps import refused_in_process

# the Trainer keywords a researcher adds with +trainer.<key>, besides the trainer config's own
PLUS_KEYS = ["profiler", "limit_train_batches", "overfit_batches", "max_time", "max_epochs", "min_epochs", "min_steps"]


def trainer_config_keys() -> list[str]:
    return [str(k) for k in OmegaConf.load(ROOT / "conf" / "trainer" / "cpu.yaml")]


def in_exactly_one_set(keys: list[str]) -> list[str]:
    """The keys the table declares in none or in more than one of its sets."""
    sets = [set(trainer_keys.PASSED), set(trainer_keys.HANDLED), set(trainer_keys.REFUSED)]
    return [k for k in keys if sum(k in s for s in sets) != 1]


def test_every_key_of_the_trainer_config_and_the_plus_keys_is_in_exactly_one_set() -> None:
    assert in_exactly_one_set([*trainer_config_keys(), *PLUS_KEYS]) == []


def test_a_new_key_of_the_trainer_config_that_the_table_lacks_is_found(tmp_path: Path) -> None:
    planted = OmegaConf.load(ROOT / "conf" / "trainer" / "cpu.yaml")
    planted.reload_dataloaders_every_n_epochs = 0
    assert in_exactly_one_set([str(k) for k in planted]) == ["reload_dataloaders_every_n_epochs"]


@pytest.mark.parametrize(
    "override",
    [
        "trainer.devices=2",
        "trainer.strategy=ddp",
        "trainer.num_nodes=2",
        "trainer.gradient_clip_algorithm=value",
        "+trainer.overfit_batches=2",
        "+trainer.reload_dataloaders_every_n_epochs=1",  # in no set: refused, never ignored
    ],
)
def test_a_key_the_ensemble_cannot_honour_is_refused_naming_it(override: str) -> None:
    cfg = compose([*TINY, override, "ensemble.seeds=2"])
    key, _, value = override.lstrip("+").partition("=")
    with pytest.raises(ConfigError) as refused:
        check_trainer_keys(cfg.trainer)
    line = str(refused.value)
    assert line.startswith(f"{key}={value} is not supported with ensemble.seeds > 1") and "\n" not in line
    assert "ensemble.seeds=1, -m seed=..." in line


@pytest.mark.parametrize(
    "override",
    ["trainer.devices=1", "trainer.strategy=auto", "+trainer.overfit_batches=0", "+trainer.profiler=simple"],
)
def test_a_refused_key_at_a_value_that_changes_nothing_and_a_passed_key_are_not_refused(override: str) -> None:
    check_trainer_keys(compose([*TINY, override, "ensemble.seeds=2"]).trainer)


def test_limit_train_batches_changes_the_ensemble_as_it_changes_a_single_run(tmp_path: Path) -> None:
    # 48 examples in batches of 16: three batches an epoch; limited to two, 8 steps are four epochs
    overrides = [
        *TINY,
        "trainer.max_steps=8",
        "trainer.val_check_interval=8",
        "task.train_size=48",
        "task.batch_size=16",
        "model.dropout=0.0",
        "optim.lr=0.01",
        "+trainer.limit_train_batches=2",
    ]
    members = ensemble(overrides, tmp_path / "ensemble")
    for seed, member in enumerate(members):
        alone = separate(overrides, tmp_path, seed)
        assert member["status"] == alone["status"] == "completed", (member.get("error"), alone.get("error"))
        assert member["cost"]["steps"] == alone["cost"]["steps"] == 8
        worst = differences(member, alone)  # the epochs of two batches order the data: a third batch changes all
        assert worst and max(worst.values()) <= 1e-4, {k: v for k, v in worst.items() if v > 1e-4}


def test_the_command_line_refuses_a_key_in_one_line_with_exit_2_before_any_folder(
    tmp_path: Path, monkeypatch, capfd
) -> None:
    """The command's main() in this process: its preflight, exit code and stderr, without a process start."""
    run = tmp_path / "ens"
    args = [*TINY, "ensemble.seeds=2", "trainer.gradient_clip_algorithm=value", "logger=none", f"hydra.run.dir={run}"]
    code, stderr, _ = refused_in_process(tmp_path, monkeypatch, capfd, *args, multirun=False)
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1, stderr
    assert lines[0].startswith("attnlab: trainer.gradient_clip_algorithm=value is not supported with ensemble")
    assert not run.exists()
