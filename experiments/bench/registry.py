"""The benchmark registry: every subcommand of ``python -m experiments.bench`` is one entry.

A benchmark is a module (or a sub-package, like ``peers``) of ``experiments.bench`` that registers its function:

    from experiments.bench.registry import BENCHMARKS

    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--lengths", type=int, nargs="+", default=[256, 1024])

    @BENCHMARKS.register("peers", help="compare with other implementations", arguments=arguments)
    def peers(args: argparse.Namespace) -> int:
        ...  # the exit status

The registry scans the package (``attnlab.registry``), so a new file is a new subcommand with no other edit.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Callable

from attnlab.registry import Registry

Handler = Callable[[argparse.Namespace], int]


@dataclass(frozen=True)
class BenchEntry:
    """What a benchmark declares: its one-line help and the function that adds its options to its parser."""

    help: str
    arguments: Callable[[argparse.ArgumentParser], None]


BENCHMARKS: Registry[Handler] = Registry("benchmark", BenchEntry, package="experiments.bench")
