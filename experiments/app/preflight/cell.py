"""The checks of one composed configuration (a single run, or one cell of a sweep): where it writes, the file
size limit, seeds an ensemble would train twice, and the Trainer's keys, callbacks and loggers."""

from __future__ import annotations

from pathlib import Path

from experiments.app.preflight.argv import values_of
from experiments.app.preflight.compose import compose_overrides, sweeper_params
from experiments.app.preflight.errors import PreflightError
from experiments.app.preflight.names import check_names, check_trainer_override
from experiments.app.preflight.single_run import check_single_run


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
    swept = [v for o in seed_overrides for v in values_of(o)]
    swept += [v for key, values in sweeper_params(full) if key == "seed" for v in values]
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


def check_cell(
    overrides: list[str], parsed: list, args: list[str], *, search_path: tuple[Path, ...], multirun: bool, first: bool
) -> None:
    """Compose one cell of the command line (``overrides``) and check it; ``parsed`` and ``args`` are the whole
    command line's overrides, parsed and as written; ``first``: the first cell, which the file size limit checks."""
    from omegaconf import OmegaConf

    from experiments.config.checks import check_claims, check_logger
    from experiments.config.roles import expand_roles

    full = compose_overrides(overrides)
    if first:
        check_file_size_limit(full)
    for key, values in sweeper_params(full):
        check_names(key, values, search_path)
        check_trainer_override(key)  # a sweeper's key that has moved, as on the command line
    cfg = OmegaConf.masked_copy(full, [k for k in full if k != "hydra"])
    check_paths(full, multirun)
    check_seed_overlap(full, [o for o in parsed if o.get_key_element() == "seed"])
    check_claims(cfg)  # a malformed claim in a preset stops the sweep before its first cell
    check_logger(cfg)  # W&B would warn in four lines and train without logging
    check_lightning(cfg)
    if multirun:
        from experiments.app.sweeper_checks import check_sweeper
        from experiments.config.checks import ConfigError

        try:
            check_sweeper(full, cfg, args)
        except ConfigError as err:
            raise PreflightError(str(err)) from None
    expand_roles(cfg)
    if not multirun:
        check_single_run(full, cfg)
