"""Settings a run asked for but its built model never read, recorded as unused in result.json.

A decoder-only model has no cross attention, so ``attention@model.cross_attention=local``
changes nothing it computes. The model says which of its settings it did not use
(``Transformer.unused_settings``, read off the modules it built); the result then
records the configuration that was computed:

- ``config``: each unused key is null (its sub-keys, such as ``model.cross_attention.window``,
  are gone), so the analysis never makes it a factor or a cell;
- the role's own field (``cross_attention``) is null;
- ``unused``: ``{config key: what was asked}`` (``{"model.cross_attention": "local(window=4)"}``),
  so a grid that varied only unused settings can be named as such.

A result written before this field existed has no ``unused`` key: every setting counts as used.
"""

from __future__ import annotations

from typing import Any, Iterable

from experiments.config.roles import ROLES, label

MODEL_PREFIX = "model."


def asked_value(config: dict[str, Any], key: str) -> Any:
    """What the flattened config asked for under ``key``: its value, or a role's label
    (``local(window=4)``) when the key is a group with a ``name``, or the group's sub-keys."""
    if key in config:
        return config[key]
    prefix = key + "."
    node = {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}
    if not node:
        return None
    return label(node) if "name" in node else node


def record_unused(result: dict[str, Any], unused_fields: Iterable[str]) -> dict[str, Any]:
    """Mark the model's unused fields (``ModelSpec`` names, e.g. ``cross_attention``) in ``result``, in place.

    Returns ``result["unused"]``: {config key: the value asked for}.
    """
    config: dict[str, Any] = dict(result["config"])  # a copy: the asked config may be shared (W&B's)
    result["config"] = config
    unused: dict[str, Any] = {}
    for field in unused_fields:
        key = MODEL_PREFIX + field
        unused[key] = asked_value(config, key)
        for sub in [k for k in config if k.startswith(key + ".")]:
            del config[sub]
        config[key] = None
        if field in ROLES:
            result[field] = None
    result["unused"] = unused
    return unused


__all__ = ["asked_value", "record_unused"]
