"""Nested mappings as dotted keys: how a run's config is spelled in result.json (written by experiments,
read back by analysis); one function so that the writer and the reader cannot drift apart."""

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
