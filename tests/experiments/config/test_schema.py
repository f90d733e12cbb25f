"""One schema for the model and the optimiser: every preset resolves to the settings it had before.

tests/helpers/fixtures/preset_settings.json was written by ``python -m tests.helpers.preset_settings`` from the code
before the defaults moved into experiments/config/schema.py (then in conf/config.yaml, conf/model/small.yaml,
config.py's dataclasses and the runtime specs, joined by a dict round trip).
"""

from __future__ import annotations

import json
from dataclasses import fields

import pytest
from omegaconf import OmegaConf

from experiments.config.schema import ModelConf, ModelOptions, OptimConf
from experiments.model.transformer import ModelSpec
from tests.helpers.config import compose
from tests.helpers.preset_settings import FIXTURE, presets, settings

BEFORE = json.loads(FIXTURE.read_text())


def test_the_fixture_covers_every_preset() -> None:
    assert sorted(BEFORE) == sorted(presets())


@pytest.mark.parametrize("name", sorted(presets()))
def test_preset_resolves_to_the_settings_it_had(name: str) -> None:
    assert settings(presets()[name]) == BEFORE[name]


def test_runtime_specs_are_the_schema() -> None:
    """The structured config and the runtime spec share each field and its default (one definition)."""
    assert issubclass(ModelSpec, ModelOptions) and issubclass(ModelConf, ModelOptions)
    spec_defaults = {f.name: f.default for f in fields(ModelSpec)}
    for f in fields(ModelOptions):
        assert spec_defaults[f.name] == f.default, f.name
    # nothing under conf/ repeats a default of the schema: model=small is the schema's model
    assert compose([]).model == OmegaConf.structured(ModelConf)
    assert compose([]).optim == OmegaConf.structured(OptimConf)
