"""One training step (forward, cross-entropy, backward, AdamW step) and how ``peers`` times steps:
cases in alternating turns, the median of each."""

from __future__ import annotations

import itertools
import math
import statistics
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from experiments.bench.measure import CLOCKS
from experiments.bench.peers.models import Batch
from experiments.tasks.batches import IGNORE


# -- one training step ---------------------------------------------------------------------------------------
class TrainStep:
    """Forward on the next batch, cross-entropy, backward and an AdamW step: what the training loop does."""

    def __init__(
        self,
        model: nn.Module,
        batches: list[Batch],
        autocast: Callable[[], Any],
        call: Callable[..., Tensor] | None = None,
    ) -> None:
        self.model, self.call = model, (call if call is not None else model)
        self.batches = itertools.cycle(batches)
        self.autocast = autocast
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        self.loss: Tensor | None = None

    def __call__(self) -> None:
        inputs, targets = next(self.batches)
        with self.autocast():
            logits = self.call(*inputs)  # (B, T, V)
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=IGNORE)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.loss = loss.detach()  # read once at the end: no device sync inside the timed loop

    @property
    def final_loss(self) -> float:
        return float(self.loss) if self.loss is not None else math.nan


# -- timing --------------------------------------------------------------------------------------------------
def alternate(
    cases: dict[str, Callable[[], Any]], *, warmup: int, repeats: int, inner: int, clock: str, device: torch.device
) -> dict[str, list[float]]:
    """Seconds per call of each case, one sample per round; the cases take turns within each round."""
    tick = CLOCKS[clock]

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for run in cases.values():
        for _ in range(warmup):
            run()
    samples: dict[str, list[float]] = {name: [] for name in cases}
    order = list(cases)
    for round_ in range(repeats):
        for name in order if round_ % 2 == 0 else order[::-1]:
            sync()
            start = tick()
            for _ in range(inner):
                cases[name]()
            sync()
            samples[name].append((tick() - start) / inner)
    return samples


def summarise(samples: list[float]) -> dict[str, Any]:
    ms = [s * 1000 for s in samples]
    return {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms), "rounds": len(ms)}


def profile(name: str, run: Callable[[], Any], rows: int, device: torch.device) -> None:
    """Print the operators that cost most over three calls of ``run`` (after the timed rounds)."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(3):
            run()
    sort = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(f"\n-- profile: {name} (3 calls, sorted by {sort}) --")
    print(prof.key_averages().table(sort_by=sort, row_limit=rows))
