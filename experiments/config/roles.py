"""Per-role attention: the encoder's self attention, the decoder's and the cross attention.

A role is null (it uses the ``attention`` group) or a variant of its own, chosen in
Hydra's idiom by placing the attention group at the role's node:

    attention@model.cross_attention=local model.cross_attention.window=4

which loads ``conf/attention/local.yaml`` there, as ``attention=local`` does for the
main group. The older forms ``model.cross_attention=hard`` (a bare name) and
``model.cross_attention={name:hard,estimator:reinforce}`` still work: ``expand_roles``
fills them with the same yaml defaults, once, before the config is flattened, hashed
and recorded, so every form gives the same run and the same ``result.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from omegaconf import DictConfig, OmegaConf, open_dict

from attnlab.roles import ROLES
from experiments.config.errors import ConfigError
from experiments.config.variant_node import variant_node

ATTENTION_CONF = Path(__file__).resolve().parents[2] / "conf" / "attention"


class RoleError(ConfigError):
    """A per-role attention that cannot be built; the message names the role."""


def attention_defaults(name: str) -> dict[str, Any]:
    """The yaml defaults of an attention type (``{"name": name}`` for a plugin type without a yaml)."""
    path = ATTENTION_CONF / f"{name}.yaml"
    if not path.is_file():
        return {"name": name}
    return dict(OmegaConf.to_container(OmegaConf.load(path), resolve=True))


def expand_roles(cfg: DictConfig) -> DictConfig:
    """Give every per-role variant its type's yaml defaults (in place; returns ``cfg``).

    A node composed from the group already holds them, so expanding it again changes nothing.
    """
    model = cfg.get("model")
    if model is None:
        return cfg
    for role in ROLES:
        node = variant_node(model.get(role))
        if node is None:
            continue
        if "name" not in node:
            raise RoleError(
                f"model.{role}={node} names no attention type; choose one with "
                f"attention@model.{role}=<name>, e.g. attention@model.{role}=local"
            )
        with open_dict(cfg):
            cfg.model[role] = {**attention_defaults(str(node["name"])), **node}
    return cfg


def role_variants(cfg: DictConfig) -> dict[str, dict[str, Any] | None]:
    """{role: {"name": .., **params} | None} from an expanded config."""
    return {role: variant_node(cfg.model.get(role)) for role in ROLES}


def label(node: dict[str, Any] | None) -> str | None:
    """A short name for a variant: its type and the parameters that differ from the type's yaml,
    e.g. ``local(mode=predictive,window=4)``; ``soft`` when every parameter is the default."""
    if node is None:
        return None
    defaults = attention_defaults(str(node["name"]))
    changed = {k: v for k, v in node.items() if k != "name" and defaults.get(k, object()) != v}
    inner = ",".join(f"{k}={v}" for k, v in sorted(changed.items()))
    return f"{node['name']}({inner})" if inner else str(node["name"])


def role_labels(cfg: DictConfig) -> dict[str, str | None]:
    """{role: label or None}: what result.json and the W&B tags record for each role."""
    return {role: label(node) for role, node in role_variants(cfg).items()}


def used_variants(cfg: DictConfig, unused: Iterable[str] = ()) -> dict[str, list[str]]:
    """Registry kind -> the names a run uses: its task, position and every attention type of any role,
    but a role whose config key is in ``unused`` (``model.cross_attention`` of a decoder-only model)."""
    skip = set(unused)
    roles = [
        str(node["name"])
        for role, node in role_variants(cfg).items()
        if node is not None and f"model.{role}" not in skip
    ]
    return {
        "attention": [str(cfg.attention.name), *roles],
        "position": [str(cfg.position.name)],
        "task": [str(cfg.task.name)],
    }


def check_roles(cfg: DictConfig) -> None:
    """Each per-role variant exists and accepts its parameters; the error names the role, in one line."""
    from variants import ATTENTION  # not experiments.training.build: checking a command line never imports Lightning

    for role, node in role_variants(cfg).items():
        if node is None:
            continue
        params = {k: v for k, v in node.items() if k != "name"}
        try:
            ATTENTION.build(node["name"], d_model=cfg.model.d_model, backend=cfg.backend, **params)
        except (ValueError, TypeError) as err:
            raise RoleError(f"model.{role}: {err}") from None


__all__ = [
    "ROLES",
    "RoleError",
    "attention_defaults",
    "check_roles",
    "expand_roles",
    "label",
    "role_labels",
    "role_variants",
]
