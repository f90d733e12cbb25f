"""Parity: a string of ``n`` bits; the label is 1 when it holds an odd number of ones."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from experiments.tasks.base import FIRST_SYMBOL_ID
from experiments.tasks.registry import TASKS
from experiments.tasks.synthetic import SyntheticTask

BITS = ("0", "1")


@TASKS.register("parity")
class Parity(SyntheticTask):
    kind = "classify"
    num_classes = 2

    def __init__(
        self,
        *,
        seed: int = 0,
        batch_size: int = 32,
        num_workers: int = 0,
        train_lengths: Sequence[int] = (2, 16),
        eval_lengths: Sequence[int] = (8, 16, 32, 64),
        train_size: int = 5000,
        val_size: int = 500,
        test_size: int = 200,
    ) -> None:
        super().__init__(
            seed=seed, batch_size=batch_size, num_workers=num_workers, train_lengths=train_lengths,
            eval_lengths=eval_lengths, train_size=train_size, val_size=val_size, test_size=test_size,
        )
        self.vocab_size = FIRST_SYMBOL_ID + len(BITS)

    def generate(self, rng: np.random.Generator, n: int, count: int) -> dict[str, np.ndarray]:
        bits = rng.integers(0, 2, size=(count, n))  # (count, n)
        return {"src": FIRST_SYMBOL_ID + bits, "label": bits.sum(axis=1) % 2}

    def source_length(self, n: int) -> int:
        return n

    def symbol(self, token_id: int) -> str:
        return BITS[token_id - FIRST_SYMBOL_ID]
