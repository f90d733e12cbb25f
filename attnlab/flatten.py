"""Nested mappings as dotted keys: how a run's config is spelled in result.json (written by experiments,
read back by analysis, and back into a tree by evaluation); one module so that the writer and the readers cannot
drift apart."""

from __future__ import annotations

from typing import Any, Mapping


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings -> {"a.b.c": value}; lists and empty mappings stay values; a non-mapping is {prefix: tree}."""
    if not isinstance(tree, Mapping):
        return {prefix.rstrip("."): tree}
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    """{"a.b.c": value} -> nested dicts: ``flatten``'s inverse for a config (whose keys hold no dots of their own)."""
    tree: dict[str, Any] = {}
    for key, value in flat.items():
        *parents, leaf = key.split(".")
        node = tree
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"{key!r} lies under {part!r}, which holds a value, not a mapping")
        node[leaf] = value
    return tree
