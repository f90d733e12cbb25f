"""The checks of ``python -m experiments.gpu_check``: their registry and what each one ends as.

A check is a function of the parsed arguments that returns what it measured (``detail``: one line for
the table) or raises ``Skip`` (cannot run here) or ``CheckFailed`` (ran and found something wrong).
"""

from __future__ import annotations

import argparse
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

CHECKS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {}
#: the checks that need a CUDA device: skipped without one, before any process starts
NEEDS_CUDA: set[str] = set()
#: a check's own cap in seconds, where it declares one tighter than ``--timeout``
CAPS: dict[str, float] = {}


class Skip(Exception):
    """A check that cannot run here; the message says why."""


class CheckFailed(Exception):
    """A check that ran and found something wrong; the message says what, in one line; ``data`` what it measured."""

    def __init__(self, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.data = data or {}


class CommandTimedOut(CheckFailed):
    """A command stopped at its timeout or at the deadline; what it wrote so far is still on disk."""


@dataclass
class Outcome:
    name: str
    status: str  # pass | fail | timeout | skipped
    detail: str = ""
    seconds: float = 0.0
    data: dict[str, Any] = field(default_factory=dict)


def check(name: str, *, cuda: bool = True, cap: float | None = None):
    """Register a check; ``cuda``: skipped without a CUDA device; ``cap``: its own limit in seconds, when
    tighter than ``--timeout``."""

    def register(fn: Callable[[argparse.Namespace], dict[str, Any]]):
        CHECKS[name] = fn
        if cuda:
            NEEDS_CUDA.add(name)
        if cap is not None:
            CAPS[name] = cap
        return fn

    return register


def run_check(name: str, fn: Callable[[], dict[str, Any]]) -> Outcome:
    """Run one check; whatever it raises becomes its outcome, never the end of the others."""
    began = time.perf_counter()
    try:
        data = fn() or {}
        outcome = Outcome(name, "pass", str(data.pop("detail", "")), data=data)
    except Skip as why:
        outcome = Outcome(name, "skipped", str(why))
    except CheckFailed as err:
        outcome = Outcome(name, "fail", str(err), data=err.data)
    except Exception as err:  # noqa: BLE001 - an unexpected error fails this check only
        lines = traceback.format_exception_only(err)
        outcome = Outcome(name, "fail", lines[-1].strip(), data={"traceback": traceback.format_exc()})
    outcome.seconds = time.perf_counter() - began
    return outcome


def need_cuda() -> None:
    if not torch.cuda.is_available():
        raise Skip("no CUDA device here")
