"""Benchmarks of what each variant costs: ``python -m experiments.bench <command> [options]``.

A command is a module (or a sub-package, like ``peers``) of this package that registers a function:

    from experiments.bench import command

    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--lengths", type=int, nargs="+", default=[256, 1024])

    @command("peers", help="compare with other implementations", arguments=arguments)
    def peers(args: argparse.Namespace) -> int:
        ...  # the exit status

The CLI imports every module in this package before parsing, so a new file is a
new subcommand with no other edit; import optional dependencies inside the
command function so that a missing one breaks only that command.
"""

from __future__ import annotations

import argparse
import importlib
import math
import pkgutil
from dataclasses import dataclass
from typing import Callable, Sequence

from experiments.record.files import OutputError

Handler = Callable[[argparse.Namespace], int]


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Handler


COMMANDS: dict[str, Command] = {}


def command(
    name: str, *, help: str, arguments: Callable[[argparse.ArgumentParser], None]
) -> Callable[[Handler], Handler]:
    """Register ``run`` as the subcommand ``name``; a duplicate name is an error."""

    def decorator(run: Handler) -> Handler:
        if name in COMMANDS:
            raise ValueError(f"bench command {name!r} is already registered by {COMMANDS[name].run.__module__}")
        COMMANDS[name] = Command(name, help, arguments, run)
        return run

    return decorator


def _load_commands() -> None:
    for module in pkgutil.iter_modules(__path__):
        if not module.name.startswith("_"):
            importlib.import_module(f"{__name__}.{module.name}")


def build_parser() -> argparse.ArgumentParser:
    from attnlab.prog import prog_name

    _load_commands()
    parser = argparse.ArgumentParser(
        prog=prog_name("experiments.bench"),
        description="Benchmarks of attention variants (time, memory, scaling with sequence length).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in sorted(COMMANDS):
        cmd = COMMANDS[name]
        cmd.arguments(sub.add_parser(name, help=cmd.help, description=cmd.help))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        check_arguments(args)
        return COMMANDS[args.command].run(args)
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
)
OUTPUTS = ("out", "figure")  # files a command writes
# Time budgets: 0 would stop every series after its first point and still report a finished bench.
POSITIVE_SECONDS = ("max_seconds",)


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
