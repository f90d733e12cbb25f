"""The processes of ``python -m experiments.gpu_check``: each check in a process of its own under its cap,
and each command a check starts in a process group that is stopped whole at its timeout or the deadline."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from experiments.diagnostics.gpu_check import registry
from experiments.diagnostics.gpu_check.registry import CommandTimedOut, Outcome, run_check
from experiments.record.result import write_json_atomic

# When the commands of this process must end (time.monotonic()); main sets it from --budget, a
# check's process from its cap.
DEADLINE = {"at": float("inf")}
ROOT = Path(__file__).resolve().parents[3]
#: how a check's process is started (the arguments follow); see ``run_isolated``
CHILD = [sys.executable, "-m", "experiments.gpu_check"]
#: seconds of a check's cap kept back from the commands it starts, for it to record what they left
GRACE = 10.0
#: seconds between asking a process group to stop (SIGTERM) and killing it
STOP_WAIT = 5.0
#: process groups of the commands this process started and has not reaped (stopped with it)
_GROUPS: set[int] = set()


def stop_group(proc: subprocess.Popen) -> None:
    """Stop ``proc`` and everything it started (its own process group): SIGTERM, then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=STOP_WAIT)
            break
        except subprocess.TimeoutExpired:
            continue
    _GROUPS.discard(proc.pid)


def run_command(command: list[str], out_dir: Path, timeout: float) -> subprocess.CompletedProcess:
    """Run ``command`` from the repository root, for at most ``timeout`` seconds and never past the deadline;
    at either, it and every process it started (a sweep's workers) are stopped."""
    out_dir.mkdir(parents=True, exist_ok=True)
    timeout = min(timeout, max(DEADLINE["at"] - time.monotonic(), 1.0))
    proc = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    _GROUPS.add(proc.pid)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_group(proc)
        stdout, stderr = proc.communicate()
        (out_dir / "output.log").write_text(stdout + stderr)
        raise CommandTimedOut(f"did not finish in {timeout:.0f} s: {' '.join(command)}") from None
    finally:
        if proc.poll() is None:  # interrupted while waiting: stop it with us
            stop_group(proc)
        _GROUPS.discard(proc.pid)
    (out_dir / "output.log").write_text(stdout + stderr)
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)


def ended(code: int) -> str:
    """'exit 1' or 'signal SIGSEGV' for a process's return code."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
    return f"exit {code}"


def last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no output"
    return lines[-1][:300] if lines else "no output"


def run_isolated(name: str, args: argparse.Namespace, cap: float) -> Outcome:
    """Check ``name`` in a process of its own, stopped (with every process it started) after ``cap`` seconds.

    The process records its outcome in a file; a process that dies before recording one (a crash, a
    sticky CUDA error at exit) fails this check with how it ended and its last line of output.
    """
    folder = Path(args.work) / name
    folder.mkdir(parents=True, exist_ok=True)
    recorded, log_path = folder / "outcome.json", folder / "check.log"
    recorded.unlink(missing_ok=True)
    command = [
        *CHILD,
        "--child",
        name,
        "--cap",
        f"{cap:.3f}",
        "--out",
        str(args.out),
        "--work",
        str(args.work),
        "--quick-steps",
        str(args.quick_steps),
        "--jobs-per-gpu",
        str(args.jobs_per_gpu),
        "--timeout",
        str(args.timeout),
    ]
    began = time.perf_counter()
    with log_path.open("w") as log_file:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = proc.wait(timeout=cap)
        except subprocess.TimeoutExpired:
            stop_group(proc)
            return Outcome(
                name,
                "timeout",
                f"stopped after its cap of {cap:.0f} s (its own, --timeout, or what --budget left); "
                f"output in {log_path}",
                time.perf_counter() - began,
            )
        finally:
            if proc.poll() is None:  # this run was interrupted: its check goes with it
                stop_group(proc)
    seconds = time.perf_counter() - began
    from experiments.record.result import read_result

    found = read_result(recorded)
    if found is None:
        return Outcome(
            name, "fail", f"its process ended ({ended(code)}) without an outcome: {last_line(log_path)}", seconds
        )
    return Outcome(name, found["status"], found["detail"], seconds, found.get("data") or {})


def child_main(args: argparse.Namespace) -> int:
    """The process of one check: run it, record its outcome for ``run_isolated``, stop its commands on SIGTERM."""

    def stop(signum, frame):
        for group in list(_GROUPS):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    DEADLINE["at"] = time.monotonic() + max(args.cap - GRACE, 1.0)  # its commands end before the cap
    outcome = run_check(args.child, lambda: registry.CHECKS[args.child](args))
    write_json_atomic(Path(args.work) / args.child / "outcome.json", asdict(outcome))
    return 0
