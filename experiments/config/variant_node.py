"""A variant's config node read as plain data: the one reading every caller shares.

A variant appears in a config in three forms: a group node (``attention: {name: local, window: 4}``, a
``DictConfig`` whose values may hold interpolations), a mapping already made plain (``OmegaConf.to_object``
of the model's node, a checkpoint, a test), or a bare registry name (``model.cross_attention=hard``).
The model's ``VariantSpec.of``, the per-role attention (``roles``) and the preflight's checks read it here,
so the forms are told apart in one place. It lives in ``config``, the lowest package they all import, and
imports neither torch nor Lightning, so checking a command line stays light.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf


def variant_node(node: str | Mapping[str, Any] | DictConfig | None) -> dict[str, Any] | None:
    """``{"name": .., **params}`` from any form of a variant's node (a ``DictConfig`` resolved); None stays None.

    The result is a new dict: a caller may pop from it without touching the config.
    """
    if node is None:
        return None
    if isinstance(node, str):
        return {"name": node}
    if isinstance(node, DictConfig):
        return dict(OmegaConf.to_container(node, resolve=True))
    return dict(node)


__all__ = ["variant_node"]
