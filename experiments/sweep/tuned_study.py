"""A tuned comparison (``hparams_search=tuned``): the grid's cells, each tuned by a study of its own with the
same budget on tuning seeds, then trained at its best configuration and at the shared defaults on fresh
seeds that never tuned anything. What the sweeper (hydra_plugins/attnlab_sweeper/tuned_sweeper.py) plans
before any trial: the cells, the search space, the seeds.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from experiments.sweep.optuna_study import StudyError, distribution


def split_cells(params: Mapping[str, Any], arguments: Sequence[str]) -> tuple[list[str], list[list[str]], list[str]]:
    """(the overrides that join the search space ``params``, the cells, the fixed overrides).

    A key of the search space joins it; any other swept key (``attention=soft,local``) is an axis of the
    grid of cells; a single value is fixed for every run.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    space_args, axes, fixed = [], [], []
    parser = OverridesParser.create()
    for arg in arguments:
        key = arg.split("=", 1)[0].lstrip("+~")
        if params.get(key) is not None:
            space_args.append(arg)
            continue
        if key == "seed":
            raise StudyError(
                "seed: a tuned comparison takes its seeds from hydra.sweeper.tuning_seeds and "
                "hydra.sweeper.final_seeds, not from the command line"
            )
        if distribution(key, arg.split("=", 1)[1]) is None:
            fixed.append(arg)
            continue
        (override,) = parser.parse_overrides([arg])
        values = [str(v) for v in override.sweep_string_iterator()]
        axes.append([f"{arg.split('=', 1)[0]}={v}" for v in values])
    return space_args, [list(cell) for cell in itertools.product(*axes)], fixed


def grid_arguments(params: Mapping[str, Any], arguments: Sequence[str]) -> list[str]:
    """The grid as overrides: a preset's ``hydra.sweeper.params`` (its seed list aside: a tuned comparison
    has its own seeds), then the command line, whose value of a key wins over the preset's."""
    given = {arg.split("=", 1)[0].lstrip("+~") for arg in arguments}
    preset = [f"{k}={v}" for k, v in params.items() if v is not None and k != "seed" and k not in given]
    return [*preset, *arguments]


def check_seeds(tuning: Sequence[Any], final: Sequence[Any]) -> tuple[list[int], list[int]]:
    """The tuning and final seeds as ints; refused when empty or when a final seed also tunes (a leak)."""
    for key, seeds in (("tuning_seeds", tuning), ("final_seeds", final)):
        if not seeds or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
            raise StudyError(f"hydra.sweeper.{key}={list(seeds)!r}: give a non-empty list of integer seeds")
    shared = sorted(set(tuning) & set(final))
    if shared:
        raise StudyError(
            f"hydra.sweeper.final_seeds: seed(s) {shared} also in tuning_seeds; the seeds that test a cell's "
            "best configuration must never have tuned it"
        )
    return [int(s) for s in tuning], [int(s) for s in final]


def cell_label(cell: Sequence[str]) -> str:
    """``attention=soft,position=rope``: the cell's overrides, or ``all`` for a grid of one cell."""
    return ",".join(cell) or "all"


def study_name(base: str, cell: Sequence[str]) -> str:
    """The cell's study: the sweep's study name and the cell, in characters any storage accepts."""
    return f"{base}__{re.sub(r'[^A-Za-z0-9_.-]+', '_', cell_label(cell))}"
