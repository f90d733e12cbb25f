"""The optimiser and its learning-rate schedule: AdamW (fused where torch has the kernel), warm-up, then the
schedule ``optim.schedule`` names, stepped per optimiser step; the single run's module and the ensemble's share it."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from experiments.config.schema import OptimConf


def lr_factor(step: int, spec: OptimConf, max_steps: int) -> float:
    """Multiplier of the base learning rate at ``step`` (linear warm-up, then the schedule)."""
    warm = max(spec.warmup_steps, 1)
    if step < spec.warmup_steps:
        return (step + 1) / warm
    if spec.schedule == "inverse_sqrt":
        return math.sqrt(warm / (step + 1))
    if spec.schedule == "cosine":
        progress = min((step - spec.warmup_steps) / max(max_steps - spec.warmup_steps, 1), 1.0)
        return spec.min_lr_ratio + (1 - spec.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
    return 1.0


def fused_adamw_available(params: list[Tensor], *, mixed_clipping: bool = False) -> bool | None:
    """True where torch has a fused AdamW kernel for every parameter (floating point, on CPU or CUDA), else
    None: torch's default. The fused kernel makes the same update element by element in one pass, where
    torch's default on CPU loops over the tensors in Python, a tenth of a small model's step
    (docs/benchmarks.md: the training loop). Not under ``mixed_clipping`` (a ``*-mixed`` precision with
    gradient clipping): Lightning clips mixed-precision gradients itself and refuses an optimiser that
    unscales them inside its step, as the fused one declares."""
    if mixed_clipping:
        return None
    return all(p.device.type in ("cpu", "cuda") and p.is_floating_point() for p in params) or None


def mixed_clipping(trainer: Any) -> bool:
    """Whether ``trainer`` clips gradients under a mixed precision (``16-mixed``, ``bf16-mixed``)."""
    return trainer is not None and str(trainer.precision).endswith("-mixed") and bool(trainer.gradient_clip_val)


def adamw_with_schedule(
    params: list[Tensor], spec: OptimConf, max_steps: int, member_dims: int = 0, trainer: Any = None
) -> dict[str, Any]:
    """AdamW that decays matrices only (weights of ``member_dims`` + 2 or more dimensions: an ensemble's carry
    a leading member dimension) and the learning-rate schedule per step, as Lightning's optimiser config;
    torch's fused kernel where it has one and ``trainer`` allows it (``fused_adamw_available``)."""
    decay = [p for p in params if p.dim() - member_dims >= 2]
    no_decay = [p for p in params if p.dim() - member_dims < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": spec.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=spec.lr,
        betas=tuple(spec.betas),
        fused=fused_adamw_available(params, mixed_clipping=mixed_clipping(trainer)),
    )
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: lr_factor(step, spec, max_steps))
    return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
