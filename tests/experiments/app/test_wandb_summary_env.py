"""The closing summary's W&B line says W&B is off when WANDB_MODE turned it off and the config left the mode null."""

from __future__ import annotations

from pathlib import Path

from experiments.app.summary import wandb_line

CONFIG = {"logger.wandb._target_": "lightning.pytorch.loggers.WandbLogger", "logger.wandb.mode": None}


def test_wandb_mode_disabled_is_named_as_why_there_is_no_run(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert wandb_line({"run_id": "abc", "config": CONFIG}, tmp_path) == "off (WANDB_MODE=disabled)"


def test_a_mode_set_in_the_config_is_what_the_run_used(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "disabled")
    config = {**CONFIG, "logger.wandb.mode": "offline"}  # the key wins over the variable: W&B was on
    assert wandb_line({"run_id": "abc", "config": config}, tmp_path).startswith("chosen, but it did not start")
