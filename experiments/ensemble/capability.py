"""Whether the seeds of a cell can train as one batched model: a declared capability, never a list of names.

A module whose forward pass would differ between members in control flow or state (REINFORCE's
per-layer samples and baseline, features redrawn inside forward) declares why through a method
``batched_members_problem() -> str | None``; the model, the run and the trainer are asked the same.
"""

from __future__ import annotations

from typing import Any

from experiments.config.spec import Spec, thaw


def ensemble_problem(module: Any, spec: Spec) -> str | None:
    """Why the members of ``spec`` cannot train batched (one sentence naming the cause), or None."""
    for name, sub in module.model.named_modules():
        declared = getattr(sub, "batched_members_problem", None)
        problem = declared() if callable(declared) else None
        if problem:
            return f"model.{name} ({type(sub).__name__}): {problem}"
    if len(module.baselines):
        return "the run trains REINFORCE baselines, which the batched step does not carry per member"
    t = spec.trainer
    devices = thaw(t.get("devices"))
    if t.strategy not in ("auto", "single_device") or devices not in (1, "1", "auto") or t.get("num_nodes") != 1:
        return f"trainer.strategy={t.strategy} trainer.devices={devices}: the batched members run on one device"
    if spec.model.compile:
        return "model.compile=true: the batched step is not compiled"
    return None
