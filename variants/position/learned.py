"""A trainable table of ``max_len`` absolute positions, added to the embeddings."""
import torch
from torch import Tensor, nn

from variants.checks import VariantConfigError, positive
from variants.position.base import PositionEncoding
from variants.registries import POSITION


class SequenceTooLongError(VariantConfigError):
    """An input longer than a learned table: never index garbage silently."""


@POSITION.register("learned")
class Learned(PositionEncoding):
    def __init__(self, d_model: int, num_heads: int = 1, max_len: int = 512) -> None:
        super().__init__(d_model, num_heads)
        self.max_len = positive("max_len", max_len, integer=True)
        self.table = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.table.weight, std=0.02)

    def embed(self, x: Tensor, positions: Tensor) -> Tensor:
        if torch.compiler.is_compiling():
            # Reading the max back would break the graph (and sync a GPU) on every call.
            # Compiled runs rely on the up-front check of the training app, which holds
            # max_len against the longest sequence the task can produce.
            return x + self.table(positions)[None].to(x.dtype)
        longest = int(positions.max()) + 1 if positions.numel() else 0
        if longest > self.max_len:
            raise SequenceTooLongError(
                f"position=learned has max_len={self.max_len} but saw a sequence of length {longest}; "
                f"set max_len >= {longest}"
            )
        return x + self.table(positions)[None].to(x.dtype)  # (1, T, d_model)
