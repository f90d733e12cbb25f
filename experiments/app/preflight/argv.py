"""The command line as Hydra reads it: its overrides without Hydra's flags, each override's values (a sweep's
choices), its first value, the config folders it adds, and the presets of a ``--config-dir``."""

from __future__ import annotations

from pathlib import Path

from experiments.app.preflight.errors import PreflightError

MULTIRUN_FLAGS = ("-m", "--multirun")
# Hydra's flags: those after which nothing of attnlab's config runs, and those that take a value
NOT_RUNNING = (
    "--help",
    "-h",
    "--hydra-help",
    "--version",
    "--shell-completion",
    "-sc",
    "--config-path",
    "-cp",
    "--config-name",
    "-cn",
    "--config-dir",
    "-cd",
    "--experimental-rerun",
)
WITH_VALUE = ("--cfg", "-c", "--package", "-p")
INFO_TOPICS = ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")


def overrides_of(argv: list[str]) -> list[str] | None:
    """The overrides of a command line without Hydra's flags (``--cfg job``, ``--info``, ``-m``, ``--resolve``);
    None when a flag means attnlab's config is not what runs (``--help``, ``-cn other``)."""
    args, rest = [], list(argv)
    while rest:
        arg = rest.pop(0)
        flag = arg.split("=", 1)[0]
        if flag in NOT_RUNNING:
            return None
        if flag in WITH_VALUE:
            if "=" not in arg and rest:
                rest.pop(0)
        elif flag in ("--info", "-i"):
            if "=" not in arg and rest and rest[0] in INFO_TOPICS:
                rest.pop(0)
        elif not arg.startswith("-"):
            args.append(arg)
    return args


def values_of(override) -> list[str]:
    """The values an override takes: one for a plain override, each choice for a choice sweep.

    A mapping value (``model.cross_attention={name:hard,estimator:reinforce}``) stands for its name.
    """
    if override.is_sweep_override():
        try:
            return [_name_of(v) for v in override.sweep_iterator()]
        except Exception:  # noqa: BLE001 - range/interval sweeps (Optuna) are not choices
            return []
    value = override.value()
    if isinstance(value, list):  # several configs of one group, merged in order: experiment=[a,b]
        return [_name_of(v) for v in value]
    return [] if value is None else [_name_of(value)]


def _name_of(value) -> str:
    return str(value.get("name")) if isinstance(value, dict) else str(value)


def first_value(override) -> str | None:
    """The override at its first value (a sweep's first choice); None for an Optuna range, which has none."""
    if not override.is_sweep_override():
        return override.input_line
    values = values_of(override)
    if not values:
        return None  # an Optuna range: left to the sweeper
    return f"{override.input_line.split('=', 1)[0]}={values[0]}"


def search_path_folders(overrides: list) -> tuple[Path, ...]:
    """The config folders a command line's ``hydra.searchpath=[...]`` adds, as Hydra reads its entries: ``file://``
    or a bare path (relative to the current folder), ``pkg://`` a package's folder; others (``structured://``) hold
    no files."""
    import importlib.util

    folders: list[Path] = []
    for override in overrides:
        if override.get_key_element().lstrip("+~") != "hydra.searchpath" or override.is_sweep_override():
            continue
        value = override.value()
        for entry in value if isinstance(value, list) else [value]:
            scheme, sep, rest = str(entry).partition("://")
            if not sep or scheme == "file":
                folders.append(Path(rest if sep else scheme))
            elif scheme == "pkg":
                try:
                    spec = importlib.util.find_spec(rest.replace("/", "."))
                except (ImportError, ValueError):
                    spec = None  # Hydra names the missing package itself
                folders += [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    return tuple(folders)


def check_config_dirs(argv: list[str]) -> None:
    """The presets of a ``--config-dir`` folder read as YAML, before Hydra's page-long error (and safely: a
    ``!!python`` tag is refused, never run)."""
    from experiments.config.checks import ConfigError
    from experiments.config.yaml_files import check_config_dir

    overrides = [a for a in argv if "=" in a and not a.startswith("-")]
    for i, arg in enumerate(argv):
        flag, has_value, value = arg.partition("=")
        if flag not in ("--config-dir", "-cd"):
            continue
        if not has_value:
            value = argv[i + 1] if i + 1 < len(argv) else ""
        try:
            check_config_dir(value, overrides)
        except ConfigError as err:
            raise PreflightError(str(err)) from None
