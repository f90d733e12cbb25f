"""Shared test fixtures: offline W&B, Hydra composition, a tiny config for fast runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("WANDB_DISABLE_GIT", "true")

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
SHARED_DATA = ROOT.parent / "shared" / "data"

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


@pytest.fixture
def run_config():
    return compose


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is absent")
    return SHARED_DATA


def pytest_ignore_collect(collection_path: Path, config) -> bool | None:
    """tests/cluster/ needs a SLURM cluster (make test-cluster); it runs only when named on the command line."""
    cluster = ROOT / "tests" / "cluster"
    if collection_path == cluster or cluster in collection_path.parents:
        named = [Path(arg.split("::")[0]).resolve() for arg in config.args]
        if not any(p == cluster or cluster in p.parents for p in named):
            return True
    return None


def pytest_configure(config) -> None:
    # Under pytest-xdist each worker shares the machine's cores with the others:
    # one intra-op thread each avoids oversubscription stalls.
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items) -> None:
    """The longest files first (tests/durations.py): the two xdist workers end together instead of one running a
    long test alone at the end. After pytest's own ordering, which this keeps within each file."""
    from tests.durations import longest_files_first, recorded

    items[:] = longest_files_first(items, recorded())
