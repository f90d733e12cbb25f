"""Sweeps as a test starts them: ``python -m experiments.train -m`` in a process of its own or, for a command
refused before its first job, in this one; the cells' results; the config the launching process sees."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from omegaconf import open_dict

from experiments.config.schema import register_configs
from experiments.sweep.grid import register_resolvers
from tests.helpers.config import TINY
from tests.helpers.env import ENV
from tests.helpers.paths import CONF
from tests.helpers.warm import run_module

# one intra-op thread per training process: the tests may run two at a time on two cores
QUIET = [*TINY, "num_threads=1"]


def multirun(tmp_path: Path, *args: str, timeout: int = 300) -> tuple[subprocess.CompletedProcess, Path]:
    sweep_dir = tmp_path / "sweep"
    proc = run_module(
        "experiments.train", "-m", *args, f"hydra.sweep.dir={sweep_dir}", cwd=tmp_path, env=ENV, timeout=timeout
    )
    return proc, sweep_dir


def refused_in_process(tmp_path: Path, monkeypatch, capfd, *args: str, multirun: bool = True) -> tuple[int, str, Path]:
    """``python -m experiments.train -m *args`` (without ``-m`` when not ``multirun``) run in this process:
    (exit code, stderr, sweep folder).

    For a command refused before its first job, where a process of its own would cost more than the
    refusal: the same main(), the same Hydra sweeper, the same SystemExit and stderr line."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    from experiments.app.train import main

    sweep_dir = tmp_path / "sweep"
    mode = ["-m", f"hydra.sweep.dir={sweep_dir}"] if multirun else []
    monkeypatch.setattr(sys, "argv", ["experiments.train", *mode[:1], *args, *mode[1:]])
    monkeypatch.chdir(tmp_path)
    for key in ("WANDB_MODE", "WANDB_SILENT", "HYDRA_FULL_ERROR"):
        monkeypatch.setenv(key, ENV[key])
    # what Hydra sets for its run, given back after it: later tests in this worker read HydraConfig
    # (a W&B run asks it whether it is a multirun's cell) and log through the root logger
    root, hydra_cfg = logging.getLogger(), HydraConfig.instance().cfg
    handlers, level = root.handlers[:], root.level
    try:
        with pytest.raises(SystemExit) as stopped:
            main()
    finally:
        GlobalHydra.instance().clear()
        HydraConfig.instance().cfg = hydra_cfg
        root.handlers[:] = handlers
        root.setLevel(level)
    return stopped.value.code, capfd.readouterr().err, sweep_dir


def results(sweep_dir: Path) -> dict[Path, dict]:
    return {p.parent: json.loads(p.read_text()) for p in sorted(sweep_dir.rglob("result.json"))}


def cell_with(sweep_dir: Path, override: str) -> Path | None:
    """The cell folder whose overrides include ``override`` (long override lists name folders by hash)."""
    for saved in sweep_dir.glob("*/.hydra/overrides.yaml"):
        if override in (yaml.safe_load(saved.read_text()) or []):  # empty while Hydra writes it
            return saved.parent.parent
    return None


def hydra_config(overrides: list[str], sweep: list[str] | None = None, params: dict | None = None):
    """The config the launching process sees: ``sweep`` stands for the grid on the command line."""
    register_configs()
    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = hydra_compose(config_name="config", overrides=overrides, return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.overrides.task = [*overrides, *(sweep or [])]
        if params is not None:
            cfg.hydra.sweeper.params = params
    return cfg
