"""A sweep over an option from a folder the command line's ``hydra.searchpath`` adds: the grid check takes the
added folder's presets as choices (a preset of any name: its variant name is checked when the cell composes),
while attnlab's own folder still offers only registered variants and a typo is still one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from omegaconf import open_dict

from experiments.app.preflight import CONF
from experiments.config.schema import register_configs
from experiments.config.spec import grid_spec
from experiments.sweep.grid import SweepConfigError, check_grid, register_resolvers


def check_sweep(tmp_path: Path, grid: str) -> None:
    """check_grid as the launching process runs it: inside the sweep's Hydra, with the search path added."""
    mine = tmp_path / "my_configs" / "attention" / "narrow_local.yaml"
    mine.parent.mkdir(parents=True, exist_ok=True)
    mine.write_text("name: local\nnum_heads: 1\nscore: scaled_dot\nmode: monotonic\nwindow: 3\nratio: 1.0\n")
    searchpath = f"hydra.searchpath=[file://{mine.parent.parent}]"
    register_configs()
    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = hydra_compose(config_name="config", overrides=[searchpath], return_hydra_config=True)
        with open_dict(cfg):
            cfg.hydra.overrides.task = [searchpath, grid]
        check_grid(grid_spec(cfg))


def test_a_preset_from_the_added_folder_is_a_choice_of_the_grid(tmp_path: Path) -> None:
    check_sweep(tmp_path, "attention=narrow_local,local")


def test_a_typo_beside_the_added_folder_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(SweepConfigError, match="attention='narrow_locl'.*did you mean 'narrow_local'") as err:
        check_sweep(tmp_path, "attention=narrow_locl,local")
    assert "\n" not in str(err.value)
