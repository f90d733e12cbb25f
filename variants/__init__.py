"""attnlab variants: attention types and position encodings, chosen by registry name.

Pure PyTorch: nothing here imports Lightning or Hydra, so a variant can be used
in any model.

    from variants import ATTENTION, POSITION
    layer = ATTENTION.build("local", d_model=64, num_heads=4, window=8)
    pos = POSITION.build("rope", d_model=64, num_heads=4)
    out, weights = layer(x, causal=True, position=pos, need_weights=True)
"""

from variants import attention, position  # noqa: E402,F401  (registers the built-ins)
from variants.attention import AttentionLayer, KVCache, reinforce_entropies, reinforce_terms
from variants.checks import VariantConfigError
from variants.position import PositionEncoding
from variants.registries import ATTENTION, POSITION
from variants.registry import Registry, RegistryError

__all__ = [
    "ATTENTION",
    "POSITION",
    "AttentionLayer",
    "KVCache",
    "PositionEncoding",
    "Registry",
    "RegistryError",
    "VariantConfigError",
    "reinforce_entropies",
    "reinforce_terms",
]
