"""Generated tasks: examples built per problem size ``n`` from the seed.

A task only says how to make ``count`` examples of size ``n`` at once (numpy,
vectorised) and how long their source and target are. The split layout is the
same for all of them:

- ``train`` / ``val``: ``train_size`` / ``val_size`` examples, ``n`` uniform in ``train_lengths``;
- ``test``: ``test_size`` examples at every ``n`` in ``eval_lengths`` (which may
  lie outside the training range: that is the length-generalisation test).

Each ``(split, n)`` block has its own random stream seeded by ``(seed, split, n)``,
so adding an eval length or growing the train set leaves the other blocks as they were.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from experiments.tasks.base import (
    EOS_ID,
    SPLIT_STREAMS,
    TaskDataModule,
    integer,
    length_list,
    length_range,
)
from experiments.tasks.batching import Example

_LENGTH_DRAW, _BLOCK = 0, 1  # sub-streams of one split


class _TaskDefault:
    """Stands for a length list the caller did not give: the task's own default (``None`` is an error)."""

    def __repr__(self) -> str:
        return "<the task's default>"


TASK_DEFAULT: Any = _TaskDefault()


class SyntheticTask(TaskDataModule):
    """The parameters every generated task takes. A task with parameters of its own
    takes them first and hands the rest on as ``**shared``."""

    #: the lengths a task trains and is evaluated on when the caller names none
    default_train_lengths: tuple[int, int]
    default_eval_lengths: tuple[int, ...]

    def __init__(
        self,
        *,
        seed: int = 0,
        batch_size: int = 32,
        num_workers: int = 0,
        train_lengths: Sequence[int] = TASK_DEFAULT,
        eval_lengths: Sequence[int] = TASK_DEFAULT,
        train_size: int = 5000,
        val_size: int = 500,
        test_size: int = 200,
    ) -> None:
        if train_lengths is TASK_DEFAULT:
            train_lengths = self.default_train_lengths
        if eval_lengths is TASK_DEFAULT:
            eval_lengths = self.default_eval_lengths
        super().__init__(seed=seed, batch_size=batch_size, num_workers=num_workers)
        self.train_lengths = length_range("train_lengths", train_lengths)
        self.eval_lengths = length_list("eval_lengths", eval_lengths)
        self.sizes = {
            "train": integer("train_size", train_size),
            "val": integer("val_size", val_size),
            "test": integer("test_size", test_size),
        }

    # -- what a generated task provides ---------------------------------------------------------
    def generate(self, rng: np.random.Generator, n: int, count: int) -> dict[str, np.ndarray]:
        """``count`` examples of size ``n``: each array has a leading ``count`` axis.

        2-D arrays are sequences (one length within a block), 1-D arrays are labels.
        """
        raise NotImplementedError

    def source_length(self, n: int) -> int:
        raise NotImplementedError

    def target_length(self, n: int) -> int:
        """Target tokens including EOS; 0 when the task has no target sequence."""
        return 0

    def training_sizes(self) -> np.ndarray:
        """The sizes ``n`` the train and val splits draw from."""
        low, high = self.train_lengths
        return np.arange(low, high + 1)

    # -- layout --------------------------------------------------------------------------------
    def all_sizes(self) -> list[int]:
        return sorted({int(n) for n in self.training_sizes()} | set(self.eval_lengths))

    def max_source_length(self) -> int:
        return max(self.source_length(n) for n in self.all_sizes())

    def max_target_length(self) -> int:
        return max(self.target_length(n) for n in self.all_sizes())

    def split_counts(self, split: str) -> dict[int, int]:
        if split == "test":
            return {n: self.sizes["test"] for n in self.eval_lengths}
        rng = np.random.default_rng([self.seed, SPLIT_STREAMS[split], _LENGTH_DRAW])
        drawn = rng.choice(self.training_sizes(), size=self.sizes[split])
        sizes, counts = np.unique(drawn, return_counts=True)
        return {int(n): int(c) for n, c in zip(sizes, counts)}

    def build_split(self, split: str) -> list[Example]:
        examples: list[Example] = []
        for n, count in sorted(self.split_counts(split).items()):
            rng = np.random.default_rng([self.seed, SPLIT_STREAMS[split], _BLOCK, n])
            arrays = self.generate(rng, n, count)
            examples.extend(rows(arrays, length=n))
        return examples


def rows(arrays: dict[str, np.ndarray], length: int) -> list[Example]:
    """Split block arrays into per-example dicts (tensor views, no copies)."""
    columns: dict[str, list] = {}
    for key, array in arrays.items():
        if array.ndim == 2:
            columns[key] = list(torch.from_numpy(np.ascontiguousarray(array, dtype=np.int64)).unbind(0))
        else:
            columns[key] = [int(v) for v in array]
    count = len(next(iter(columns.values())))
    return [{**{key: column[i] for key, column in columns.items()}, "length": length} for i in range(count)]


def with_eos(tokens: np.ndarray) -> np.ndarray:
    """Append the EOS column to a block of targets: ``(count, T)`` -> ``(count, T + 1)``."""
    eos = np.full((tokens.shape[0], 1), EOS_ID, dtype=np.int64)
    return np.concatenate([tokens.astype(np.int64), eos], axis=1)
