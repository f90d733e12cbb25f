"""A run's files for a team, and output problems said in one line: modes under the umask, a full disk."""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from experiments.config.spec import build_spec
from experiments.training.single_run import train
from tests.helpers.cli import train_cli
from tests.helpers.config import TINY, compose
from tests.helpers.env import environment

ENV = environment()


@contextlib.contextmanager
def umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_results_state_and_checkpoints_take_the_umask_mode(mask: int, tmp_path: Path) -> None:
    """What open() would give a new file: 0644 under umask 022 (a teammate can read it), 0600 under 077."""
    overrides = [*TINY, "trainer.max_steps=2", "checkpoint_every_n_steps=1"]
    with umask(mask):
        result = train(build_spec(compose(overrides)), tmp_path, overrides)
    assert result["status"] == "completed", result["error"]
    expected = 0o666 & ~mask
    for name in ("result.json", "run_state.json", "checkpoints/last.ckpt"):
        assert (tmp_path / name).stat().st_mode & 0o777 == expected, (name, oct(expected))


@pytest.fixture
def small_disk(tmp_path: Path):
    """A tmpfs of a given size at a fresh folder (root and mount needed), unmounted afterwards."""
    mounted: list[Path] = []

    def make(size: str) -> Path:
        where = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
        where.mkdir()
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, text=True
        )
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here (needs root): {proc.stderr.strip()}")
        mounted.append(where)
        return where

    yield make
    for where in mounted:
        subprocess.run(["umount", str(where)], check=False)


# default model (a 2.7 MB checkpoint): refused before training; tiny model (68 KB): its first checkpoint fails
@pytest.mark.slow
@pytest.mark.parametrize("model, size", [([], "300k"), (TINY[:5], "100k")], ids=["before-training", "checkpoint"])
def test_a_full_disk_is_named_in_one_line(model: list[str], size: str, small_disk) -> None:
    run_dir = small_disk(size) / "run"
    overrides = [
        *model,
        *TINY[5:],
        "trainer.max_steps=20",
        "checkpoint_every_n_steps=5",
        "trainer.val_check_interval=10",
    ]
    proc = train_cli(*overrides, f"hydra.run.dir={run_dir}", env=ENV)
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, lines
    assert "no space left" in lines[0] and str(run_dir / "checkpoints") in lines[0], lines
