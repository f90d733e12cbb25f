"""NoPE: no position information at all (causal masking alone may still leak order)."""
from variants.position.base import PositionEncoding
from variants.papers import KAZEMNEJAD_2023
from variants.registries import POSITION


@POSITION.register("none", references=KAZEMNEJAD_2023)
class NoPosition(PositionEncoding):
    def __init__(self, d_model: int, num_heads: int = 1) -> None:
        super().__init__(d_model, num_heads)
