"""Translation from line-aligned parallel text files (plain or ``.gz``).

The tokenizer is trained on the training side only (both languages, one joint
vocabulary) and cached as JSON in ``<folder of train_src>/<cache_name>/``,
named by a hash of the training files (path, size, mtime) and the tokenizer
parameters; when that folder cannot be written (read-only data), ``cache_dir``
(the run's output folder) is used instead. Everything (files, counts,
tokenizer, encoding) happens in ``__init__``, so bad data fails before training.

Sources carry no specials; targets end with EOS. The length tag of an example
is its source length in tokens rounded up to a bucket: 8, 16, 32, 64, ...
(tag 16 holds sources of 9 to 16 tokens). ``train_lengths`` / ``eval_lengths``
are in the same buckets.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from experiments.tasks import cache
from experiments.tasks.base import (
    EOS_ID,
    FIRST_SYMBOL_ID,
    TaskConfigError,
    TaskDataModule,
    integer,
    one_of,
    optional_integer,
    path_value,
    refuse,
)
from experiments.tasks.batching import Example
from experiments.tasks.registry import TASKS
from experiments.tasks.textfiles import read_parallel
from experiments.tasks.tokenizer import TextTokenizer, load_tokenizer, train_tokenizer

CACHE_FORMAT = 1  # bump when the tokenizer recipe changes, so old cache entries are not reused
SMALLEST_BUCKET = 8


def bucket(length: int) -> int:
    """The smallest power of two >= ``length``, at least ``SMALLEST_BUCKET``."""
    return max(SMALLEST_BUCKET, 1 << max(length - 1, 0).bit_length())


@TASKS.register("translation", references=("elliott2016multi30k", "sennrich2016neural"))
class Translation(TaskDataModule):
    kind = "seq2seq"
    decode_separator = ""
    bleu_at_test = True

    def __init__(
        self,
        *,
        train_src: str | None = None,
        train_tgt: str | None = None,
        val_src: str | None = None,
        val_tgt: str | None = None,
        test_src: str | None = None,
        test_tgt: str | None = None,
        seed: int = 0,
        batch_size: int = 32,
        num_workers: int = 0,
        tokenizer: str = "bpe",
        vocab_size: int = 8000,
        max_length: int = 128,
        train_limit: int | None = None,
        cache_name: str = ".attnlab_cache",
        cache_dir: str | None = None,
    ) -> None:
        super().__init__(seed=seed, batch_size=batch_size, num_workers=num_workers)
        self.tokenizer_kind = one_of("tokenizer", tokenizer, ["bpe", "char"])
        self.requested_vocab_size = integer("vocab_size", vocab_size, minimum=16)
        self.max_length = integer("max_length", max_length, minimum=2)
        self.train_limit = optional_integer("train_limit", train_limit)
        if (test_src is None) != (test_tgt is None):
            given = "test_src" if test_src is not None else "test_tgt"
            raise refuse(
                given,
                test_src if test_src is not None else test_tgt,
                "give both task.test_src and task.test_tgt, or neither (then val is used for test)",
            )
        if test_src is None:
            test_src, test_tgt = val_src, val_tgt
        self.files = {
            key: path_value(key, value)
            for key, value in [
                ("train_src", train_src),
                ("train_tgt", train_tgt),
                ("val_src", val_src),
                ("val_tgt", val_tgt),
                ("test_src", test_src),
                ("test_tgt", test_tgt),
            ]
        }
        self.cache_folders = [cache.inside(self.files["train_src"].parent, cache_name, "cache_name")]
        if cache_dir is not None:
            self.cache_folders.append(path_value("cache_dir", cache_dir))

        texts = {split: self._read(split) for split in ("train", "val", "test")}
        self.tokenizer, self.tokenizer_path, self.tokenizer_cached = self._tokenizer(texts["train"])
        self.vocab_size = self.tokenizer.vocab_size
        self.dropped: dict[str, int] = {}
        for split, (src, tgt) in texts.items():
            self._splits[split] = self._encode(split, src, tgt)
        train_tags = [int(e["length"]) for e in self._splits["train"]]
        self.train_lengths = (min(train_tags), max(train_tags))
        self.eval_lengths = sorted({int(e["length"]) for e in self._splits["test"]})

    # -- reading -------------------------------------------------------------------------------
    def _read(self, split: str) -> tuple[list[str], list[str]]:
        src_key, tgt_key = f"{split}_src", f"{split}_tgt"
        src, tgt = read_parallel(src_key, self.files[src_key], tgt_key, self.files[tgt_key])
        if split == "train" and self.train_limit is not None:
            src, tgt = src[: self.train_limit], tgt[: self.train_limit]
        return src, tgt

    def _tokenizer(self, train: tuple[list[str], list[str]]) -> tuple[TextTokenizer, Path | None, bool]:
        """Load the cached tokenizer for these inputs, or train and cache it. Returns (tokenizer, file, was cached)."""
        params: dict[str, Any] = {
            "format": CACHE_FORMAT,
            "tokenizer": self.tokenizer_kind,
            "train_limit": self.train_limit,
            "vocab_size": self.requested_vocab_size if self.tokenizer_kind == "bpe" else None,
        }
        digest = cache.input_hash([self.files["train_src"], self.files["train_tgt"]], params)
        filename = f"tokenizer-{self.tokenizer_kind}-{digest}.json"
        found = cache.find(self.cache_folders, filename)
        if found is not None:
            try:
                return load_tokenizer(self.tokenizer_kind, found), found, True
            except Exception:  # noqa: BLE001 - a damaged entry (tokenizers raises a bare Exception) is rebuilt
                pass
        tokenizer = train_tokenizer(self.tokenizer_kind, train[0] + train[1], self.requested_vocab_size)
        return tokenizer, cache.store(self.cache_folders, filename, tokenizer.save), False

    # -- encoding ------------------------------------------------------------------------------
    def _encode(self, split: str, src_lines: list[str], tgt_lines: list[str]) -> list[Example]:
        """Examples of one split. Pairs with an empty side are dropped everywhere (nothing to attend
        to or nothing to say); training pairs longer than ``max_length`` tokens are dropped too."""
        src_ids = self.tokenizer.encode_batch(src_lines)
        tgt_ids = self.tokenizer.encode_batch(tgt_lines)
        examples: list[Example] = []
        for src, tgt in zip(src_ids, tgt_ids):
            if not src or not tgt:
                continue
            if split == "train" and max(len(src), len(tgt) + 1) > self.max_length:
                continue
            examples.append(
                {
                    "src": torch.tensor(src, dtype=torch.long),
                    "tgt": torch.tensor(tgt + [EOS_ID], dtype=torch.long),
                    "length": bucket(len(src)),
                }
            )
        self.dropped[split] = len(src_ids) - len(examples)
        if not examples:
            if split == "train":
                raise refuse(
                    "max_length",
                    self.max_length,
                    f"it leaves none of the {len(src_ids)} training pairs (or all have an empty side)",
                )
            key = f"{split}_src"
            raise TaskConfigError(f"task.{key}={str(self.files[key])!r} cannot be used: every pair has an empty side")
        return examples

    def build_split(self, split: str) -> list[Example]:
        return self._splits[split]  # encoded in __init__; kept for the interface

    # -- facts ---------------------------------------------------------------------------------
    def max_source_length(self) -> int:
        return max(len(e["src"]) for examples in self._splits.values() for e in examples)

    def max_target_length(self) -> int:
        return max(len(e["tgt"]) for examples in self._splits.values() for e in examples)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode_batch([text])[0]

    def decode(self, ids: list[int] | torch.Tensor) -> str:
        """Detokenised text (for BLEU): up to the first EOS, specials and unknowns left out."""
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        kept = []
        for i in ids:
            if i == EOS_ID:
                break
            if i >= FIRST_SYMBOL_ID:
                kept.append(int(i))
        return self.tokenizer.decode(kept)
