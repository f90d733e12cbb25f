"""The task registry; ``experiments.tasks`` registers every built-in task into it on import."""

from __future__ import annotations

from typing import TYPE_CHECKING

from variants.registry import Registry

if TYPE_CHECKING:
    from experiments.tasks.base import TaskDataModule

TASKS: Registry["TaskDataModule"] = Registry("task")
