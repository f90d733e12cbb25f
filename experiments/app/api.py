"""Training from Python (a notebook, a script): the command line's overrides in, the result dict out.

    from experiments import multirun, run
    result = run(["task=reverse", "attention=local", "trainer.max_steps=200"], run_dir="runs/local")
    result["metrics"]["test/seq_acc"]
    folder = multirun(["experiment=quick", "hydra/launcher=joblib"])  # python -m experiments.train -m ...

``run`` composes the config exactly as ``python -m experiments.train`` composes it, the same one-line checks
run first (a bad override raises ``PreflightError`` or ``ConfigError``), and the run writes the same files
into ``run_dir`` (result.json, checkpoints, logs). ``ensemble.seeds=N`` trains the cell's N seeds as one
batched model, as on the command line, and returns their N results. What chooses how a sweep runs (a
launcher, a sweeper, ``hparams_search``, a swept value ``a,b``) is refused by ``run`` in one line: ``multirun``
runs it, as ``python -m experiments.train -m`` does. (Not ``experiments.sweep``: that is the sweeps' package.)
"""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any, Sequence

from omegaconf import DictConfig

# overrides that choose how a sweep runs: run() trains one configuration and would ignore them
SWEEP_GROUPS = ("hydra/launcher", "hydra/sweeper", "hparams_search")
SWEEP_NODES = ("hydra.launcher.", "hydra.sweeper.")


class SweepError(RuntimeError):
    """A sweep that was refused or stopped (its exit code and folder in one line)."""


def compose(overrides: Sequence[str] = (), with_hydra: bool = False) -> DictConfig:
    """The config ``python -m experiments.train <overrides>`` runs with (Hydra's own node too with ``with_hydra``)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from experiments.app.preflight import CONF
    from experiments.config.schema import register_configs
    from experiments.sweep.grid import register_resolvers

    register_configs()
    register_resolvers()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides), return_hydra_config=with_hydra)


def run(overrides: Sequence[str] = (), run_dir: str | Path | None = None) -> dict[str, Any] | list[dict[str, Any]]:
    """Train and test one configuration; returns its result (also written to ``run_dir/result.json``).

    ``run_dir`` defaults to ``outputs/<name>/<time>`` under the current folder, as on the command line.
    A run that diverges or fails returns its result with that status rather than raising. With
    ``ensemble.seeds=N`` the N members train as one batched model and their results come back in seed order
    (each also in ``run_dir/seed=<s>/result.json``).
    """
    from experiments.app.preflight import AlreadyCompleted, preflight
    from experiments.sweep.grid import register_resolvers, set_threads, threads_per_process

    register_resolvers()
    overrides = _override_list(overrides, "run")
    refuse_sweep_overrides(overrides)
    try:
        preflight(overrides)
    except AlreadyCompleted as done:  # its folder is read-only: nothing to train, nothing to write
        return done.result
    cfg = compose(overrides)
    if run_dir is None:
        run_dir = Path("outputs") / cfg.name / datetime.now().strftime("%Y-%m-%d_%H-%M-%S_%f")
    run_dir = Path(run_dir)
    from experiments.record.files import blocking_file

    if blocking_file(run_dir) is not None:
        raise ValueError(f"run_dir={run_dir} is not allowed; {blocking_file(run_dir)} is a file, not a folder")
    run_dir.mkdir(parents=True, exist_ok=True)
    set_threads(threads_per_process(None, cfg.trainer, cfg.num_threads))
    from experiments.config.spec import build_spec

    spec = build_spec(cfg)
    if spec.sweep.ensemble_seeds != 1:
        from experiments.ensemble import train_ensemble

        return train_ensemble(spec, run_dir, overrides)
    from experiments.training.single_run import train

    return train(spec, run_dir, overrides)


def multirun(overrides: Sequence[str] = (), sweep_dir: str | Path | None = None) -> Path:
    """Run the multirun ``python -m experiments.train -m <overrides>`` (its grid, sweeper and launcher) in a
    process of its own, as the command line does; returns its folder.

    ``sweep_dir`` defaults to the config's ``hydra.sweep.dir`` (``multirun/<name>``), under the current
    folder. Bad input raises ``PreflightError`` in one line before anything starts. A cell that fails is
    recorded in its folder (the sweep's closing summary says so) and the folder is returned; a sweep refused
    or stopped by a signal raises ``SweepError``. Read its results with ``analysis.collect(folder)``.
    """
    from experiments.app.preflight import preflight

    overrides = _override_list(overrides, "multirun")
    preflight(["-m", *overrides])
    if sweep_dir is None:  # the config's, composed at each sweep's first value (as its first cell)
        from hydra.core.override_parser.overrides_parser import OverridesParser
        from omegaconf import OmegaConf

        from experiments.app.preflight import first_value

        firsts = [first_value(o) for o in OverridesParser.create().parse_overrides(overrides)]
        full = compose([f for f in firsts if f is not None], with_hydra=True)
        sweep_dir = str(OmegaConf.select(full, "hydra.sweep.dir"))
    folder = Path(sweep_dir).absolute()
    command = [sys.executable, "-m", "experiments.train", "-m", *overrides, f"hydra.sweep.dir={folder}"]
    code = subprocess.run(command).returncode
    if code not in (0, 1):  # 1: a cell failed, which its folder records
        raise SweepError(f"the sweep ended with exit code {code} (see its output above); its folder: {folder}")
    return folder


def refuse_sweep_overrides(overrides: list[str]) -> None:
    """One line for an override that only a sweep takes (a launcher, a sweeper, a swept value)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from experiments.app.preflight import PreflightError

    try:
        parsed_overrides = OverridesParser.create().parse_overrides(overrides)
    except Exception:  # noqa: BLE001 - not override syntax: the preflight says so in its one line
        return
    for line, parsed in zip(overrides, parsed_overrides):
        key = parsed.get_key_element().lstrip("+~")
        if key.startswith(SWEEP_GROUPS + SWEEP_NODES):
            why = "chooses how a sweep runs"
        elif parsed.is_sweep_override():
            why = "is a sweep"
        elif key.startswith("ensemble.member_"):
            why = "is set by hydra/launcher=ensemble for its members"
        else:
            continue
        raise PreflightError(
            f"{line}: {why}, which run() would ignore (it trains one configuration); run the sweep with "
            f"experiments.multirun({[*overrides]!r}), as python -m experiments.train -m does"
        )


def _override_list(overrides: Sequence[str], name: str) -> list[str]:
    if isinstance(overrides, (str, bytes)) or not all(isinstance(o, str) for o in overrides):
        # a string is a sequence too: run("attention=local") would be read as one override per character
        raise ValueError(f"{name}() takes a list of override strings, e.g. {name}([{overrides!r}]); got {overrides!r}")
    overrides = list(overrides)
    if any(o.startswith("-") for o in overrides):
        raise ValueError(f"{name}() takes overrides only, not command-line flags: {overrides}")
    return overrides
