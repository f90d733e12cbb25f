"""The composed config as ``python -m experiments.train`` sees it, and the overrides that make a run tiny."""

from __future__ import annotations

from tests.helpers.paths import CONF

# Overrides that make a run take seconds: a tiny model, a few steps, small data.
TINY = [
    "model.d_model=16",
    "model.ffn_dim=32",
    "model.encoder_layers=1",
    "model.decoder_layers=1",
    "attention.num_heads=2",
    "trainer.max_steps=2",
    "trainer.val_check_interval=2",
    "trainer.limit_val_batches=1",
    "progress_bar=false",
    "task.train_size=64",
    "task.val_size=16",
    "task.test_size=8",
    "task.batch_size=8",
    "eval.attention_maps=false",
    "logger=csv",
]


def compose(overrides: list[str]):
    """The composed config exactly as `python -m experiments.train` would see it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from experiments.config.schema import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=overrides)
