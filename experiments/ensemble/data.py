"""The members' batches side by side: each member reads its own seed's loader, in that run's order.

A separate run turns a task batch into model inputs and targets (``experiments.batches``);
here each member does the same on its own batch, then the N results are right-padded to
common lengths and stacked along a new leading member dimension. Padding is what a batch
already holds: extra key positions that are masked, extra query positions whose targets
are ``IGNORE``. So a member's loss is its separate run's loss, up to the order of sums.
"""
from __future__ import annotations

from typing import Any, Iterator

import torch
import torch.nn.functional as F
from torch import Tensor

from experiments.batches import IGNORE, concat_io, lm_io, seq2seq_io

# the model's keyword inputs, as ``Seq2SeqModule._io`` passes them
INPUT_KEYS = ("src", "tgt_in")


def member_io(batch: dict[str, Tensor], *, kind: str, arch: str, pad_id: int, bos_id: int,
              sep_id: int) -> tuple[dict[str, Tensor], Tensor, Tensor | None]:
    """One member's (model inputs by keyword, targets, src), as ``Seq2SeqModule._io`` builds them."""
    if kind == "classify":
        return {"src": batch["src"]}, batch["label"], batch["src"]
    if kind == "lm":
        inputs, targets = lm_io(batch["tokens"])
        return {"tgt_in": inputs}, targets, None
    if arch == "seq2seq":
        tgt_in, targets = seq2seq_io(batch["tgt"], bos_id, pad_id)
        return {"src": batch["src"], "tgt_in": tgt_in}, targets, batch["src"]
    inputs, targets = concat_io(batch["src"], batch["tgt"], pad_id, sep_id)
    return {"tgt_in": inputs}, targets, batch["src"]


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

    def __init__(self, loaders: list[Any], **io: Any) -> None:
        self.loaders, self.io = loaders, io

    def __len__(self) -> int:
        return min(len(loader) for loader in self.loaders)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for batches in zip(*self.loaders):
            yield self.collate(list(batches))

    def collate(self, batches: list[dict[str, Tensor]]) -> dict[str, Any]:
        pad = self.io["pad_id"]
        ios = [member_io(b, **self.io) for b in batches]
        inputs = {key: stack_padded([io[0][key] for io in ios], pad) for key in INPUT_KEYS if key in ios[0][0]}
        targets = stack_padded([io[1] for io in ios], IGNORE)
        tokens = torch.stack([_seen(io[1], io[2], pad) for io in ios])  # (N,)
        return {"inputs": inputs, "targets": targets, "tokens": tokens}

    # Lightning looks for these to know that a mid-epoch resume is exact (see ResumableLoader).
    def state_dict(self) -> dict:
        return {"order": "recovered by each member's sampler from the trainer's epoch and step"}

    def load_state_dict(self, state: dict) -> None:
        return None


def _seen(targets: Tensor, src: Tensor | None, pad_id: int) -> Tensor:
    """What ``Seq2SeqModule.training_step`` adds to ``tokens_seen``."""
    seen = targets.ne(IGNORE).sum()
    return seen + src.ne(pad_id).sum() if src is not None else seen
