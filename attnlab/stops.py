"""A run's ``stop`` record (result.json), read alike by the run and by the report.

``{"reason": "max_time", "step": 230, "max_steps": 100000}``: ``reason`` is ``max_steps`` when the run
reached its budget; anything else (a signal, ``max_time``, ``max_epochs``, ``fast_dev_run``, early
stopping) stopped it short, and such a run is never compared as if it had its full budget.
"""

from __future__ import annotations

from typing import Any

BUDGET = "max_steps"


def stopped_short(result: dict[str, Any]) -> bool:
    """Whether a result's run stopped before its budget (a result without ``stop`` did not say)."""
    stop = result.get("stop") or {}
    return bool(stop) and stop.get("reason") != BUDGET


def describe(stop: dict[str, Any]) -> str:
    """``stopped at 230/100000 by max_time``."""
    return f"stopped at {stop.get('step')}/{stop.get('max_steps')} by {stop.get('reason')}"
