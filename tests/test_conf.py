"""The Hydra config groups mirror the registries one to one, and every group file composes."""
from __future__ import annotations

import pytest
import yaml

from experiments.tasks import TASKS
from tests.conftest import CONF, compose
from variants import ATTENTION, POSITION

GROUPS = {"attention": ATTENTION, "position": POSITION, "task": TASKS}


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_group_files_equal_registry_names(group: str) -> None:
    files = sorted(p.stem for p in (CONF / group).glob("*.yaml"))
    assert files == GROUPS[group].names()


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_each_file_names_its_own_entry_with_accepted_parameters(group: str) -> None:
    registry = GROUPS[group]
    for path in (CONF / group).glob("*.yaml"):
        node = yaml.safe_load(path.read_text())
        assert node["name"] == path.stem, f"{path}: name must equal the file name"
        params = set(node) - {"name", "batch_size"} if group == "task" else set(node) - {"name"}
        accepted = set(registry.accepted_params(path.stem))
        assert params <= accepted, f"{path}: {sorted(params - accepted)} not accepted by {group}={path.stem}"


@pytest.mark.parametrize("option", sorted(p.stem for p in (CONF / "experiment").glob("*.yaml")))
def test_every_experiment_preset_composes(option: str) -> None:
    cfg = compose([f"experiment={option}"])
    assert cfg.name and cfg.task.name in TASKS.names()


@pytest.mark.parametrize("group", ["model", "trainer", "logger"])
def test_every_preset_of_the_other_groups_composes(group: str) -> None:
    for path in (CONF / group).glob("*.yaml"):
        compose([f"{group}={path.stem}"])
