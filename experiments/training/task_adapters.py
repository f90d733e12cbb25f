"""One adapter per task kind: what training and evaluation do differently for seq2seq, lm and classify.

The Lightning module (``experiments/training/module.py``) chooses its adapter once, from the task kind and
the architecture (``adapter_for``), and the seed ensemble builds its members' batches through the
same adapter (``experiments/ensemble/data.py``). An adapter turns a batch into the model's keyword
inputs and the targets, scores logits through the one cross-entropy below, says what counts as
tokens seen, and names and reduces the evaluation metrics of its kind.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Callable, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from experiments.tasks.batches import IGNORE, concat_io, lm_io, prompt_rows, seq2seq_io

# (model inputs by keyword, as Transformer.forward takes them; targets; the source, if any)
IO = tuple[dict[str, Tensor], Tensor, "Tensor | None"]


def cross_entropy(logits: Tensor, targets: Tensor, smoothing: float = 0.0) -> Tensor:
    """Per-position losses in float32, 0 where the target is ``IGNORE``.

    logits (B, C) with targets (B,) -> (B,); logits (B, T, V) with targets (B, T) -> (B, T).
    """
    # F.cross_entropy wants the classes in dimension 1: (B, T, V) -> (B, V, T); (B, C) stays.
    return F.cross_entropy(
        logits.float().movedim(-1, 1), targets, ignore_index=IGNORE, reduction="none", label_smoothing=smoothing
    )


class Scores(NamedTuple):
    """One test batch's accuracy counts: correct units, units counted (a mask), per-example success."""

    tok: Tensor  # () correct tokens (a classifier's: correct labels)
    real: Tensor  # (B, T) | (B,) the units that count
    seq: Tensor  # (B,) bool: the whole example right
    generated: Tensor | None = None  # (B, T) greedy outputs, when the test generated


class TaskAdapter(ABC):
    """The part of training and evaluation that depends on the task kind (and, for seq2seq, the arch)."""

    kind = ""

    def __init__(self, *, pad_id: int, bos_id: int, sep_id: int) -> None:
        self.pad_id, self.bos_id, self.sep_id = pad_id, bos_id, sep_id

    @abstractmethod
    def io(self, batch: dict[str, Tensor]) -> IO:
        """(model inputs by keyword, targets, src or None) for a task batch."""

    @abstractmethod
    def losses(self, logits: Tensor, targets: Tensor, smoothing: float = 0.0) -> tuple[Tensor, Tensor]:
        """Mean loss and the per-example loss (B,)."""

    def loss(self, logits: Tensor, targets: Tensor, smoothing: float = 0.0) -> Tensor:
        """The mean loss alone, ``losses(...)[0]``: what a training step needs, without the per-example losses."""
        return self.losses(logits, targets, smoothing)[0]

    @abstractmethod
    def token_losses(self, logits: Tensor, targets: Tensor, smoothing: float = 0.0) -> Tensor:
        """Per-position losses c (B, T), 0 where nothing is scored (REINFORCE's costs)."""

    @abstractmethod
    def scored(self, targets: Tensor) -> Tensor:
        """(B, T) bool: the positions ``token_losses`` scores."""

    @abstractmethod
    def example_nll(self, per_example: Tensor, targets: Tensor) -> Tensor:
        """(B,) each example's summed loss, from its mean ``per_example`` (B,)."""

    def seen(self, targets: Tensor, src: Tensor | None) -> Tensor:
        """() the tokens one training batch counts as seen: scored targets and real source tokens."""
        seen = targets.ne(IGNORE).sum()
        return seen + src.ne(self.pad_id).sum() if src is not None else seen

    @abstractmethod
    def test_scores(
        self,
        batch: dict[str, Tensor],
        logits: Tensor,
        targets: Tensor,
        greedy: Callable[[dict[str, Tensor]], Tensor] | None = None,
    ) -> Scores:
        """Accuracy counts of a test batch from the teacher-forced ``logits``; a seq2seq task's from
        ``greedy(batch)`` (B, T) instead, when given."""

    @abstractmethod
    def epoch_metrics(self, stage: str, loss: Tensor, acc: Tensor, seq: Tensor | None = None) -> dict[str, Tensor]:
        """The logged metrics of a validation or test epoch besides ``<stage>/loss`` (seq: test only)."""

    @abstractmethod
    def length_metrics(self, sums: dict[str, float]) -> dict[str, float]:
        """One evaluation length's metrics from its sums (tok, ntok, seq, nseq, nll; nseq > 0)."""

    def aligned(self, batch: dict[str, Tensor], alignment: Callable | None) -> Tensor | None:
        """(B, T, S) the task's alignment of target to source, for cross-attention statistics."""
        return None

    def generate(self, model: nn.Module, batch: dict[str, Tensor], use_cache: bool = True) -> Tensor:
        """Greedy outputs aligned with ``batch["tgt"]``: (B, T)."""
        raise TypeError(f"greedy decoding needs a seq2seq task; this task's kind is {self.kind!r}")


class TokenAdapter(TaskAdapter):
    """Targets (B, T) with ``IGNORE`` where no loss is due: the loss is the mean over scored tokens."""

    def losses(self, logits: Tensor, targets: Tensor, smoothing: float = 0.0) -> tuple[Tensor, Tensor]:
        per_tok = cross_entropy(logits, targets, smoothing)  # (B, T)
        mask = targets.ne(IGNORE)
        per = (per_tok * mask).sum(1) / mask.sum(1).clamp(min=1)
        return (per_tok * mask).sum() / mask.sum().clamp(min=1), per

    def loss(self, logits: Tensor, targets: Tensor, smoothing: float = 0.0) -> Tensor:
        # torch's own mean over the targets that are not IGNORE, in one call over (B * T, V) rows, which is
        # ``losses(...)[0]`` (the training step's loss) in about half the time on CPU: no per-position
        # losses, masks or per-example means to build and differentiate
        flat = targets.flatten()  # (B * T,)
        mean = F.cross_entropy(
            logits.flatten(0, -2).float(), flat, ignore_index=IGNORE, label_smoothing=smoothing
        )  # (B * T, V) rows
        # a batch with nothing scored: torch's mean is 0 / 0, ``losses`` gives 0, and so does this (gradient 0)
        return torch.where(flat.ne(IGNORE).any(), mean, torch.zeros_like(mean))

    def token_losses(self, logits: Tensor, targets: Tensor, smoothing: float = 0.0) -> Tensor:
        return cross_entropy(logits, targets, smoothing) * targets.ne(IGNORE)

    def scored(self, targets: Tensor) -> Tensor:
        return targets.ne(IGNORE)

    def example_nll(self, per_example: Tensor, targets: Tensor) -> Tensor:
        return per_example * targets.ne(IGNORE).sum(1).clamp(min=1)

    def test_scores(
        self,
        batch: dict[str, Tensor],
        logits: Tensor,
        targets: Tensor,
        greedy: Callable[[dict[str, Tensor]], Tensor] | None = None,
    ) -> Scores:
        mask = targets.ne(IGNORE)
        hits = logits.argmax(-1).eq(targets) & mask
        return Scores(hits.sum(), mask, (hits | ~mask).all(1))

    def epoch_metrics(self, stage: str, loss: Tensor, acc: Tensor, seq: Tensor | None = None) -> dict[str, Tensor]:
        return {f"{stage}/token_acc": acc}


class LanguageModelAdapter(TokenAdapter):
    """Next-token prediction over windows ``tokens`` (B, C + 1) with a decoder."""

    kind = "lm"

    def io(self, batch: dict[str, Tensor]) -> IO:
        inputs, targets = lm_io(batch["tokens"])
        return {"tgt_in": inputs}, targets, None

    def epoch_metrics(self, stage: str, loss: Tensor, acc: Tensor, seq: Tensor | None = None) -> dict[str, Tensor]:
        return {f"{stage}/token_acc": acc, f"{stage}/ppl": torch.exp(loss), f"{stage}/bpc": loss / math.log(2)}

    def length_metrics(self, sums: dict[str, float]) -> dict[str, float]:
        nll = sums["nll"] / max(sums["ntok"], 1)
        return {"loss": nll, "bpc": nll / math.log(2), "token_acc": sums["tok"] / max(sums["ntok"], 1)}


class Seq2SeqAdapter(TokenAdapter):
    """A (src, tgt) pair with an encoder-decoder: shifted-right targets, greedy decoding at test."""

    kind = "seq2seq"

    def io(self, batch: dict[str, Tensor]) -> IO:
        tgt_in, targets = seq2seq_io(batch["tgt"], self.bos_id, self.pad_id)
        return {"src": batch["src"], "tgt_in": tgt_in}, targets, batch["src"]

    def test_scores(
        self,
        batch: dict[str, Tensor],
        logits: Tensor,
        targets: Tensor,
        greedy: Callable[[dict[str, Tensor]], Tensor] | None = None,
    ) -> Scores:
        if greedy is None:
            return super().test_scores(batch, logits, targets)
        generated = greedy(batch)  # (B, T)
        tgt = batch["tgt"]
        real = tgt.ne(self.pad_id)
        return Scores((generated.eq(tgt) & real).sum(), real, (generated.eq(tgt) | ~real).all(1), generated)

    def epoch_metrics(self, stage: str, loss: Tensor, acc: Tensor, seq: Tensor | None = None) -> dict[str, Tensor]:
        return {f"{stage}/token_acc": acc, **({f"{stage}/seq_acc": seq} if seq is not None else {})}

    def length_metrics(self, sums: dict[str, float]) -> dict[str, float]:
        return {"token_acc": sums["tok"] / max(sums["ntok"], 1), "seq_acc": sums["seq"] / sums["nseq"]}

    def aligned(self, batch: dict[str, Tensor], alignment: Callable | None) -> Tensor | None:
        return alignment(batch["src"], batch["tgt"]) if alignment is not None else None

    @torch.no_grad()
    def generate(self, model: nn.Module, batch: dict[str, Tensor], use_cache: bool = True) -> Tensor:
        tgt = batch["tgt"]
        prompt = tgt.new_full((tgt.shape[0], 1), self.bos_id)
        return model.generate(prompt, tgt.shape[1], src=batch["src"], use_cache=use_cache)


class ConcatSeq2SeqAdapter(Seq2SeqAdapter):
    """A (src, tgt) pair with a decoder only: ``src <sep> tgt``, the loss on the ``tgt`` part."""

    def io(self, batch: dict[str, Tensor]) -> IO:
        inputs, targets = concat_io(batch["src"], batch["tgt"], self.pad_id, self.sep_id)
        return {"tgt_in": inputs}, targets, batch["src"]

    def aligned(self, batch: dict[str, Tensor], alignment: Callable | None) -> Tensor | None:
        return None  # no cross attention to compare with an alignment

    @torch.no_grad()
    def generate(self, model: nn.Module, batch: dict[str, Tensor], use_cache: bool = True) -> Tensor:
        # Prompts of different lengths are decoded in groups of equal length, so no example is
        # shifted by left padding.
        tgt = batch["tgt"]
        prompts = prompt_rows(batch["src"], self.pad_id, self.sep_id)
        out = tgt.new_full(tgt.shape, self.pad_id)
        lengths = torch.tensor([p.numel() for p in prompts])
        for n in lengths.unique().tolist():
            idx = (lengths == n).nonzero().flatten()
            group = torch.stack([prompts[i] for i in idx.tolist()])
            out[idx.to(out.device)] = model.generate(group, tgt.shape[1], use_cache=use_cache)
        return out


class ClassifyAdapter(TaskAdapter):
    """One label per sequence from an encoder: targets (B,), every example scored."""

    kind = "classify"

    def io(self, batch: dict[str, Tensor]) -> IO:
        return {"src": batch["src"]}, batch["label"], batch["src"]

    def losses(self, logits: Tensor, targets: Tensor, smoothing: float = 0.0) -> tuple[Tensor, Tensor]:
        per = cross_entropy(logits, targets, smoothing)  # (B,)
        return per.mean(), per

    def token_losses(self, logits: Tensor, targets: Tensor, smoothing: float = 0.0) -> Tensor:
        return cross_entropy(logits, targets, smoothing)[:, None]  # (B, 1): one scored position

    def scored(self, targets: Tensor) -> Tensor:
        return torch.ones((targets.shape[0], 1), dtype=torch.bool, device=targets.device)

    def example_nll(self, per_example: Tensor, targets: Tensor) -> Tensor:
        return per_example

    def test_scores(
        self,
        batch: dict[str, Tensor],
        logits: Tensor,
        targets: Tensor,
        greedy: Callable[[dict[str, Tensor]], Tensor] | None = None,
    ) -> Scores:
        hits = logits.argmax(-1).eq(targets)  # (B,)
        return Scores(hits.sum(), torch.ones_like(hits), hits)

    def epoch_metrics(self, stage: str, loss: Tensor, acc: Tensor, seq: Tensor | None = None) -> dict[str, Tensor]:
        return {f"{stage}/acc": acc}

    def length_metrics(self, sums: dict[str, float]) -> dict[str, float]:
        return {"acc": sums["seq"] / sums["nseq"]}


# task kind -> adapter; a seq2seq task on a decoder-only model takes the concatenated form
ADAPTERS: dict[str, type[TaskAdapter]] = {
    "seq2seq": Seq2SeqAdapter,
    "lm": LanguageModelAdapter,
    "classify": ClassifyAdapter,
}


def adapter_for(kind: str, arch: str, *, pad_id: int, bos_id: int, sep_id: int) -> TaskAdapter:
    """The adapter of task ``kind`` on a model of architecture ``arch``."""
    if kind not in ADAPTERS:
        raise ValueError(f"task kind={kind!r} has no adapter; choose one of {list(ADAPTERS)}")
    cls = ConcatSeq2SeqAdapter if kind == "seq2seq" and arch != "seq2seq" else ADAPTERS[kind]
    return cls(pad_id=pad_id, bos_id=bos_id, sep_id=sep_id)
