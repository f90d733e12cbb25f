"""An ensemble's members as configurations: their seeds, their folders, their command lines and configs.

Apart from run.py (the training) so that ensemble/folder.py, which checks the folders before any
work, and app/train.py ask them without importing the training.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from experiments.config.spec import Spec, spec_of

SHARED = "ensemble"  # the members' shared folder under the run: checkpoint, batched log, lock


@dataclass
class Member:
    """A member still to train: its seed, spec, folder, command line, result so far and assembled run parts."""

    seed: int
    spec: Spec
    run_dir: Path
    overrides: list[str]
    result: dict[str, Any]
    parts: Any = None


def member_seeds(spec: Spec) -> list[int]:
    """The members' seeds: those hydra/launcher=ensemble grouped, else ``seed .. seed+N-1``."""
    listed = spec.sweep.member_seeds
    if listed is not None:
        return [int(s) for s in listed]
    return [int(spec.run.seed) + i for i in range(int(spec.sweep.ensemble_seeds))]


def member_dirs(spec: Spec, run_dir: Path, seeds: list[int]) -> list[Path]:
    """Each member's folder: the sweep job's own (hydra/launcher=ensemble), else ``seed=<s>/`` under the run."""
    listed = spec.sweep.member_dirs
    if listed is not None:
        return [Path(str(d)) for d in listed]
    return [run_dir / f"seed={s}" for s in seeds]


def member_overrides(overrides: list[str], seed: int) -> list[str]:
    """The command line of the separate run this member stands for."""
    kept = []
    for o in overrides:
        key = o.lstrip("+~").split("=")[0]
        if key != "seed" and not key.startswith("ensemble."):
            kept.append(o)
    return [*kept, f"seed={seed}"]


def member_spec(spec: Spec, seed: int) -> Spec:
    """The spec of the separate run a member stands for: the ensemble's with its own seed (and the hash that
    gives), and the ensemble's checks' verdict (the members differ in nothing the checks read but the seed)."""
    plain = spec.run.resolved_config()
    plain["seed"] = seed
    return spec_of(plain, spec.problem)


def without_wandb(spec: Spec) -> Spec:
    """The spec for building a member to train: W&B keeps one run open per process, so each member's W&B run
    is opened later, around its own evaluation."""
    loggers = MappingProxyType({k: v for k, v in spec.trainer.loggers.items() if k != "wandb"})
    return replace(spec, trainer=replace(spec.trainer, loggers=loggers))


def any_result(dirs: list[Path]) -> bool:
    """Whether any member's folder holds a result (``result.json``): only then can a member be completed
    already, and the memory estimate must wait for the members still to train to be known."""
    return any((d / "result.json").is_file() for d in dirs)
