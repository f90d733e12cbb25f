"""Task datamodules, chosen by registry name; the registry finds every task module of this package by scanning it.

    from experiments.tasks import TASKS
    data = TASKS.build("reverse", seed=0, batch_size=32, train_lengths=[2, 12], eval_lengths=[16, 24])
    data.setup("fit")
    batch = next(iter(data.train_dataloader()))  # {"src": (B, S), "tgt": (B, T), "length": (B,)}

See ``base`` for the interface and batch formats every task shares.
"""

from experiments.tasks.base import TaskConfigError, TaskDataModule
from experiments.tasks.registry import TASKS

__all__ = ["TASKS", "TaskConfigError", "TaskDataModule"]
