"""The summary of ``python -m experiments.gpu_check``: the verdict, the JSON written after every check and
the table printed at the end."""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from experiments.diagnostics.gpu_check.registry import Outcome
from experiments.record.result import environment, now_iso

STATUSES = ("pass", "fail", "timeout", "skipped")


def verdict(outcomes: list[Outcome], planned: int) -> tuple[bool, bool, str]:
    """(complete, ok, why not ok): complete when every planned check has an outcome and one passed."""
    counts = {s: sum(o.status == s for o in outcomes) for s in STATUSES}
    if len(outcomes) < planned:
        return False, False, f"{planned - len(outcomes)} of {planned} checks have not run"
    if not counts["pass"]:
        reasons = sorted({o.detail for o in outcomes if o.status == "skipped"})
        return False, False, f"no check passed ({counts}); skipped because: {'; '.join(reasons)[:300]}"
    if counts["fail"] or counts["timeout"]:
        return True, False, f"{counts['fail']} failed, {counts['timeout']} timed out"
    return True, True, ""


def summary(outcomes: list[Outcome], planned: int, device: str) -> dict[str, Any]:
    complete, ok, why = verdict(outcomes, planned)
    return {
        "schema": 1,
        "complete": complete,
        "ok": ok,
        "why_not_ok": why or None,
        "finished_at": now_iso(),
        "device": device,
        "gpus": torch.cuda.device_count(),
        "counts": {s: sum(o.status == s for o in outcomes) for s in STATUSES},
        "checks": [asdict(o) for o in outcomes],
        "env": environment(device),
    }


def table(outcomes: list[Outcome]) -> str:
    width = max([len(o.name) for o in outcomes] + [5])
    lines = [f"{'check':<{width}}  {'status':<7}  {'seconds':>7}  detail"]
    lines += [f"{o.name:<{width}}  {o.status:<7}  {o.seconds:7.1f}  {o.detail}" for o in outcomes]
    return "\n".join(lines)


def out_problem(path: Path) -> str | None:
    """Why the JSON summary cannot be written at ``path``, or None."""
    if path.is_dir():
        return "is a folder; give a file, e.g. --out gpu_check.json"
    folder = path.parent
    if not folder.exists():
        return f"its folder {folder} does not exist"
    if not folder.is_dir():
        return f"{folder} is not a folder"
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return f"cannot be written here (no write permission in {folder})"
    return None
