"""Check a command line before Hydra runs anything, and say what is wrong in one line.

Hydra's own composition errors span several lines and, in a multirun, surface
only when the bad cell's turn comes. Here every group choice is checked against
``conf/<group>/*.yaml`` and every variant name against its registry, for every
value of every sweep, before the first cell starts. A single run is composed
in full and its values checked too; in a sweep, value errors stay per cell (the
other cells still run and the bad one is recorded as failed).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Iterable

from attnlab.roles import ROLES

CONF = Path(__file__).resolve().parents[2] / "conf"
GROUPS = (
    "task",
    "attention",
    "position",
    "model",
    "trainer",
    "callbacks",
    "logger",
    "experiment",
    "hparams_search",
    "variant_param",
)
MULTIRUN_FLAGS = ("-m", "--multirun")


class PreflightError(ValueError):
    """A command line that cannot run; the message is one line."""


class AlreadyCompleted(Exception):
    """A single run whose folder holds its completed result and cannot be written (a read-only file system):
    nothing to do, and Hydra's log file and config record could not be opened there. The message is one line."""

    def __init__(self, result_file: Path, result: dict) -> None:
        super().__init__(f"already completed with the same config ({result_file}); skipped (its folder is read-only)")
        self.result = result


def group_options(group: str, search_path: tuple[Path, ...] = ()) -> list[str]:
    """The group's options in conf/ and in the folders a ``hydra.searchpath`` adds (config.yaml_files.yaml_options)."""
    from experiments.config.yaml_files import yaml_options

    return sorted(set().union(*(yaml_options(folder / group) for folder in (CONF, *search_path))))


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


def unknown_choice(key: str, value: str, choices: Iterable[str]) -> PreflightError:
    choices = sorted(choices)
    near = difflib.get_close_matches(value, choices, n=1)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    return PreflightError(f"{key}={value} is unknown; choose one of {choices}{hint}")


def _values(override) -> list[str]:
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


def check_names(key: str, values: list[str], search_path: tuple[Path, ...] = ()) -> None:
    """Group choices must exist as yaml files (in conf/ or a folder ``search_path`` adds); variant names inside
    groups must be registered.

    Group choices are checked against the files alone, so a typo is reported before
    torch or Lightning is even imported. A group placed at another node
    (``attention@model.cross_attention=...``) is named as written, so the error says which role.
    """
    key = key.lstrip("+~")
    group = key.split("@")[0]
    if group in GROUPS:
        options = group_options(group, search_path)
        for value in values:
            if value not in ("null", "None") and value not in options:
                raise unknown_choice(key, value, options)
    registry = _registry_for(group)
    if registry is not None:
        for value in values:
            if value not in ("null", "None"):
                try:
                    registry.get(value)
                except ValueError as err:
                    raise PreflightError(f"{group}: {err}" if group.startswith("model.") else str(err)) from None


def _registry_for(key: str):
    roles = {f"model.{role}{suffix}" for role in ROLES for suffix in ("", ".name")}
    if key == "attention.name" or key in roles:
        from variants import ATTENTION

        return ATTENTION
    if key == "position.name":
        from variants import POSITION

        return POSITION
    if key == "task.name":
        from experiments.tasks import TASKS

        return TASKS
    return None


def _one_line(err: BaseException) -> str:
    text = str(err)
    if err.__cause__ is not None and str(err.__cause__) not in text:
        text = f"{text}: {err.__cause__}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    full_key = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("full_key:")), None)
    noise = ("full_key:", "object_type", "reference_type", "Set the environment")
    kept = [ln for ln in lines if not ln.startswith(noise)]
    message = "; ".join(kept) or type(err).__name__
    return f"{message} (key: {full_key})" if full_key and full_key not in message else message


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


def preflight(argv: list[str]) -> None:
    """Raise PreflightError (one line) when the command line cannot work."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    multirun = any(a in MULTIRUN_FLAGS for a in argv)
    check_config_dirs(argv)
    args = overrides_of(argv)
    if args is None:
        return  # --help, another config (-cp, -cn): nothing of attnlab's runs
    parser = OverridesParser.create()
    try:
        overrides = parser.parse_overrides(args)
    except Exception as err:  # noqa: BLE001
        raise PreflightError(_one_line(err)) from None
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
            check_choice(override.get_key_element(), _values(override))
        except ConfigError as err:
            raise PreflightError(str(err)) from None
        check_names(override.get_key_element(), _values(override), search_path)
        check_trainer_override(override.get_key_element())

    from omegaconf import OmegaConf

    from experiments.config.checks import check_claims, check_logger
    from experiments.config.roles import expand_roles
    from experiments.config.schema import register_configs

    register_configs()
    # One configuration per sweep value (the others at their first value): linear in the grid.
    sweeps = [(i, _values(o)) for i, o in enumerate(overrides) if o.is_sweep_override() and _values(o)]
    base = [first_value(o) for o in overrides]
    variants = [base] + [
        base[:i] + [f"{overrides[i].input_line.split('=', 1)[0]}={v}"] + base[i + 1 :]
        for i, values in sweeps
        for v in values[1:]
    ]
    for index, cell in enumerate(variants):
        full = _compose([c for c in cell if c is not None])
        if index == 0:
            check_file_size_limit(full)
        for key, values in _sweeper_params(full):
            check_names(key, values, search_path)
            check_trainer_override(key)  # a sweeper's key that has moved, as on the command line
        cfg = OmegaConf.masked_copy(full, [k for k in full if k != "hydra"])
        check_paths(full, multirun)
        check_seed_overlap(full, [o for o in overrides if o.get_key_element() == "seed"])
        check_claims(cfg)  # a malformed claim in a preset stops the sweep before its first cell
        check_logger(cfg)  # W&B would warn in four lines and train without logging
        check_lightning(cfg)
        if multirun:
            from experiments.app.sweeper_checks import check_sweeper

            try:
                check_sweeper(full, cfg, args)
            except ConfigError as err:
                raise PreflightError(str(err)) from None
        expand_roles(cfg)
        if not multirun:
            check_single_run(full, cfg)


def check_single_run(full, cfg) -> None:
    """A single run's values (the checks the run builds its spec with), its variants, its folder, then its task:
    last, because naming the task imports Lightning, which no other check needs."""
    from experiments.config.checks import check_task
    from experiments.config.spec import build_spec

    spec = build_spec(cfg, check_task=False).checked()
    _build_variants(cfg)
    _check_run_folder(full, spec)
    check_task(cfg)


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


def check_hydra_sweep(override) -> None:
    """Hydra sweeps no key under ``hydra.``: a search space or grid given there (hydra.sweeper.params.x=a,b)
    is meant as text, quoted, or as a sweep of the key itself."""
    key = override.get_key_element().lstrip("+~")
    if not (key.startswith("hydra.") and override.is_sweep_override()):
        return
    value = override.input_line.split("=", 1)[1]
    inner = key.split(".", 3)[-1] if key.startswith(("hydra.sweeper.params.", "hydra.sweeper.space.")) else None
    instead = f", or sweep the key itself: {inner}={value}" if inner else ""
    if inner:
        check_trainer_override(inner)  # a key that has moved says where to first: quoting would not help it
    raise PreflightError(
        f"{override.input_line}: Hydra sweeps no key under hydra.*; quote it: {key}='{value}'{instead}"
    )


def check_file_size_limit(full) -> None:
    """A file size limit (``ulimit -f``) below what the run writes first, Hydra's record of its config
    (``.hydra/config.yaml`` and ``hydra.yaml``): refused before Hydra cuts a file at the limit."""
    import resource

    from omegaconf import OmegaConf

    limit, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if limit == resource.RLIM_INFINITY:
        return
    written = {
        "config.yaml": OmegaConf.to_yaml(OmegaConf.masked_copy(full, [k for k in full if k != "hydra"])),
        "hydra.yaml": OmegaConf.to_yaml(OmegaConf.masked_copy(full, ["hydra"])),
    }
    name, text = max(written.items(), key=lambda item: len(item[1].encode()))
    size = len(text.encode())
    if size > limit:
        raise PreflightError(
            f"the file size limit (ulimit -f) is {limit // 1024} KB; Hydra's .hydra/{name} alone is "
            f"{size / 1024:.0f} KB and a checkpoint is larger; raise it (ulimit -f unlimited)"
        )


def _check_run_folder(full, spec) -> None:
    """A single run's folder that holds another computation, or that a live process writes, is refused
    before Hydra writes this run's ``.hydra/`` into it (experiments/training/folder.py)."""
    from experiments.record.result import read_result
    from experiments.training.folder import check_before_start

    run, cfg_hash = spec.run, spec.run.config_hash
    run_dir = Path(str(full.hydra.run.dir))
    done = read_result(run_dir / "result.json") if run_dir.is_dir() and not os.access(run_dir, os.W_OK) else None
    if done and run.resume == "auto" and done.get("status") == "completed" and done.get("config_hash") == cfg_hash:
        raise AlreadyCompleted(run_dir / "result.json", done)
    if spec.sweep.ensemble_seeds != 1:  # its members' folders, its shared checkpoint and lock, and its memory
        from experiments.ensemble.folder import check_before_start as check_ensemble_folder

        check_ensemble_folder(Path(str(full.hydra.run.dir)), spec)
    check_before_start(Path(str(full.hydra.run.dir)), run.flat_config(), resume=run.resume, ckpt_path=run.ckpt_path)


def check_paths(full, multirun: bool) -> None:
    """Where the run writes: ``name`` stays a folder under outputs/ and multirun/, the run's folder is not a
    file (Hydra would end in a traceback), and a joblib launcher runs at least one job."""
    from omegaconf import OmegaConf

    name = str(full.name)
    parts = Path(name).parts
    if not name or Path(name).is_absolute() or ".." in parts:
        raise PreflightError(
            f"name={name} is not allowed; it names a folder under outputs/ and multirun/, "
            "without '..' or a leading '/' "
            "(to write elsewhere set hydra.run.dir or hydra.sweep.dir)"
        )
    if not multirun:
        run_dir = Path(str(OmegaConf.select(full, "hydra.run.dir")))
        from experiments.record.files import blocking_file

        blocker = blocking_file(run_dir)
        if blocker is not None:
            raise PreflightError(f"hydra.run.dir={run_dir} is not allowed; {blocker} is a file, not a folder")
    n_jobs = OmegaConf.select(full, "hydra.launcher.n_jobs")
    if multirun and n_jobs is not None and (not isinstance(n_jobs, int) or n_jobs == 0):
        raise PreflightError(
            f"hydra.launcher.n_jobs={n_jobs} is not allowed; it must be the number of jobs at once (>= 1), "
            "or -1 for one per core"
        )


def check_seed_overlap(full, seed_overrides: list) -> None:
    """An ensemble trains seeds seed .. seed+N-1; seeds swept beside it must not name one member twice."""
    from omegaconf import OmegaConf

    n = full.ensemble.seeds
    if "ensemble_launcher" in str(OmegaConf.select(full, "hydra.launcher._target_") or ""):
        return  # hydra/launcher=ensemble refuses ensemble.seeds beside swept seeds in its own words
    swept = [v for o in seed_overrides for v in _values(o)]
    swept += [v for key, values in _sweeper_params(full) if key == "seed" for v in values]
    if not isinstance(n, int) or n <= 1 or len(swept) < 2:
        return
    seen: dict[int, str] = {}
    for value in swept:
        for member in range(int(value), int(value) + n):
            if member in seen and seen[member] != value:
                raise PreflightError(
                    f"seed={','.join(swept)} with ensemble.seeds={n}: seed {member} would train twice (a cell with "
                    f"seed=s trains seeds s .. s+{n - 1}); sweep seeds {n} apart, or drop ensemble.seeds and use "
                    "hydra/launcher=ensemble to batch the swept seeds"
                )
            seen[member] = value


SWEEPER_PARAMS = "hydra.sweeper.params."


def check_trainer_override(key: str) -> None:
    """``trainer.<key>`` must be a keyword of lightning.Trainer (or attnlab's own): one line, nearest match.
    A key that has moved says where to."""
    key = key.lstrip("+~")
    # hydra.sweeper.params.<key> on the command line sweeps <key>, as a preset's sweeper params do; checked
    # here because Hydra cannot compose it when the config has no sweeper params ("Unexpected type: None")
    key = key.removeprefix(SWEEPER_PARAMS)
    from experiments.config.lightning_keys import MOVED

    if key in MOVED:
        raise PreflightError(MOVED[key])
    if key.startswith("trainer.") and key.count(".") == 1:
        from experiments.config.checks import ConfigError
        from experiments.config.lightning_keys import check_trainer_key

        try:
            check_trainer_key(key.split(".", 1)[1], check_value=False)
        except ConfigError as err:
            raise PreflightError(str(err)) from None


def check_lightning(cfg) -> None:
    """The Trainer's keys and value types, the callbacks and the loggers of a composed config."""
    from experiments.config import lightning_keys
    from experiments.config.checks import ConfigError

    try:
        lightning_keys.check_trainer(cfg.trainer)
        lightning_keys.check_callbacks(cfg)
        lightning_keys.check_loggers(cfg)
        if cfg.ensemble.seeds != 1:  # its own Trainer: every trainer key passed, handled or refused here
            from experiments.ensemble.trainer_keys import check_trainer_keys

            check_trainer_keys(cfg.trainer)
    except ConfigError as err:
        raise PreflightError(str(err)) from None


def _trainer_key_error(overrides: list[str], err: Exception) -> PreflightError | None:
    """A Trainer keyword the trainer config does not list, set without ``+`` (and named by Hydra's
    error: another failure of the same composition is reported as itself)."""
    for line in overrides:
        key, _, value = line.partition("=")
        if key.startswith("trainer.") and key.count(".") == 1 and f"'{key}'" in str(err):
            from experiments.config.lightning_keys import trainer_keywords

            name = key.split(".", 1)[1]
            if name in trainer_keywords():
                return PreflightError(
                    f"{key}={value}: the trainer config does not list {name!r}; add it with +{key}={value}"
                )
    return None


def first_value(override) -> str | None:
    """The override at its first value (a sweep's first choice); None for an Optuna range, which has none."""
    if not override.is_sweep_override():
        return override.input_line
    values = _values(override)
    if not values:
        return None  # an Optuna range: left to the sweeper
    return f"{override.input_line.split('=', 1)[0]}={values[0]}"


def _compose(overrides: list[str]):
    from hydra import compose, initialize_config_dir

    try:
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            return compose(config_name="config", overrides=overrides, return_hydra_config=True)
    except Exception as err:  # noqa: BLE001 - every composition error becomes one line
        raise (
            _role_parameter_error(overrides) or _trainer_key_error(overrides, err) or PreflightError(_one_line(err))
        ) from None


def _role_parameter_error(overrides: list[str]) -> PreflightError | None:
    """A role parameter Hydra refused: ``model.cross_attention.window=4`` where the role has no
    attention type of its own, or where its type has no such parameter."""
    from experiments.config.roles import attention_defaults

    for line in overrides:
        key, _, value = line.partition("=")
        for role in ROLES:
            node = f"model.{role}"
            if not key.startswith(node + "."):
                continue
            param = key[len(node) + 1 :]
            chosen = [o.split("=", 1)[1] for o in overrides if o.startswith(f"attention@{node}=")]
            if not chosen:
                return PreflightError(
                    f"{key}={value}: {node} has no attention type of its own to take {param!r}; choose one "
                    f"with the attention group at the role, e.g. attention@{node}=local {key}={value}"
                )
            name = chosen[-1]
            if param not in attention_defaults(name):
                from variants import ATTENTION

                accepted = sorted(set(ATTENTION.accepted_params(name)) - {"d_model", "backend"})
                if param in accepted:
                    return PreflightError(
                        f"{key}={value}: {param!r} is not in conf/attention/{name}.yaml; add it with +{key}={value}"
                    )
                return PreflightError(
                    f"{key}={value}: attention {name!r} at {node} has no parameter {param!r}; accepted: {accepted}"
                )
    return None


def _sweeper_params(cfg) -> list[tuple[str, list[str]]]:
    """Sweep lists an experiment preset declares under hydra.sweeper.params."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    params = cfg.hydra.sweeper.get("params") or {}
    parser = OverridesParser.create()
    out = []
    for key, spec in params.items():
        spec = str(spec)
        if spec.lstrip().startswith(("choice(", "interval(", "range(", "tag(")):
            continue  # for Optuna
        try:
            (override,) = parser.parse_overrides([f"{key}={spec}"])
        except Exception as err:  # noqa: BLE001
            raise PreflightError(f"hydra.sweeper.params.{key}: {_one_line(err)}") from None
        out.append((override.key_or_group, _values(override)))
    return out


def _build_variants(cfg) -> None:
    """Construct the attention and position modules once: their parameter checks run here."""
    from experiments.config.variant_node import variant_node
    from variants import ATTENTION, POSITION
    from variants.pairs import check_pair

    attention, position = variant_node(cfg.attention), variant_node(cfg.position)
    attention_name, position_name = attention.pop("name"), position.pop("name")
    d_model = cfg.model.d_model
    layer = ATTENTION.build(attention_name, d_model=d_model, backend=cfg.backend, **attention)
    encoding = POSITION.build(position_name, d_model=d_model, num_heads=layer.num_heads, **position)
    check_pair(attention_name, layer, position_name, encoding)
    # A self-attention role of a stack the architecture builds takes the same encoding
    # (cross attention gets no position hooks): its pair is checked too, named by the role.
    from attnlab.roles import SELF_ROLES, built
    from experiments.config.roles import role_variants

    for role, node in role_variants(cfg).items():
        if node is None or role not in SELF_ROLES or not built(role, cfg.model.arch):
            continue
        params = {k: v for k, v in node.items() if k != "name"}
        role_layer = ATTENTION.build(node["name"], d_model=d_model, backend=cfg.backend, **params)
        try:
            check_pair(node["name"], role_layer, position_name, encoding)
        except ValueError as err:
            raise PreflightError(f"model.{role}: {err}") from None


__all__ = ["AlreadyCompleted", "PreflightError", "preflight"]
