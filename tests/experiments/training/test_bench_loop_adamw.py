"""A run's AdamW is torch's fused kernel where it has one, and makes the update of torch's plain
for-loop AdamW with the same groups and schedule (the reference)."""

from __future__ import annotations

import torch

from experiments.config.schema import OptimConf
from experiments.training.optimiser import adamw_with_schedule, lr_factor


def _params(seed: int) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    shapes = [(8, 4), (4,), (3, 2, 5), (5,)]
    return [torch.nn.Parameter(torch.randn(s, generator=g)) for s in shapes]


def test_cpu_parameters_get_the_fused_kernel_and_others_torchs_default():
    spec = OptimConf(lr=1e-2, weight_decay=0.1)
    assert adamw_with_schedule(_params(0), spec, 10)["optimizer"].defaults["fused"] is True
    integers = [torch.nn.Parameter(torch.zeros(3, dtype=torch.int64), requires_grad=False)]
    assert adamw_with_schedule(integers, spec, 10)["optimizer"].defaults["fused"] is None


def test_fused_update_is_the_for_loop_adamw_with_decay_on_matrices_only():
    """12 steps with warm-up and cosine decay; the reference decays the matrices (dim >= 2) only."""
    spec = OptimConf(lr=1e-2, weight_decay=0.1, betas=[0.9, 0.99], warmup_steps=3, schedule="cosine")
    ours, ref = _params(1), _params(1)
    config = adamw_with_schedule(ours, spec, 12)
    opt, sched = config["optimizer"], config["lr_scheduler"]["scheduler"]
    reference = torch.optim.AdamW(
        [
            {"params": [p for p in ref if p.dim() >= 2], "weight_decay": 0.1},
            {"params": [p for p in ref if p.dim() < 2], "weight_decay": 0.0},
        ],
        lr=1e-2,
        betas=(0.9, 0.99),
        foreach=False,
    )
    g = torch.Generator().manual_seed(2)
    for step in range(12):
        grads = [torch.randn(p.shape, generator=g) for p in ours]
        for p, q, grad in zip(ours, ref, grads):
            p.grad, q.grad = grad.clone(), grad.clone()
        for group in reference.param_groups:
            group["lr"] = 1e-2 * lr_factor(step, spec, 12)
        opt.step()
        sched.step()
        reference.step()
    for p, q in zip(ours, ref):
        assert torch.allclose(p, q, atol=1e-6), (p - q).abs().max()
    assert not torch.equal(ours[0], _params(1)[0])  # the weights moved


def test_lightning_clipping_a_mixed_precision_run_gets_torchs_default_adamw():
    """Lightning's mixed-precision plugin clips gradients itself and refuses an optimiser that unscales them
    in its step (the fused one declares so): a run with ``*-mixed`` precision and clipping must train."""
    import lightning as L

    spec = OptimConf(lr=1e-2)
    for precision, clip, fused in [("bf16-mixed", 1.0, None), ("bf16-mixed", None, True), ("32-true", 1.0, True)]:
        trainer = L.Trainer(accelerator="cpu", precision=precision, gradient_clip_val=clip, logger=False)
        optimizer = adamw_with_schedule(_params(0), spec, 10, trainer=trainer)["optimizer"]
        assert optimizer.defaults["fused"] is fused, (precision, clip)
