"""The LightningModule's test phase: the task's metrics per evaluation length, the texts BLEU scores, the
attention statistics over the test set and the test's time, each gathered across ranks.

``TransformerModule`` (``experiments/training/module.py``) is a ``TestingPhase``: the hooks Lightning calls at
test time live here, apart from the training step, and read the module's task adapter, its forward pass and its
greedy generation.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import lightning as L
import torch
from torch import Tensor
from torchmetrics import MeanMetric, SumMetric

from experiments.model import attention_stats
from experiments.model.transformer import Transformer
from experiments.tasks.batches import IGNORE, REPEATED
from experiments.training.task_adapters import TaskAdapter


@dataclass(frozen=True)
class EvalOptions:
    """What a test measures besides the task's metrics, and the task's functions it needs for that.

    Not hyper-parameters: a checkpoint keeps none of them (two are the datamodule's functions), and a
    module loaded from one without them tests the task's metrics alone.
    """

    #: token ids -> text, for BLEU (translation)
    decode_text: Callable[[list[int]], str] | None = None
    #: attention statistics over the test set (``experiments.model.attention_stats``; eval.attention_stats)
    attention_stats: bool = False
    #: examples per evaluation length the statistics read (None: all); the first ones, so every
    #: variant is measured on the same examples (eval.attention_stats_examples)
    stats_examples: int | None = None
    #: the task's alignment, (src (B, S), tgt (B, T)) -> (B, T, S) bool | None, for cross-attention statistics
    alignment: Callable[[Tensor, Tensor], Tensor | None] | None = None


class TestingPhase(L.LightningModule):
    """The test hooks and their bookkeeping; what they read of the module is declared below."""

    model: Transformer
    adapter: TaskAdapter
    evaluation: EvalOptions
    eval_lengths: list[int]
    generate_at_test: bool
    bleu: bool
    #: the module's teacher-forced pass and loss, and its greedy generation (``TransformerModule``)
    _io: Callable[[dict[str, Tensor]], tuple[Tensor, Tensor, Tensor | None]]
    _losses: Callable[..., tuple[Tensor, Tensor]]
    greedy: Callable[[dict[str, Tensor]], Tensor]

    def _init_testing(self) -> None:
        """The test's metrics (per ``eval_lengths``), texts and statistic sums, empty."""
        self.test_loss, self.test_acc, self.test_seq = MeanMetric(), MeanMetric(), MeanMetric()
        # per evaluation length: correct tokens, tokens, correct sequences, sequences
        self.by_length = torch.nn.ModuleDict(
            {
                str(n): torch.nn.ModuleDict({k: SumMetric() for k in ("tok", "ntok", "seq", "nseq", "nll")})
                for n in self.eval_lengths
            }
        )
        self.hypotheses: list[str] = []
        self.references: list[str] = []
        self._stats_seen: dict[str, int] = {}
        self.stats_sums: dict[tuple[str, str], dict[str, Tensor]] = {}
        self.stats_seconds = self.test_seconds = 0.0

    def on_test_epoch_start(self) -> None:
        self.hypotheses, self.references = [], []
        self.stats_sums, self.stats_seconds, self._stats_seen = {}, 0.0, {}
        self._test_began = time.perf_counter()
        for group in self.by_length.values():
            for metric in group.values():
                metric.reset()
                # A zero update: a rank whose shard holds no example of this length still
                # takes part in the sum across ranks, without torchmetrics' warning.
                metric.update(0.0)

    def test_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        if batch.get(REPEATED):
            return
        logits, targets, _ = self._io(batch)
        loss, per_example = self._losses(logits, targets)
        mask = targets.ne(IGNORE)
        self.test_loss.update(loss, weight=int(mask.sum()))
        length = str(int(batch["length"][0])) if "length" in batch else None
        # seq2seq generates greedily (when eval.generate); the others score the teacher-forced logits
        greedy = self.greedy if self.generate_at_test else None
        tok, real, seq, generated = self.adapter.test_scores(batch, logits, targets, greedy)
        decode = self.evaluation.decode_text
        if generated is not None and self.bleu and decode is not None:
            self.hypotheses += [decode(row.tolist()) for row in generated]
            self.references += [decode(row.tolist()) for row in batch["tgt"]]
        self.test_acc.update(tok / real.sum().clamp(min=1), weight=int(real.sum()))
        self.test_seq.update(seq.float().mean(), weight=seq.numel())
        if length in self.by_length:
            m = self.by_length[length]
            m["tok"].update(tok.float())
            m["ntok"].update(real.sum().float())
            m["seq"].update(seq.sum().float())
            m["nseq"].update(float(seq.numel()))
            m["nll"].update(self.adapter.example_nll(per_example, targets).sum())
        if self.evaluation.attention_stats:
            self._sync()
            began = time.perf_counter()
            self._attention_stats(batch, length or "all")
            self._sync()
            self.stats_seconds += time.perf_counter() - began

    def _stats_share(self, batch: dict[str, Tensor], length: str) -> dict[str, Tensor] | None:
        """The rows of this batch the statistics still need for ``length`` (None: none)."""
        size = len(next(v for v in batch.values() if isinstance(v, Tensor)))
        seen = self._stats_seen.get(length, 0)
        cap = self.evaluation.stats_examples
        take = size if cap is None else min(size, cap - seen)
        if take <= 0:
            return None
        self._stats_seen[length] = seen + take
        return batch if take == size else {k: v[:take] if isinstance(v, Tensor) else v for k, v in batch.items()}

    def _sync(self) -> None:
        """Wait for the GPU, so the statistics' timer measures their work and nothing queued before."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _attention_stats(self, batch: dict[str, Tensor], length: str) -> None:
        """Add one batch to the per-(layer, length) sums; a separate teacher-forced forward pass with
        weights, so the outputs scored above come from the model's usual (fused) path."""
        batch = self._stats_share(batch, length)
        if batch is None:
            return
        inputs, _, _ = self.adapter.io(batch)
        layers = self.model.attention_weights(**inputs)
        aligned = self.adapter.aligned(batch, self.evaluation.alignment)  # (B, T, S) | None
        for name, (weights, visible, queries) in layers.items():
            sums = attention_stats.layer_sums(weights, visible, queries, aligned if name.startswith("cross") else None)
            key = (name, length)
            self.stats_sums[key] = attention_stats.add(self.stats_sums.get(key), sums)

    def on_test_epoch_end(self) -> None:
        loss = self.test_loss.compute()
        self.log("test/loss", loss, sync_dist=True)
        metrics = self.adapter.epoch_metrics("test", loss, self.test_acc.compute(), self.test_seq.compute())
        for name, value in metrics.items():
            self.log(name, value, sync_dist=True)
        for metric in (self.test_loss, self.test_acc, self.test_seq):
            metric.reset()
        if self.bleu:
            self.hypotheses, self.references = gather_texts(self.hypotheses, self.references)
        if self.evaluation.attention_stats:
            self.stats_sums = gather_sums(self.stats_sums)
        self.test_seconds = time.perf_counter() - self._test_began

    def attention_statistics(self) -> tuple[dict[str, dict[str, dict[str, float]]], dict[str, Any]]:
        """From the last test run: {"<layer>": {"<length>": {stat: mean}}} and the per-head arrays
        {"<layer>/<length>/<stat>": (H,)} (see ``experiments.model.attention_stats``)."""
        summary: dict[str, dict[str, dict[str, float]]] = {}
        heads: dict[str, Any] = {}

        def order(key: tuple[str, str]) -> tuple:
            layer, length = key
            return (layer, not length.isdigit(), int(length) if length.isdigit() else 0, length)

        for (layer, length), sums in sorted(self.stats_sums.items(), key=lambda kv: order(kv[0])):
            summary.setdefault(layer, {})[length] = attention_stats.summarise(sums)
            for stat, value in attention_stats.per_head(sums).items():
                heads[f"{layer}/{length}/{stat}"] = value.cpu().numpy()
        return summary, heads

    def length_metrics(self) -> dict[str, dict[str, float]]:
        """Per evaluation length, from the last test run: {"<n>": {"token_acc", "seq_acc"} | {"acc"} | ...}."""
        out: dict[str, dict[str, float]] = {}
        for n, m in self.by_length.items():
            if float(m["nseq"].compute()) == 0:
                continue
            out[n] = self.adapter.length_metrics({k: float(metric.compute()) for k, metric in m.items()})
        return out

    def bleu_scores(self) -> dict[str, float]:
        if not self.hypotheses:
            return {}
        import sacrebleu

        bleu = sacrebleu.corpus_bleu(self.hypotheses, [self.references])
        chrf = sacrebleu.corpus_chrf(self.hypotheses, [self.references])
        return {"test/bleu": float(bleu.score), "test/chrf": float(chrf.score)}


def gather_sums(sums: dict[Any, dict[str, Tensor]]) -> dict[Any, dict[str, Tensor]]:
    """Every rank's statistic sums added together (a rank may lack a length: its share is absent)."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return sums
    world = torch.distributed.get_world_size()
    if world == 1:
        return sums
    shares: list[Any] = [None] * world
    local = {key: {k: v.cpu() for k, v in part.items()} for key, part in sums.items()}
    torch.distributed.all_gather_object(shares, local)
    total: dict[Any, dict[str, Tensor]] = {}
    for share in shares:
        for key, part in share.items():
            total[key] = attention_stats.add(total.get(key), part)
    return total


def gather_texts(hypotheses: list[str], references: list[str]) -> tuple[list[str], list[str]]:
    """Every rank's (hypothesis, reference) pairs on every rank, so corpus BLEU covers the whole test set.

    Corpus BLEU and chrF sum statistics over sentences, so the order of the ranks' shares does not matter.
    """
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return hypotheses, references
    world = torch.distributed.get_world_size()
    if world == 1:
        return hypotheses, references
    shares: list[Any] = [None] * world
    torch.distributed.all_gather_object(shares, (hypotheses, references))
    return [h for hyp, _ in shares for h in hyp], [r for _, ref in shares for r in ref]
