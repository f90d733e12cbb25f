"""``ensemble``: the seeds of one cell as one batched model against separate runs, whole-process wall time.

    python -m experiments.bench ensemble                     # the quick cell, 5 seeds, 2 cores
    python -m experiments.bench ensemble --steps 300 --jobs 2 5

Each arrangement is the command a user would type, timed from start to exit (imports, data,
W&B, training, evaluation, result files), on ``--cores`` cores (pinned with ``taskset`` when the
machine has more), one after another in one run, with the load average printed beside each:
- ``ensemble-T-threads``: one process, ``ensemble.seeds=N``, T intra-op threads (``--ensemble-threads``);
- ``sequential``: N single runs, one after another (the preset's threads);
- ``multirun-sequential``: one multirun over the N seeds with Hydra's basic launcher (one after
  another in one process: one start for all);
- ``multirun-ensemble``: the same multirun with ``hydra/launcher=ensemble`` (the seeds grouped into
  one ensemble, ``num_threads`` as the first ensemble row's);
- ``parallel-J``: one multirun over the N seeds with the joblib launcher, J at a time.
Every member's metrics are compared with its separate run's; beside that difference, the noise
floor of float reordering: seed ``--seed`` run once more alone with ``backend=math`` (the
ensemble's attention path, summing in another order than SDPA), against its ordinary run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from experiments.bench.registry import BENCHMARKS

# the cell named in full: a multirun would otherwise also sweep the preset's own grid
QUICK_CELL = ("experiment=quick", "attention=multihead", "position=sinusoidal")


def cell_argument(parser: argparse.ArgumentParser) -> None:
    """``--cell``: the overrides naming the cell, by default the quick grid's multihead + sinusoidal."""
    parser.add_argument("--cell", nargs="*", default=list(QUICK_CELL), help="overrides naming the cell")


def check_cell(cell: list[str]) -> None:
    """Before any work: the cell's overrides checked as the training command checks them (a ``PreflightError``,
    one line; ``python -m experiments.bench`` exits 2 with it)."""
    from experiments.app.preflight import preflight

    preflight(list(cell))


def arguments(parser: argparse.ArgumentParser) -> None:
    cell_argument(parser)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=None, help="trainer.max_steps (default: the cell's)")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--jobs", type=int, nargs="+", default=[2, 5], help="joblib jobs at once, one row each")
    parser.add_argument(
        "--ensemble-threads",
        type=int,
        nargs="+",
        default=None,
        help="intra-op threads of the ensemble process, one row each (default: --cores)",
    )
    parser.add_argument("--work", type=Path, default=Path("bench_ensemble"), help="folder for the runs")
    parser.add_argument("--only", nargs="*", default=None, help="run only these arrangements (by name)")
    parser.add_argument("--no-floor", action="store_true", help="skip the backend=math run of the first seed")
    parser.add_argument("--out", type=Path, default=None, help="write the table as JSON here")


def _dir(key: str, path: Path) -> str:
    """A Hydra override for a folder; quoted, since a member folder's name holds ``=``."""
    quoted = str(path).replace("'", "\\'")
    return f"{key}='{quoted}'"


def _pin(cores: int) -> list[str]:
    if (os.cpu_count() or 1) > cores and subprocess.run(["which", "taskset"], capture_output=True).returncode == 0:
        return ["taskset", "-c", f"0-{cores - 1}"]
    return []


def _timed(cmd: list[str]) -> tuple[float, int, str]:
    env = {**os.environ, "WANDB_MODE": os.environ.get("WANDB_MODE", "offline"), "WANDB_SILENT": "true"}
    began = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return time.perf_counter() - began, proc.returncode, proc.stderr[-1500:]


def _results(folder: Path) -> dict[int, dict[str, Any]]:
    out = {}
    for path in folder.rglob("result.json"):
        result = json.loads(path.read_text())
        out[int(result["seed"])] = result
    return out


def _largest_difference(a: dict[int, dict], b: dict[int, dict]) -> float | None:
    diffs = [
        abs(a[s]["metrics"][k] - v) for s in a if s in b for k, v in b[s]["metrics"].items() if k in a[s]["metrics"]
    ]
    return max(diffs) if diffs else None


# (name, the commands it runs one after another, the folder its results land in)
Arrangement = tuple[str, list[list[str]], Path]


def _arrangements(args: argparse.Namespace, cell: list[str], threads: list[int], work: Path) -> list[Arrangement]:
    """Every arrangement, in the order they run, each as the commands a user would type."""
    seeds = list(range(args.seeds))
    pin, py = _pin(args.cores), [sys.executable, "-m", "experiments.train"]

    def multirun(name: str, *overrides: str) -> Arrangement:
        every_seed = f"seed={','.join(map(str, seeds))}"
        command = [*pin, *py, "-m", *cell, every_seed, *overrides, _dir("hydra.sweep.dir", work / name)]
        return name, [command], work / name

    found: list[Arrangement] = [
        (
            f"ensemble-{t}-threads",
            [
                [
                    *pin,
                    *py,
                    *cell,
                    f"ensemble.seeds={args.seeds}",
                    f"num_threads={t}",
                    _dir("hydra.run.dir", work / f"ensemble-{t}"),
                ]
            ],
            work / f"ensemble-{t}",
        )
        for t in threads
    ]
    found.append(
        (
            "sequential",
            [[*pin, *py, *cell, f"seed={s}", _dir("hydra.run.dir", work / "sequential" / f"seed={s}")] for s in seeds],
            work / "sequential",
        )
    )
    # Hydra's basic launcher runs a sweep's jobs one after another in one process (one start)
    found.append(multirun("multirun-sequential"))
    found.append(multirun("multirun-ensemble", "hydra/launcher=ensemble", f"num_threads={threads[0]}"))
    found += [multirun(f"parallel-{j}", "hydra/launcher=joblib", f"hydra.launcher.n_jobs={j}") for j in args.jobs]
    if not args.no_floor:
        floor = [*pin, *py, *cell, "seed=0", "backend=math", _dir("hydra.run.dir", work / "floor-math" / "seed=0")]
        found.append(("floor-math", [floor], work / "floor-math"))
    return [a for a in found if a[0] in args.only] if args.only else found


def _time_each(arrangements: list[Arrangement], seeds: int) -> list[dict[str, Any]]:
    """Run every arrangement in turn: a row each with its wall time, completed runs and the load before it."""
    rows = []
    for name, commands, folder in arrangements:
        load = os.getloadavg()[0]
        wall, failed = 0.0, []
        for cmd in commands:
            seconds, code, err = _timed(cmd)
            wall += seconds
            if code != 0:
                failed.append(err)
        results = _results(folder)
        done = sum(r["status"] == "completed" for r in results.values())
        rows.append(
            {"arrangement": name, "wall_seconds": wall, "completed": done, "load_before": load, "errors": failed}
        )
        expected = 1 if name == "floor-math" else seeds
        print(f"{name}: {wall:.1f} s, {done}/{expected} completed, load average before {load:.1f}", flush=True)
    return rows


def _print_table(args: argparse.Namespace, cell: list[str], rows: list[dict[str, Any]]) -> None:
    """The markdown table; each row gains its speed-up over the sequential runs."""
    sequential = next((r["wall_seconds"] for r in rows if r["arrangement"] == "sequential"), math.nan)
    print(
        f"\n{args.seeds} seeds of {' '.join(cell)} on {args.cores} cores (load average now {os.getloadavg()[0]:.1f})\n"
    )
    print("| arrangement | wall s | × faster than sequential | completed |")
    print("|---|---:|---:|---:|")
    for r in rows:
        r["speedup_vs_sequential"] = sequential / r["wall_seconds"]
        if r["arrangement"] == "floor-math":
            continue
        print(
            f"| {r['arrangement']} | {r['wall_seconds']:.1f} | {r['speedup_vs_sequential']:.2f} | "
            f"{r['completed']}/{args.seeds} |"
        )


@BENCHMARKS.register(
    "ensemble", help="seeds batched in one process vs separate runs in sequence and in parallel", arguments=arguments
)
def ensemble(args: argparse.Namespace) -> int:
    cell = list(args.cell) + ([f"trainer.max_steps={args.steps}"] if args.steps else [])
    check_cell(cell)
    work = args.work.resolve()
    threads = args.ensemble_threads or [args.cores]
    rows = _time_each(_arrangements(args, cell, threads, work), args.seeds)
    members, alone = _results(work / f"ensemble-{threads[0]}"), _results(work / "sequential")
    _print_table(args, cell, rows)
    diff = _largest_difference(members, alone)
    floor = _largest_difference(_results(work / "floor-math"), alone)
    print(f"\nlargest |ensemble member - its separate run| over the metrics: {diff}")
    print(f"largest |separate run with backend=math - the same run| (float reordering alone): {floor}")
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "cell": cell,
                    "seeds": args.seeds,
                    "cores": args.cores,
                    "ensemble_threads": threads,
                    "rows": rows,
                    "largest_difference": diff,
                    "reordering_floor": floor,
                },
                indent=2,
            )
        )
    return 0 if all(r["completed"] == (1 if r["arrangement"] == "floor-math" else args.seeds) for r in rows) else 1
