"""The checks that run a command as a user would type it: training runs, the MFU and peers benchmarks
and the quick grid, one cell at a time and K at a time."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

from experiments.diagnostics.gpu_check import processes
from experiments.diagnostics.gpu_check.registry import CheckFailed, CommandTimedOut, Skip, check, need_cuda

# The run every training check starts from: a small model, a few hundred steps.
# peers on a GPU: B 32, T 512, d 512, 6+6 layers (bf16); uncompiled, to stay within the budget
PEERS_GPU_SHAPE = [
    "--batch",
    "32",
    "--length",
    "512",
    "--d-model",
    "512",
    "--heads",
    "8",
    "--layers",
    "6",
    "--ffn",
    "2048",
    "--no-compile",
    "--repeats",
    "5",
    "--batches",
    "4",
]
SHORT_RUN = [
    "task=reverse",
    "model.d_model=64",
    "model.ffn_dim=128",
    "trainer.max_steps=200",
    "trainer.val_check_interval=100",
    "progress_bar=false",
    "logger=none",
    "eval.attention_maps=false",
    "task.train_size=2000",
    "task.val_size=128",
    "task.test_size=64",
]


def training_run(name: str, overrides: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """One ``python -m experiments.train`` run; passes when its result.json says completed."""
    run_dir = Path(args.work) / name
    command = [sys.executable, "-m", "experiments.train", *SHORT_RUN, *overrides, f"hydra.run.dir={run_dir}"]
    proc = processes.run_command(command, run_dir, args.timeout)
    result_path = run_dir / "result.json"
    if not result_path.exists():
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise CheckFailed(f"exit {proc.returncode} without a result: {tail}")
    result = json.loads(result_path.read_text())
    if result["status"] != "completed":
        raise CheckFailed(f"{result['status']}: {result.get('error')}")
    metrics, cost = result["metrics"], result["cost"]
    return {
        "detail": f"{cost.get('steps')} steps, val/loss {metrics.get('val/loss', float('nan')):.3f}, "
        f"step {cost.get('step_ms') or float('nan'):.1f} ms, "
        f"{cost.get('tokens_per_second') or 0:,.0f} tokens/s steady "
        f"({cost.get('fit_tokens_per_second') or 0:,.0f} over the whole fit, "
        f"{cost.get('compile_seconds') or 0:.0f} s compiling) on {result['env'].get('device')}",
        "metrics": metrics,
        "cost": cost,
        "precision": result["config"].get("trainer.precision"),
    }


@check("train-bf16")
def _train_bf16(args: argparse.Namespace) -> dict[str, Any]:
    need_cuda()
    return training_run("train-bf16", ["trainer=gpu", "trainer.precision=bf16-mixed"], args)


@check("train-compile")
def _train_compile(args: argparse.Namespace) -> dict[str, Any]:
    need_cuda()
    return training_run("train-compile", ["trainer=gpu", "model.compile=true"], args)


@check("train-cudagraphs")
def _train_cudagraphs(args: argparse.Namespace) -> dict[str, Any]:
    need_cuda()
    return training_run(
        "train-cudagraphs", ["trainer=gpu", "model.compile=true", "model.compile_mode=reduce-overhead"], args
    )


@check("ddp")
def _ddp(args: argparse.Namespace) -> dict[str, Any]:
    need_cuda()
    gpus = torch.cuda.device_count()
    if gpus < 2:
        raise Skip(f"DDP needs at least 2 GPUs; {gpus} visible")
    data = training_run("ddp", ["trainer=ddp", "trainer.accelerator=gpu", f"trainer.devices={gpus}"], args)
    if data["cost"].get("world_size") != gpus:
        raise CheckFailed(f"world size {data['cost'].get('world_size')}, expected {gpus} (every visible GPU)")
    return {**data, "detail": f"{gpus} GPU(s): {data['detail']}"}


@check("mfu")
def _mfu(args: argparse.Namespace) -> dict[str, Any]:
    need_cuda()
    out = Path(args.work) / "mfu" / "mfu.json"
    proc = processes.run_command(
        [sys.executable, "-m", "experiments.bench", "mfu", "--device", "cuda", "--bf16", "--out", str(out)],
        out.parent,
        args.timeout,
    )
    if proc.returncode != 0 or not out.exists():
        raise CheckFailed(f"exit {proc.returncode}: {(proc.stderr.strip().splitlines() or [''])[-1]}")
    found = json.loads(out.read_text())
    mfu = found.get("mfu")
    share = "unknown peak" if mfu is None else f"MFU {100 * mfu:.1f}% (goal 40% on an H100)"
    return {
        "detail": f"{found['tokens_per_second']:,.0f} tokens/s, {found['achieved_tflops']:.0f} TFLOP/s, {share}",
        "mfu": mfu,
        "achieved_tflops": found["achieved_tflops"],
        "device": found["device"],
    }


@check("peers")
def _peers(args: argparse.Namespace) -> dict[str, Any]:
    """The suite's steps against torch.nn.Transformer and x-transformers on a GPU-sized shape
    (the CPU default, width 64 and batch 64 x 16 tokens, would time kernel launches only)."""
    need_cuda()
    out = Path(args.work) / "peers" / "peers.json"
    proc = processes.run_command(
        [
            sys.executable,
            "-m",
            "experiments.bench",
            "peers",
            "--device",
            "cuda",
            "--bf16",
            *PEERS_GPU_SHAPE,
            "--out",
            str(out),
        ],
        out.parent,
        args.timeout,
    )
    if proc.returncode != 0 or not out.exists():
        raise CheckFailed(f"exit {proc.returncode}: {(proc.stderr.strip().splitlines() or [''])[-1]}")
    found = json.loads(out.read_text())
    ratios = {
        f"{name}: {key}": value
        for name, comparison in found["comparisons"].items()
        if isinstance(comparison, dict)  # a comparison skipped here (x-transformers missing) has no ratios
        for key, value in (comparison.get("ratios") or {}).items()
        if isinstance(value, (int, float))
    }
    return {
        "detail": "; ".join(f"{k} {v:.2f}x" for k, v in ratios.items()),
        "ratios": ratios,
        "targets": found.get("targets"),
    }


def quick_grid(args: argparse.Namespace, name: str, parallel: list[str]) -> dict[str, Any]:
    """``experiment=quick`` on the GPU into its own folder; wall seconds and the cells' results."""
    sweep_dir = Path(args.work) / name
    command = [
        sys.executable,
        "-m",
        "experiments.train",
        "-m",
        "experiment=quick",
        "trainer=gpu",
        f"trainer.max_steps={args.quick_steps}",
        "logger=none",
        "progress_bar=false",
        "resume=never",  # train every cell afresh; an earlier check's cells move to previous/
        *parallel,
        f"hydra.sweep.dir={sweep_dir}",
    ]
    began = time.perf_counter()
    try:
        proc = processes.run_command(command, sweep_dir, args.timeout)
    except CommandTimedOut as cut:
        # the cells that finished before the cut keep their results
        done = [r for r in grid_results(sweep_dir) if r["status"] == "completed"]
        raise CheckFailed(
            f"{cut}; {len(done)} cells had completed",
            {"cut": True, "wall_seconds": time.perf_counter() - began, "cells": grid_cells(done)},
        ) from None
    seconds = time.perf_counter() - began
    found = grid_results(sweep_dir)
    done = [r for r in found if r["status"] == "completed"]
    if proc.returncode != 0 or not found or len(done) != len(found):
        bad = [f"{r['attention']}+{r['position']}: {r['status']}" for r in found if r["status"] != "completed"]
        raise CheckFailed(f"exit {proc.returncode}; {len(done)}/{len(found)} cells completed {bad[:3]}")
    step_ms = sorted(r["cost"].get("step_ms") or float("nan") for r in done)
    return {
        "detail": f"{len(done)} cells x {args.quick_steps} steps in {seconds:.0f} s wall "
        f"(median step {step_ms[len(step_ms) // 2]:.1f} ms)",
        "wall_seconds": seconds,
        "steps": args.quick_steps,
        "cells": grid_cells(done),
    }


def grid_results(sweep_dir: Path) -> list[dict[str, Any]]:
    """The result.json of every cell under ``sweep_dir`` that wrote a whole one."""
    from attnlab.run_folders import moved_aside
    from experiments.record.result import read_result

    paths = [p for p in sorted(sweep_dir.rglob("result.json")) if not moved_aside(p, sweep_dir)]
    return [r for r in (read_result(p) for p in paths) if r]


def grid_cells(done: list[dict[str, Any]]) -> dict[str, Any]:
    return {f"{r['attention']}+{r['position']}": r["metrics"].get("test/token_acc") for r in done}


def earlier(args: argparse.Namespace, name: str) -> dict[str, Any] | None:
    """The outcome of check ``name`` earlier in this run, from the summary (``--out``) written after it."""
    from experiments.record.result import read_result

    found = read_result(Path(args.out)) if getattr(args, "out", None) else None
    return next((c for c in (found or {}).get("checks", []) if c["name"] == name), None)


@check("quick-grid")
def _quick_grid(args: argparse.Namespace) -> dict[str, Any]:
    """One cell at a time."""
    need_cuda()
    data = quick_grid(args, "quick-1", [])
    return {**data, "detail": f"1 cell at a time: {data['detail']}"}


@check("quick-grid-k")
def _quick_grid_k(args: argparse.Namespace) -> dict[str, Any]:
    """K cells at a time on every GPU (``jobs_per_gpu``, experiments/sweep/gpu_share.py)."""
    need_cuda()
    k, gpus = args.jobs_per_gpu, torch.cuda.device_count()
    data = quick_grid(
        args, f"quick-{k}", ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={k * gpus}", f"jobs_per_gpu={k}"]
    )
    one = earlier(args, "quick-grid")
    one_seconds = one["data"].get("wall_seconds") if one and one["status"] == "pass" else None
    speedup = one_seconds / data["wall_seconds"] if one_seconds else float("nan")
    return {
        **data,
        "jobs_per_gpu": k,
        "speedup": speedup,
        "detail": f"{k} cells at a time per GPU: {data['detail']}, {speedup:.2f}x the 1-at-a-time wall time",
    }
