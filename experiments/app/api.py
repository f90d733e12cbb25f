"""Training from Python (a notebook, a script): the command line's overrides in, the result dict out.

    from experiments import run
    result = run(["task=reverse", "attention=local", "trainer.max_steps=200"], run_dir="runs/local")
    result["metrics"]["test/seq_acc"]

The config is composed exactly as ``python -m experiments.train`` composes it, the same one-line
checks run first (a bad override raises ``PreflightError`` or ``ConfigError``), and the run writes
the same files into ``run_dir`` (result.json, checkpoints, logs).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Sequence

from omegaconf import DictConfig


def compose(overrides: Sequence[str] = ()) -> DictConfig:
    """The config ``python -m experiments.train <overrides>`` runs with (without Hydra's own node)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from experiments.app.preflight import CONF
    from experiments.config.schema import register_configs
    from experiments.sweep.grid import register_resolvers

    register_configs()
    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides))


def run(overrides: Sequence[str] = (), run_dir: str | Path | None = None) -> dict[str, Any]:
    """Train and test one configuration; returns its result (also written to ``run_dir/result.json``).

    ``run_dir`` defaults to ``outputs/<name>/<time>`` under the current folder, as on the command line.
    A run that diverges or fails returns its result with that status rather than raising.
    """
    from experiments.app.preflight import preflight
    from experiments.sweep.grid import register_resolvers, set_threads, threads_per_process
    from experiments.training.single_run import train

    register_resolvers()
    if isinstance(overrides, (str, bytes)) or not all(isinstance(o, str) for o in overrides):
        # a string is a sequence too: run("attention=local") would be read as one override per character
        raise ValueError(f"run() takes a list of override strings, e.g. run([{overrides!r}]); got {overrides!r}")
    overrides = list(overrides)
    if any(o in ("-m", "--multirun") or o.startswith("-") for o in overrides):
        raise ValueError(f"run() takes overrides only, not command-line flags: {overrides}")
    preflight(overrides)
    cfg = compose(overrides)
    if run_dir is None:
        run_dir = Path("outputs") / cfg.name / datetime.now().strftime("%Y-%m-%d_%H-%M-%S_%f")
    run_dir = Path(run_dir)
    from experiments.record.files import blocking_file

    if blocking_file(run_dir) is not None:
        raise ValueError(f"run_dir={run_dir} is not allowed; {blocking_file(run_dir)} is a file, not a folder")
    run_dir.mkdir(parents=True, exist_ok=True)
    set_threads(threads_per_process(None, cfg.trainer, cfg.num_threads))
    return train(cfg, run_dir, overrides)
