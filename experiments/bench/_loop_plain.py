"""The loop bench's reference: a character language model trained by a hand-written torch loop.

What nanoGPT's ``train.py`` does per step and nothing else: random windows of the training text,
forward, cross-entropy, backward, gradient clipping, (fused) AdamW with the learning rate set by hand, and
an evaluation that averages the loss over fixed held-out windows. The model is attnlab's own
``Transformer`` built from the run's spec, so the two loops differ in the loop and not the network.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from experiments.config.schema import OptimConf
from experiments.model.transformer import ModelSpec, Transformer
from experiments.training.optimiser import lr_factor

# attnlab's vocabulary starts the characters after its four special ids (experiments/tasks/base.py)
FIRST_SYMBOL_ID = 4


@dataclass
class PlainTimes:
    """Seconds the plain loop spent, by phase."""

    startup: float = 0.0
    steps_ms: list[float] = field(default_factory=list)  # the mean step of each block
    evals: list[float] = field(default_factory=list)
    final: float = 0.0


class PlainLoop:
    """Data, model and optimiser of one run, stepped and evaluated on demand (the bench interleaves it)."""

    def __init__(
        self,
        text_path: Path,
        spec: ModelSpec,
        optim: OptimConf,
        *,
        context: int,
        batch_size: int,
        val_fraction: float,
        val_windows: int,
        test_windows: int | None = None,
        eval_contexts: list[int],
        max_steps: int,
        device: torch.device,
        seed: int,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.clock = clock  # time.perf_counter (wall) or time.process_time (CPU), as the bench's --clock
        began = clock()
        self.times = PlainTimes()
        self.device, self.context, self.batch_size = device, context, batch_size
        codepoints = np.frombuffer(text_path.read_text(encoding="utf-8").encode("utf-32-le"), dtype=np.uint32)
        _, index = np.unique(codepoints, return_inverse=True)
        ids = torch.from_numpy(index.astype(np.int64) + FIRST_SYMBOL_ID)  # (N,)
        held = int(round(len(ids) * val_fraction))
        self.train_ids, self.val_ids = ids[: len(ids) - held].to(device), ids[len(ids) - held :].to(device)
        self.val_batches = self._held_out(context, val_windows)
        tests = val_windows if test_windows is None else test_windows  # as CharLM's task.test_windows
        self.test_batches = [b for c in eval_contexts for b in self._held_out(c, tests)]
        self.generator = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        self.model = Transformer(spec).to(device)
        self.optim_spec, self.max_steps, self.step_count = optim, max_steps, 0
        decay = [p for p in self.model.parameters() if p.dim() >= 2]
        no_decay = [p for p in self.model.parameters() if p.dim() < 2]
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": optim.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=optim.lr,
            betas=(optim.betas[0], optim.betas[1]),
            # torch's one-kernel AdamW, as attnlab's (nanoGPT takes it on CUDA only): the loops differ in
            # the loop, not in the optimiser's kernel
            fused=device.type in ("cpu", "cuda") or None,
        )
        self.params = decay + no_decay
        self.times.startup = self.clock() - began

    def _held_out(self, context: int, windows: int) -> list[Tensor]:
        """Evenly spaced windows of ``context + 1`` held-out tokens, in batches: [(B, context + 1)]."""
        starts = np.linspace(0, len(self.val_ids) - context - 1, num=windows).round().astype(int)
        rows = torch.stack([self.val_ids[s : s + context + 1] for s in starts.tolist()])  # (W, context + 1)
        return list(rows.split(self.batch_size))

    def _batch(self) -> Tensor:
        """(B, context + 1) random training windows."""
        starts = torch.randint(len(self.train_ids) - self.context, (self.batch_size,), generator=self.generator)
        return torch.stack([self.train_ids[s : s + self.context + 1] for s in starts.tolist()])

    def block(self, steps: int) -> float:
        """``steps`` optimiser steps; returns their mean milliseconds, waiting for a GPU only at the end."""
        _sync(self.device)
        began = self.clock()
        for _ in range(steps):
            loss = self._step()
        _sync(self.device)
        ms = (self.clock() - began) * 1000 / steps
        # a non-finite loss spreads to the weights, so the block's last loss shows a divergence within it
        if not math.isfinite(float(loss)):
            raise FloatingPointError(f"plain loop: loss became {float(loss)} by step {self.step_count}")
        self.times.steps_ms.append(ms)
        return ms

    def _step(self) -> Tensor:
        tokens = self._batch()
        logits = self.model(tgt_in=tokens[:, :-1])  # (B, T, V)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten())
        for group in self.optimizer.param_groups:
            group["lr"] = self.optim_spec.lr * lr_factor(self.step_count, self.optim_spec, self.max_steps)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.optim_spec.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.params, self.optim_spec.grad_clip)
        self.optimizer.step()
        self.step_count += 1
        return loss.detach()

    @torch.no_grad()
    def loss(self, batches: list[Tensor]) -> float:
        """Mean next-token loss over every position of ``batches``."""
        self.model.eval()
        total, count = torch.zeros((), device=self.device), 0
        for tokens in batches:
            logits = self.model(tgt_in=tokens[:, :-1])  # (B, T, V)
            total += F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten(), reduction="sum")
            count += tokens[:, 1:].numel()
        self.model.train()
        return float(total) / count

    def evaluate(self) -> float:
        """The validation loss; its seconds are one evaluation."""
        _sync(self.device)
        began = self.clock()
        value = self.loss(self.val_batches)
        self.times.evals.append(self.clock() - began)
        return value

    def finish(self) -> dict[str, float]:
        """The final validation and the held-out loss at every evaluation context (the test phase)."""
        _sync(self.device)
        began = self.clock()
        result = {"val/loss": self.loss(self.val_batches), "test/loss": self.loss(self.test_batches)}
        self.times.final = self.clock() - began
        return result


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
