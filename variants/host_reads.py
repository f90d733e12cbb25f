"""Reads of device tensors on the host that a kernel makes by design, declared where they happen.

On a GPU every read (``.tolist()``, ``int(t)``, ``bool(t)``) waits for all queued kernels, so a
training step reads nothing. A kernel whose tensor shapes follow the data must read them (the
banded local kernel slices keys by where each block of windows reaches); it says so with
``@reads_host(reason)``. The step-sync test (tests/experiments/training/test_step_sync.py) allows reads made directly
inside a declared function, and fails on any other read in any registered variant's step.
"""

from __future__ import annotations

from types import CodeType
from typing import Callable, TypeVar

F = TypeVar("F", bound=Callable)

#: the code of each declared function -> why it reads
DECLARED: dict[CodeType, str] = {}


def reads_host(reason: str) -> Callable[[F], F]:
    """Declare that ``fn`` reads device tensors on the host, and why (one sentence)."""

    def mark(fn: F) -> F:
        DECLARED[fn.__code__] = reason
        return fn

    return mark
