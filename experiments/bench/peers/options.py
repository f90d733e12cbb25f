"""The options of ``peers`` and ``mfu``: device, precision, threads, clock and the model's size."""

from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path
from typing import Any, Callable

import torch

from experiments.bench.measure import CLOCKS
from experiments.bench.options import BenchArgumentError
from experiments.bench.peers.models import Size
from experiments.tasks.base import FIRST_SYMBOL_ID

COMPARISONS = ("seq2seq", "decoder", "generation")


# -- options -------------------------------------------------------------------------------------------------
def device_options(parser: argparse.ArgumentParser, default_device: str | None) -> None:
    parser.add_argument("--device", default=default_device, help="cpu or cuda")
    parser.add_argument(
        "--bf16",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="CUDA only: run forward passes under torch.autocast(dtype=bfloat16)",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads on CPU (default: torch's)")
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="wall: elapsed time; cpu: CPU time of this process, steadier on a shared machine",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")


def peers_arguments(parser: argparse.ArgumentParser) -> None:
    device_options(parser, "cpu")
    parser.add_argument(
        "--only", nargs="+", choices=COMPARISONS, default=list(COMPARISONS), help="comparisons to run (default: all)"
    )
    shape = parser.add_argument_group("shape (the issue's: batch 64, length 16, width 64, 4 heads, 2+2 layers)")
    shape.add_argument("--batch", type=int, default=64)
    shape.add_argument("--length", type=int, default=16)
    shape.add_argument("--vocab", type=int, default=1000)
    shape.add_argument("--d-model", type=int, default=64)
    shape.add_argument("--heads", type=int, default=4)
    shape.add_argument("--layers", type=int, default=2, help="layers per stack")
    shape.add_argument("--ffn", type=int, default=256)
    shape.add_argument("--dropout", type=float, default=0.1, help="dropout of the seq2seq comparison")
    timing = parser.add_argument_group("timing")
    timing.add_argument("--warmup", type=int, default=5, help="untimed steps per case (compilation happens here)")
    timing.add_argument("--repeats", type=int, default=15, help="timed rounds per case; the median is reported")
    timing.add_argument("--inner", type=int, default=5, help="steps per timed round")
    timing.add_argument("--batches", type=int, default=8, help="distinct batches, cycled through by every case")
    timing.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time the suite's model through torch.compile",
    )
    timing.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="ROWS",
        help="after timing, print the ROWS costliest operators of each training case",
    )
    gen = parser.add_argument_group("generation")
    gen.add_argument("--gen-tokens", type=int, default=256)
    gen.add_argument("--gen-prompt", type=int, default=16)
    gen.add_argument("--gen-batch", type=int, default=8)
    gen.add_argument("--gen-repeats", type=int, default=5)


def setup_device(args: argparse.Namespace) -> torch.device:
    """Validate the device options, set the threads; ``args.bf16`` becomes a bool."""
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type not in ("cpu", "cuda"):
        raise BenchArgumentError(f"--device={args.device!r} is not allowed; allowed: ['cpu', 'cuda']")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise BenchArgumentError("--device='cuda' is not allowed here; no CUDA device is visible (use cpu)")
    if args.bf16 and device.type != "cuda":
        raise BenchArgumentError("--bf16 is not allowed with --device='cpu'; it needs --device cuda")
    if args.clock == "cpu" and device.type == "cuda":
        raise BenchArgumentError("--clock='cpu' is not allowed with --device='cuda'; GPU work needs 'wall'")
    args.bf16 = bool(args.bf16)
    if args.threads is not None:
        positive_options(args, "threads")
        torch.set_num_threads(args.threads)
    return device


def positive_options(args: argparse.Namespace, *names: str) -> None:
    for name in names:
        value = getattr(args, name)
        if value < 1:
            raise BenchArgumentError(f"--{name.replace('_', '-')}={value} is not allowed; it must be >= 1")


def size_from(args: argparse.Namespace) -> Size:
    positive_options(args, "batch", "length", "d_model", "heads", "layers", "ffn")
    size = Size(args.batch, args.length, args.vocab, args.d_model, args.heads, args.layers, args.ffn)
    if size.d_model % size.heads:
        raise BenchArgumentError(
            f"--heads={size.heads} is not allowed with --d-model={size.d_model}; the heads must divide the width"
        )
    if size.vocab <= FIRST_SYMBOL_ID:
        raise BenchArgumentError(
            f"--vocab={size.vocab} is not allowed; it must be > {FIRST_SYMBOL_ID} (ids below are the specials)"
        )
    return size


def autocast_for(args: argparse.Namespace, device: torch.device) -> Callable[[], Any]:
    if args.bf16:
        return lambda: torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return f"cpu ({torch.get_num_threads()} threads, {os.cpu_count()} cores)"


def load() -> list[float] | None:
    """The 1, 5 and 15 minute load averages: how busy a shared machine was."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None
