"""W&B's environment variables reach a run's W&B run, and a key the user set in ``logger.wandb`` wins over them.

W&B's documented order for a wrapper that passes init arguments: an argument given wins, a variable fills an
argument not given. The expected values below are that order applied by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.config.errors import ConfigError
from experiments.config.wandb_settings import check_mode, resolve
from tests.helpers.wandb_runs import WITH_WANDB, offline_runs

OWN = {"name": "local+alibi seed=0", "group": "abl", "job_type": "train", "save_dir": "/runs/a"}
OWN_TAGS = ["copy", "local", "alibi"]
UNSET = {"mode": None, "project": None, "entity": None, "name": None, "group": None, "tags": None, "job_type": None}


def test_without_variables_or_keys_the_run_takes_attnlabs_choices() -> None:
    got = resolve(UNSET, OWN, OWN_TAGS, environ={})
    want = {**OWN, "mode": "offline", "project": "attnlab", "tags": OWN_TAGS}
    assert got == want


def test_each_variable_fills_the_key_left_null() -> None:
    environ = {
        "WANDB_MODE": "disabled",
        "WANDB_PROJECT": "myproj",
        "WANDB_ENTITY": "lab",
        "WANDB_DIR": "/scratch/wb",
        "WANDB_NAME": "mine",
        "WANDB_RUN_GROUP": "grp",
        "WANDB_JOB_TYPE": "probe",
        "WANDB_TAGS": "x, y,,z",
        "WANDB_NOTES": "a note",
    }
    got = resolve(UNSET, OWN, OWN_TAGS, environ=environ)
    assert got == {
        "mode": "disabled",
        "project": "myproj",
        "entity": "lab",
        "save_dir": "/scratch/wb",
        "name": "mine",
        "group": "grp",
        "job_type": "probe",
        "tags": ["copy", "local", "alibi", "x", "y", "z"],
        "notes": "a note",
    }


def test_a_key_the_user_set_wins_over_its_variable() -> None:
    chosen = {**UNSET, "mode": "offline", "project": "cli", "tags": ["t"], "dir": "/mine"}
    environ = {"WANDB_MODE": "disabled", "WANDB_PROJECT": "myproj", "WANDB_TAGS": "x", "WANDB_DIR": "/scratch"}
    got = resolve(chosen, OWN, OWN_TAGS, environ=environ)
    assert (got["mode"], got["project"], got["save_dir"]) == ("offline", "cli", "/mine")
    assert got["tags"] == ["copy", "local", "alibi", "t"] and "dir" not in got


def test_an_empty_variable_is_unset() -> None:
    got = resolve(UNSET, OWN, OWN_TAGS, environ={"WANDB_PROJECT": "", "WANDB_MODE": " "})
    assert (got["project"], got["mode"]) == ("attnlab", "offline")


@pytest.mark.parametrize(
    ("chosen", "environ", "line"),
    [
        ({"mode": None}, {"WANDB_MODE": "offlne"}, "WANDB_MODE=offlne is not allowed; choose one of "),
        ({"mode": "onlin"}, {"WANDB_MODE": "offline"}, "logger.wandb.mode=onlin is not allowed; choose one of "),
    ],
)
def test_a_bad_mode_is_one_line_naming_where_it_came_from(chosen, environ, line) -> None:
    with pytest.raises(ConfigError) as err:
        check_mode(chosen, environ)
    message = str(err.value)
    assert message.startswith(line) and "'online', 'offline', 'disabled'" in message and "\n" not in message


def test_a_key_set_in_config_is_not_checked_against_a_bad_variable() -> None:
    check_mode({"mode": "offline"}, {"WANDB_MODE": "nonsense"})  # the variable is not used, so not refused


@pytest.mark.slow
def test_variables_and_keys_reach_the_offline_run(tmp_path: Path, monkeypatch) -> None:
    from experiments import run

    monkeypatch.setenv("WANDB_PROJECT", "myproj")
    monkeypatch.setenv("WANDB_RUN_GROUP", "envgroup")
    monkeypatch.setenv("WANDB_TAGS", "from-env")
    run(WITH_WANDB, run_dir=tmp_path / "env")
    [logged] = offline_runs(tmp_path / "env").values()
    assert (logged["project"], logged["group"]) == ("myproj", "envgroup") and "from-env" in logged["tags"]

    # explicit keys win, the mode included: WANDB_MODE=disabled would leave no run folder at all
    monkeypatch.setenv("WANDB_MODE", "disabled")
    run([*WITH_WANDB, "logger.wandb.mode=offline", "logger.wandb.project=cli"], run_dir=tmp_path / "keys")
    [logged] = offline_runs(tmp_path / "keys").values()
    assert (logged["project"], logged["group"]) == ("cli", "envgroup")

    run(WITH_WANDB, run_dir=tmp_path / "disabled")
    assert not list((tmp_path / "disabled").rglob("offline-run-*"))
    assert (tmp_path / "disabled" / "result.json").is_file()
