"""Turning task batches into model inputs and targets, per architecture.

Targets use ``IGNORE`` wherever no loss is due (padding; the prompt of a
decoder-only model trained on a seq2seq task).
"""

from __future__ import annotations

import torch
from torch import Tensor

IGNORE = -100
# Key of an evaluation batch that a DDP rank repeats only to take as many steps as the
# others (see ``experiments.tasks.sampling.RankBatches``); evaluation skips it.
REPEATED = "repeated"


def seq2seq_io(tgt: Tensor, bos_id: int, pad_id: int) -> tuple[Tensor, Tensor]:
    """Shifted-right decoder input and the targets: tgt (B, T) -> (B, T), (B, T)."""
    bos = tgt.new_full((tgt.shape[0], 1), bos_id)
    tgt_in = torch.cat((bos, tgt[:, :-1]), dim=1)
    tgt_in = tgt_in.masked_fill(tgt_in.eq(pad_id), pad_id)
    return tgt_in, tgt.masked_fill(tgt.eq(pad_id), IGNORE)


def prompt_rows(src: Tensor, pad_id: int, sep_id: int) -> list[Tensor]:
    """The decoder-only prompt of each example: its real source tokens then ``<sep>``."""
    sep = src.new_tensor([sep_id])
    return [torch.cat((row[row.ne(pad_id)], sep)) for row in src]


def concat_io(src: Tensor, tgt: Tensor, pad_id: int, sep_id: int) -> tuple[Tensor, Tensor]:
    """Decoder-only view of a seq2seq pair: ``src <sep> tgt``, loss on the ``tgt`` part only.

    src (B, S), tgt (B, T) -> inputs (B, L - 1), targets (B, L - 1), right-padded.
    """
    prompts = prompt_rows(src, pad_id, sep_id)
    rows, masks = [], []
    for prompt, target in zip(prompts, tgt):
        target = target[target.ne(pad_id)]
        rows.append(torch.cat((prompt, target)))
        masks.append(torch.cat((torch.zeros_like(prompt, dtype=torch.bool), torch.ones_like(target, dtype=torch.bool))))
    length = max(r.numel() for r in rows)
    seq = src.new_full((len(rows), length), pad_id)
    scored = torch.zeros((len(rows), length), dtype=torch.bool, device=src.device)
    for i, (r, m) in enumerate(zip(rows, masks)):
        seq[i, : r.numel()] = r
        scored[i, : m.numel()] = m
    targets = seq[:, 1:].masked_fill(~scored[:, 1:], IGNORE)
    return seq[:, :-1], targets


def lm_io(tokens: Tensor) -> tuple[Tensor, Tensor]:
    """tokens (B, C + 1) -> inputs (B, C), next-token targets (B, C)."""
    return tokens[:, :-1], tokens[:, 1:]
