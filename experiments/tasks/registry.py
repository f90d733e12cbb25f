"""The task registry: each task is a module of ``experiments.tasks`` whose class registers itself, found by
scanning the package (``attnlab.registry``), so a new task is that module and its ``conf/task/<name>.yaml``.

A task's entry (``TaskEntry``) is read off its class: its ``kind`` (``experiments/tasks/kinds.py``), the
architectures it fits (the kind's, or a narrower ``architectures`` on the class) and the metrics it logs (the
kind's, plus BLEU and chrF when the class sets ``bleu_at_test``). The config checks and the sweepers ask the
entry, so they know a task's facts without building its data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from experiments.tasks.kinds import task_kind
from variants.registry import Registry

if TYPE_CHECKING:
    from experiments.tasks.base import TaskDataModule


@dataclass(frozen=True)
class TaskEntry:
    """What a task declares: its kind, the model architectures it fits, every metric name a run of it logs
    (``train/``, ``val/`` and ``test/``), and the papers it comes from."""

    kind: str
    architectures: tuple[str, ...]
    metrics: tuple[str, ...]
    references: tuple[str, ...] = ()


def task_fields(cls: Any) -> dict[str, Any]:
    """The entry fields a task class declares through its class attributes."""
    kind = task_kind(getattr(cls, "kind", ""), cls.__name__)
    return {
        "kind": cls.kind,
        "architectures": tuple(getattr(cls, "architectures", None) or kind.architectures),
        "metrics": kind.metrics(text_scores=bool(getattr(cls, "bleu_at_test", False))),
    }


class TaskRegistry(Registry["TaskDataModule"]):
    """The tasks: ``@TASKS.register("copy", references=...)`` on a ``TaskDataModule`` subclass."""

    def __init__(self) -> None:
        super().__init__("task", TaskEntry, package="experiments.tasks")

    def register(
        self, name: str, references: str | tuple[str, ...] | list[str] = (), **declared: Any
    ) -> Callable[[Callable[..., TaskDataModule]], Callable[..., TaskDataModule]]:
        register = super().register

        def decorator(cls: Callable[..., TaskDataModule]) -> Callable[..., TaskDataModule]:
            return register(name, references, **task_fields(cls), **declared)(cls)

        return decorator

    def declared(self, name: str) -> TaskEntry:
        """The entry of ``name``, read off its class now (a class attribute changed since registration counts)."""
        stored: TaskEntry = super().declared(name)
        return TaskEntry(**task_fields(self.get(name)), references=stored.references)


TASKS = TaskRegistry()
