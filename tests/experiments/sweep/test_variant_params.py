"""``experiment=variant_params``: one multirun over the main parameter of each variant.

The grid is over the options of ``conf/variant_param/`` (``glob(*)``); each option selects a
variant and sets one of its parameters. The values the grid must cover come from the
registries' own declarations (estimators, scores) and from what the preset is for (relative
``max_distance`` including 0, one head), not from the option files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hydra import compose as hydra_compose
from hydra import initialize_config_dir

from experiments.app.preflight import PreflightError, preflight
from experiments.config.checks import check_config
from experiments.config.schema import register_configs
from experiments.config.spec import grid_spec
from experiments.model.transformer import VariantSpec
from experiments.sweep.grid import check_grid, grid_values
from tests.helpers.cli import train_cli
from tests.helpers.config import TINY, compose
from tests.helpers.env import environment
from tests.helpers.paths import CONF
from variants import ATTENTION, POSITION
from variants.attention.hard import ESTIMATORS
from variants.attention.scores import SCORES

OPTIONS = sorted(p.stem for p in (CONF / "variant_param").glob("*.yaml"))
# (group, registry name, parameter) -> the values the sweep must cover at least
MUST_COVER = {
    ("attention", "local", "window"): None,  # several windows; which ones is the preset's choice
    ("position", "relative", "max_distance"): {0},  # 0: relative positions carrying no information
    ("attention", "multihead", "num_heads"): {1},  # one head: multihead as a single soft head
    ("attention", "hard", "estimator"): set(ESTIMATORS),
    ("attention", "soft", "score"): set(SCORES),
}


def preset(*overrides: str):
    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return hydra_compose(
            config_name="config", overrides=["experiment=variant_params", *overrides], return_hydra_config=True
        )


def option_file(option: str) -> tuple[tuple[str, str, str], object]:
    """(group, variant, key) and value that an option file sets; it must set exactly one."""
    node = yaml.safe_load((CONF / "variant_param" / f"{option}.yaml").read_text())
    (choice,) = node.pop("defaults")
    ((override, name),) = choice.items()
    group = override.removeprefix("override /")
    ((key, value),) = node.pop(group).items()
    assert not node, f"variant_param={option} sets more than {group}.{key}: {node}"
    return (group, name, key), value


def test_the_preset_sweeps_every_option_in_one_multirun():
    cfg = preset()
    assert cfg.hydra.sweeper.params.variant_param == "glob(*)"
    grid = dict(grid_values(grid_spec(cfg)))
    assert grid["variant_param"] == OPTIONS  # what the sweep will run, as the sweep checker expands it
    check_grid(grid_spec(cfg))  # every option exists, nothing listed twice


def test_the_options_cover_the_main_parameter_of_each_variant():
    covered: dict[tuple[str, str, str], set] = {}
    for option in OPTIONS:
        key, value = option_file(option)
        covered.setdefault(key, set()).add(value)
    assert set(covered) == set(MUST_COVER)
    for key, must in MUST_COVER.items():
        assert len(covered[key]) >= 3, (key, covered[key])
        assert must is None or must <= covered[key], (key, must - covered[key])


def test_every_option_composes_to_its_variant_and_builds():
    for option in OPTIONS:
        (group, name, key), value = option_file(option)
        cfg = compose(["experiment=variant_params", f"variant_param={option}"])
        assert cfg[group].name == name and cfg[group][key] == value, option
        check_config(cfg)
        attention, position = VariantSpec.of(cfg.attention), VariantSpec.of(cfg.position)
        layer = ATTENTION.build(attention.name, d_model=cfg.model.d_model, **attention.params)
        POSITION.build(position.name, d_model=cfg.model.d_model, num_heads=layer.num_heads, **position.params)


def test_a_misspelt_option_is_one_line_before_anything_runs():
    with pytest.raises(PreflightError, match=r"variant_param=local_window_3 is unknown; .*'local_window_2'"):
        preflight(["-m", "experiment=variant_params", "variant_param=local_window_3"])


@pytest.mark.slow
def test_a_tiny_variant_params_multirun_records_each_parameter(tmp_path: Path):
    options = ["local_window_1", "relative_max_distance_0"]
    env = environment(HYDRA_FULL_ERROR="0")
    proc = train_cli(
        "-m",
        "experiment=variant_params",
        f"variant_param={','.join(options)}",
        *TINY,
        "num_threads=1",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = {p.parent.name: json.loads(p.read_text()) for p in (tmp_path / "sweep").rglob("result.json")}
    assert len(results) == 2 and all(r["status"] == "completed" for r in results.values())
    by_option = {next(o for o in options if f"variant_param={o}" in folder): r for folder, r in results.items()}
    assert by_option["local_window_1"]["config"]["attention.window"] == 1
    assert by_option["local_window_1"]["attention"] == "local"
    assert by_option["relative_max_distance_0"]["config"]["position.max_distance"] == 0
    assert by_option["relative_max_distance_0"]["position"] == "relative"
