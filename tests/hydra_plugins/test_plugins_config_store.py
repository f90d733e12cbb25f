"""Each of attnlab's Hydra plugins stores its config in Hydra's ConfigStore, as Hydra's plugin guide asks: under an
``attnlab_`` name (a plugin's entry is in every Hydra app of the environment and must not take another plugin's
name, such as hydra-optuna-sweeper's ``optuna``), naming the plugin's class and exactly the keywords its
constructor takes (the signature is the reference), each with the constructor's default where it has one."""

from __future__ import annotations

import inspect

import pytest
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from experiments.app.api import compose
from hydra_plugins.attnlab_launcher.adaptive_sweeper import AdaptiveSeedSweeper
from hydra_plugins.attnlab_launcher.ensemble_launcher import EnsembleLauncher
from hydra_plugins.attnlab_sweeper.optuna_sweeper import OptunaSweeper
from hydra_plugins.attnlab_sweeper.tuned_sweeper import TunedSweeper

PLUGINS = [
    ("hydra/launcher", "attnlab_ensemble", "ensemble", EnsembleLauncher),
    ("hydra/sweeper", "attnlab_adaptive", "adaptive", AdaptiveSeedSweeper),
    ("hydra/sweeper", "attnlab_optuna", "optuna", OptunaSweeper),
    ("hydra/sweeper", "attnlab_tuned", "tuned", TunedSweeper),
]
HYDRA_KEYS = {"_target_", "_recursive_"}


def constructor_parameters(cls: type) -> dict[str, inspect.Parameter]:
    """The keywords the class takes, a **kwargs forwarded to its base class followed there."""
    found: dict[str, inspect.Parameter] = {}
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        parameters = inspect.signature(vars(klass)["__init__"]).parameters
        found |= {n: p for n, p in parameters.items() if n != "self" and p.kind != p.VAR_KEYWORD and n not in found}
        if not any(p.kind == p.VAR_KEYWORD for p in parameters.values()):
            break
    return found


# where a config's default differs from its constructor's on purpose: tuned's budget is per cell
OWN_DEFAULTS = {("attnlab_tuned", "n_trials")}


def as_config(value: object) -> object:
    """A constructor default as a config holds it: a tuple as a list, an absent mapping (None) as {}."""
    return list(value) if isinstance(value, tuple) else value


@pytest.mark.parametrize("group, name, option, cls", PLUGINS, ids=[p[1] for p in PLUGINS])
def test_the_stored_config_names_the_class_and_exactly_its_keywords(group: str, name: str, option: str, cls) -> None:
    node = ConfigStore.instance().load(f"{group}/{name}.yaml")
    assert node.provider == "attnlab"
    config = OmegaConf.to_container(node.node)
    assert config["_target_"] == f"{cls.__module__}.{cls.__qualname__}"
    parameters = constructor_parameters(cls)
    assert set(config) - HYDRA_KEYS == set(parameters)
    for key, parameter in parameters.items():
        if parameter.default is inspect.Parameter.empty or (name, key) in OWN_DEFAULTS:
            continue
        expected = as_config(parameter.default)
        assert config[key] == expected or (expected is None and config[key] == {}), key


@pytest.mark.parametrize("group, name, option, cls", PLUGINS, ids=[p[1] for p in PLUGINS])
def test_attnlabs_config_option_extends_the_stored_config(group: str, name: str, option: str, cls) -> None:
    """``hydra/sweeper=optuna`` in attnlab's app is the stored node, a sampler and a pruner added."""
    stored = OmegaConf.to_container(ConfigStore.instance().load(f"{group}/{name}.yaml").node)
    full = compose([f"{group}={option}"], with_hydra=True)
    chosen = OmegaConf.to_container(OmegaConf.select(full, group.replace("/", ".")))
    added = {"sampler", "pruner"}
    assert {k: v for k, v in chosen.items() if k not in added} == {k: v for k, v in stored.items() if k not in added}
