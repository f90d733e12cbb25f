"""``ensemble-equality``: how far each ensemble member's results are from its separate run's, per type.

    python -m experiments.bench ensemble-equality                 # every type and every encoding, 10 steps
    python -m experiments.bench ensemble-equality --steps 300 --attention soft local --position none

For every attention type (with ``--base-position``) and every position encoding (with
``--base-attention``), and decoder-only with rope: ``--members`` seeds trained as one ensemble
(``ensemble.seeds``) and each seed again as its own ordinary run, in this process, CPU float32,
dropout 0. A row is the largest |member - separate run| over every metric and per-length value the
separate run reports, the key where it occurs, and how many values were compared; with ``--floor``,
beside it the difference float reordering alone makes (seed 0 alone on ``backend=math``). The test
(``tests/experiments/ensemble/test_ensemble.py``) holds the same cases to 1e-4 over a tiny model; this command
prints the numbers on the quick cell's model, at any number of steps.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from experiments.bench.registry import BENCHMARKS

# The quick cell's model, a short budget over two epochs (a member's batch order changes per epoch),
# a clip small enough to act on every step (a clip over all members at once would change each).
BASE = [
    "experiment=quick",
    "model.dropout=0.0",
    "task.train_size=48",
    "optim.grad_clip=0.05",
    "optim.warmup_steps=2",
    "eval.attention_maps=false",
    "logger=csv",
    "num_threads=1",
]


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=int, default=10, help="trainer.max_steps of every run")
    parser.add_argument("--members", type=int, default=2, help="seeds 0 .. N-1 in each ensemble")
    parser.add_argument("--attention", nargs="*", default=None, help="types to run (default: every registered one)")
    parser.add_argument("--position", nargs="*", default=None, help="encodings to run (default: every one)")
    parser.add_argument("--base-attention", default="multihead", help="the type the encodings are run with")
    parser.add_argument("--base-position", default="sinusoidal", help="the encoding the types are run with")
    parser.add_argument("--no-decoder", action="store_true", help="skip the decoder-only rope case")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also run seed 0 alone with backend=math: the difference float reordering alone makes",
    )
    parser.add_argument("--set", nargs="*", default=[], help="further overrides for every run (e.g. a smaller model)")
    parser.add_argument("--work", type=Path, default=None, help="folder for the runs (default: a temporary one)")
    parser.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")


def cases(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    from variants import ATTENTION, POSITION

    attention = args.attention if args.attention is not None else ATTENTION.names()
    position = args.position if args.position is not None else POSITION.names()
    out = [(f"{a} + {args.base_position}", [f"attention={a}", f"position={args.base_position}"]) for a in attention]
    out += [
        (f"{args.base_attention} + {p}", [f"attention={args.base_attention}", f"position={p}"])
        for p in position
        if p != args.base_position or args.base_attention not in attention
    ]
    if not args.no_decoder:
        out.append(("decoder-only multihead + rope", ["model.arch=decoder", "attention=multihead", "position=rope"]))
    return out


def differences(member: dict[str, Any], alone: dict[str, Any]) -> dict[str, float]:
    """|member - separate run| for every metric and per-length value the separate run reports."""
    out = {k: abs(member["metrics"][k] - v) for k, v in alone["metrics"].items()}
    for n, values in alone["by_length"].items():
        out.update({f"{n}/{k}": abs(member["by_length"][n][k] - v) for k, v in values.items()})
    return out


def compare(
    name: str, overrides: list[str], steps: int, members: int, work: Path, extra: list[str] = (), floor: bool = False
) -> dict[str, Any]:
    """One case: the ensemble, then each member's separate run, and the largest difference."""
    from experiments.app.api import compose
    from experiments.config.checks import ConfigError, check_config
    from experiments.config.spec import build_spec
    from experiments.ensemble import train_ensemble
    from experiments.training.single_run import train

    common = [*BASE, *overrides, f"trainer.max_steps={steps}", f"trainer.val_check_interval={steps}", *extra]
    row: dict[str, Any] = {"case": name, "overrides": overrides}
    grouped = [*common, f"ensemble.seeds={members}"]
    cfg = compose(grouped)
    try:
        check_config(cfg)
    except ConfigError as err:  # a pair that cannot compose, refused as the CLI refuses it
        return {**row, "skipped": str(err)}
    began = time.perf_counter()
    ensemble = train_ensemble(build_spec(cfg), work / "ensemble", grouped)
    row["ensemble_seconds"] = time.perf_counter() - began
    fallback = ensemble[0].get("ensemble", {}).get("fallback")
    if fallback:
        return {**row, "skipped": f"trains its seeds one after another: {fallback}"}
    worst: dict[str, float] = {}
    separate = []
    for seed, member in enumerate(ensemble):
        alone = train(
            build_spec(compose([*common, f"seed={seed}"])), work / f"separate-{seed}", [*common, f"seed={seed}"]
        )
        separate.append(alone)
        if member["status"] != "completed" or alone["status"] != "completed":
            return {**row, "error": f"seed {seed}: member {member['status']}, separate run {alone['status']}"}
        for key, value in differences(member, alone).items():
            worst[f"seed={seed} {key}"] = value
    key = max(worst, key=worst.__getitem__)
    row.update(largest=worst[key], where=key, values=len(worst))
    if floor:
        # float reordering alone: seed 0's separate run on the reference attention path (the one
        # the batched step takes for most layers) against its default path
        math_run = [*common, "seed=0", "backend=math"]
        reordered = train(compose(math_run), work / "separate-0-math", math_run)
        gaps = differences(reordered, separate[0])
        key = max(gaps, key=gaps.__getitem__)
        row.update(floor=gaps[key], floor_where=key)
    return row


@BENCHMARKS.register(
    "ensemble-equality",
    help="each ensemble member against its separate run, per attention type and encoding",
    arguments=arguments,
)
def ensemble_equality(args: argparse.Namespace) -> int:
    import torch

    from experiments.training.quiet import quiet_library_warnings

    quiet_library_warnings()
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        root = args.work.resolve() if args.work else Path(scratch)
        for name, overrides in cases(args):
            row = compare(
                name, overrides, args.steps, args.members, root / name.replace(" ", "_"), args.set, args.floor
            )
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(f"\n{args.members} members, {args.steps} steps, CPU float32, dropout 0; |member - its separate run|\n")
    floor = " backend=math alone (seed 0) | where |" if args.floor else ""
    print(f"| case | largest difference | where | values compared |{floor}")
    print("|---|---:|---|---:|" + ("---:|---|" if args.floor else ""))
    for r in rows:
        if "largest" in r:
            extra = f" {r['floor']:.2g} | {r['floor_where']} |" if args.floor else ""
            print(f"| {r['case']} | {r['largest']:.2g} | {r['where']} | {r['values']} |{extra}")
        else:
            print(f"| {r['case']} | – | {r.get('skipped') or r.get('error')} | 0 |" + (" | |" if args.floor else ""))
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2))
    return 1 if any("error" in r for r in rows) else 0
