"""Dependencies by use: the launchers and the sweeper are extras, and a missing one is named in one line."""

from __future__ import annotations

import importlib.util
import re
from importlib import metadata

import pytest
import tomllib

from experiments.app.preflight import PreflightError, preflight
from experiments.config import extras
from tests.helpers.paths import ROOT

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
OPTIONAL = {"optuna", "hydra-optuna-sweeper", "submitit", "hydra-submitit-launcher", "tensorboard"}


def name_of(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def reachable(requirements: list[str]) -> set[str]:
    """Every distribution a plain install of ``requirements`` brings, by the installed metadata (no extras)."""
    seen: set[str] = set()
    todo = [r for r in requirements if "extra ==" not in r]
    while todo:
        name = name_of(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            todo.extend(r for r in metadata.requires(name) or [] if "extra ==" not in r)
        except metadata.PackageNotFoundError:
            pass  # not installed here (a CUDA-only wheel, say): its own requirements are unknown
    return seen


def test_plain_install_brings_no_optuna_no_submitit() -> None:
    core = reachable(PROJECT["dependencies"])
    assert {"wandb", "hydra-core", "lightning", "hydra-joblib-launcher"} <= core  # the walk found the tree
    assert not core & OPTIONAL, sorted(core & OPTIONAL)


def test_extras_declare_what_their_features_import() -> None:
    optional = {extra: {name_of(r) for r in reqs} for extra, reqs in PROJECT["optional-dependencies"].items()}
    assert {"hydra-submitit-launcher", "submitit"} <= optional["slurm"]
    assert "optuna" in optional["optuna"] and "hydra-optuna-sweeper" not in optional["optuna"]
    assert "tensorboard" in optional["tensorboard"]
    # make test installs '.[dev]': the tests need every extra they exercise
    assert any(
        r.startswith("attnlab[")
        and {"slurm", "optuna", "tensorboard"} <= set(r.split("[", 1)[1].rstrip("]").split(","))
        for r in PROJECT["optional-dependencies"]["dev"]
    )


@pytest.mark.parametrize(
    "argv, extra",
    [
        (["-m", "hydra/launcher=slurm"], "slurm"),
        (["-m", "hydra/launcher=submitit_local"], "slurm"),
        (["-m", "hparams_search=optuna"], "optuna"),
        (["hparams_search=optuna_grid"], "optuna"),
    ],
)
def test_a_missing_extra_is_named_in_one_line(argv, extra, monkeypatch) -> None:
    hidden = set(extras.EXTRAS[extra])
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in hidden else real(name, *a))
    with pytest.raises(PreflightError) as err:
        preflight(argv)
    message = str(err.value)
    assert "\n" not in message and f"pip install 'attnlab[{extra}]'" in message, message
    assert argv[-1] in message


def test_an_installed_extra_passes() -> None:
    if not all(extras.installed(m) for m in extras.EXTRAS["optuna"]):
        pytest.skip("attnlab[optuna] is not installed")
    extras.check_choice("hparams_search", ["optuna"])  # no error
