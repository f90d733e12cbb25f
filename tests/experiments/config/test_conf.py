"""The Hydra config groups mirror the registries one to one, and every group file composes."""

from __future__ import annotations

import pytest
import yaml
from omegaconf import OmegaConf

from experiments.tasks import TASKS
from tests.helpers.config import compose
from tests.helpers.paths import CONF
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


OTHER_GROUPS = ("model", "trainer", "callbacks", "logger")
PRESETS = [(group, path.stem) for group in OTHER_GROUPS for path in sorted((CONF / group).glob("*.yaml"))]


def test_other_groups_have_their_presets() -> None:
    """The parametrisation below is not empty: each group holds its default and a second preset."""
    found = {group: {stem for g, stem in PRESETS if g == group} for group in OTHER_GROUPS}
    assert found["model"] >= {"small", "base"}
    assert found["trainer"] >= {"cpu", "ddp", "gpu"}
    assert found["logger"] >= {"default", "none", "csv", "wandb", "tensorboard"}
    assert found["callbacks"] >= {"default", "none", "early_stopping", "lr_monitor", "best_checkpoint"}


def assert_sets(composed, written, where: str) -> None:
    """Every value the yaml file writes is in the composed node (nested mappings key by key)."""
    for key, value in written.items():
        assert key in composed, f"{where}.{key} missing after composition"
        if isinstance(value, dict):
            assert_sets(composed[key], value, f"{where}.{key}")
        else:
            assert composed[key] == value, f"{where}.{key}: composed {composed[key]!r}, file says {value!r}"


@pytest.mark.parametrize("group, preset", PRESETS, ids=[f"{g}={p}" for g, p in PRESETS])
def test_every_preset_of_the_other_groups_composes(group: str, preset: str) -> None:
    """Choosing the preset gives its values: nothing of it is lost or overridden by what it extends."""
    cfg = compose([f"{group}={preset}"])
    written = yaml.safe_load((CONF / group / f"{preset}.yaml").read_text()) or {}
    for included in written.pop("defaults", None) or []:  # options of the same group it extends
        if included != "_self_":
            extended = yaml.safe_load((CONF / group / f"{included}.yaml").read_text()) or {}
            extended.pop("defaults", None)
            written = {**extended, **written}
    if preset == "none":  # logger=none, callbacks=none: nothing at all
        assert not cfg[group], f"{group}=none composes to {OmegaConf.to_container(cfg[group])}"
        return
    if (
        group == "model" and not written
    ):  # model=small is the schema's defaults, defined once in experiments/config/schema.py
        from experiments.config.schema import ModelConf

        assert cfg.model == OmegaConf.structured(ModelConf)
        return
    assert written, f"conf/{group}/{preset}.yaml sets nothing"
    # unresolved: an interpolation (trainer.gradient_clip_val: ${optim.grad_clip}) is what the file says
    assert_sets(OmegaConf.to_container(cfg[group], resolve=False), written, group)
