"""Optional dependencies (pyproject.toml's extras): what needs each, and the one line a missing one gives."""

from __future__ import annotations

import importlib.util

from experiments.config.errors import ConfigError

# each extra, and the modules it brings that attnlab imports
EXTRAS = {
    "slurm": ("hydra_plugins.hydra_submitit_launcher", "submitit"),
    "optuna": ("optuna",),
    "tensorboard": ("tensorboard",),
}
# command-line choices that need an extra: (override key, value) -> extra
NEEDS = {
    ("hydra/launcher", "slurm"): "slurm",
    ("hydra/launcher", "submitit_slurm"): "slurm",
    ("hydra/launcher", "submitit_local"): "slurm",
    ("hydra/sweeper", "optuna"): "optuna",
    ("hparams_search", "optuna"): "optuna",
    ("hparams_search", "optuna_grid"): "optuna",
    ("hydra/sweeper", "tuned"): "optuna",
    ("hparams_search", "tuned"): "optuna",
}


def missing_extra(extra: str, what: str) -> ConfigError:
    """``<what> needs attnlab[<extra>]: pip install 'attnlab[<extra>]'``, in one line."""
    return ConfigError(
        f"{what} needs the optional dependencies of attnlab[{extra}], which are not installed: "
        f"pip install 'attnlab[{extra}]'"
    )


def installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def require(extra: str, what: str) -> None:
    """Raise ``missing_extra`` unless every module the extra brings can be imported."""
    if not all(installed(m) for m in EXTRAS[extra]):
        raise missing_extra(extra, what)


def check_choice(key: str, values: list[str]) -> None:
    """A group choice on the command line (``hydra/launcher=slurm``) whose extra is not installed."""
    key = key.lstrip("+~")
    for value in values:
        extra = NEEDS.get((key, value))
        if extra is not None:
            require(extra, f"{key}={value}")
