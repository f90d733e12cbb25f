"""The registries whose entries a config group names and whose references the papers list, by kind."""

from __future__ import annotations

from experiments.tasks import TASKS
from variants import ATTENTION, POSITION

REGISTRIES = {"attention": ATTENTION, "position": POSITION, "task": TASKS}
