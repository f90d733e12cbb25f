"""How long a report takes: ``python -m analysis.report.timing [--runs 100] [--factors 4] [--repeat 3] [--exports]``.

Writes synthetic result.json files (with per-length results and a CSV log each,
as the training app does) into a temporary folder: ``--factors`` config keys
with two levels each (attention, position, optim.lr, model.d_model, ...), runs
spread over the cells as seeds. Then times ``collect`` and ``build_report`` and
prints the median of ``--repeat`` builds. ``--exports`` times, alternately, a report
without the paper exports (PNG figures only, no latex/, references.bib or methods)
and a full one, and prints the ratio of their medians.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

from analysis.data.collect import collect
from analysis.report.build import build_report

# Two levels per factor, in the order they are added.
LEVELS = {
    "attention.name": ["multihead", "local"],
    "position.name": ["rope", "sinusoidal"],
    "optim.lr": [0.001, 0.003],
    "model.d_model": [64, 128],
    "model.ffn_dim": [128, 256],
    "optim.warmup_steps": [50, 100],
}
LENGTHS = (8, 12, 16, 24)


def _config(values: dict, run_seed: int) -> dict:
    """A run's flattened config: the defaults, the run's seed, its cell's ``values`` over them."""
    return {
        "task.name": "reverse",
        "attention.name": "multihead",
        "position.name": "rope",
        "model.d_model": 64,
        "model.ffn_dim": 128,
        "optim.lr": 0.003,
        "optim.warmup_steps": 50,
        "trainer.max_steps": 1000,
        "name": "bench",
        "seed": run_seed,
        **values,
    }


def _result(i: int, config: dict, values: dict, acc: float, cell: int, cells: int) -> dict:
    """Run ``i``'s schema-1 result: token accuracy ``acc``, decaying beyond the training lengths; a step time that
    grows with its cell's index ``cell`` of ``cells``."""
    return {
        "schema": 1,
        "run_id": f"run{i:04d}",
        "sweep": "bench",
        "status": "completed",
        "error": None,
        "task": "reverse",
        "attention": config["attention.name"],
        "position": config["position.name"],
        "seed": config["seed"],
        "arch": "seq2seq",
        "overrides": [f"{k}={v}" for k, v in values.items()],
        "config": config,
        "config_hash": None,
        "metrics": {"test/token_acc": acc, "test/seq_acc": acc**4, "val/loss": float(2 - 2 * acc)},
        "by_length": {
            str(n): {"token_acc": acc * (1 - 0.02 * max(0, n - 12)), "seq_acc": acc ** (n / 3)} for n in LENGTHS
        },
        "cost": {
            "params": 100_000,
            "train_seconds": 30.0,
            "tokens_per_second": 5000.0,
            "steps": 1000,
            "step_ms": 20.0 + 10.0 * cell / cells,
            "peak_memory_mb": 400.0,
        },
        "env": {"torch": "2.13.0", "device": "cpu", "git_sha": "0" * 40, "python": "3.11.7"},
        "started_at": "2026-01-01T10:00:00+00:00",
        "finished_at": "2026-01-01T10:05:00+00:00",
        "command": "python -m experiments.train",
        "train_lengths": [2, 12],
    }


def _metrics_log(acc: float) -> str:
    """A CSV log as the training app writes it: train and validation loss every 100 steps, settling at 2 - 2 acc."""
    steps = np.arange(0, 1001, 100)
    return "step,train/loss,val/loss\n" + "".join(
        f"{s},{2 * np.exp(-s / 300) + 2 - 2 * acc},{2 * np.exp(-s / 300) + 2.05 - 2 * acc}\n" for s in steps
    )


def write_runs(root: Path, runs: int, factors: int, seed: int = 0) -> int:
    """``runs`` result folders over 2**factors cells; returns the number of cells."""
    if not 1 <= factors <= len(LEVELS):
        raise SystemExit(f"--factors={factors} must be between 1 and {len(LEVELS)}")
    rng = np.random.default_rng(seed)
    keys = list(LEVELS)[:factors]
    cells = list(itertools.product(*(LEVELS[k] for k in keys)))
    for i in range(runs):
        values = dict(zip(keys, cells[i % len(cells)]))
        config = _config(values, run_seed=i // len(cells))
        acc = float(rng.uniform(0.4, 0.95))
        run_dir = root / f"run{i:04d}"
        (run_dir / "csv").mkdir(parents=True)
        (run_dir / "result.json").write_text(json.dumps(_result(i, config, values, acc, i % len(cells), len(cells))))
        (run_dir / "csv" / "metrics.csv").write_text(_metrics_log(acc))
    return len(cells)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis.report.timing", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--factors", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--exports", action="store_true", help="also time reports without the paper exports, alternating with full ones"
    )
    args = parser.parse_args(argv)
    if args.runs < 1 or args.repeat < 1:
        raise SystemExit(f"--runs={args.runs} and --repeat={args.repeat} must be positive")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cells = write_runs(root / "runs", args.runs, args.factors)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            runs = collect([root / "runs"])
            collect_s = time.perf_counter() - start
            builds, plain = [], []
            for k in range(args.repeat):
                if args.exports:  # side by side, so a change of load hits both
                    start = time.perf_counter()
                    build_report([root / "runs"], root / f"plain{k}", figure_formats=["png"], paper_files=False)
                    plain.append(time.perf_counter() - start)
                start = time.perf_counter()
                html = build_report([root / "runs"], root / f"report{k}")
                builds.append(time.perf_counter() - start)
        markdown = (html.parent / "report.md").read_text()
        tables = sum(
            line.startswith("*test/token_acc on ") and "mean ± 95% CI" in line for line in markdown.splitlines()
        )
        figures = len(list((html.parent / "figures").glob("*.png")))
        print(
            f"{len(runs)} runs, {cells} cells, factors: {', '.join(runs.factors)}; "
            f"{tables} tables per metric, {figures} figures"
        )
        print(
            f"collect: {collect_s:.2f} s; build_report (collect, statistics, figures, files): median "
            f"{statistics.median(builds):.2f} s over {args.repeat} (min {min(builds):.2f}, max {max(builds):.2f})"
        )
        if plain:
            ratio = statistics.median(builds) / statistics.median(plain)
            print(
                f"without the paper exports (PNG only, no latex/, .bib, methods): median "
                f"{statistics.median(plain):.2f} s; the exports add {ratio:.2f}x"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
