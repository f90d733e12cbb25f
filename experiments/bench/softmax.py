"""``softmax``: the math path's softmax (``variants.masking.masked_softmax``) against torch's kernel.

    python -m experiments.bench softmax                      # 1 thread, key lengths 12..17, 64
    python -m experiments.bench softmax --threads 2 --lengths 13 24

Scores of shape (batch, heads, T, T) with a causal mask, forward and backward, timed in one
process, the two interleaved over ``--repeats`` rounds (median per call). The quick preset's
batches are (32, 8, 12..13, 12..13): on CPUs with 512-bit vectors torch's softmax is several
times slower on rows whose length is not a multiple of 16, which is why the math path writes
the softmax out on CPU. The largest difference between the two outputs is printed beside.
"""

from __future__ import annotations

import argparse
import statistics
import time

from experiments.bench.registry import BENCHMARKS


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lengths", type=int, nargs="+", default=[12, 13, 15, 16, 17, 64])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=50, help="calls per timed round")


def _reference(scores, allowed):
    weights = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
    return weights.masked_fill(~allowed.any(-1, keepdim=True), 0.0)


@BENCHMARKS.register(
    "softmax", help="the math path's CPU softmax vs torch's softmax kernel, forward and backward", arguments=arguments
)
def softmax(args: argparse.Namespace) -> int:
    import torch

    from variants.masking import masked_softmax

    for key, value in (
        ("--lengths", min(args.lengths)),
        ("--batch", args.batch),
        ("--heads", args.heads),
        ("--threads", args.threads),
        ("--repeats", args.repeats),
        ("--calls", args.calls),
    ):
        if value < 1:
            raise SystemExit(f"bench softmax: {key} must be >= 1 (got {value})")
    torch.set_num_threads(args.threads)
    print(
        f"(batch, heads, T, T) = ({args.batch}, {args.heads}, T, T), causal, {args.threads} thread(s), "
        f"CPU capability {torch.backends.cpu.get_cpu_capability()}; median µs per forward+backward\n"
    )
    print("| T | torch softmax | masked_softmax | × faster | max |difference| |")
    print("|---:|---:|---:|---:|---:|")
    for length in args.lengths:
        scores = torch.randn(args.batch, args.heads, length, length, requires_grad=True)
        allowed = torch.ones(length, length, dtype=torch.bool).tril()[None, None]  # (1, 1, T, T)
        grad = torch.randn(args.batch, args.heads, length, length)

        times: dict[str, list[float]] = {"torch": [], "ours": []}
        for _ in range(args.repeats):
            for name, fn in (("torch", _reference), ("ours", masked_softmax)):
                began = time.perf_counter()
                for _ in range(args.calls):
                    fn(scores, allowed).backward(grad)
                times[name].append((time.perf_counter() - began) / args.calls * 1e6)
        with torch.no_grad():
            diff = (masked_softmax(scores, allowed) - _reference(scores, allowed)).abs().max().item()
        ref, ours = statistics.median(times["torch"]), statistics.median(times["ours"])
        print(f"| {length} | {ref:.0f} | {ours:.0f} | {ref / ours:.2f} | {diff:.1e} |")
    return 0
