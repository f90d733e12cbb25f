"""Examples, padding and length-grouped batches, shared by every task."""

from __future__ import annotations

from typing import Union

import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import Dataset

# One example: 1-D LongTensors for sequences, plain ints for labels and the length tag.
Example = dict[str, Union[Tensor, int]]


class ExampleDataset(Dataset):
    """A list of ready examples (or of ready batches)."""

    def __init__(self, examples: list) -> None:
        self.examples = examples

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, index: int):
        return self.examples[index]


def bucket_length(length: int, longest: int, smallest: int = 8) -> int:
    """``length`` rounded up to a power of two (at least ``smallest``), never past ``longest``."""
    bucket = smallest
    while bucket < length:
        bucket *= 2
    return max(length, min(bucket, longest))


def pad_collate(examples: list[Example], pad_id: int = 0, buckets: dict[str, int] | None = None) -> dict[str, Tensor]:
    """Stack examples into a batch; sequences are right-padded with ``pad_id``.

    ``buckets`` ({key: longest}) pads those keys further, to their ``bucket_length``: a few fixed
    shapes instead of one per batch, which CUDA graphs (``model.compile_mode=reduce-overhead``)
    need. The extra positions are ``pad_id``, so the masks keep them out of attention and loss.
    """
    batch: dict[str, Tensor] = {}
    for key in examples[0]:
        values = [e[key] for e in examples]
        if isinstance(values[0], Tensor):
            batch[key] = pad_sequence(values, batch_first=True, padding_value=pad_id)  # (B, longest)
            if buckets and key in buckets:
                extra = bucket_length(batch[key].shape[1], buckets[key]) - batch[key].shape[1]
                batch[key] = torch.nn.functional.pad(batch[key], (0, extra), value=pad_id)  # (B, bucket)
        else:
            batch[key] = torch.tensor(values, dtype=torch.long)  # (B,)
    return batch


def batches_by_length(examples: list[Example], batch_size: int, pad_id: int = 0) -> list[dict[str, Tensor]]:
    """Ready batches in which every example has the same length tag, in ascending tag order.

    Metrics are then grouped per length by reading one tag per batch, and the order is
    fixed, so test results never depend on a shuffle. The batches are made up front and
    served whole (``DataLoader(batch_size=None)``): a distributed run then shards
    whole batches across devices instead of needing a custom batch sampler.
    """
    by_length: dict[int, list[Example]] = {}
    for example in examples:
        by_length.setdefault(int(example["length"]), []).append(example)
    return [
        pad_collate(members[start : start + batch_size], pad_id)
        for _, members in sorted(by_length.items())
        for start in range(0, len(members), batch_size)
    ]
