"""``experiment=efficient`` (ListOps) and ``experiment=efficient_charlm``: the grids compose, cover the
types they compare, and one cell of each trains at a tiny budget."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from experiments.app.preflight import preflight
from experiments.config.roles import expand_roles
from experiments.config.spec import build_spec
from experiments.training.single_run import train
from tests.helpers.config import compose
from tests.helpers.paths import CONF, SHARED_DATA
from variants import ATTENTION

PRESETS = {"efficient": "encoder_attention", "efficient_charlm": "decoder_attention"}
TINY_RUN = [
    "trainer.max_steps=2",
    "trainer.val_check_interval=2",
    "trainer.limit_val_batches=1",
    "progress_bar=false",
    "logger=none",
    "model.d_model=16",
    "model.ffn_dim=32",
]


def grid(preset: str) -> list[dict]:
    """The role's sweep values, parsed as the sweeper parses them."""
    role = PRESETS[preset]
    params = OmegaConf.load(CONF / "experiment" / f"{preset}.yaml").hydra.sweeper.params
    (override,) = OverridesParser.create().parse_overrides([f"model.{role}={params[f'model.{role}']}"])
    return [dict(v) for v in override.sweep_iterator()]


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_grid_compares_the_efficient_types_with_grouped_heads(preset):
    cells = grid(preset)
    names = {c["name"] for c in cells}
    kernelised = {n for n in ATTENTION.names() if not ATTENTION.get(n).supports_score_bias}
    assert {"soft", "multihead", "local"} | kernelised <= names
    grouped = [c for c in cells if c.get("num_kv_heads") is not None]
    assert grouped and all(c["num_kv_heads"] < c["num_heads"] for c in grouped)
    preflight(["-m", f"experiment={preset}"])  # every cell composes and names registered types


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_cell_builds_with_the_preset_encoding(preset):
    """Every variant of the grid takes the preset's position encoding (none is refused at build time)."""
    from experiments.model.transformer import ModelSpec, Transformer, VariantSpec

    role = PRESETS[preset]
    for cell in grid(preset):
        mapping = "{" + ",".join(f"{k}:{v}" for k, v in cell.items()) + "}"
        cfg = expand_roles(compose([f"experiment={preset}", f"model.{role}={mapping}"]))
        node = dict(cfg.model[role])
        spec = ModelSpec(
            arch=cfg.model.arch,
            vocab_size=20,
            attention=VariantSpec("multihead", {"num_heads": 4}),
            position=VariantSpec(cfg.position.name),
            d_model=cfg.model.d_model,
            ffn_dim=32,
            encoder_layers=1,
            decoder_layers=1,
            dropout=0.0,
            num_classes=10,
            **{role: VariantSpec(node.pop("name"), node)},
        )
        Transformer(spec)


def test_one_listops_cell_runs_at_a_tiny_budget(tmp_path: Path):
    overrides = [
        "experiment=efficient",
        "model.encoder_attention={name:performer,num_heads:2,num_features:16}",
        *TINY_RUN,
        "task.train_size=64",
        "task.val_size=16",
        "task.test_size=8",
        "task.batch_size=8",
        "num_threads=1",
    ]
    result = train(build_spec(compose(overrides)), tmp_path, overrides)
    assert result["status"] == "completed", result["error"]
    assert result["config"]["model.encoder_attention.name"] == "performer"
    assert set(result["by_length"]) == {"32", "64", "96", "128"}


@pytest.mark.skipif(not (SHARED_DATA / "tinyshakespeare").is_dir(), reason="shared tinyshakespeare data not present")
def test_one_charlm_cell_runs_at_a_tiny_budget(tmp_path: Path):
    overrides = [
        "experiment=efficient_charlm",
        "model.decoder_attention={name:linear,num_heads:2}",
        *TINY_RUN,
        "task.context=32",
        "task.eval_contexts=[32,64]",
        "task.batch_size=4",
        "task.val_windows=4",
        "num_threads=1",
    ]
    result = train(build_spec(compose(overrides)), tmp_path, overrides)
    assert result["status"] == "completed", result["error"]
    assert result["config"]["model.decoder_attention.name"] == "linear"
    assert set(result["by_length"]) == {"32", "64"}
