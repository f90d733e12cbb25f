"""NoPE: no position information at all (causal masking alone may still leak order)."""

from variants.position.base import PositionEncoding
from variants.registries import POSITION


@POSITION.register("none", references="kazemnejad2023impact")
class NoPosition(PositionEncoding):
    def __init__(self, d_model: int, num_heads: int = 1) -> None:
        super().__init__(d_model, num_heads)
