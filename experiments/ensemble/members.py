"""An ensemble's members as configurations: their seeds, their folders, their command lines and configs.

Apart from run.py (the training) so that ensemble/folder.py, which checks the folders before any
work, and app/train.py ask them without importing the training.
"""

from __future__ import annotations

import copy
from pathlib import Path

from omegaconf import DictConfig, open_dict

SHARED = "ensemble"  # the members' shared folder under the run: checkpoint, batched log, lock


def member_seeds(cfg: DictConfig) -> list[int]:
    """The members' seeds: those hydra/launcher=ensemble grouped, else ``seed .. seed+N-1``."""
    listed = cfg.ensemble.get("member_seeds")
    if listed is not None:
        return [int(s) for s in listed]
    return [int(cfg.seed) + i for i in range(int(cfg.ensemble.seeds))]


def member_dirs(cfg: DictConfig, run_dir: Path, seeds: list[int]) -> list[Path]:
    """Each member's folder: the sweep job's own (hydra/launcher=ensemble), else ``seed=<s>/`` under the run."""
    listed = cfg.ensemble.get("member_dirs")
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


def member_config(cfg: DictConfig, seed: int) -> DictConfig:
    member = copy.deepcopy(cfg)
    with open_dict(member):
        member.seed = seed
    return member


def any_result(dirs: list[Path]) -> bool:
    """Whether any member's folder holds a result (``result.json``): only then can a member be completed
    already, and the memory estimate must wait for the members still to train to be known."""
    return any((d / "result.json").is_file() for d in dirs)
