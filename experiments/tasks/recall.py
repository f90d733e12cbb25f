"""Associative recall: ``n`` key-value pairs, a separator and a query key; the answer is its value.

Source: ``k1 v1 k2 v2 .. kn vn SEP kq``; target: ``v_q EOS``. Keys and values come
from disjoint halves of the alphabet (keys ``k0 ..``, values ``v0 ..``), so a
symbol's role never depends on its position; keys within one example are distinct.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from experiments.tasks.base import FIRST_SYMBOL_ID, SEP_ID, integer, refuse
from experiments.tasks.registry import TASKS
from experiments.tasks.synthetic import SyntheticTask, with_eos


@TASKS.register("recall", references=("graves2014neural", "ba2016using"))
class Recall(SyntheticTask):
    kind = "seq2seq"

    default_train_lengths = (2, 8)
    default_eval_lengths = (4, 8, 12, 16)

    def __init__(self, *, num_symbols: int = 32, **shared: Any) -> None:
        super().__init__(**shared)
        num_symbols = integer("num_symbols", num_symbols, minimum=2)
        longest = max(self.all_sizes())
        if num_symbols // 2 < longest:
            raise refuse(
                "num_symbols",
                num_symbols,
                f"recall draws n distinct keys from num_symbols // 2 key symbols, so it must be "
                f">= {2 * longest} for the longest length n={longest}",
            )
        self.num_symbols = num_symbols
        self.num_keys = num_symbols // 2
        self.vocab_size = FIRST_SYMBOL_ID + num_symbols

    def generate(self, rng: np.random.Generator, n: int, count: int) -> dict[str, np.ndarray]:
        # Distinct keys per row: the first n of a random permutation of the key alphabet.
        keys = np.argsort(rng.random((count, self.num_keys)), axis=1)[:, :n]  # (count, n)
        values = rng.integers(self.num_keys, self.num_symbols, size=(count, n))  # (count, n)
        query = rng.integers(0, n, size=count)  # (count,) which pair is asked for
        every = np.arange(count)
        pairs = np.empty((count, 2 * n), dtype=np.int64)
        pairs[:, 0::2], pairs[:, 1::2] = keys, values  # (count, 2n): k1 v1 k2 v2 ..
        sep = np.full((count, 1), SEP_ID)
        asked = FIRST_SYMBOL_ID + keys[every, query][:, None]  # (count, 1)
        src = np.concatenate([FIRST_SYMBOL_ID + pairs, sep, asked], axis=1)  # (count, 2n + 2)
        tgt = with_eos(FIRST_SYMBOL_ID + values[every, query][:, None])  # (count, 2)
        return {"src": src, "tgt": tgt}

    def source_length(self, n: int) -> int:
        return 2 * n + 2

    def target_length(self, n: int) -> int:
        return 2

    def symbol(self, token_id: int) -> str:
        index = token_id - FIRST_SYMBOL_ID
        return f"k{index}" if index < self.num_keys else f"v{index - self.num_keys}"
