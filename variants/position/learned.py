"""A trainable table of ``max_len`` absolute positions, added to the embeddings.

The table is initialised as GPT-2's (std ``init_std`` = 0.02) and multiplied by
``scale / init_std`` when added, so it starts at the token term's RMS under every
embedding convention (1 under sqrt(d)-scaled embeddings, where an unscaled 0.02 table
would start 50 times smaller than the tokens). Relative to its size it moves under Adam
as GPT-2's table does, whatever the factor; under ``model.embedding=gpt2`` the factor is 1
and nanoGPT's recipe is unchanged.
"""

import torch
from torch import Tensor, nn

from variants.checks import VariantConfigError, positive
from variants.position.base import PositionEncoding
from variants.registries import POSITION


class SequenceTooLongError(VariantConfigError):
    """An input longer than a learned table: never index garbage silently."""


@POSITION.register("learned", references="gehring2017convolutional")
class Learned(PositionEncoding):
    adds_to_embeddings = True
    init_std = 0.02

    def __init__(self, d_model: int, num_heads: int = 1, max_len: int = 512) -> None:
        super().__init__(d_model, num_heads)
        self.max_len = positive("max_len", max_len, integer=True)
        self.table = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.table.weight, std=self.init_std)

    def embed(self, x: Tensor, positions: Tensor, scale: float | None = None) -> Tensor:
        factor = 1.0 if scale is None else scale / self.init_std
        if torch.compiler.is_compiling():
            # Reading the max back would break the graph (and sync a GPU) on every call.
            # Compiled runs rely on the up-front check of the training app, which holds
            # max_len against the longest sequence the task can produce.
            return x + factor * self.table(positions)[None].to(x.dtype)
        # The length the model declares from shapes: no read from the device. Past the table, the positions
        # themselves decide: generation declares prompt + new tokens, one more than it ever feeds back.
        longest = self.declared_length
        if longest is None or longest > self.max_len:
            longest = int(positions.max()) + 1 if positions.numel() else 0
        if longest > self.max_len:
            raise SequenceTooLongError(
                f"position=learned has max_len={self.max_len} but saw a sequence of length {longest}; "
                f"set max_len >= {longest}"
            )
        return x + factor * self.table(positions)[None].to(x.dtype)  # (1, T, d_model)
