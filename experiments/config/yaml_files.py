"""YAML the user points at (a claims file, a ``--config-dir`` preset), read safely: one line when it cannot be.

OmegaConf's loader is PyYAML's safe loader (with YAML 1.2's floats, as Hydra reads presets): a ``!!python/...``
tag is refused as a YAML error, never constructed, so nothing in the file runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from experiments.config.errors import ConfigError


def load_yaml(path: str | Path, shown: str) -> Any:
    """The plain data in the YAML file ``path``; ``shown`` names it in the one-line error (``key=path``)."""
    import yaml
    from omegaconf import OmegaConf

    try:
        return OmegaConf.to_container(OmegaConf.load(Path(path)), resolve=False)
    except OSError as err:
        raise ConfigError(f"{shown}: cannot be read ({err.strerror or err})") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{shown}: not valid YAML ({' '.join(str(err).split())})") from None


def check_config_dir(folder: str | Path, overrides: list[str]) -> None:
    """The presets a command line takes from a ``--config-dir`` folder read as YAML (Hydra's own error spans a
    page): its top-level configs and each ``group=option`` the overrides name there."""
    root = Path(folder)
    if not root.is_dir():
        raise ConfigError(f"--config-dir {root}: not a folder; give the folder that holds your config groups")
    named = []
    for override in overrides:
        group, _, option = override.lstrip("+~").partition("=")
        named.append(root / group.split("@")[0] / f"{option}.yaml")
    for path in [*sorted(root.glob("*.yaml")), *named]:
        if path.is_file():
            load_yaml(path, str(path))


def yaml_options(folder: Path) -> set[str]:
    """The options a config group folder holds: every yaml under it, sub-folders too (``study/vaswani_pe``)."""
    return {p.relative_to(folder).with_suffix("").as_posix() for p in folder.rglob("*.yaml")}
