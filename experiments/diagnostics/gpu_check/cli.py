"""``python -m experiments.gpu_check``: the arguments, and every check in turn."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from pathlib import Path

import torch

# kernels before runs: the order they register their checks in is the order a run takes them in
from experiments.diagnostics.gpu_check import kernels, processes, registry, runs  # noqa: F401
from experiments.diagnostics.gpu_check.registry import Outcome
from experiments.diagnostics.gpu_check.report import out_problem, summary, table, verdict
from experiments.record.result import write_json_atomic


def device_name() -> str:
    """The GPU's name from NVML when the driver has it, without a CUDA context in this process."""
    if not torch.cuda.is_available():
        return "cpu (no CUDA)"
    try:
        import pynvml

        pynvml.nvmlInit()
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: BLE001 - NVML missing: the device is named in each check's own process
        return "cuda"


def main(argv: list[str] | None = None) -> int:
    from attnlab.prog import prog_name
    from experiments.diagnostics import gpu_check as package

    parser = argparse.ArgumentParser(
        prog=prog_name("experiments.gpu_check"), description=package.__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=Path, default=Path("gpu_check.json"), help="the JSON summary")
    parser.add_argument("--work", type=Path, default=Path("gpu_check"), help="runs' folders")
    parser.add_argument("--only", nargs="+", choices=sorted(registry.CHECKS), help="run these checks only")
    parser.add_argument("--quick-steps", type=int, default=200, help="steps per cell of the quick grid")
    parser.add_argument("--jobs-per-gpu", type=int, default=4, help="cells at a time per GPU in quick-grid-k")
    parser.add_argument(
        "--timeout", type=float, default=240, help="seconds each check, and each command it starts, may take"
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=480,
        help="seconds for the whole check: a check still running then is stopped and later checks are skipped",
    )
    # the process of one check (run_isolated); not for the command line
    parser.add_argument("--child", choices=sorted(registry.CHECKS), help=argparse.SUPPRESS)
    parser.add_argument("--cap", type=float, default=float("inf"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if min(args.quick_steps, args.jobs_per_gpu) < 1 or min(args.timeout, args.budget) <= 0:
        parser.error(
            f"--quick-steps={args.quick_steps}, --jobs-per-gpu={args.jobs_per_gpu}, "
            f"--timeout={args.timeout} and --budget={args.budget} must be positive"
        )
    if args.child:
        return processes.child_main(args)
    problem = out_problem(args.out)
    if problem:
        print(f"gpu_check: --out={args.out} {problem}", file=sys.stderr)
        return 2
    # each check's process starts in the repository root: its paths must not depend on where this one runs
    args.out, args.work = args.out.resolve(), args.work.resolve()
    # SIGTERM (a scheduler's time limit) ends the run like Ctrl-C: the running check is stopped with it
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        return run_all(args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_all(args: argparse.Namespace) -> int:
    """Every check in turn, each in its own process, the summary written whole before and after each."""
    processes.DEADLINE["at"] = time.monotonic() + args.budget
    names = list(args.only or registry.CHECKS)
    device, cuda = device_name(), torch.cuda.is_available()
    outcomes: list[Outcome] = []
    write_json_atomic(args.out, summary(outcomes, len(names), device))  # valid from the start
    for name in names:
        left = processes.DEADLINE["at"] - time.monotonic()
        if left <= 0:
            outcome = Outcome(name, "skipped", f"the {args.budget:.0f} s budget of the whole check is spent")
        elif name in registry.NEEDS_CUDA and not cuda:
            outcome = Outcome(name, "skipped", "no CUDA device here")
        else:
            outcome = processes.run_isolated(name, args, min(registry.CAPS.get(name, args.timeout), args.timeout, left))
        print(f"[gpu-check] {name}: {outcome.status} {outcome.detail}", flush=True)
        outcomes.append(outcome)
        write_json_atomic(args.out, summary(outcomes, len(names), device))  # a check cut short later loses nothing
    if device == "cuda" and any(o.status != "skipped" for o in outcomes):
        # no NVML: name the GPU now that no check is left to share this process's CUDA context with
        with contextlib.suppress(Exception):
            device = torch.cuda.get_device_name()
            write_json_atomic(args.out, summary(outcomes, len(names), device))
    print(table(outcomes))
    complete, ok, why = verdict(outcomes, len(names))
    print(f"wrote {args.out}" + ("" if ok else f"; not ok: {why}"))
    return 0 if ok else 1
