"""Copy, reverse and sort: a random string of ``n`` symbols in, a rearrangement of it out."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from experiments.tasks.base import FIRST_SYMBOL_ID, integer
from experiments.tasks.registry import TASKS
from experiments.tasks.synthetic import SyntheticTask, with_eos


class SymbolTask(SyntheticTask):
    """Sources are ``n`` symbols drawn with replacement from an alphabet named ``0 .. num_symbols-1``."""

    kind = "seq2seq"

    default_train_lengths = (2, 12)
    default_eval_lengths = (8, 12, 16, 24)

    def __init__(self, *, num_symbols: int = 10, **shared: Any) -> None:
        super().__init__(**shared)
        # Two symbols at least, or sorting and reversing are the identity.
        self.num_symbols = integer("num_symbols", num_symbols, minimum=2)
        self.vocab_size = FIRST_SYMBOL_ID + self.num_symbols

    def transform(self, src: np.ndarray) -> np.ndarray:
        """The target of each row of ``src`` ``(count, n)``, without EOS."""
        raise NotImplementedError

    def generate(self, rng: np.random.Generator, n: int, count: int) -> dict[str, np.ndarray]:
        src = FIRST_SYMBOL_ID + rng.integers(0, self.num_symbols, size=(count, n))  # (count, n)
        return {"src": src, "tgt": with_eos(self.transform(src))}  # tgt: (count, n + 1)

    def source_length(self, n: int) -> int:
        return n

    def target_length(self, n: int) -> int:
        return n + 1

    def symbol(self, token_id: int) -> str:
        return str(token_id - FIRST_SYMBOL_ID)

    def aligned_source(self, t: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        """The source index target position ``t`` reads in a sequence of ``n`` symbols (broadcasting)."""
        raise NotImplementedError

    def alignment(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """(B, T, S) bool: target position t (before EOS) aligns with source index ``aligned_source(t, n)``."""
        n = src.ne(self.pad_id).sum(1)[:, None, None]  # (B, 1, 1)
        t = torch.arange(tgt.shape[1], device=src.device)[None, :, None]  # (1, T, 1)
        s = torch.arange(src.shape[1], device=src.device)[None, None, :]  # (1, 1, S)
        return (t < n) & (s == self.aligned_source(t, n))


@TASKS.register("copy", references="graves2014neural")
class Copy(SymbolTask):
    def transform(self, src: np.ndarray) -> np.ndarray:
        return src.copy()

    def aligned_source(self, t: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        return t


@TASKS.register("reverse", references="grefenstette2015learning")
class Reverse(SymbolTask):
    def transform(self, src: np.ndarray) -> np.ndarray:
        return src[:, ::-1].copy()

    def aligned_source(self, t: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        return n - 1 - t


@TASKS.register("sort", references="graves2014neural")
class Sort(SymbolTask):
    """Ascending by id, which is also the order of the symbol names."""

    def transform(self, src: np.ndarray) -> np.ndarray:
        return np.sort(src, axis=1)

    def alignment(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """(B, T, S) bool: target position t aligns with every source position holding its symbol.

        Equal symbols are interchangeable in a sorted output, so no single position of a
        repeated symbol is more right than another.
        """
        n = src.ne(self.pad_id).sum(1)[:, None, None]  # (B, 1, 1)
        t = torch.arange(tgt.shape[1], device=src.device)[None, :, None]  # (1, T, 1)
        real = src.ne(self.pad_id)[:, None, :]  # (B, 1, S)
        return (t < n) & real & tgt[:, :, None].eq(src[:, None, :])
