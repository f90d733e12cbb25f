"""result.json files and CSV logs as a run writes them, with settings and costs fixed by the arguments."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

# the keys of a run's result.json (schema 1)
RESULT_KEYS = {
    "schema",
    "run_id",
    "sweep",
    "status",
    "error",
    "task",
    "attention",
    "position",
    "seed",
    "arch",
    "overrides",
    "config",
    "config_hash",
    "metrics",
    "by_length",
    "cost",
    "env",
    "started_at",
    "finished_at",
}


def result_dict(
    task: str,
    attention: str,
    position: str,
    seed: int,
    status: str = "completed",
    metrics: dict | None = None,
    by_length: dict | None = None,
    error: str | None = None,
    sweep: str = "ablation",
    train_lengths: list | None = None,
) -> dict:
    run_id = f"{task}-{attention}-{position}-s{seed}"
    overrides = [f"task={task}", f"attention={attention}", f"position={position}", f"seed={seed}"]
    return {
        "schema": 1,
        "run_id": run_id,
        "sweep": sweep,
        "status": status,
        "error": error,
        "task": task,
        "attention": attention,
        "position": position,
        "seed": seed,
        "arch": "seq2seq",
        "overrides": overrides,
        "config": {"model.d_model": 64, "model.num_heads": 4, "optim.lr": 0.001, "seed": seed},
        "config_hash": f"h{abs(hash((task, attention, position))) % 10**8}",
        "metrics": metrics or {},
        "by_length": by_length or {},
        "cost": {
            "params": 120_000 + 1000 * len(attention),
            "train_seconds": 10.0 + seed,
            "tokens_per_second": 5000.0 - 100 * seed,
            "peak_memory_mb": 210.5,
            "steps": 100,
        },
        "env": {
            "torch": "2.13.0",
            "device": "cpu",
            "git_sha": "0123456789abcdef",
            "host": "node1",
            "python": "3.11.7",
            "packages": {"torch": "2.13.0", "lightning": "2.5.0"},
        },
        "started_at": f"2026-01-{1 + seed:02d}T10:00:00+00:00",
        "finished_at": f"2026-01-{1 + seed:02d}T10:05:00+00:00",
        "command": "python -m experiments.train " + " ".join(overrides),
        "train_lengths": train_lengths,
    }


def write_result(run_dir: Path, result: dict) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "result.json"
    path.write_text(json.dumps(result))
    return path


def write_csv_log(run_dir: Path, final_loss: float) -> pd.DataFrame:
    """A sparse Lightning-style log: train/loss every row, val/loss every other row."""
    steps = np.arange(0, 101, 10)
    train = final_loss + 2.0 * np.exp(-steps / 30)
    val = np.where(steps % 20 == 0, train + 0.05, np.nan)
    log = pd.DataFrame({"step": steps, "epoch": steps // 50, "train/loss": train, "val/loss": val})
    (run_dir / "csv").mkdir(parents=True, exist_ok=True)
    log.to_csv(run_dir / "csv" / "metrics.csv", index=False)
    return log
