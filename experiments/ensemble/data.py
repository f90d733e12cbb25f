"""The members' batches side by side: each member reads its own seed's loader, in that run's order.

A separate run turns a task batch into model inputs and targets through its task adapter
(``experiments.training.task_adapters``); here each member does the same on its own batch through the
same adapter, then the N results are right-padded to common lengths and stacked along a new
leading member dimension. Padding is what a batch already holds: extra key positions that are
masked, extra query positions whose targets are ``IGNORE``. So a member's loss is its separate
run's loss, up to the order of sums.
"""

from __future__ import annotations

from typing import Any, Iterator

import torch
import torch.nn.functional as F
from torch import Tensor

from experiments.tasks.batches import IGNORE
from experiments.training.task_adapters import TaskAdapter, adapter_for

# the model's keyword inputs, as ``TransformerModule._io`` passes them
INPUT_KEYS = ("src", "tgt_in")


def stack_padded(tensors: list[Tensor], value: int) -> Tensor:
    """N tensors (B, T_i) or (B,) -> (N, B, max T_i) right-padded with ``value``, or (N, B)."""
    if tensors[0].dim() == 1:
        return torch.stack(tensors)
    longest = max(t.shape[1] for t in tensors)
    return torch.stack([F.pad(t, (0, longest - t.shape[1]), value=value) for t in tensors])  # (N, B, T)


class MemberBatches:
    """Zips the members' train loaders; each item is one training step of every member.

    An item: ``inputs`` {key: (N, B, T)}, ``targets`` (N, B, T) or (N, B), and ``tokens`` (N,),
    the tokens each member's separate run counts as seen. The loaders' samplers read their
    datamodule's trainer (set to the ensemble's), so a resumed ensemble skips, per member,
    the batches already consumed, exactly as a resumed separate run does.
    """

    def __init__(self, loaders: list[Any], *, kind: str, arch: str, pad_id: int, bos_id: int, sep_id: int) -> None:
        self.loaders, self.pad_id = loaders, pad_id
        self.adapter: TaskAdapter = adapter_for(kind, arch, pad_id=pad_id, bos_id=bos_id, sep_id=sep_id)

    def __len__(self) -> int:
        return min(len(loader) for loader in self.loaders)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for batches in zip(*self.loaders):
            yield self.collate(list(batches))

    def collate(self, batches: list[dict[str, Tensor]]) -> dict[str, Any]:
        ios = [self.adapter.io(b) for b in batches]
        inputs = {key: stack_padded([io[0][key] for io in ios], self.pad_id) for key in INPUT_KEYS if key in ios[0][0]}
        targets = stack_padded([io[1] for io in ios], IGNORE)
        # (N,): as TransformerModule.training_step counts them
        tokens = torch.stack([self.adapter.seen(io[1], io[2]) for io in ios])
        return {"inputs": inputs, "targets": targets, "tokens": tokens}

    # Lightning looks for these to know that a mid-epoch resume is exact (see ResumableLoader).
    def state_dict(self) -> dict:
        return {"order": "recovered by each member's sampler from the trainer's epoch and step"}

    def load_state_dict(self, state: dict) -> None:
        return None
