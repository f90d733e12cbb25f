"""Run a device check's sections: each command in a process group of its own, capped, stopped whole at its cap;
the summary rewritten after every section; the logs packed at the end, whatever ended the run."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tarfile
import time
from pathlib import Path
from typing import Any

from experiments.diagnostics.device_check.plan import Knobs, Section
from experiments.diagnostics.device_check.summary import write_summary
from experiments.diagnostics.gpu_check.processes import stop_group

ROOT = Path(__file__).resolve().parents[2]
#: seconds kept back from the deadline for stopping a section and writing the summary
RESERVE_S = 15
#: a section is not started with less time left than this (or than its own cap, when smaller)
MIN_SECTION_S = 10
#: logs.tgz past this size keeps the logs and JSON only (a lent device brings back little)
PACK_LIMIT = 15_000_000
#: what is never packed: weights, arrays, figures and the compile caches
NOT_PACKED = (".ckpt", ".npz", ".png", ".pt", ".compile_cache", ".gpu_slots")


def run_section(section: Section, knobs: Knobs, began: float) -> dict[str, Any]:
    """Run the section's commands one after another within min(its cap, the time left); its status row."""
    left = knobs.deadline_s - (time.monotonic() - began) - RESERVE_S
    cap = min(section.cap_s, left)
    row: dict[str, Any] = {"name": section.name, "cap_s": round(cap), "rc": None, "seconds": 0.0}
    if cap < min(section.cap_s, MIN_SECTION_S):
        return {**row, "status": "skipped", "why": f"{left:.0f} s left before the deadline"}
    log = knobs.work / "logs" / f"{section.name}.log"
    start = time.monotonic()
    status = "ok"
    with open(log, "a") as out:
        for command in section.commands:
            remaining = cap - (time.monotonic() - start)
            proc = subprocess.Popen(
                command.line(),
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **command.env},
                start_new_session=True,  # its own process group: stopped whole at the cap
            )
            try:
                row["rc"] = proc.wait(timeout=max(remaining, 1))
            except subprocess.TimeoutExpired:
                out.write(f"\n[device-check] cut at the cap of {cap:.0f} s\n")
                out.flush()
                stop_group(proc)
                status = "timeout"
                break
            finally:
                if proc.poll() is None:  # interrupted while waiting: stop it with us
                    stop_group(proc)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)  # what it left running in its group, if anything
            if row["rc"] != 0:
                status = "fail"
                break
    return {**row, "status": status, "seconds": round(time.monotonic() - start, 1)}


def pack(work: Path, out: Path) -> None:
    """``logs.tgz``: the work folder without weights, arrays and caches; logs and JSON alone if too big."""
    target = out / "logs.tgz"

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return None if any(part in info.name for part in NOT_PACKED) else info

    with tarfile.open(target, "w:gz") as tar:
        tar.add(work, arcname=".", filter=keep)
    if target.stat().st_size > PACK_LIMIT:
        with tarfile.open(target, "w:gz") as tar:
            for name in ("logs", "json"):
                if (work / name).exists():
                    tar.add(work / name, arcname=name)


def run(run_name: str, sections: list[Section], knobs: Knobs, out: Path) -> int:
    """Every section in order; returns 0 when each finished ok."""
    began = time.monotonic()
    for folder in (out, knobs.work / "logs", knobs.work / "json"):
        folder.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    try:
        for section in sections:
            rows.append(run_section(section, knobs, began))
            print(f"[device-check] {rows[-1]['name']}: {rows[-1]['status']} ({rows[-1]['seconds']} s)", flush=True)
            write_summary(run_name, rows, knobs, out, time.monotonic() - began)
    finally:
        text = write_summary(run_name, rows, knobs, out, time.monotonic() - began)
        pack(knobs.work, out)
        print(text, end="")
    return 0 if rows and all(r["status"] == "ok" for r in rows) else 1
