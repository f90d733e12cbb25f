"""Attention types; every module in this folder is imported, which registers its types."""

import sys

from variants.discovery import import_submodules

import_submodules(sys.modules[__name__])

from variants.attention.hard import reinforce_entropies, reinforce_terms  # noqa: E402
from variants.attention.layer import AttentionLayer, KVCache  # noqa: E402

__all__ = ["AttentionLayer", "KVCache", "reinforce_entropies", "reinforce_terms"]
