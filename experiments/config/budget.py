"""The budget keys: how long the same computation runs. They may change between the segments of one run (raising
``trainer.max_steps`` continues it: experiments/training/folder.py), and a run's W&B display name leaves them out
so that a continued run keeps its name (experiments/record/wandb_run.py)."""

from __future__ import annotations

BUDGET_KEYS = (
    "trainer.max_steps",
    "trainer.max_time",
    "trainer.max_epochs",
    "trainer.min_steps",
    "trainer.min_epochs",
)
