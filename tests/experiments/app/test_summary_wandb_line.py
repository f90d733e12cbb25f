"""The closing summary's W&B line says why there is no W&B run: none chosen (``logger=csv``) is not a failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.app.summary import wandb_line


@pytest.mark.parametrize(
    "config,said",
    [
        ({"logger.csv._target_": "lightning.pytorch.loggers.CSVLogger"}, "not used (loggers: csv;"),
        ({"logger": None}, "not used (loggers: none;"),
        (
            {"logger.csv._target_": "x", "logger.wandb._target_": "y", "logger.wandb.mode": "disabled"},
            "off (logger.wandb.mode=disabled)",
        ),
        ({"logger.wandb._target_": "y", "logger.wandb.mode": "offline"}, "chosen, but it did not start"),
    ],
)
def test_no_wandb_run_is_explained_by_the_loggers_chosen(config: dict, said: str, tmp_path: Path) -> None:
    line = wandb_line({"run_id": "abc", "config": config}, tmp_path)
    assert line.startswith(said)
    assert "failed" not in line


def test_a_wandb_run_folder_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "wandb" / "offline-run-20260101_000000-abc"
    folder.mkdir(parents=True)
    config = {"logger.wandb._target_": "y"}
    assert wandb_line({"run_id": "abc", "config": config}, tmp_path).startswith(str(folder))
