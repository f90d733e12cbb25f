"""``ensemble-step``: the ensemble's batched training step timed alone, and the bound it sets on the whole run.

    python -m experiments.bench ensemble-step                       # the quick cell, 5 members
    python -m experiments.bench ensemble-step --batches 1 8 32 --threads 1 2 --split --compile

The cell's members are assembled as ``ensemble.seeds=N`` assembles them and read their own training batches;
each row times ``--steps`` steps (forward, backward, the fused AdamW update) of one arrangement, after a
few untimed ones, at a number of examples per member (the first ``--batches`` rows of each batch) and
intra-op threads:
- ``ensemble``: the N members under ``vmap``, as ``EnsembleModule`` trains them;
- ``one-model-Nx``: one member's model on the N members' batches concatenated, the same arithmetic with no
  ``vmap`` (the cost a batched step could come down to);
- ``N-models``: the N members' models one after another, each on its own batch (N separate runs' steps);
- ``split`` (``--split``, one intra-op thread): the ensemble step on each half of the batch in two Python
  threads at once, the gradients of both halves summed (data parallelism inside the process);
- ``compiled`` (``--compile``): ``torch.compile`` of the ensemble's forward and loss; its first call
  (compilation, or a load from torch's on-disk cache) is printed apart.

From the ``ensemble`` rows at one thread the command fits ``step = fixed + per_example x batch`` (least
squares) and prints the fastest step T threads could give if the per-example part scaled perfectly and the
fixed part (dispatch, ``vmap``, autograd, the update, one thread's work) did not shrink:
``fixed + per_example x batch / T``; times the cell's steps, that is a floor under the ensemble's fit.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from experiments.bench.ensemble import cell_argument, check_cell
from experiments.bench.registry import BENCHMARKS

ARRANGEMENTS = ("ensemble", "one-model-Nx", "N-models")


def arguments(parser: argparse.ArgumentParser) -> None:
    cell_argument(parser)
    parser.add_argument("--seeds", type=int, default=5, help="members")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 16, 32], help="examples per member")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="intra-op threads, one row each")
    parser.add_argument("--steps", type=int, default=40, help="timed steps per row")
    parser.add_argument("--split", action="store_true", help="also the two-Python-thread split of each batch")
    parser.add_argument("--compile", action="store_true", help="also the torch.compile'd ensemble step")
    parser.add_argument("--only", nargs="*", default=None, help=f"arrangements among {', '.join(ARRANGEMENTS)}")
    parser.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")


def _check(args: argparse.Namespace) -> None:
    from experiments.bench.options import BenchArgumentError

    if args.seeds < 2:
        raise BenchArgumentError(f"--seeds={args.seeds} is not allowed; an ensemble has 2 members or more")
    # --batches, --threads and --steps >= 1: checked for every benchmark (experiments.bench.check_arguments)
    unknown = sorted(set(args.only or ()) - set(ARRANGEMENTS))
    if unknown:
        raise BenchArgumentError(f"--only {unknown[0]} is not allowed; choose among {', '.join(ARRANGEMENTS)}")
    check_cell(args.cell)


def _check_batches(batches: list[int], spec) -> None:
    """Every ``--batches`` size fits in the cell's batch (``task.batch_size`` examples per member)."""
    from experiments.bench.options import BenchArgumentError

    largest = int(spec.task.params["batch_size"])
    over = [b for b in batches if b > largest]
    if over:
        raise BenchArgumentError(
            f"--batches={over[0]} is not allowed; the cell's batches hold task.batch_size={largest} examples per member"
        )


def _members(spec, seeds: int, work: Path):
    """The members of the cell ``spec`` (its run spec), assembled as ``ensemble.seeds`` assembles them, its batched
    module and its batches."""
    from experiments.ensemble.fit import member_batches, train_loaders
    from experiments.ensemble.members import member_spec, without_wandb
    from experiments.ensemble.module import EnsembleModule
    from experiments.training import build

    numbers = list(range(int(spec.run.seed), int(spec.run.seed) + seeds))  # as ensemble.seeds numbers them
    parts = [
        build.assemble(without_wandb(member_spec(spec, s)), work / f"seed={s}", run_id=f"bench-{s}") for s in numbers
    ]
    batches = member_batches(parts, train_loaders(parts))
    ensemble = EnsembleModule([p.module for p in parts], numbers, None)
    return parts, ensemble, batches


def _rows_of(batch: dict[str, Any], rows: slice) -> dict[str, Any]:
    """The examples ``rows`` of every member's batch: inputs {key: (N, b, T)}, targets (N, b, ...)."""
    return {"inputs": {k: v[:, rows] for k, v in batch["inputs"].items()}, "targets": batch["targets"][:, rows]}


def _scored(targets) -> Any:
    """(N, B, ...) targets -> (N,) float: how many each member's loss averages over."""
    from experiments.tasks.batches import IGNORE

    return (targets != IGNORE).reshape(targets.shape[0], -1).sum(-1).float()


def _twin(parts, ensemble):
    """A second batched module over the same stacked weights and buffers, with a template of its own."""
    from experiments.ensemble.module import EnsembleModule

    twin = EnsembleModule([p.module for p in parts], ensemble.seeds, None)
    twin.stacked = ensemble.stacked
    for i in range(len(ensemble.buffer_names)):
        setattr(twin, f"member_buffer_{i}", getattr(ensemble, f"member_buffer_{i}"))
    return twin


def _steps(parts, ensemble, arrangement: str) -> tuple[Callable[[dict[str, Any]], None], list]:
    """One training step of ``arrangement`` on a batch, and the parameters its optimiser updates."""
    template = parts[0].module
    smoothing = ensemble.optim_spec.label_smoothing

    def batched(batch: dict[str, Any]) -> None:
        ensemble.member_losses(batch["inputs"], batch["targets"]).sum().backward()

    def one_model(batch: dict[str, Any]) -> None:
        # (N, B, T) -> (N*B, T): every member's examples through member 0's model
        x = {k: v.flatten(0, 1) for k, v in batch["inputs"].items()}
        template._loss(template.model(**x), batch["targets"].flatten(0, 1), smoothing).backward()

    def n_models(batch: dict[str, Any]) -> None:
        for i, p in enumerate(parts):
            x = {k: v[i] for k, v in batch["inputs"].items()}
            p.module._loss(p.module.model(**x), batch["targets"][i], smoothing).backward()

    # the second thread's own template: the batched forward puts each member's tensors into its template's modules
    twin = _twin(parts, ensemble) if arrangement == "split" else None

    def split(batch: dict[str, Any]) -> None:
        rows = batch["targets"].shape[1]
        if rows < 2:
            batched(batch)
            return
        # each half's mean loss weighted by its share of the scored targets: the sum is the whole batch's mean
        total = _scored(batch["targets"])  # (N,)
        halves = [slice(0, rows // 2), slice(rows // 2, rows)]

        def half(module, part: slice) -> None:
            sub = _rows_of(batch, part)
            losses = module.member_losses(sub["inputs"], sub["targets"])  # (N,)
            (losses * _scored(sub["targets"]) / total.clamp(min=1)).sum().backward()

        other = threading.Thread(target=half, args=(twin, halves[0]))
        other.start()
        half(ensemble, halves[1])
        other.join()

    if arrangement == "one-model-Nx":
        return one_model, [p for p in template.model.parameters() if p.requires_grad]
    if arrangement == "N-models":
        return n_models, [q for p in parts for q in p.module.model.parameters() if q.requires_grad]
    params = [p for p in ensemble.stacked if p.requires_grad]
    return (split if arrangement == "split" else batched), params


def _time(step, params: list, batches: list[dict[str, Any]], steps: int) -> float:
    """Milliseconds per step (forward, backward, fused AdamW) over ``steps`` batches after 3 untimed ones."""
    import torch

    optimiser = torch.optim.AdamW(params, lr=1e-4, fused=True)

    def once(batch: dict[str, Any]) -> None:
        step(batch)
        optimiser.step()
        optimiser.zero_grad(set_to_none=True)

    for batch in batches[:3]:
        once(batch)
    began = time.perf_counter()
    for batch in batches[3 : 3 + steps]:
        once(batch)
    return (time.perf_counter() - began) / steps * 1000


def _fit(points: list[tuple[int, float]]) -> tuple[float, float] | None:
    """Least squares ``ms = fixed + per_example x batch`` over (batch, ms); None with fewer than 2 batches."""
    if len({b for b, _ in points}) < 2:
        return None
    n = len(points)
    mean_b = sum(b for b, _ in points) / n
    mean_t = sum(t for _, t in points) / n
    slope = sum((b - mean_b) * (t - mean_t) for b, t in points) / sum((b - mean_b) ** 2 for b, _ in points)
    return mean_t - slope * mean_b, slope


@BENCHMARKS.register(
    "ensemble-step",
    help="the ensemble's batched step alone: vmap against one model on N batches, threads, and the floor it sets",
    arguments=arguments,
)
def ensemble_step(args: argparse.Namespace) -> int:
    import torch

    from experiments.app.api import compose
    from experiments.config.spec import build_spec
    from experiments.training.quiet import quiet_library_warnings

    _check(args)
    spec = build_spec(compose([*args.cell, "logger=csv"]))
    _check_batches(args.batches, spec)
    quiet_library_warnings()
    arrangements = [a for a in ARRANGEMENTS if args.only is None or a in args.only]
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        parts, ensemble, stream = _members(spec, args.seeds, Path(scratch))
        full = []
        for batch in stream:
            full.append(batch)
            if len(full) >= args.steps + 3:
                break
        if len(full) < args.steps + 3:
            raise SystemExit(f"the cell has {len(full)} training batches, fewer than --steps={args.steps} + 3")
        largest = min(b["targets"].shape[1] for b in full)  # below task.batch_size only for a tiny training set
        if max(args.batches) > largest:
            raise SystemExit(f"--batches={max(args.batches)}: the cell's batches hold {largest} examples per member")
        for size in args.batches:
            batches = [_rows_of(b, slice(0, size)) for b in full]
            for threads in args.threads:
                torch.set_num_threads(threads)
                for name in arrangements + (["split"] if args.split and threads == 1 else []):
                    step, params = _steps(parts, ensemble, name)
                    row = {"arrangement": name, "threads": threads, "batch": size}
                    row["ms"] = _time(step, params, batches, args.steps)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
        if args.compile:
            compiled = torch.compile(ensemble.member_losses)
            batches = [_rows_of(b, slice(0, largest)) for b in full]
            for threads in args.threads:
                torch.set_num_threads(threads)
                params = [p for p in ensemble.stacked if p.requires_grad]

                def step(batch: dict[str, Any]) -> None:
                    compiled(batch["inputs"], batch["targets"]).sum().backward()

                began = time.perf_counter()
                step(batches[0])
                first = time.perf_counter() - began
                ms = _time(step, params, batches, args.steps)
                row = {"arrangement": "compiled", "threads": threads, "batch": largest, "ms": ms, "first_s": first}
                rows.append(row)
                print(json.dumps(rows[-1]), flush=True)
    _table(args, rows)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2))
    return 0


def _table(args: argparse.Namespace, rows: list[dict[str, Any]]) -> None:
    print(f"\n{args.seeds} members of {' '.join(args.cell)}: ms per training step (forward, backward, fused AdamW)\n")
    print("| arrangement | threads | examples per member | ms per step | ms per member |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        first = f" (first call {r['first_s']:.1f} s)" if "first_s" in r else ""
        per_member = r["ms"] / args.seeds
        print(f"| {r['arrangement']}{first} | {r['threads']} | {r['batch']} | {r['ms']:.1f} | {per_member:.1f} |")
    batched = [r for r in rows if r["arrangement"] == "ensemble"]
    fit = _fit([(r["batch"], r["ms"]) for r in batched if r["threads"] == 1])
    if fit is None:
        return
    fixed, per_example = fit
    largest = max(r["batch"] for r in rows)
    print(f"\nensemble at one thread: {fixed:.1f} ms fixed + {per_example:.2f} ms per example per member")
    for threads in sorted({r["threads"] for r in rows}):
        floor = fixed + per_example * largest / threads
        measured = [r["ms"] for r in batched if r["threads"] == threads and r["batch"] == largest]
        seen = f", measured {measured[0]:.1f}" if measured else ""
        print(
            f"{threads} thread(s), {largest} examples: at least {floor:.1f} ms a step"
            f" (the per-example part alone scales){seen}"
        )
