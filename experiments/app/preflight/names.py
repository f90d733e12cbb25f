"""Each override's key and values against what exists: group choices against ``conf/<group>/*.yaml``, variant
and task names against their registries, Trainer keywords against lightning.Trainer's, and no sweep under
``hydra.``."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Iterable

from attnlab.roles import ROLES
from experiments.app.preflight.errors import PreflightError

CONF = Path(__file__).resolve().parents[3] / "conf"
GROUPS = (
    "task",
    "attention",
    "position",
    "model",
    "trainer",
    "callbacks",
    "logger",
    "experiment",
    "hparams_search",
    "variant_param",
)


def group_options(group: str, search_path: tuple[Path, ...] = ()) -> list[str]:
    """The group's options in conf/ and in the folders a ``hydra.searchpath`` adds (config.yaml_files.yaml_options)."""
    from experiments.config.yaml_files import yaml_options

    return sorted(set().union(*(yaml_options(folder / group) for folder in (CONF, *search_path))))


def unknown_choice(key: str, value: str, choices: Iterable[str]) -> PreflightError:
    choices = sorted(choices)
    near = difflib.get_close_matches(value, choices, n=1)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    return PreflightError(f"{key}={value} is unknown; choose one of {choices}{hint}")


def check_names(key: str, values: list[str], search_path: tuple[Path, ...] = ()) -> None:
    """Group choices must exist as yaml files (in conf/ or a folder ``search_path`` adds); variant names inside
    groups must be registered.

    Group choices are checked against the files alone, so a typo is reported before
    torch or Lightning is even imported. A group placed at another node
    (``attention@model.cross_attention=...``) is named as written, so the error says which role.
    """
    key = key.lstrip("+~")
    group = key.split("@")[0]
    if group in GROUPS:
        options = group_options(group, search_path)
        for value in values:
            if value not in ("null", "None") and value not in options:
                raise unknown_choice(key, value, options)
    registry = _registry_for(group)
    if registry is not None:
        for value in values:
            if value not in ("null", "None"):
                try:
                    registry.get(value)
                except ValueError as err:
                    raise PreflightError(f"{group}: {err}" if group.startswith("model.") else str(err)) from None


def _registry_for(key: str):
    roles = {f"model.{role}{suffix}" for role in ROLES for suffix in ("", ".name")}
    if key == "attention.name" or key in roles:
        from variants import ATTENTION

        return ATTENTION
    if key == "position.name":
        from variants import POSITION

        return POSITION
    if key == "task.name":
        from experiments.tasks import TASKS

        return TASKS
    return None


SWEEPER_PARAMS = "hydra.sweeper.params."


def check_trainer_override(key: str) -> None:
    """``trainer.<key>`` must be a keyword of lightning.Trainer (or attnlab's own): one line, nearest match.
    A key that has moved says where to."""
    key = key.lstrip("+~")
    # hydra.sweeper.params.<key> on the command line sweeps <key>, as a preset's sweeper params do; checked
    # here because Hydra cannot compose it when the config has no sweeper params ("Unexpected type: None")
    key = key.removeprefix(SWEEPER_PARAMS)
    from experiments.config.lightning_keys import MOVED

    if key in MOVED:
        raise PreflightError(MOVED[key])
    if key.startswith("trainer.") and key.count(".") == 1:
        from experiments.config.checks import ConfigError
        from experiments.config.lightning_keys import check_trainer_key

        try:
            check_trainer_key(key.split(".", 1)[1], check_value=False)
        except ConfigError as err:
            raise PreflightError(str(err)) from None


def check_hydra_sweep(override) -> None:
    """Hydra sweeps no key under ``hydra.``: a search space or grid given there (hydra.sweeper.params.x=a,b)
    is meant as text, quoted, or as a sweep of the key itself."""
    key = override.get_key_element().lstrip("+~")
    if not (key.startswith("hydra.") and override.is_sweep_override()):
        return
    value = override.input_line.split("=", 1)[1]
    inner = key.split(".", 3)[-1] if key.startswith(("hydra.sweeper.params.", "hydra.sweeper.space.")) else None
    instead = f", or sweep the key itself: {inner}={value}" if inner else ""
    if inner:
        check_trainer_override(inner)  # a key that has moved says where to first: quoting would not help it
    raise PreflightError(
        f"{override.input_line}: Hydra sweeps no key under hydra.*; quote it: {key}='{value}'{instead}"
    )
