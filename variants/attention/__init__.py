"""Attention types; importing this package registers every built-in one."""
from variants.attention import hard, local, soft  # noqa: F401
from variants.attention.hard import reinforce_terms
from variants.attention.layer import AttentionLayer, KVCache

__all__ = ["AttentionLayer", "KVCache", "reinforce_terms"]
