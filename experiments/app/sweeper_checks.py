"""A sweeper's settings, checked before Hydra creates the sweep folder (experiments/app/preflight/).

- ``hydra/sweeper=optuna`` and ``hparams_search=tuned``: every interval of the search space is one Optuna takes
  (a log scale starts above 0), the storage is a place a study can be written (a writable folder, a database
  URL whose driver SQLAlchemy knows), the tuned comparison's seeds are lists, and ``direction`` (and a tuned
  comparison's ``compare_direction``) goes the way its metric is better: a study maximizing a loss picks the
  worst setting. A direction against the metric's name is taken with ``hydra.sweeper.direction_override=true``.
- ``hydra/sweeper=adaptive``: the claims (``hydra.sweeper.claims_file``, read safely, or the config's
  ``claims:``) are well formed and each claim's metric is one the task logs into result.json, as a study's
  objective must be; else every seed trains and no claim can be decided.

Each refusal is a ``ConfigError`` of one line naming the key, its value and what is allowed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

from omegaconf import DictConfig, OmegaConf

from experiments.config.errors import ConfigError

OPTUNA = "hydra_plugins.attnlab_sweeper.optuna_sweeper.OptunaSweeper"
TUNED = "hydra_plugins.attnlab_sweeper.tuned_sweeper.TunedSweeper"
ADAPTIVE = "hydra_plugins.attnlab_launcher.adaptive_sweeper.AdaptiveSeedSweeper"
BETTER_DIRECTION = {"lower": "minimize", "higher": "maximize"}


def sweeper_of(full: DictConfig) -> str | None:
    """``optuna``, ``tuned`` or ``adaptive``: the attnlab sweeper the composed config (with ``hydra``) runs."""
    target = str(OmegaConf.select(full, "hydra.sweeper._target_") or "")
    return {OPTUNA: "optuna", TUNED: "tuned", ADAPTIVE: "adaptive"}.get(target)


def check_sweeper(full: DictConfig, cfg: DictConfig, arguments: Iterable[str]) -> None:
    """Every check of this module that applies to the sweeper ``full`` runs; ``arguments``: the command line's
    overrides (a swept key there joins an Optuna search space)."""
    import importlib.util

    kind = sweeper_of(full)
    sweeper = full.hydra.sweeper
    if kind in ("optuna", "tuned") and importlib.util.find_spec("optuna") is None:
        return  # the missing extra is named in its own one line (experiments/config/extras.py)
    if kind in ("optuna", "tuned"):
        check_search_space(kind, sweeper, list(arguments))
        check_storage(sweeper.get("storage"))
        override = bool(sweeper.get("direction_override", False))
        check_direction("hydra.sweeper.direction", sweeper.direction, "objective", cfg.objective, override, cfg)
        if kind == "tuned":
            check_seed_lists(sweeper)
            check_direction(
                "hydra.sweeper.compare_direction",
                sweeper.compare_direction,
                "hydra.sweeper.compare_on",
                sweeper.compare_on,
                override,
                cfg,
            )
    elif kind == "adaptive":
        check_claim_metrics(sweeper, cfg)


# -- the search space --------------------------------------------------------------------------------------
def space_specs(kind: str, sweeper: DictConfig, arguments: list[str]) -> list[tuple[str, str, str]]:
    """(name as the user wrote it, config key, spec) of every entry of the search space."""
    declared = "params" if kind == "optuna" else "space"
    specs = {str(k): (f"hydra.sweeper.{declared}.{k}", str(v)) for k, v in (sweeper.get(declared) or {}).items()}
    for arg in arguments:
        key, _, spec = arg.partition("=")
        key = key.lstrip("+~")
        if key.startswith("hydra.") or (kind == "tuned" and key not in specs):
            continue  # a tuned comparison's other sweeps are its cells, not its search space
        specs[key] = (key, spec)
    return [(name, key, spec) for key, (name, spec) in specs.items() if spec not in ("None", "null")]


def check_search_space(kind: str, sweeper: DictConfig, arguments: list[str]) -> None:
    """Each interval is one Optuna can sample: a log scale starts above 0; Optuna's own refusals in one line."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import IntervalSweep

    from experiments.sweep.optuna_study import StudyError, distribution

    parser = OverridesParser.create()
    for name, key, spec in space_specs(kind, sweeper, arguments):
        try:
            (override,) = parser.parse_overrides([f"{key}={spec}"])
        except Exception:  # noqa: BLE001 - not sweep syntax: the sweeper names it in its own one line
            continue
        value = override.value() if override.is_sweep_override() else None
        if isinstance(value, IntervalSweep) and "log" in value.tags and not value.start > 0:
            raise ConfigError(
                f"{name}={spec}: a log-scale interval must start above 0 (Optuna samples its logarithm); "
                f"give a positive start, e.g. tag(log, interval({value.end / 1000:g}, {value.end:g}))"
            )
        try:
            distribution(key, spec)
        except StudyError:
            raise
        except ValueError as err:  # Optuna's distributions check their bounds in messages of their own
            raise ConfigError(f"{name}={spec}: {' '.join(str(err).split())}") from None


# -- the storage -------------------------------------------------------------------------------------------
def check_storage(storage: Any) -> None:
    """``hydra.sweeper.storage`` names a place a study can be written: a database URL SQLAlchemy can open (its
    SQLite file's folder writable), or a journal file in a writable folder. None: the sweep folder's journal."""
    if not storage:
        return
    spec, key = str(storage), "hydra.sweeper.storage"
    if "://" not in spec:
        writable_file(key, spec, Path(spec))
        return
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        url = make_url(spec)
        url.get_dialect()
    except NoSuchModuleError:  # before ArgumentError, its base class
        raise ConfigError(
            f"{key}={spec}: no database driver for {spec.split('://', 1)[0]!r}; use sqlite:///study.db, "
            "postgresql://..., mysql://..., or a journal file path (e.g. study.journal)"
        ) from None
    except ArgumentError as err:
        raise ConfigError(f"{key}={spec}: not a database URL ({err}); e.g. sqlite:///study.db") from None
    except ImportError as err:
        raise ConfigError(f"{key}={spec}: its database driver is not installed ({err})") from None
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        writable_file(key, spec, Path(url.database))


def writable_file(key: str, spec: str, path: Path) -> None:
    """``path`` can be created or appended to: not a folder, under folders only, in a writable one."""
    from experiments.record.files import blocking_file

    path = path.expanduser()
    if path.is_dir():
        raise ConfigError(f"{key}={spec} is a folder; give a file (the study's journal or database)")
    blocker = blocking_file(path.parent)
    if blocker is not None:
        raise ConfigError(f"{key}={spec}: {blocker} is a file, not a folder")
    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    target = path if path.exists() else folder
    if not os.access(target, os.W_OK):
        why = "read-only file system" if os.statvfs(folder).f_flag & os.ST_RDONLY else "permission denied"
        raise ConfigError(f"{key}={spec}: cannot write in {folder} ({why}); give a writable place")


# -- directions and seeds ----------------------------------------------------------------------------------
def check_direction(key: str, direction: Any, metric_key: str, metric: Any, override: bool, cfg: DictConfig) -> None:
    """``direction`` goes the way ``metric`` is better by its name (a loss down, an accuracy up), unless
    ``hydra.sweeper.direction_override=true`` says the other way is meant. A metric the task never logs is
    said first (it is the first thing wrong); only then, since naming the task imports Lightning."""
    from attnlab.metric_scale import direction as better_direction

    better = better_direction(str(metric))
    wanted = BETTER_DIRECTION.get(better or "")
    if wanted is None or override or direction not in BETTER_DIRECTION.values() or direction == wanted:
        return
    check_logged(metric_key, metric, cfg)
    raise ConfigError(
        f"{key}={direction} on {metric_key}={metric}, where {better} is better: the sweep would rank the worst "
        f"settings best; set {key}={wanted}, or hydra.sweeper.direction_override=true if {direction} is meant"
    )


def check_logged(key: str, metric: Any, cfg: DictConfig) -> None:
    """``metric`` is one the task logs into result.json: what a study can optimise and a claim can decide."""
    from experiments.config.metric_names import logged_metrics

    final = logged_metrics(cfg, "result")
    if str(metric) not in final:
        raise ConfigError(f"{key}={str(metric)!r}: the task never logs it; choose one of {sorted(final)}")


def check_seed_lists(sweeper: DictConfig) -> None:
    """A tuned comparison's ``tuning_seeds`` and ``final_seeds`` are lists of integer seeds, none in both."""
    from experiments.sweep.tuned_study import check_seeds

    for key in ("tuning_seeds", "final_seeds"):
        if not OmegaConf.is_list(sweeper.get(key)):
            raise ConfigError(
                f"hydra.sweeper.{key}={sweeper.get(key)}: give a non-empty list of integer seeds, "
                f"e.g. hydra.sweeper.{key}=[0,1]"
            )
    check_seeds(list(sweeper.tuning_seeds), list(sweeper.final_seeds))


# -- the adaptive sweeper's claims -------------------------------------------------------------------------
def check_claim_metrics(sweeper: DictConfig, cfg: DictConfig) -> None:
    """The claims parse, and each claim's metric is one the task logs into result.json (a metric at a length,
    ``token_acc@24``, is the analysis's to find)."""
    from attnlab.claims import ClaimError, parse_claims, split_metric
    from experiments.config.yaml_files import load_yaml

    claims_file = sweeper.get("claims_file")
    if claims_file:
        where = f"hydra.sweeper.claims_file={claims_file}"
        raw = load_yaml(str(claims_file), where)
        raw = raw.get("claims") if isinstance(raw, dict) else raw
    else:
        where = "claims"
        raw = OmegaConf.to_container(cfg.claims, resolve=True) if cfg.get("claims") else None
    try:
        claims = parse_claims(raw, where)
    except ClaimError as err:
        raise ConfigError(str(err)) from None
    for i, claim in enumerate(claims):
        if split_metric(claim.metric)[1] is None:
            check_logged(f"claims[{i}].metric", claim.metric, cfg)
