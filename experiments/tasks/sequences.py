"""Copy, reverse and sort: a random string of ``n`` symbols in, a rearrangement of it out."""
from __future__ import annotations

from typing import Any

import numpy as np

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


@TASKS.register("copy")
class Copy(SymbolTask):
    def transform(self, src: np.ndarray) -> np.ndarray:
        return src.copy()


@TASKS.register("reverse")
class Reverse(SymbolTask):
    def transform(self, src: np.ndarray) -> np.ndarray:
        return src[:, ::-1].copy()


@TASKS.register("sort")
class Sort(SymbolTask):
    """Ascending by id, which is also the order of the symbol names."""

    def transform(self, src: np.ndarray) -> np.ndarray:
        return np.sort(src, axis=1)
