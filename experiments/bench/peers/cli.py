"""``python -m experiments.bench peers``: every comparison in one run, printed and written as JSON."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from experiments.bench.options import BenchArgumentError
from experiments.bench.outcome import nothing_measured, report_nothing_measured
from experiments.bench.peers.compare import check_targets, decoder_comparison, generation_comparison, seq2seq_comparison
from experiments.bench.peers.options import (
    COMPARISONS,
    describe_device,
    load,
    peers_arguments,
    positive_options,
    setup_device,
    size_from,
)
from experiments.bench.registry import BENCHMARKS
from experiments.record.result import environment, write_json_atomic


# -- the commands --------------------------------------------------------------------------------------------
@BENCHMARKS.register(
    "peers",
    help="training step and generation speed against torch.nn.Transformer and x-transformers",
    arguments=peers_arguments,
)
def peers(args: argparse.Namespace) -> int:
    device = setup_device(args)
    positive_options(args, "repeats", "inner", "batches", "gen_tokens", "gen_prompt", "gen_batch", "gen_repeats")
    if args.warmup < 0:
        raise BenchArgumentError(f"--warmup={args.warmup} is not allowed; it must be >= 0")
    if not 0 <= args.dropout < 1:
        raise BenchArgumentError(f"--dropout={args.dropout} is not allowed; it must be in [0, 1)")
    size = size_from(args)
    load_before = load()
    results: dict[str, Any] = {}
    failed: str | None = None
    run = {"seq2seq": seq2seq_comparison, "decoder": decoder_comparison, "generation": generation_comparison}

    def report(targets: list[dict[str, Any]] | None) -> dict[str, Any]:
        return {
            "benchmark": "peers",
            "device": describe_device(device),
            "torch": torch.__version__,
            "settings": {
                **{k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in ("command",)},
                "size": asdict(size),
            },
            "load_average": {"before": load_before, "after": load()},
            "comparisons": results,
            "targets": targets,
            "env": environment(describe_device(device)),
            "complete": targets is not None and failed is None,
        }

    for name in COMPARISONS:
        if name in args.only:
            results[name] = run[name](args, size, device)
            print_comparison(name, results[name])
            if args.out is not None:  # as it goes, so an interrupted run keeps what it measured
                write_json_atomic(args.out, report(None))
    targets = check_targets(results)
    print_targets(targets)
    # a comparison that was skipped (its peer not installed) measured nothing
    failed = nothing_measured(
        [{"status": "skipped", "error": r["skipped"]} if "skipped" in r else {"status": "ok"} for r in results.values()]
    )
    if args.out is not None:
        write_json_atomic(args.out, report(targets))
        print(f"wrote {args.out}")
    return 0 if failed is None else report_nothing_measured("peers", failed)


def print_comparison(name: str, result: dict[str, Any]) -> None:
    if "skipped" in result:
        return
    print(f"\n{name}: {result.get('model', '')}")
    for case, row in result["cases"].items():
        extra = f"  params {row['params']:,}  final loss {row['final_loss']:.3f}" if "params" in row else ""
        print(f"  {case:<26} {row['median_ms']:9.2f} ms  (min {row['min_ms']:.2f}, max {row['max_ms']:.2f}){extra}")
    for ratio, value in result["ratios"].items():
        print(f"  {ratio:<50} {value:6.3f}x")
    if "same_tokens" in result:
        print(f"  cached and recomputed tokens agree on {100 * result['same_tokens']:.1f}%")


def print_targets(targets: list[dict[str, Any]]) -> None:
    print("\ntargets:")
    for t in targets:
        shown = "not run" if t["value"] is None else f"{t['value']:.3f}  {'met' if t['met'] else 'MISSED'}"
        print(f"  {t['ratio']:<45} {t['target']:<7} {shown}")
