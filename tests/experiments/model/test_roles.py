"""Per-role attention (encoder self, decoder self, cross) with parameters, and the alignment preset.

Expected values come from the yaml files read here, the command line given, and the
registry's own classes; bad input is checked for one line that names the role.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from omegaconf import OmegaConf

from experiments.app.preflight import PreflightError, preflight
from experiments.config.roles import RoleError, check_roles, expand_roles, label, role_labels
from experiments.config.spec import build_spec, grid_spec
from experiments.record.result import config_hash, flatten
from tests.helpers.cli import train_cli
from tests.helpers.config import TINY, compose
from tests.helpers.paths import CONF

DATA = SimpleNamespace(vocab_size=13, pad_id=0, bos_id=1, eos_id=2, num_classes=0)


def yaml_of(name: str) -> dict:
    return yaml.safe_load((CONF / "attention" / f"{name}.yaml").read_text())


def built(overrides: list[str]):
    """The Transformer a run with these overrides trains."""
    from experiments.model.transformer import Transformer
    from experiments.training.build import model_spec

    cfg = expand_roles(compose(overrides))
    return cfg, Transformer(model_spec(build_spec(cfg), DATA))


def test_role_parameters_from_the_command_line_reach_the_built_layers():
    cfg, model = built(
        [
            "attention=multihead",
            "attention.num_heads=4",
            "attention@model.cross_attention=local",
            "model.cross_attention.window=3",
            "model.cross_attention.mode=predictive",
            "attention@model.encoder_attention=soft",
            "model.encoder_attention.score=additive",
        ]
    )
    from variants.attention.scores import Additive

    for layer in model.decoder.layers:
        cross = layer.cross_attn
        assert type(cross).__name__ == "LocalAttention" and cross.window == 3 and cross.mode == "predictive"
        assert type(layer.self_attn).__name__ == "MultiHeadAttention" and layer.self_attn.num_heads == 4
    for layer in model.encoder.layers:
        assert type(layer.self_attn).__name__ == "SoftAttention" and isinstance(layer.self_attn.score, Additive)
    # the rest of the role's node is conf/attention/local.yaml, as attention=local would load it
    assert dict(cfg.model.cross_attention) == {**yaml_of("local"), "window": 3, "mode": "predictive"}


def test_bare_name_and_mapping_forms_get_the_yaml_defaults_and_equal_the_group_form():
    group = expand_roles(compose(["attention@model.cross_attention=hard", "model.cross_attention.estimator=reinforce"]))
    mapping = expand_roles(compose(["model.cross_attention={name:hard,estimator:reinforce}"]))
    assert (
        dict(group.model.cross_attention)
        == dict(mapping.model.cross_attention)
        == {**yaml_of("hard"), "estimator": "reinforce"}
    )
    flat = [flatten(OmegaConf.to_container(c, resolve=True)) for c in (group, mapping)]
    assert config_hash(flat[0]) == config_hash(flat[1])
    bare = expand_roles(compose(["model.cross_attention=hard"]))
    assert dict(bare.model.cross_attention) == yaml_of("hard")
    assert expand_roles(compose([])).model.cross_attention is None  # null: the role uses `attention`


def test_labels_name_the_parameters_that_differ_from_the_yaml():
    assert label({**yaml_of("local"), "mode": "predictive", "window": 4}) == "local(mode=predictive,window=4)"
    assert label(yaml_of("soft")) == "soft" and label(None) is None
    cfg = expand_roles(compose(["model.cross_attention={name:hard,estimator:gumbel}"]))
    assert role_labels(cfg) == {
        "encoder_attention": None,
        "decoder_attention": None,
        "cross_attention": "hard(estimator=gumbel)",
    }
    from experiments.training.build import role_tags

    assert role_tags(build_spec(cfg).model) == ["cross_attention=hard(estimator=gumbel)"]


BAD = [
    (["attention@model.cross_attention=hrad"], ["attention@model.cross_attention=hrad", "did you mean 'hard'"]),
    (["model.cross_attention=hrad"], ["model.cross_attention", "'hrad'", "did you mean 'hard'"]),
    (["model.decoder_attention={name:sofft}"], ["model.decoder_attention", "'sofft'"]),
    (
        ["attention@model.cross_attention=local", "model.cross_attention.window=0"],
        ["model.cross_attention", "window=0", "positive integer"],
    ),
    (
        ["attention@model.cross_attention=local", "model.cross_attention.windw=3"],
        ["model.cross_attention.windw=3", "'local'", "accepted", "'window'"],
    ),
    (["model.encoder_attention={name:local,windw:3}"], ["model.encoder_attention", "['windw']"]),
    (
        ["model.cross_attention.window=3"],
        ["model.cross_attention has no attention type", "attention@model.cross_attention="],
    ),
    (
        ["attention@model.cross_attention=hard", "model.cross_attention.estimator=ppo"],
        ["model.cross_attention", "estimator='ppo'", "reinforce"],
    ),
    (["-m", "attention@model.cross_attention=soft,lcal"], ["attention@model.cross_attention=lcal", "'local'"]),
]


@pytest.mark.parametrize("argv, expected", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_role_names_and_parameters_fail_in_one_line_naming_the_role(argv, expected):
    from experiments.config.schema import register_configs

    register_configs()
    with pytest.raises(ValueError) as err:
        preflight(argv)
    message = str(err.value)
    assert isinstance(err.value, (PreflightError, RoleError)) and "\n" not in message
    for part in expected:
        assert part in message, message


def test_check_roles_names_the_role_of_a_bad_variant():
    cfg = compose(["model.cross_attention={name:hard,temperature:-1}"])
    with pytest.raises(RoleError, match=r"^model\.cross_attention: temperature=-1"):
        check_roles(expand_roles(cfg))


# -- the alignment preset ------------------------------------------------------------------------------------
def alignment_cells() -> list[str]:
    from experiments.sweep.grid import grid_values
    from tests.helpers.sweeps import hydra_config

    return dict(grid_values(grid_spec(hydra_config(["experiment=alignment"]))))["model.cross_attention"]


def test_alignment_preset_composes_every_cell_with_its_own_cross_attention():
    preset = yaml.safe_load((CONF / "experiment" / "alignment.yaml").read_text())
    cells = alignment_cells()
    assert len(cells) == 12 and preset["hydra"]["sweeper"]["params"]["model.cross_attention"]
    seen = set()
    for cell in cells:
        cfg, model = built(["experiment=alignment", f"model.cross_attention={cell}", "model.d_model=16"])
        node = dict(cfg.model.cross_attention)
        seen.add((node["name"], node.get("score"), node.get("estimator"), node.get("mode"), node.get("window")))
        layer = model.decoder.layers[0]
        assert type(layer.self_attn).__name__ == "MultiHeadAttention"
        assert layer.cross_attn.num_heads == 1 and type(layer.cross_attn).__name__.lower().startswith(node["name"])
    names = [s[0] for s in seen]
    assert names.count("soft") == 3 and names.count("hard") == 3 and names.count("local") == 6
    assert {s[2] for s in seen if s[0] == "hard"} == {"straight_through", "gumbel", "reinforce"}
    assert {(s[3], s[4]) for s in seen if s[0] == "local"} == {
        (m, w) for m in ("monotonic", "predictive") for w in (2, 4, 8)
    }


def test_alignment_on_multi30k_composes_with_the_translation_preset():
    cfg = compose(["experiment=[alignment,multi30k]", "model.cross_attention={name:local,mode:predictive,window:4}"])
    assert cfg.task.name == "translation" and cfg.model.d_model == 128 and cfg.attention.name == "multihead"


@pytest.mark.slow
def test_alignment_cell_runs_and_names_its_cross_attention(tmp_path: Path):
    """One cell of the preset at a tiny budget, as a multirun: result.json, the flattened config
    and the W&B tags all name the cross attention's variant."""
    sweep_dir = tmp_path / "sweep"
    args = [
        "-m",
        "experiment=alignment",
        *TINY,
        "logger=default",
        "num_threads=1",
        "model.cross_attention={name:local,mode:predictive,window:2}",
        f"hydra.sweep.dir={sweep_dir}",
    ]
    proc = train_cli(*args, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (path,) = sweep_dir.rglob("result.json")
    result = json.loads(path.read_text())
    assert result["status"] == "completed" and result["sweep"] == "alignment_reverse"
    assert result["cross_attention"] == "local(mode=predictive,window=2)"
    assert result["encoder_attention"] is None and result["decoder_attention"] is None
    config = result["config"]
    expected = {**yaml_of("local"), "mode": "predictive", "window": 2}
    assert {k: config[f"model.cross_attention.{k}"] for k in expected} == expected
    from analysis.data.wandb_offline import read_wandb_offline_run

    (run,) = [read_wandb_offline_run(p) for p in path.parent.rglob("offline-run-*") if p.is_dir()]
    assert "cross_attention=local(mode=predictive,window=2)" in run["tags"]
