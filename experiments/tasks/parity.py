"""Parity: a string of ``n`` bits; the label is 1 when it holds an odd number of ones."""

from __future__ import annotations

import numpy as np

from experiments.tasks.base import FIRST_SYMBOL_ID
from experiments.tasks.registry import TASKS
from experiments.tasks.synthetic import SyntheticTask

BITS = ("0", "1")


@TASKS.register("parity", references="hahn2020theoretical")
class Parity(SyntheticTask):
    kind = "classify"
    num_classes = 2

    default_train_lengths = (2, 16)
    default_eval_lengths = (8, 16, 32, 64)
    vocab_size = FIRST_SYMBOL_ID + len(BITS)

    def generate(self, rng: np.random.Generator, n: int, count: int) -> dict[str, np.ndarray]:
        bits = rng.integers(0, 2, size=(count, n))  # (count, n)
        return {"src": FIRST_SYMBOL_ID + bits, "label": bits.sum(axis=1) % 2}

    def source_length(self, n: int) -> int:
        return n

    def symbol(self, token_id: int) -> str:
        return BITS[token_id - FIRST_SYMBOL_ID]
