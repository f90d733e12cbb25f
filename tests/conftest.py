"""The suite's fixtures and hooks: offline W&B, Hydra composition, the cluster tests only when named, the run
order. What test files import lives in tests/helpers/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.config import compose
from tests.helpers.paths import SHARED_DATA, TESTS

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("WANDB_DISABLE_GIT", "true")


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
    cluster = TESTS / "cluster"
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
    """The longest files first (tests/helpers/durations.py): the two xdist workers end together instead of one running a
    long test alone at the end. After pytest's own ordering, which this keeps within each file."""
    from tests.helpers.durations import longest_files_first, recorded

    items[:] = longest_files_first(items, recorded())
