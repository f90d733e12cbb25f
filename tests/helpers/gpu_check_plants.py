"""Checks planted into ``python -m experiments.gpu_check`` by tests/experiments/diagnostics/test_gpu_check.py, in
place of the real ones, in the run's own process and in each check's process: one that passes, one that hangs,
one whose process dies as a sticky CUDA error leaves it."""

from __future__ import annotations

import os
import sys
import time

from experiments.diagnostics import gpu_check
from experiments.diagnostics.gpu_check import processes, registry


def passes(args) -> dict:
    return {"detail": "all good", "value": 1.5}


def hangs(args) -> dict:
    time.sleep(3600)  # a kernel that never returns
    return {}


def dies(args) -> dict:
    # After a sticky CUDA error (an illegal address, a device-side assert) every later CUDA call of the
    # process raises, and the process often aborts before it can record anything.
    print("RuntimeError: CUDA error: an illegal memory access was encountered", flush=True)
    os.abort()
    return {}


PLANTED = {"passes": passes, "hangs": hangs, "dies": dies}


def plant(monkeypatch, checks: dict, needs_cuda: set[str] = frozenset(), caps: dict | None = None) -> None:
    """Make ``gpu_check.main`` run ``checks`` (names of ``PLANTED``) in processes of their own."""
    monkeypatch.setattr(registry, "CHECKS", checks)
    monkeypatch.setattr(registry, "NEEDS_CUDA", set(needs_cuda))
    monkeypatch.setattr(registry, "CAPS", dict(caps or {}))
    program = "import sys; from tests.helpers.gpu_check_plants import child; sys.exit(child())"
    monkeypatch.setattr(processes, "CHILD", [sys.executable, "-c", program])


def child() -> int:
    """A check's process with the planted checks registered."""
    registry.CHECKS.clear()
    registry.CHECKS.update(PLANTED)
    return gpu_check.main(sys.argv[1:])
