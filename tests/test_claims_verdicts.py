"""Verdicts a reviewer accepts, met where a user meets them: ``python -m analysis.claims DIR --claims FILE`` on
synthetic sweep folders whose truth is known (issue 45).

- a seed that diverged is an outcome, counted beside the verdict and scored as the metric's worst value;
- a verdict in either direction is wrong at most alpha: a one-sided p of 0.035 on 3 seeds a side decides nothing;
- no verdict from two sides without spread (3 against 3 seeds reach an exact p of 1/20 at best);
- two claims of one name, a YAML error and a ``!!python`` tag are one line and exit 2;
- a claims file beside an adaptive sweep's own claims is evaluated, in its own table.

Expected p-values come from scipy (Fisher's exact test, Welch's t) and from counting arrangements by hand.
"""

from __future__ import annotations

import json
from math import comb
from pathlib import Path

import pytest
import yaml
from scipy import stats as sps

from analysis.claims.cli import main as claims_main

METRIC = "test/token_acc"
SOFT = [0.912, 0.905, 0.921, 0.899, 0.915, 0.908, 0.918, 0.902, 0.911, 0.907]


def run_row(attention: str, seed: int, value: float | None, status: str = "completed", sweep: str = "f") -> dict:
    """One result.json as the recorder writes it: a diverged or failed run keeps no metric."""
    done = status == "completed"
    return {
        "schema": 1,
        "run_id": f"{sweep}-{attention}-s{seed}",
        "sweep": sweep,
        "status": status,
        "error": None if done else f"{status} at step 40",
        "task": "copy",
        "attention": attention,
        "position": "sinusoidal",
        "seed": seed,
        "arch": "seq2seq",
        "overrides": [],
        "config": {"task.name": "copy", "attention.name": attention, "position.name": "sinusoidal", "seed": seed},
        "config_hash": "h",
        "metrics": {METRIC: value} if done else {},
        "by_length": {},
        "cost": {},
        "env": {},
        "started_at": None,
        "finished_at": None,
        "command": "",
        "train_lengths": [2, 8],
    }


def write_folder(root: Path, sides: dict[str, list]) -> Path:
    """A sweep folder: per attention, one run per seed; a value of "diverged" or "failed" is that status."""
    for attention, values in sides.items():
        for seed, value in enumerate(values):
            status = value if isinstance(value, str) else "completed"
            run = root / f"{attention}-{seed}"
            run.mkdir(parents=True, exist_ok=True)
            row = run_row(attention, seed, None if isinstance(value, str) else value, status)
            (run / "result.json").write_text(json.dumps(row))
    return root


def claims_file(path: Path, *claims: dict) -> Path:
    path.write_text(yaml.safe_dump({"claims": list(claims)}, sort_keys=False))
    return path


def claim(name: str = "local matches soft", expect: str = "equivalent", **fields) -> dict:
    base = {"name": name, "metric": METRIC, "a": {"attention": "local"}, "b": {"attention": "soft"}, "expect": expect}
    return {**base, **fields}


def verdicts(capsys, folder: Path, file: Path) -> tuple[int, str]:
    code = claims_main([str(folder), "--claims", str(file)])
    return code, capsys.readouterr().out


# ---------------------------------------------------------------- the three folders of the issue

DIVERGED = {"soft": SOFT, "local": SOFT[:7] + ["diverged"] * 3}
ZERO_SPREAD = {"local": [1.0, 1.0, 1.0], "soft": [31 / 32] * 3}
# one-sided Welch p = 0.035 on 3 seeds a side (checked against scipy below)
WELCH_035 = {"local": [0.82, 0.85, 0.898], "soft": [0.79, 0.77, 0.78]}
