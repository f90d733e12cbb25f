"""Addition of two ``n``-digit decimal numbers.

Source: ``a_1 .. a_n + b_1 .. b_n``; target: the ``n + 1`` digits of the sum, then EOS.
All numbers are written most significant digit first and at fixed width: operands
may have leading zeros and the sum always has ``n + 1`` digits (a leading ``0``
when there is no final carry), so the target length depends on ``n`` only.
"""

from __future__ import annotations

import numpy as np

from experiments.tasks.base import FIRST_SYMBOL_ID
from experiments.tasks.registry import TASKS
from experiments.tasks.synthetic import SyntheticTask, with_eos

DIGITS = [str(d) for d in range(10)]
PLUS = "+"
PLUS_ID = FIRST_SYMBOL_ID + len(DIGITS)


def add_digits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Column-wise school addition of digit rows ``(count, n)``, most significant first -> ``(count, n + 1)``.

    Done digit by digit so any ``n`` works without integer overflow.
    """
    count, n = a.shape
    total = np.zeros((count, n + 1), dtype=np.int64)
    carry = np.zeros(count, dtype=np.int64)
    for column in range(n - 1, -1, -1):
        s = a[:, column] + b[:, column] + carry
        total[:, column + 1] = s % 10
        carry = s // 10
    total[:, 0] = carry
    return total


@TASKS.register("addition", references="zaremba2014learning")
class Addition(SyntheticTask):
    kind = "seq2seq"

    default_train_lengths = (1, 8)
    default_eval_lengths = (4, 8, 12, 16)
    vocab_size = FIRST_SYMBOL_ID + len(DIGITS) + 1

    def generate(self, rng: np.random.Generator, n: int, count: int) -> dict[str, np.ndarray]:
        a = rng.integers(0, 10, size=(count, n))  # (count, n) digits
        b = rng.integers(0, 10, size=(count, n))
        plus = np.full((count, 1), PLUS_ID)
        src = np.concatenate([FIRST_SYMBOL_ID + a, plus, FIRST_SYMBOL_ID + b], axis=1)  # (count, 2n + 1)
        tgt = with_eos(FIRST_SYMBOL_ID + add_digits(a, b))  # (count, n + 2)
        return {"src": src, "tgt": tgt}

    def source_length(self, n: int) -> int:
        return 2 * n + 1

    def target_length(self, n: int) -> int:
        return n + 2

    def symbol(self, token_id: int) -> str:
        return PLUS if token_id == PLUS_ID else DIGITS[token_id - FIRST_SYMBOL_ID]
