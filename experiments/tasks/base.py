"""The interface every task datamodule offers, and the up-front checks of task parameters.

A task owns its data: it generates it from ``seed`` or reads files the user
names, and it exposes the vocabulary facts the model is built from. All tasks
share four special ids, so a model never needs to ask which task it is on:
``pad = 0``, ``bos = 1``, ``eos = 2``, ``sep = 3``; real symbols start at 4.

Batches are dicts of LongTensors, right-padded with ``pad_id``:

- ``seq2seq``:  ``src (B, S)``, ``tgt (B, T)`` (targets then EOS, no BOS), ``length (B,)``
- ``lm``:       ``tokens (B, C + 1)`` (predict ``tokens[:, 1:]`` from ``tokens[:, :-1]``), ``length (B,)``
- ``classify``: ``src (B, S)``, ``label (B,)``, ``length (B,)``

``length`` is the tag evaluation is grouped by (problem size, context, bucket).
The test loader never mixes two tags in one batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from os import PathLike
from pathlib import Path
from typing import Any, ClassVar, Iterable

import lightning as L
import torch
from torch.utils.data import DataLoader

from experiments.tasks.batching import Example, ExampleDataset, batches_by_length, pad_collate
from experiments.tasks.kinds import TASK_KINDS, task_kind
from experiments.tasks.sampling import (
    RankBatches,
    ResumableLoader,
    ResumableOrder,
    shuffled,
    trainer_position,
    trainer_shard,
)

KINDS = tuple(TASK_KINDS)
SPECIALS = ("<pad>", "<bos>", "<eos>", "<sep>")
PAD_ID, BOS_ID, EOS_ID, SEP_ID = 0, 1, 2, 3
FIRST_SYMBOL_ID = len(SPECIALS)

# Each split draws from its own stream, so growing one split never changes another.
SPLIT_STREAMS = {"train": 0, "val": 1, "test": 2}


class TaskConfigError(ValueError):
    """A task parameter or data file the task cannot work with (a user error, raised before training)."""


# -- parameter checks: each returns the normalised value or raises a one-line TaskConfigError -------
def _show(value: Any) -> str:
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return repr([v for v in value])  # a Hydra ListConfig prints like a list
    if isinstance(value, PathLike):
        return repr(str(value))
    return repr(value)


def refuse(key: str, value: Any, allowed: str) -> TaskConfigError:
    """The project's one-line error: the key, the value given and what is allowed."""
    return TaskConfigError(f"task.{key}={_show(value)} is not allowed; {allowed}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def integer(key: str, value: Any, minimum: int = 1) -> int:
    if not _is_int(value) or value < minimum:
        raise refuse(key, value, f"it must be an integer >= {minimum}")
    return int(value)


def optional_integer(key: str, value: Any, minimum: int = 1) -> int | None:
    if value is None:
        return None
    if not _is_int(value) or value < minimum:
        raise refuse(key, value, f"it must be null or an integer >= {minimum}")
    return int(value)


def fraction(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < 1.0:
        raise refuse(key, value, "it must be a number strictly between 0 and 1")
    return float(value)


def one_of(key: str, value: Any, allowed: Iterable[Any]) -> Any:
    allowed = list(allowed)
    if value not in allowed:
        raise refuse(key, value, f"choose one of {allowed}")
    return value


def length_range(key: str, value: Any) -> tuple[int, int]:
    """``[min, max]`` with ``1 <= min <= max``."""
    ok = (
        isinstance(value, Sequence)
        and not isinstance(value, (str, bytes))
        and len(value) == 2
        and all(_is_int(v) for v in value)
        and 1 <= value[0] <= value[1]
    )
    if not ok:
        raise refuse(key, value, "it must be [min, max] with 1 <= min <= max")
    return int(value[0]), int(value[1])


def length_list(key: str, value: Any) -> list[int]:
    """A non-empty list of lengths >= 1, returned sorted without repeats."""
    ok = (
        isinstance(value, Sequence)
        and not isinstance(value, (str, bytes))
        and len(value) > 0
        and all(_is_int(v) and v >= 1 for v in value)
    )
    if not ok:
        raise refuse(key, value, "it must be a non-empty list of integers >= 1")
    return sorted({int(v) for v in value})


def path_value(key: str, value: Any) -> Path:
    if not isinstance(value, (str, PathLike)) or not str(value):
        raise refuse(key, value, "it must be a file path")
    return Path(value).expanduser()


# -- the datamodule interface ------------------------------------------------------------------------
class TaskDataModule(L.LightningDataModule):
    """Common loaders and facts; a task fills in ``build_split`` and the vocabulary.

    Subclasses set ``kind``, ``vocab_size``, ``train_lengths`` and ``eval_lengths``
    (and ``num_classes`` for ``classify``) during ``__init__``, after validating
    every parameter, so a bad config fails before the model is built.
    """

    kind: str = ""
    pad_id: int = PAD_ID
    bos_id: int = BOS_ID
    eos_id: int = EOS_ID
    sep_id: int = SEP_ID
    num_classes: int | None = None
    # Symbols of synthetic tasks are words; text tasks join characters or subwords without a gap.
    decode_separator: str = " "
    # Whether the test scores the decoded text against its references with corpus BLEU and chrF
    # (needs ``decode`` to give detokenised text): a fact of the task, not of its name, declared on the
    # class so that the checks read it through the registry before any data is built (config/metric_names.py).
    bleu_at_test: ClassVar[bool] = False

    vocab_size: int
    train_lengths: tuple[int, int]
    eval_lengths: list[int]

    def __init__(self, *, seed: int, batch_size: int, num_workers: int = 0) -> None:
        super().__init__()
        task_kind(self.kind, type(self).__name__)
        self.seed = integer("seed", seed, minimum=0)
        self.batch_size = integer("batch_size", batch_size)
        self.num_workers = integer("num_workers", num_workers, minimum=0)
        self._splits: dict[str, list[Example]] = {}

    # -- what a task provides ------------------------------------------------------------------
    def build_split(self, split: str) -> list[Example]:
        """The examples of ``split`` (``train``, ``val`` or ``test``), deterministic from the seed."""
        raise NotImplementedError

    def max_source_length(self) -> int:
        """The longest ``src`` any split can hold (``lm``: the longest context), known before training."""
        raise NotImplementedError

    def max_target_length(self) -> int:
        """The longest ``tgt`` including EOS (``lm``: the longest context; ``classify``: 0, no target sequence)."""
        raise NotImplementedError

    def longest_sequence(self) -> int | None:
        """The most keys any attention call of a run on this task sees (the decoder reads BOS + the target),
        or None where the task cannot say before building its data: what a plan by length reads."""
        try:
            return max(self.max_source_length(), self.max_target_length()) + 1
        except NotImplementedError:
            return None

    def symbol(self, token_id: int) -> str:
        """The text of one non-special id."""
        raise NotImplementedError

    def alignment(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor | None:
        """Which source positions each target position should read, where the task knows it:
        src (B, S), tgt (B, T) -> (B, T, S) bool (a row of False: no aligned position), or None."""
        return None

    def decode(self, ids: Sequence[int] | torch.Tensor) -> str:
        """Ids to text: stop at the first EOS, skip the specials."""
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        words = []
        for i in ids:
            if i == self.eos_id:
                break
            if i >= FIRST_SYMBOL_ID:
                words.append(self.symbol(int(i)))
        return self.decode_separator.join(words)

    # -- data ----------------------------------------------------------------------------------
    def split(self, name: str) -> list[Example]:
        """Built once on first use, then kept; ``setup`` only decides which are needed when."""
        if name not in SPLIT_STREAMS:
            raise ValueError(f"split={name!r} is unknown; choose one of {list(SPLIT_STREAMS)}")
        if name not in self._splits:
            self._splits[name] = self.build_split(name)
        return self._splits[name]

    def setup(self, stage: str | None = None) -> None:
        needed = {"fit": ("train", "val"), "validate": ("val",), "test": ("test",), "predict": ("test",)}
        for name in needed.get(stage or "", tuple(SPLIT_STREAMS)):
            self.split(name)

    #: pad training batches to a few bucket lengths (``fixed_shape_buckets``); the training app sets it
    fixed_shapes = False

    def collate(self, examples: list[Example]) -> dict[str, torch.Tensor]:
        return pad_collate(examples, pad_id=self.pad_id)

    def _loader(self, dataset: Any, loader: type[DataLoader] = DataLoader, **kwargs: Any) -> DataLoader:
        kwargs.setdefault("collate_fn", partial(pad_collate, pad_id=self.pad_id))
        # A loader's own generator: creating its iterator then draws nothing from torch's
        # global stream, which dropout uses, so a resumed run's dropout masks line up.
        kwargs.setdefault("generator", torch.Generator().manual_seed(self.seed))
        return loader(dataset, num_workers=self.num_workers, persistent_workers=self.num_workers > 0, **kwargs)

    def train_dataloader(self) -> DataLoader:
        examples = self.split("train")
        collate = partial(pad_collate, pad_id=self.pad_id, buckets=self.fixed_shape_buckets())
        order = self.train_order(shuffled(len(examples)), len(examples))
        # No new shape at an epoch's end: a last short batch (experiment=quick: 5000 mod 32 = 8 examples)
        # is a batch size no other step has, which a compiled path compiles again. Dropped (a different
        # 8 each epoch, as the order is reshuffled) while one whole batch is left.
        order.drop_last = len(order) >= self.batch_size
        return self._loader(
            ExampleDataset(examples),
            ResumableLoader,
            batch_size=self.batch_size,
            sampler=order,
            collate_fn=collate,
            drop_last=order.drop_last,
        )

    def fixed_shape_buckets(self) -> dict[str, int] | None:
        """{key: longest} of the sequences training pads to a bucket length when ``fixed_shapes`` is on
        (set by the training app for CUDA graphs), else None: each batch as long as its longest example."""
        if not self.fixed_shapes or self.kind == "lm":  # an lm window is always context + 1 long
            return None
        return {"src": self.max_source_length(), "tgt": self.max_target_length()}

    def train_order(self, draw, length: int) -> ResumableOrder:
        """The training sampler: seeded per epoch, resumable mid-epoch, sharded by rank (see ``sampling``)."""
        return ResumableOrder(draw, length, self.seed, self.batch_size, trainer_position(self), trainer_shard(self))

    def val_dataloader(self) -> DataLoader:
        examples = self.split("val")
        batches = [self.collate(examples[i : i + self.batch_size]) for i in range(0, len(examples), self.batch_size)]
        return self._loader(RankBatches(batches, trainer_shard(self)), batch_size=None, collate_fn=None)

    def test_dataloader(self) -> DataLoader:
        batches = batches_by_length(self.split("test"), self.batch_size, self.pad_id)
        return self._loader(RankBatches(batches, trainer_shard(self)), batch_size=None, collate_fn=None)

    def example(self) -> dict[str, torch.Tensor]:
        """One fixed batch of size 1 for attention maps: the longest validation example within training lengths."""
        examples = self.split("val")
        low, high = self.train_lengths
        inside = [e for e in examples if low <= int(e["length"]) <= high] or examples
        longest = max(int(e["length"]) for e in inside)
        chosen = next(e for e in inside if int(e["length"]) == longest)
        return self.collate([chosen])

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(kind={self.kind!r}, vocab_size={getattr(self, 'vocab_size', None)}, "
            f"train_lengths={getattr(self, 'train_lengths', None)}, eval_lengths={getattr(self, 'eval_lengths', None)})"
        )
