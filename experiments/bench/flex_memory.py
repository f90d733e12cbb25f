"""``flex-memory``: peak memory of a score bias on the flex path against the dense path, across T.

    python -m experiments.bench flex-memory --lengths 2048 4096 8192 16384

The dense path is today's fused path for a score bias: SDPA given the encoding's (1, H, T, T)
bias, quadratic in T. The flex path adds the bias inside the kernel as a ``score_mod``, so only
the inputs and the output grow with T. On CPU the step is a forward pass (flex has no backward
there) of the compiled kernel (eager flex materialises the scores); on CUDA, forward + backward.

Peak memory, in MB above what was in use before the step:
- CPU: the process's peak resident memory (``VmHWM``, reset through ``/proc/self/clear_refs``),
  which also sees what a compiled kernel allocates outside PyTorch's tensors; Linux only;
- CUDA: ``torch.cuda.max_memory_allocated``.
Each path runs once untimed first, so compilation and first-call caches are not counted.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

from experiments.bench.measure import is_out_of_memory, loglog_slope, peak_memory_mb
from experiments.bench.options import BenchArgumentError, configured, shared_arguments
from experiments.bench.outcome import nothing_measured, report_nothing_measured
from experiments.bench.registry import BENCHMARKS
from experiments.bench.scaling import device_name
from variants import ATTENTION, POSITION
from variants.flex import SETTINGS

PATHS = {"dense": "sdpa", "flex": "flex"}  # label -> backend


def _status_kb(key: str) -> int:
    match = re.search(rf"^{key}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.M)
    return int(match.group(1)) if match else 0


def _large_allocations_from_the_os() -> None:
    """glibc serves allocations of 64 kB and more from fresh mappings and unmaps them on free, so the
    resident size follows what is alive (by default a freed block is reused without raising it)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    libc.mallopt(M_MMAP_THRESHOLD, 64 * 1024)
    libc.mallopt(M_TRIM_THRESHOLD, 64 * 1024)


def resident_peak_mb(step: Callable[[], Any]) -> float:
    """Peak resident memory of one run of ``step`` above the resident memory before it (Linux)."""
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # the peak (VmHWM) restarts from the current size
    before = _status_kb("VmRSS")
    step()
    return (_status_kb("VmHWM") - before) / 1024


def make_call(
    backend: str, T: int, args: argparse.Namespace, device: torch.device, dtype: torch.dtype
) -> Callable[[], Any]:
    """One call of the layer at length T: a forward under no_grad on CPU, forward + backward on CUDA."""
    torch.manual_seed(0)
    layer = ATTENTION.build(
        args.attention,
        d_model=args.d_model,
        num_heads=args.heads,
        backend=backend,
        **({"window": args.window} if args.window else {}),
    )
    pos = POSITION.build(args.position, d_model=args.d_model, num_heads=args.heads)
    layer.to(device, dtype)
    pos.to(device, dtype)
    x = torch.randn(args.batch, T, args.d_model, device=device, dtype=dtype)
    if device.type == "cpu":
        layer.eval()

        def forward() -> None:
            with torch.no_grad():
                layer(x, causal=args.causal, position=pos)

        return forward
    layer.train()
    x.requires_grad_(True)

    def forward_backward() -> None:
        layer.zero_grad(set_to_none=True)
        x.grad = None
        out, _ = layer(x, causal=args.causal, position=pos)
        out.sum().backward()

    return forward_backward


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--lengths", type=int, nargs="+", default=[2048, 4096, 8192, 16384], metavar="T")
    parser.add_argument("--attention", default="soft", help="a type with a flex backend (soft, multihead, local)")
    parser.add_argument("--position", default="alibi", help="an encoding with a score_mod (alibi, t5, relative, fire)")
    parser.add_argument("--window", type=int, default=None, help="local attention's window")
    parser.add_argument("--out", type=Path, default=None, help="JSON file with every point and the exponents")
    shared_arguments(parser)
    parser.set_defaults(heads=1, d_model=64)


@BENCHMARKS.register(
    "flex-memory",
    help="peak memory of a score bias on flex (linear in T) vs the dense path (quadratic)",
    arguments=arguments,
)
def flex_memory(args: argparse.Namespace) -> int:
    if "flex" not in ATTENTION.get(args.attention).backends:
        raise BenchArgumentError(
            f"--attention={args.attention!r} has no flex backend; choose one of "
            f"{[n for n in ATTENTION.names() if 'flex' in ATTENTION.get(n).backends]}"
        )
    POSITION.get(args.position)
    with configured(args) as shape:
        if shape.device.type == "cpu" and not sys.platform.startswith("linux"):
            raise BenchArgumentError("flex-memory on CPU reads /proc/self (Linux); use --device cuda")
        if shape.device.type == "cpu":
            _large_allocations_from_the_os()
        before, SETTINGS.compile_on_cpu = SETTINGS.compile_on_cpu, True
        try:
            return _run(args, shape.device, shape.dtype)
        finally:
            SETTINGS.compile_on_cpu = before


def _point(
    label: str, backend: str, T: int, args: argparse.Namespace, device: torch.device, dtype: torch.dtype
) -> dict[str, Any]:
    """One path at one length: its peak memory and time, or how it failed (a point that does not fit is
    recorded, not fatal)."""
    rec: dict[str, Any] = {
        "T": T,
        "path": label,
        "backend": backend,
        "status": "ok",
        "peak_mb": None,
        "ms": None,
    }
    try:
        call = make_call(backend, T, args, device, dtype)
        call()  # compiles (flex) and fills first-call caches
        peak = peak_memory_mb(call, device) if device.type == "cuda" else resident_peak_mb(call)
        start = time.perf_counter()
        call()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        rec.update(peak_mb=peak, ms=(time.perf_counter() - start) * 1000)
    except Exception as err:  # noqa: BLE001  (a point that does not fit is recorded, not fatal)
        rec.update(
            status="oom" if is_out_of_memory(err) else "error",
            error=f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
        )
    finally:
        call = None
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return rec


def _memory_exponents(records: list[dict[str, Any]]) -> dict[str, float | None]:
    """Each path's log-log slope of peak memory against T, printed with the dense / flex ratio at each T."""
    exponents = {}
    for label in PATHS:
        ok = [
            (r["T"], r["peak_mb"]) for r in records if r["path"] == label and r["status"] == "ok" and r["peak_mb"] > 0
        ]
        exponents[label] = loglog_slope(*map(list, zip(*ok))) if len(ok) >= 2 else None
    print()
    for label, slope in exponents.items():
        shown = "n/a" if slope is None else f"{slope:.2f}"
        print(f"peak memory ~ T^{shown} on the {label} path (1 is linear, 2 quadratic)")
    by_t: dict[int, dict[str, float]] = {}
    for r in records:
        if r["status"] == "ok":
            by_t.setdefault(r["T"], {})[r["path"]] = r["peak_mb"]
    for T, paths in sorted(by_t.items()):
        if "dense" in paths and paths.get("flex"):
            print(f"T={T}: dense / flex peak memory {paths['dense'] / paths['flex']:.1f}x")
    return exponents


def _run(args: argparse.Namespace, device: torch.device, dtype: torch.dtype) -> int:
    step_kind = "forward" if device.type == "cpu" else "forward + backward"
    print(
        f"device {device_name(device)}, torch {torch.__version__}, {args.attention} + {args.position}, "
        f"d_model={args.d_model}, heads={args.heads}, batch={args.batch}, causal={args.causal}, {step_kind}"
    )
    records: list[dict[str, Any]] = []
    print(f"{'T':>7} {'path':6} {'peak MB':>10} {'ms':>9}")
    for T in sorted(args.lengths):
        for label, backend in PATHS.items():
            rec = _point(label, backend, T, args, device, dtype)
            records.append(rec)
            shown = (
                f"{rec['peak_mb']:10.1f} {rec['ms']:9.1f}"
                if rec["status"] == "ok"
                else f"  {rec['status']}: {rec.get('error')}"
            )
            print(f"{T:>7} {label:6} {shown}")
    exponents = _memory_exponents(records)
    failed = nothing_measured(records)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "device": device_name(device),
            "torch": torch.__version__,
            "step": step_kind,
            "records": records,
            "exponents": exponents,
            "settings": {k: v for k, v in vars(args).items() if k != "out"},
            "complete": failed is None,
        }
        tmp = args.out.with_suffix(args.out.suffix + ".tmp")
        tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
        os.replace(tmp, args.out)
        print(f"wrote {args.out}")
    return 0 if failed is None else report_nothing_measured("flex-memory", failed)
