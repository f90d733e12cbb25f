"""Character-level language modelling on any UTF-8 text file.

The vocabulary is the sorted set of the file's characters after the four specials.
The last ``val_fraction`` of the file is held out. Training draws
``train_batches_per_epoch * batch_size`` random windows of ``context + 1``
characters from the rest, fresh every epoch (from the seeded train generator, so
two runs with one seed see the same windows). Validation takes ``val_windows``
evenly spaced windows of the held-out text at ``context``; the test loader takes
``test_windows`` (default: as many) at every length in ``eval_contexts`` (the length tag is
the context), which measures how a model trained at one context does at longer ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from experiments.tasks.base import (
    FIRST_SYMBOL_ID,
    TaskDataModule,
    fraction,
    integer,
    length_list,
    path_value,
)
from experiments.tasks.batching import Example
from experiments.tasks.registry import TASKS
from experiments.tasks.sampling import ResumableLoader, uniform_starts
from experiments.tasks.textfiles import file_error, read_text


class Windows(Dataset):
    """Every window of ``width`` tokens of a token stream, indexed by its start."""

    def __init__(self, ids: torch.Tensor, width: int) -> None:
        self.ids, self.width = ids, width

    def __len__(self) -> int:
        return len(self.ids) - self.width + 1

    def __getitem__(self, start: int) -> Example:
        return {"tokens": self.ids[start : start + self.width], "length": self.width - 1}


@TASKS.register("charlm", references="karpathy2015charrnn")
class CharLM(TaskDataModule):
    kind = "lm"
    decode_separator = ""

    def __init__(
        self,
        *,
        path: str | None = None,
        seed: int = 0,
        batch_size: int = 32,
        num_workers: int = 0,
        context: int = 64,
        eval_contexts: Sequence[int] = (64, 128, 256),
        val_fraction: float = 0.1,
        train_batches_per_epoch: int = 200,
        val_windows: int = 64,
        test_windows: int | None = None,
    ) -> None:
        super().__init__(seed=seed, batch_size=batch_size, num_workers=num_workers)
        self.path = path_value("path", path)
        self.context = integer("context", context)
        self.eval_lengths = length_list("eval_contexts", eval_contexts)
        self.train_lengths = (self.context, self.context)
        self.val_fraction = fraction("val_fraction", val_fraction)
        self.train_batches_per_epoch = integer("train_batches_per_epoch", train_batches_per_epoch)
        self.val_windows = integer("val_windows", val_windows)
        self.test_windows = self.val_windows if test_windows is None else integer("test_windows", test_windows)

        text = read_text("path", self.path)
        codepoints = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)  # (N,)
        alphabet, index = np.unique(codepoints, return_inverse=True)
        self.chars = [chr(c) for c in alphabet]
        self.char_ids = {c: i for i, c in enumerate(self.chars, start=FIRST_SYMBOL_ID)}
        self.vocab_size = FIRST_SYMBOL_ID + len(self.chars)
        ids = torch.from_numpy(index.astype(np.int64) + FIRST_SYMBOL_ID)  # (N,)
        held_out = int(round(len(ids) * self.val_fraction))
        self.train_ids, self.val_ids = ids[: len(ids) - held_out], ids[len(ids) - held_out :]

        longest = max(self.context, *self.eval_lengths)
        if len(self.train_ids) < self.context + 1:
            raise file_error(
                "path",
                self.path,
                f"its training part ({len(self.train_ids)} characters, val_fraction={self.val_fraction}) "
                f"is shorter than task.context={self.context} + 1",
            )
        if len(self.val_ids) < longest + 1:
            raise file_error(
                "path",
                self.path,
                f"its held-out part ({len(self.val_ids)} characters, val_fraction={self.val_fraction}) "
                f"is shorter than the longest context {longest} + 1; use a longer file, a larger "
                f"task.val_fraction or shorter task.eval_contexts",
            )

    def symbol(self, token_id: int) -> str:
        return self.chars[token_id - FIRST_SYMBOL_ID]

    def encode(self, text: str) -> list[int]:
        """Text to ids; a character outside the file's alphabet is an error (there is no unknown id)."""
        missing = sorted(set(text) - set(self.char_ids))
        if missing:
            raise ValueError(f"characters {missing} are not in the vocabulary of {str(self.path)!r}")
        return [self.char_ids[c] for c in text]

    def max_source_length(self) -> int:
        return max(self.context, *self.eval_lengths)

    def max_target_length(self) -> int:
        return self.max_source_length()

    def _held_out_windows(self, context: int, count: int) -> list[Example]:
        windows = Windows(self.val_ids, context + 1)
        starts = np.linspace(0, len(windows) - 1, num=min(count, len(windows))).round().astype(int)
        return [windows[int(s)] for s in starts]

    def build_split(self, split: str) -> list[Example]:
        if split == "train":
            return []  # training windows are drawn afresh every epoch; see train_dataloader
        if split == "val":
            return self._held_out_windows(self.context, self.val_windows)
        return [w for context in self.eval_lengths for w in self._held_out_windows(context, self.test_windows)]

    def train_dataloader(self) -> DataLoader:
        windows = Windows(self.train_ids, self.context + 1)
        count = self.train_batches_per_epoch * self.batch_size
        starts = self.train_order(uniform_starts(len(windows), count), count)
        return self._loader(windows, ResumableLoader, batch_size=self.batch_size, sampler=starts)
