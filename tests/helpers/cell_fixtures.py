"""result.json files shaped like the training app's (flattened config, env), for the cell and report tests.

``config`` follows ``experiments.train``: a registry group's parameters sit beside
its ``name`` (``attention.name``, ``attention.window``), so a ``local`` run has a
window and a ``multihead`` run has none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ATTENTION_PARAMS = {
    "multihead": {"num_heads": 4},
    "local": {"num_heads": 1, "window": 8, "mode": "monotonic"},
    "soft": {"num_heads": 1, "score": "scaled_dot"},
}
POSITION_PARAMS = {
    "sinusoidal": {"base": 10000},
    "rope": {"base": 10000},
    "relative": {"max_distance": 16, "values": False},
    "t5": {"num_buckets": 32, "max_distance": 128},
}


def flat_config(task: str, attention: str, position: str, seed: int, **changes: Any) -> dict[str, Any]:
    """A resolved, flattened config; ``changes`` are dotted keys (``attention.window``, ``trainer.max_steps``)."""
    config: dict[str, Any] = {
        "task.name": task,
        "task.train_lengths": [2, 12],
        "task.eval_lengths": [8, 12, 16],
        "task.train_size": 5000,
        "task.val_size": 256,
        "task.test_size": 128,
        "task.batch_size": 32,
        "attention.name": attention,
        **{f"attention.{k}": v for k, v in ATTENTION_PARAMS[attention].items()},
        "position.name": position,
        **{f"position.{k}": v for k, v in POSITION_PARAMS[position].items()},
        "model.arch": "seq2seq",
        "model.d_model": 64,
        "model.cross_attention": None,
        "optim.lr": 0.003,
        "optim.betas": [0.9, 0.98],
        "trainer.accelerator": "cpu",
        "trainer.max_steps": 1000,
        "progress_bar": None,
        "trainer.log_every_n_steps": 100,
        "checkpoint_every_n_steps": 500,
        "logger.wandb.mode": "offline",
        "logger.wandb.tags": [],
        "eval.generate": True,
        "eval.attention_maps": True,
        "name": "sweep",
        "seed": seed,
        "backend": "auto",
        "resume": True,
        "num_threads": 1,
        "plugins": [],
        "fail_at_step": None,
    }
    config.update(changes)
    return config


def result(
    run_id: str,
    config: dict[str, Any],
    metrics: dict[str, float] | None = None,
    status: str = "completed",
    env: dict[str, Any] | None = None,
    by_length: dict | None = None,
) -> dict[str, Any]:
    return {
        "schema": 1,
        "run_id": run_id,
        "sweep": config.get("name", "sweep"),
        "status": status,
        "error": None if status == "completed" else "boom",
        "task": config["task.name"],
        "attention": config["attention.name"],
        "position": config["position.name"],
        "seed": config["seed"],
        "arch": "seq2seq",
        "overrides": [],
        "config": config,
        "config_hash": None,
        "metrics": metrics or {},
        "by_length": by_length or {},
        "cost": {"params": 1000, "train_seconds": 1.0, "steps": 10},
        "env": env
        or {
            "torch": "2.13.0",
            "device": "cpu",
            "git_sha": "abc",
            "python": "3.11.7",
            "packages": {"torch": "2.13.0", "numpy": "2.4.6"},
        },
        "started_at": "2026-01-01T10:00:00+00:00",
        "finished_at": "2026-01-01T10:05:00+00:00",
        "command": "python -m experiments.train",
        "train_lengths": [2, 12],
    }


def write(folder: Path, res: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "result.json"
    path.write_text(json.dumps(res))
    return path


def md_table(markdown: str, caption_start: str) -> dict[str, dict[str, str]]:
    """The Markdown table whose caption starts with ``caption_start``, as {row label: {column: cell}}."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"*{caption_start}"))
    header = [c.strip() for c in lines[start + 2].strip("|").split(" | ")]
    table = {}
    for line in lines[start + 4 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        table[cells[0]] = dict(zip(header[1:], cells[1:]))
    return table
