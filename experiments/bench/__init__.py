"""Benchmarks of what each variant costs: ``python -m experiments.bench <command> [options]``.

A command is one entry of ``experiments.bench.registry.BENCHMARKS``: a module (or a sub-package, like ``peers``)
of this package that registers a function; the registry finds it by scanning the package, so a new file is a
new subcommand with no other edit. Import optional dependencies inside the command function so that a missing
one breaks only that command.
"""

from __future__ import annotations

import argparse
import math
from typing import Sequence

from experiments.bench.registry import BENCHMARKS, BenchEntry
from experiments.record.files import OutputError


def build_parser() -> argparse.ArgumentParser:
    from attnlab.prog import prog_name

    parser = argparse.ArgumentParser(
        prog=prog_name("experiments.bench"),
        description="Benchmarks of attention variants (time, memory, scaling with sequence length).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in BENCHMARKS.names():
        entry: BenchEntry = BENCHMARKS.declared(name)
        entry.arguments(sub.add_parser(name, help=entry.help, description=entry.help))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        check_arguments(args)
        return BENCHMARKS.get(args.command)(args)
    except ValueError as err:  # user errors are ValueError subclasses naming the option and what is allowed
        parser.exit(2, f"{parser.prog} {args.command}: error: {err}\n")
    except OutputError as err:  # an output written as results come in could not be (disk full)
        parser.exit(1, f"{parser.prog} {args.command}: error: {err}\n")


# Counts and sizes of every command: none may be below 1 (a length of 0 times nothing, -64 fails per point).
POSITIVE = (
    "lengths",
    "long_lengths",
    "prompts",
    "length",
    "tokens",
    "batch",
    "long_batch",
    "d_model",
    "heads",
    "layers",
    "ffn",
    "repeats",
    "rounds",
    "inner",
    "batches",
    "window",
    "gemm_size",
    "threads",
    "gen_tokens",
    "gen_prompt",
    "gen_batch",
    "gen_repeats",
    "steps",
    "runs",
)
OUTPUTS = ("out", "figure")  # files a command writes
# Time budgets: 0 would stop every series after its first point and still report a finished bench.
POSITIVE_SECONDS = ("max_seconds", "timeout")


def check_arguments(args: argparse.Namespace) -> None:
    """Before any work: sizes and counts >= 1, time budgets > 0, and every output file writable (one line each)."""
    from experiments.record.files import OutputError, check_output_path

    for name in POSITIVE:
        value = getattr(args, name, None)
        values = value if isinstance(value, (list, tuple)) else [value]
        bad = [v for v in values if isinstance(v, (int, float)) and v < 1]
        if bad:
            raise ValueError(f"--{name.replace('_', '-')}={bad[0]} is not allowed; it must be >= 1")
    for name in POSITIVE_SECONDS:
        value = getattr(args, name, None)
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ValueError(f"--{name.replace('_', '-')}={value:g} is not allowed; it must be a number of seconds > 0")
    for name in OUTPUTS:
        path = getattr(args, name, None)
        if path is not None:
            try:
                check_output_path(path, f"--{name}")
            except OutputError as err:
                raise ValueError(str(err)) from None
