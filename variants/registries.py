"""The two registries every variant registers into."""

from __future__ import annotations

from typing import TYPE_CHECKING

from variants.registry import Registry

if TYPE_CHECKING:
    from variants.attention.layer import AttentionLayer
    from variants.position.base import PositionEncoding

ATTENTION: Registry["AttentionLayer"] = Registry("attention", package="variants.attention")
POSITION: Registry["PositionEncoding"] = Registry("position", package="variants.position")
