"""The options every command that times layers shares (width, heads, batch, device, dtype, clock, threads,
memory cap), validated in one place, and ``KEY=VALUE`` constructor parameters."""

from __future__ import annotations

import argparse
import ast
import contextlib
from typing import Any, Iterator

import torch

from experiments.bench.measure import CLOCKS, cpu_memory_limit
from experiments.bench.point import Shape

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class BenchArgumentError(ValueError):
    """A bad command-line value, named with what is allowed."""


def parse_params(items: list[str], flag: str) -> dict[str, Any]:
    """``["window=64", "mode=monotonic"]`` -> {"window": 64, "mode": "monotonic"}."""
    params = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise BenchArgumentError(f"{flag}={item!r} is not allowed; write KEY=VALUE, e.g. window=64")
        try:
            params[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            params[key] = raw  # a bare word is a string
    return params


def shared_arguments(parser: argparse.ArgumentParser) -> None:
    """Options every command that times layers takes."""
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument(
        "--heads",
        type=int,
        default=None,
        help="heads per layer (default: the type's own, at most 4: soft/local/hard 1, multihead 4)",
    )
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--causal", action="store_true", help="causal self attention (default: full)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per point; the median is reported")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs before timing")
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=30.0,
        help="time budget per point: memory run, warm-up and timed runs together",
    )
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads on CPU (default: torch's)")
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="wall: elapsed time; cpu: CPU time of this process, steadier on a shared CPU machine",
    )
    parser.add_argument(
        "--max-memory-mb",
        type=float,
        default=None,
        help="CPU: fail allocations beyond this (default: 80%% of available memory) so an "
        "oversized point is recorded as oom instead of killing the process",
    )


@contextlib.contextmanager
def configured(args: argparse.Namespace) -> Iterator[Shape]:
    """Validate the shared options; within the block, use ``--threads`` and the memory limit."""
    name = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if name != "cpu" and not name.startswith("cuda"):
        raise BenchArgumentError(f"--device={name!r} is not allowed; choose cpu, cuda or cuda:N")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise BenchArgumentError("--device='cuda' is not allowed here; no CUDA device is visible (use cpu)")
    for flag in ("d_model", "batch", "repeats", "threads"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            raise BenchArgumentError(
                f"--{flag.replace('_', '-')}={getattr(args, flag)} is not allowed; it must be >= 1"
            )
    if args.clock == "cpu" and device.type == "cuda":
        raise BenchArgumentError("--clock='cpu' is not allowed with --device='cuda'; GPU work needs 'wall'")
    threads = torch.get_num_threads()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    try:
        limit = cpu_memory_limit(args.max_memory_mb) if device.type == "cpu" else contextlib.nullcontext()
        with limit as budget:
            if budget:
                print(f"CPU allocations are capped at {budget:,.0f} MB beyond what is in use now")
            yield Shape(args.d_model, args.heads, args.batch, args.causal, device, DTYPES[args.dtype], args.clock)
    finally:
        torch.set_num_threads(threads)


def check_names(registry, names: list[str]) -> None:
    for name in names:
        registry.get(name)  # an unknown name lists the choices and the nearest one
