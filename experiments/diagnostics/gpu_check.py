"""``python -m experiments.gpu_check`` (``make gpu-check``): is this CUDA machine running attnlab right?

One command, sized for under eight minutes on one GPU, each check recorded as pass, fail, timeout or
skipped (with the reason) and none stopping the others. Each check runs in a process of its own
(``--timeout`` caps it, and the commands it starts; ``--budget`` caps the whole run, so a check
still running at the budget is stopped and the later ones are skipped): a hung kernel, a crash or a
sticky CUDA error (one that poisons every later CUDA call of its process) ends that check alone.

- ``kernels-fp32`` / ``kernels-bf16``: every attention type with a fused path, with every
  position encoding, equals its math path through SDPA's flash and memory-efficient
  kernels (each forced alone) and xformers where a call of it runs (otherwise every xformers
  case is skipped, with the first line of the reason); outputs and input gradients.
  fp32: |fused - math| <= 1e-4 + 1e-4 |math| (TF32 off). bf16: the fused kernel's largest
  error against the fp32 math path is at most 3x the math path's own error in bf16, plus
  1e-3: a kernel is as exact as the precision allows, not more (PyTorch's own flash tests
  judge kernels the same way). A kernel that does not take a case (flash with a mask or a
  score bias, flash in fp32) counts as not applicable, not as a failure; a case that raises
  fails alone, by name, and the others are still judged.
- ``flex-fp32`` / ``flex-bf16`` / ``flex-timing``: every pair on the FlexAttention backend
  against the math path under the same tolerances, and a timing row per encoding family
  (``experiments.flex_check``);
- ``train-bf16``: a short run under ``trainer=gpu`` (bf16 autocast); ``train-compile``: the
  same with ``model.compile=true``; ``train-cudagraphs``: with ``model.compile_mode=reduce-overhead``;
  each reports its steady step time and tokens/s beside the whole fit's;
- ``ddp``: ``trainer=ddp`` on every visible GPU (skipped on fewer than two);
- ``mfu``: ``python -m experiments.bench mfu --device cuda --bf16`` (goal: 40% on an H100);
- ``peers``: ``python -m experiments.bench peers`` on a GPU shape (B 32, T 512, d 512, 6+6 layers);
- ``quick-grid`` / ``quick-grid-k``: ``experiment=quick`` on the GPU (``--quick-steps`` per cell),
  one cell at a time, then ``--jobs-per-gpu`` cells at a time per GPU, side by side.

Writes the JSON summary (``--out``, refused in one line before any work when it cannot be
written) before the first check and after every check, each time whole (written and renamed), so
a run cut short keeps what finished, and prints a table. ``"complete": true`` only when every
check has its outcome and at least one passed; ``"ok": true`` when, besides, none failed or timed
out. The exit code is 0 only then: 1 when a check failed or timed out, or when nothing passed
(every check skipped, say without CUDA): success is never reported over nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from experiments.diagnostics.kernel_compare import _params, first_line, judge, precision
from experiments.record.result import environment, now_iso, write_json_atomic

CHECKS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {}
#: the checks that need a CUDA device: skipped without one, before any process starts
NEEDS_CUDA: set[str] = set()
#: a check's own cap in seconds, where it declares one tighter than ``--timeout``
CAPS: dict[str, float] = {}
# When the commands of this process must end (time.monotonic()); main sets it from --budget, a
# check's process from its cap.
DEADLINE = {"at": float("inf")}
ROOT = Path(__file__).resolve().parents[2]
#: how a check's process is started (the arguments follow); see ``run_isolated``
CHILD = [sys.executable, "-m", "experiments.gpu_check"]
#: seconds of a check's cap kept back from the commands it starts, for it to record what they left
GRACE = 10.0
#: seconds between asking a process group to stop (SIGTERM) and killing it
STOP_WAIT = 5.0
#: process groups of the commands this process started and has not reaped (stopped with it)
_GROUPS: set[int] = set()
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


class Skip(Exception):
    """A check that cannot run here; the message says why."""


class CheckFailed(Exception):
    """A check that ran and found something wrong; the message says what, in one line; ``data`` what it measured."""

    def __init__(self, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.data = data or {}


class CommandTimedOut(CheckFailed):
    """A command stopped at its timeout or at the deadline; what it wrote so far is still on disk."""


@dataclass
class Outcome:
    name: str
    status: str  # pass | fail | timeout | skipped
    detail: str = ""
    seconds: float = 0.0
    data: dict[str, Any] = field(default_factory=dict)


def check(name: str, *, cuda: bool = True, cap: float | None = None):
    """Register a check; ``cuda``: skipped without a CUDA device; ``cap``: its own limit in seconds, when
    tighter than ``--timeout``."""

    def register(fn: Callable[[argparse.Namespace], dict[str, Any]]):
        CHECKS[name] = fn
        if cuda:
            NEEDS_CUDA.add(name)
        if cap is not None:
            CAPS[name] = cap
        return fn

    return register


def run_check(name: str, fn: Callable[[], dict[str, Any]]) -> Outcome:
    """Run one check; whatever it raises becomes its outcome, never the end of the others."""
    began = time.perf_counter()
    try:
        data = fn() or {}
        outcome = Outcome(name, "pass", str(data.pop("detail", "")), data=data)
    except Skip as why:
        outcome = Outcome(name, "skipped", str(why))
    except CheckFailed as err:
        outcome = Outcome(name, "fail", str(err), data=err.data)
    except Exception as err:  # noqa: BLE001 - an unexpected error fails this check only
        lines = traceback.format_exception_only(err)
        outcome = Outcome(name, "fail", lines[-1].strip(), data={"traceback": traceback.format_exc()})
    outcome.seconds = time.perf_counter() - began
    return outcome


def need_cuda() -> None:
    if not torch.cuda.is_available():
        raise Skip("no CUDA device here")


# -- comparing a kernel with the math path ---------------------------------------------------------------
def kernel_choices(device: torch.device) -> list[tuple[str, str, Any]]:
    """(label, backend, SDPA kernel to force or None) for what this device offers; xformers only
    where a call of it runs (``variants.kernels.xformers_unavailable``)."""
    from variants.kernels import xformers_available

    if device.type != "cuda":
        return [("sdpa", "sdpa", None)]
    from torch.nn.attention import SDPBackend

    choices = [
        ("sdpa-flash", "sdpa", SDPBackend.FLASH_ATTENTION),
        ("sdpa-efficient", "sdpa", SDPBackend.EFFICIENT_ATTENTION),
    ]
    if xformers_available():
        choices.append(("xformers", "xformers", None))
    return choices


@contextlib.contextmanager
def forced(kernel: Any) -> Iterator[None]:
    if kernel is None:
        yield
        return
    from torch.nn.attention import sdpa_kernel

    with sdpa_kernel([kernel]):
        yield


CALLS = ("self", "causal", "cross")


def layer_run(layer, pos, call: str, device: torch.device, dtype: torch.dtype, seed: int = 1) -> list[torch.Tensor]:
    """One call pattern (keys padded in element 1, except the causal call): the output and the
    input's gradient, as fp32 for comparing."""
    gen = torch.Generator().manual_seed(seed)
    B, T, S, D = 2, 33, 21, layer.w_q.in_features
    x = torch.randn(B, T, D, generator=gen).to(device).requires_grad_(True)
    memory = torch.randn(B, S, D, generator=gen).to(device)
    pad = torch.zeros(B, S if call == "cross" else T, dtype=torch.bool, device=device)
    if call != "causal":  # the causal call stays unpadded: the case flash takes without a mask tensor
        pad[1, -5:] = True
    with precision(device, dtype):
        if call == "cross":
            out, _ = layer(x, memory, key_padding_mask=pad, position=pos)
        else:
            out, _ = layer(x, causal=call == "causal", key_padding_mask=pad if pad.any() else None, position=pos)
    weights = torch.randn(out.shape, generator=gen).to(device)
    (out.float() * weights).sum().backward()
    return [out.detach().float(), x.grad.float()]


def kernel_cases(
    device: torch.device, dtype: torch.dtype, attentions: list[str] | None = None, d_model: int = 64, heads: int = 4
) -> dict[str, Any]:
    """Every fused attention type x position encoding x call x kernel against the fp32 math path."""
    from variants import ATTENTION, POSITION
    from variants.kernels import xformers_unavailable

    fused_types = [n for n in ATTENTION.names() if {"sdpa", "xformers"} & set(ATTENTION.get(n).backends)]
    counts = {"pass": 0, "fail": 0, "not applicable": 0, "skipped": 0}
    failures: list[str] = []
    found: dict[str, Any] = {"counts": counts, "failures": failures, "worst": {}}
    # every xformers case is skipped, with the reason, where xformers cannot run
    xformers_skip = xformers_unavailable() if device.type == "cuda" else None
    previous_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference must be fp32
    try:
        for attention in attentions or fused_types:
            for a_params in ATTENTION.variations(attention):
                torch.manual_seed(0)
                math = ATTENTION.build(attention, d_model=d_model, num_heads=heads, backend="math", **a_params)
                math = math.to(device).eval()
                kernels = []
                for label, backend, kernel in kernel_choices(device):
                    if backend in ATTENTION.get(attention).backends:
                        fast = ATTENTION.build(attention, d_model=d_model, num_heads=heads, backend=backend, **a_params)
                        fast.load_state_dict(math.state_dict())
                        kernels.append((label, fast.to(device).eval(), kernel))
                skipped_kernels = int(xformers_skip is not None and "xformers" in ATTENTION.get(attention).backends)
                for position in POSITION.names():
                    for p_params in POSITION.variations(position):
                        torch.manual_seed(0)
                        pos = POSITION.build(position, d_model=d_model, num_heads=heads, **p_params).to(device)
                        for call in CALLS:
                            counts["skipped"] += skipped_kernels
                            name = f"{attention}{_params(a_params)}+{position}{_params(p_params)}/{call}"
                            try:
                                reference = layer_run(math, pos, call, device, torch.float32)
                                math_low = None if dtype == torch.float32 else layer_run(math, pos, call, device, dtype)
                            except Exception as err:  # noqa: BLE001 - the case fails alone, for every kernel
                                counts["fail"] += len(kernels)
                                failures += [
                                    f"{name}/{label}: the math path raised {first_line(err)}" for label, _, _ in kernels
                                ]
                                continue
                            for label, fast, kernel in kernels:
                                case = f"{name}/{label}"
                                try:
                                    with forced(kernel):
                                        got = layer_run(fast, pos, call, device, dtype)
                                except Exception as err:  # noqa: BLE001 - one case that raises fails alone
                                    if "No available kernel" in str(err):  # e.g. flash with a mask, or in fp32
                                        counts["not applicable"] += 1
                                    else:
                                        counts["fail"] += 1
                                        failures.append(f"{case}: raised {first_line(err)}")
                                    continue
                                judge(found, case, got, reference, dtype, math_low)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous_tf32
    return {**found, "skipped_because": xformers_skip}


def kernels_outcome(device: torch.device, dtype: torch.dtype) -> dict[str, Any]:
    found = kernel_cases(device, dtype)
    counts = found["counts"]
    if not counts["pass"] and not counts["fail"]:
        raise CheckFailed("no fused kernel took any case")
    detail = (
        f"{counts['pass']} cases equal the math path, {counts['not applicable']} not applicable; "
        f"largest error {found['worst'].get('error', 0):.2e} ({found['worst'].get('case')})"
    )
    if counts["skipped"]:
        detail += f"; {counts['skipped']} xformers cases skipped: {found['skipped_because']}"
    if found["failures"]:
        raise CheckFailed(
            f"{counts['fail']} of {counts['fail'] + counts['pass']} cases fail "
            f"({'; '.join(found['failures'][:3])}); {counts['pass']} equal the math path",
            found,
        )
    return {"detail": detail, **found}


@check("kernels-fp32")
def _kernels_fp32(args: argparse.Namespace) -> dict[str, Any]:
    need_cuda()
    return kernels_outcome(torch.device("cuda"), torch.float32)


@check("kernels-bf16")
def _kernels_bf16(args: argparse.Namespace) -> dict[str, Any]:
    need_cuda()
    if not torch.cuda.is_bf16_supported():
        raise Skip(f"{torch.cuda.get_device_name()} has no bf16")
    return kernels_outcome(torch.device("cuda"), torch.bfloat16)


def flex_outcome(device: torch.device, dtype: torch.dtype) -> dict[str, Any]:
    from experiments.diagnostics.flex_check import flex_cases

    found = flex_cases(device, dtype)
    counts = found["counts"]
    if found["failures"]:
        raise CheckFailed(f"{counts['fail']} flex cases differ from the math path, e.g. {found['failures'][0]}")
    return {
        "detail": f"{counts['pass']} flex cases equal the math path; largest error "
        f"{found['worst'].get('error', 0):.2e} ({found['worst'].get('case')})",
        **found,
    }


@check("flex-fp32")
def _flex_fp32(args: argparse.Namespace) -> dict[str, Any]:
    need_cuda()
    return flex_outcome(torch.device("cuda"), torch.float32)


@check("flex-bf16")
def _flex_bf16(args: argparse.Namespace) -> dict[str, Any]:
    need_cuda()
    return flex_outcome(torch.device("cuda"), torch.bfloat16)


@check("flex-timing")
def _flex_timing(args: argparse.Namespace) -> dict[str, Any]:
    need_cuda()
    from experiments.diagnostics.flex_check import flex_timings

    rows = flex_timings(torch.device("cuda"), torch.bfloat16)
    shown = ", ".join(
        f"{r['family']} {r['flex_ms']:.2f} ms ({r['speedup']:.2f}x {r['baseline']})"
        if r["speedup"]
        else f"{r['family']} {r['status']}"
        for r in rows
    )
    return {"detail": f"bf16, T={rows[0]['T']}: {shown}", "rows": rows}


# -- training runs, the benchmark and the grid, each a command as a user would type it --------------------
def stop_group(proc: subprocess.Popen) -> None:
    """Stop ``proc`` and everything it started (its own process group): SIGTERM, then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=STOP_WAIT)
            break
        except subprocess.TimeoutExpired:
            continue
    _GROUPS.discard(proc.pid)


def run_command(command: list[str], out_dir: Path, timeout: float) -> subprocess.CompletedProcess:
    """Run ``command`` from the repository root, for at most ``timeout`` seconds and never past the deadline;
    at either, it and every process it started (a sweep's workers) are stopped."""
    out_dir.mkdir(parents=True, exist_ok=True)
    timeout = min(timeout, max(DEADLINE["at"] - time.monotonic(), 1.0))
    proc = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    _GROUPS.add(proc.pid)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_group(proc)
        stdout, stderr = proc.communicate()
        (out_dir / "output.log").write_text(stdout + stderr)
        raise CommandTimedOut(f"did not finish in {timeout:.0f} s: {' '.join(command)}") from None
    finally:
        if proc.poll() is None:  # interrupted while waiting: stop it with us
            stop_group(proc)
        _GROUPS.discard(proc.pid)
    (out_dir / "output.log").write_text(stdout + stderr)
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)


def training_run(name: str, overrides: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """One ``python -m experiments.train`` run; passes when its result.json says completed."""
    run_dir = Path(args.work) / name
    command = [sys.executable, "-m", "experiments.train", *SHORT_RUN, *overrides, f"hydra.run.dir={run_dir}"]
    proc = run_command(command, run_dir, args.timeout)
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
    proc = run_command(
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
    proc = run_command(
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
        proc = run_command(command, sweep_dir, args.timeout)
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


# -- the summary ----------------------------------------------------------------------------------------------
STATUSES = ("pass", "fail", "timeout", "skipped")


def verdict(outcomes: list[Outcome], planned: int) -> tuple[bool, bool, str]:
    """(complete, ok, why not ok): complete when every planned check has an outcome and one passed."""
    counts = {s: sum(o.status == s for o in outcomes) for s in STATUSES}
    if len(outcomes) < planned:
        return False, False, f"{planned - len(outcomes)} of {planned} checks have not run"
    if not counts["pass"]:
        reasons = sorted({o.detail for o in outcomes if o.status == "skipped"})
        return False, False, f"no check passed ({counts}); skipped because: {'; '.join(reasons)[:300]}"
    if counts["fail"] or counts["timeout"]:
        return True, False, f"{counts['fail']} failed, {counts['timeout']} timed out"
    return True, True, ""


def summary(outcomes: list[Outcome], planned: int, device: str) -> dict[str, Any]:
    complete, ok, why = verdict(outcomes, planned)
    return {
        "schema": 1,
        "complete": complete,
        "ok": ok,
        "why_not_ok": why or None,
        "finished_at": now_iso(),
        "device": device,
        "gpus": torch.cuda.device_count(),
        "counts": {s: sum(o.status == s for o in outcomes) for s in STATUSES},
        "checks": [asdict(o) for o in outcomes],
        "env": environment(device),
    }


def table(outcomes: list[Outcome]) -> str:
    width = max([len(o.name) for o in outcomes] + [5])
    lines = [f"{'check':<{width}}  {'status':<7}  {'seconds':>7}  detail"]
    lines += [f"{o.name:<{width}}  {o.status:<7}  {o.seconds:7.1f}  {o.detail}" for o in outcomes]
    return "\n".join(lines)


def out_problem(path: Path) -> str | None:
    """Why the JSON summary cannot be written at ``path``, or None."""
    if path.is_dir():
        return "is a folder; give a file, e.g. --out gpu_check.json"
    folder = path.parent
    if not folder.exists():
        return f"its folder {folder} does not exist"
    if not folder.is_dir():
        return f"{folder} is not a folder"
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        return f"cannot be written here (no write permission in {folder})"
    return None


# -- one process per check --------------------------------------------------------------------------------------
def ended(code: int) -> str:
    """'exit 1' or 'signal SIGSEGV' for a process's return code."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signal.Signals(-code).name}"
    return f"exit {code}"


def last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no output"
    return lines[-1][:300] if lines else "no output"


def run_isolated(name: str, args: argparse.Namespace, cap: float) -> Outcome:
    """Check ``name`` in a process of its own, stopped (with every process it started) after ``cap`` seconds.

    The process records its outcome in a file; a process that dies before recording one (a crash, a
    sticky CUDA error at exit) fails this check with how it ended and its last line of output.
    """
    folder = Path(args.work) / name
    folder.mkdir(parents=True, exist_ok=True)
    recorded, log_path = folder / "outcome.json", folder / "check.log"
    recorded.unlink(missing_ok=True)
    command = [
        *CHILD,
        "--child",
        name,
        "--cap",
        f"{cap:.3f}",
        "--out",
        str(args.out),
        "--work",
        str(args.work),
        "--quick-steps",
        str(args.quick_steps),
        "--jobs-per-gpu",
        str(args.jobs_per_gpu),
        "--timeout",
        str(args.timeout),
    ]
    began = time.perf_counter()
    with log_path.open("w") as log_file:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = proc.wait(timeout=cap)
        except subprocess.TimeoutExpired:
            stop_group(proc)
            return Outcome(
                name,
                "timeout",
                f"stopped after its cap of {cap:.0f} s (its own, --timeout, or what --budget left); "
                f"output in {log_path}",
                time.perf_counter() - began,
            )
        finally:
            if proc.poll() is None:  # this run was interrupted: its check goes with it
                stop_group(proc)
    seconds = time.perf_counter() - began
    from experiments.record.result import read_result

    found = read_result(recorded)
    if found is None:
        return Outcome(
            name, "fail", f"its process ended ({ended(code)}) without an outcome: {last_line(log_path)}", seconds
        )
    return Outcome(name, found["status"], found["detail"], seconds, found.get("data") or {})


def child_main(args: argparse.Namespace) -> int:
    """The process of one check: run it, record its outcome for ``run_isolated``, stop its commands on SIGTERM."""

    def stop(signum, frame):
        for group in list(_GROUPS):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    DEADLINE["at"] = time.monotonic() + max(args.cap - GRACE, 1.0)  # its commands end before the cap
    outcome = run_check(args.child, lambda: CHECKS[args.child](args))
    write_json_atomic(Path(args.work) / args.child / "outcome.json", asdict(outcome))
    return 0


def device_name() -> str:
    """The GPU's name from NVML when the driver has it, without a CUDA context in this process."""
    if not torch.cuda.is_available():
        return "cpu (no CUDA)"
    try:
        import pynvml

        pynvml.nvmlInit()
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: BLE001 - NVML missing: the device is named in each check's own process
        return "cuda"


def main(argv: list[str] | None = None) -> int:
    from attnlab.prog import prog_name

    parser = argparse.ArgumentParser(prog=prog_name("experiments.gpu_check"), description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("gpu_check.json"), help="the JSON summary")
    parser.add_argument("--work", type=Path, default=Path("gpu_check"), help="runs' folders")
    parser.add_argument("--only", nargs="+", choices=sorted(CHECKS), help="run these checks only")
    parser.add_argument("--quick-steps", type=int, default=200, help="steps per cell of the quick grid")
    parser.add_argument("--jobs-per-gpu", type=int, default=4, help="cells at a time per GPU in quick-grid-k")
    parser.add_argument(
        "--timeout", type=float, default=240, help="seconds each check, and each command it starts, may take"
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=480,
        help="seconds for the whole check: a check still running then is stopped and later checks are skipped",
    )
    # the process of one check (run_isolated); not for the command line
    parser.add_argument("--child", choices=sorted(CHECKS), help=argparse.SUPPRESS)
    parser.add_argument("--cap", type=float, default=float("inf"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if min(args.quick_steps, args.jobs_per_gpu) < 1 or min(args.timeout, args.budget) <= 0:
        parser.error(
            f"--quick-steps={args.quick_steps}, --jobs-per-gpu={args.jobs_per_gpu}, "
            f"--timeout={args.timeout} and --budget={args.budget} must be positive"
        )
    if args.child:
        return child_main(args)
    problem = out_problem(args.out)
    if problem:
        print(f"gpu_check: --out={args.out} {problem}", file=sys.stderr)
        return 2
    # each check's process starts in the repository root: its paths must not depend on where this one runs
    args.out, args.work = args.out.resolve(), args.work.resolve()
    # SIGTERM (a scheduler's time limit) ends the run like Ctrl-C: the running check is stopped with it
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        return run_all(args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_all(args: argparse.Namespace) -> int:
    """Every check in turn, each in its own process, the summary written whole before and after each."""
    DEADLINE["at"] = time.monotonic() + args.budget
    names = list(args.only or CHECKS)
    device, cuda = device_name(), torch.cuda.is_available()
    outcomes: list[Outcome] = []
    write_json_atomic(args.out, summary(outcomes, len(names), device))  # valid from the start
    for name in names:
        left = DEADLINE["at"] - time.monotonic()
        if left <= 0:
            outcome = Outcome(name, "skipped", f"the {args.budget:.0f} s budget of the whole check is spent")
        elif name in NEEDS_CUDA and not cuda:
            outcome = Outcome(name, "skipped", "no CUDA device here")
        else:
            outcome = run_isolated(name, args, min(CAPS.get(name, args.timeout), args.timeout, left))
        print(f"[gpu-check] {name}: {outcome.status} {outcome.detail}", flush=True)
        outcomes.append(outcome)
        write_json_atomic(args.out, summary(outcomes, len(names), device))  # a check cut short later loses nothing
    if device == "cuda" and any(o.status != "skipped" for o in outcomes):
        # no NVML: name the GPU now that no check is left to share this process's CUDA context with
        with contextlib.suppress(Exception):
            device = torch.cuda.get_device_name()
            write_json_atomic(args.out, summary(outcomes, len(names), device))
    print(table(outcomes))
    complete, ok, why = verdict(outcomes, len(names))
    print(f"wrote {args.out}" + ("" if ok else f"; not ok: {why}"))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
