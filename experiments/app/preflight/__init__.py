"""Check a command line before Hydra runs anything, and say what is wrong in one line.

Hydra's own composition errors span several lines and, in a multirun, surface
only when the bad cell's turn comes. Here every group choice is checked against
``conf/<group>/*.yaml`` and every variant name against its registry, for every
value of every sweep, before the first cell starts. A single run is composed
in full and its values checked too; in a sweep, value errors stay per cell (the
other cells still run and the bad one is recorded as failed).

The command line (``argv``), each override's names (``names``), its composition (``compose``), the checks of
each composed cell (``cell``) and of a single run (``single_run``), and the one-line errors (``errors``).
"""

from __future__ import annotations

from pathlib import Path

from experiments.app.preflight.argv import (
    MULTIRUN_FLAGS,
    check_config_dirs,
    first_value,
    overrides_of,
    search_path_folders,
    values_of,
)
from experiments.app.preflight.cell import check_cell
from experiments.app.preflight.errors import AlreadyCompleted, PreflightError, one_line
from experiments.app.preflight.names import CONF, GROUPS, check_hydra_sweep, check_names, check_trainer_override


def preflight(argv: list[str]) -> None:
    """Raise PreflightError (one line) when the command line cannot work."""
    multirun = any(a in MULTIRUN_FLAGS for a in argv)
    check_config_dirs(argv)
    args = overrides_of(argv)
    if args is None:
        return  # --help, another config (-cp, -cn): nothing of attnlab's runs
    overrides = _parse(args)
    search_path = _check_overrides(overrides)

    from experiments.config.schema import register_configs

    register_configs()
    for index, cell in enumerate(_cells(overrides)):
        check_cell(
            [c for c in cell if c is not None],
            overrides,
            args,
            search_path=search_path,
            multirun=multirun,
            first=index == 0,
        )


def _parse(args: list[str]) -> list:
    """Hydra's parse of the overrides, its error in one line."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    try:
        return parser.parse_overrides(args)
    except Exception as err:  # noqa: BLE001
        raise PreflightError(one_line(err)) from None


def _check_overrides(overrides: list) -> tuple[Path, ...]:
    """Each override's key and values, before anything is composed; returns the config folders they add."""
    for override in overrides:
        check_hydra_sweep(override)
    search_path = search_path_folders(overrides)
    for override in overrides:
        if override.key_or_group == "plugins" and not override.is_sweep_override():
            from variants.discovery import import_plugins

            import_plugins([str(m) for m in (override.value() or [])])  # they may register new names
    from experiments.config.checks import ConfigError
    from experiments.config.extras import check_choice

    for override in overrides:
        try:
            check_choice(override.get_key_element(), values_of(override))
        except ConfigError as err:
            raise PreflightError(str(err)) from None
        check_names(override.get_key_element(), values_of(override), search_path)
        check_trainer_override(override.get_key_element())
    return search_path


def _cells(overrides: list) -> list[list[str | None]]:
    """One configuration per sweep value, the other sweeps at their first value: linear in the grid.
    None stands for an Optuna range, which has no first value and is left to the sweeper."""
    sweeps = [(i, values_of(o)) for i, o in enumerate(overrides) if o.is_sweep_override() and values_of(o)]
    base = [first_value(o) for o in overrides]
    return [base] + [
        base[:i] + [f"{overrides[i].input_line.split('=', 1)[0]}={v}"] + base[i + 1 :]
        for i, values in sweeps
        for v in values[1:]
    ]


__all__ = ["CONF", "GROUPS", "AlreadyCompleted", "PreflightError", "first_value", "overrides_of", "preflight"]
