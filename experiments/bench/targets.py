"""``targets``: the cost targets of the variants, measured side by side in one run.

    python -m experiments.bench targets --threads 1 --clock cpu

1. Global attention on the fused path costs little more than the kernel alone
   (forward + backward at T = ``--length``, no position encoding; the four steps
   are timed in interleaved rounds, ``--repeats`` of them, so load on a shared
   machine moves them alike):
   - the ``sdpa`` layer against ``scaled_dot_product_attention`` called alone on
     (B, H, T, D) tensors; the layer also runs its four projections, so this is
     the layer's whole cost against the kernel's;
   - the ``sdpa`` layer against the same four ``nn.Linear`` + the kernel written
     inline: like against like, so only the layer's own overhead shows;
   - the ``math`` backend against the ``sdpa`` one;
   - the bound on that ratio: the math path's six matrix products (QK^T and PV
     forward; four more backward) are timed alone, and a square ``--gemm-size``
     matrix product gives this device's best matmul rate. No exact kernel runs
     those products faster than that rate, so math time / (their FLOPs at that
     rate) is the largest speed-up any fused kernel can reach on this device. A
     causal flash kernel skips about half of the products, which doubles the bound.
2. Monotonic local attention (``--window``) against full soft attention at the
   longest ``--long-lengths``: peak memory of local over that of soft on the math
   path and on the sdpa path, and the exponent of local's time over ``--long-lengths``.

With ``--device cuda`` the command measures the GPU targets instead, on a GPU-sized shape
(``experiments.bench.gpu_targets``: windows and score biases on FlexAttention against flash); on
CPU it lists them as skipped, with the reason.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from experiments.bench.gpu_targets import gpu_arguments, gpu_problem, gpu_targets, skipped_reason
from experiments.bench.measure import Measurement, loglog_slope, side_by_side
from experiments.bench.options import BenchArgumentError, configured, shared_arguments
from experiments.bench.outcome import nothing_measured, report_nothing_measured
from experiments.bench.point import Shape, heads_for, make_step, measure_point
from experiments.bench.registry import BENCHMARKS
from experiments.bench.scaling import device_name
from experiments.record.result import write_json_atomic

GLOBAL = ("soft", "multihead")


@dataclass
class Target:
    name: str
    value: float | None
    goal: str  # "<= 1.2", ">= 3"
    detail: str

    @property
    def met(self) -> bool | None:
        if self.value is None:
            return None
        op, bound = self.goal.split()
        return self.value <= float(bound) if op == "<=" else self.value >= float(bound)


def kernel_alone(T: int, heads: int, shape: Shape) -> Callable[[], None]:
    """``scaled_dot_product_attention`` on its own (B, H, T, D) tensors, forward + backward."""
    D = shape.d_model // heads
    q, k, v = (
        torch.randn(shape.batch, heads, T, D, device=shape.device, dtype=shape.dtype, requires_grad=True)
        for _ in range(3)
    )
    grad = torch.randn(shape.batch, heads, T, D, device=shape.device, dtype=shape.dtype)

    def step() -> None:
        for t in (q, k, v):
            t.grad = None
        F.scaled_dot_product_attention(q, k, v, is_causal=shape.causal).backward(grad)

    return step


def projections_and_kernel(T: int, heads: int, shape: Shape) -> Callable[[], None]:
    """The least a layer can do: four projections around the kernel, inline, no masks or hooks."""
    d, D, B = shape.d_model, shape.d_model // heads, shape.batch
    proj = nn.ModuleList(nn.Linear(d, d) for _ in range(4)).to(shape.device, shape.dtype)
    x = torch.randn(B, T, d, device=shape.device, dtype=shape.dtype, requires_grad=True)
    grad = torch.randn_like(x)

    def step() -> None:
        proj.zero_grad(set_to_none=True)
        x.grad = None
        q, k, v = (p(x).view(B, T, heads, D).transpose(1, 2) for p in proj[:3])  # (B, H, T, D)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=shape.causal)
        proj[3](out.transpose(1, 2).reshape(B, T, d)).backward(grad)

    return step


def matrix_products(T: int, heads: int, shape: Shape) -> Callable[[], None]:
    """The six (B*H, T, T)-sized matrix products of the math path's forward + backward, nothing else."""
    D, BH = shape.d_model // heads, shape.batch * heads
    q, k, v, grad_out = (torch.randn(BH, T, D, device=shape.device, dtype=shape.dtype) for _ in range(4))

    def step() -> None:
        scores = q @ k.transpose(1, 2)  # (BH, T, T)
        scores @ v  # output
        grad_scores = grad_out @ v.transpose(1, 2)  # (BH, T, T)
        scores.transpose(1, 2) @ grad_out  # dV
        grad_scores @ k  # dQ
        grad_scores.transpose(1, 2) @ q  # dK

    return step


def product_flops(T: int, heads: int, shape: Shape) -> float:
    D = shape.d_model // heads
    return 6 * 2 * shape.batch * heads * T * T * D


def gemm_rate(size: int, shape: Shape, rounds: int, clock: str) -> float:
    """FLOP/s of one square ``size`` x ``size`` matrix product, the best rate the device's BLAS reaches."""
    a, b = (torch.randn(size, size, device=shape.device, dtype=shape.dtype) for _ in range(2))
    m = side_by_side({"gemm": lambda: a @ b}, shape.device, warmup=1, rounds=rounds, clock=clock)["gemm"]
    return 2 * size**3 / (m.ms / 1000)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--length", type=int, default=1024, help="T for the fused-kernel targets")
    parser.add_argument(
        "--long-lengths",
        type=int,
        nargs="+",
        default=[2048, 4096, 8192, 16384],
        metavar="T",
        help="T for local attention's exponent; the longest also compares peak memory",
    )
    parser.add_argument(
        "--long-batch",
        type=int,
        default=1,
        help="batch for the long-sequence targets (full soft attention at T=16384 holds 3 GB per row)",
    )
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument(
        "--gemm-size", type=int, default=2048, help="square matrix product that measures the device's best matmul rate"
    )
    parser.add_argument("--out", type=Path, default=None, help="JSON file with the measurements and the targets")
    shared_arguments(parser)
    gpu_arguments(parser)
    parser.set_defaults(batch=4, repeats=15)


@BENCHMARKS.register(
    "targets", help="the cost targets (fused overhead, sdpa vs math, local memory and scaling)", arguments=arguments
)
def targets(args: argparse.Namespace) -> int:
    for flag in ("length", "long_batch", "window", "gemm_size"):
        if getattr(args, flag) < 1:
            raise BenchArgumentError(
                f"--{flag.replace('_', '-')}={getattr(args, flag)} is not allowed; it must be >= 1"
            )
    problem = gpu_problem(args)
    if problem:
        raise BenchArgumentError(problem)
    with configured(args) as shape:
        return _targets(args, shape)


def _global_targets(
    args: argparse.Namespace, shape: Shape, rate: float, note: Callable[[str, int, int, Measurement], None]
) -> tuple[list[Target], list[dict[str, Any]]]:
    """Each global type's sdpa layer against the kernel alone and the math path at ``--length``, with the
    matrix products' floor under the math path (``bounds``)."""
    T = args.length
    found: list[Target] = []
    bounds: list[dict[str, Any]] = []
    for attention in GLOBAL:
        heads = heads_for(attention, shape.heads)
        fused_step, fused_backend = make_step(attention, "none", "sdpa", T, shape, {}, {})
        math_step, math_backend = make_step(attention, "none", "math", T, shape, {}, {})
        steps = {
            f"{attention}/{fused_backend}": fused_step,
            f"{attention}/{math_backend}": math_step,
            f"sdpa alone (H={heads}, D={shape.d_model // heads})": kernel_alone(T, heads, shape),
            "4 projections + sdpa inline": projections_and_kernel(T, heads, shape),
            "math path's 6 matrix products alone": matrix_products(T, heads, shape),
        }
        got = side_by_side(steps, shape.device, warmup=args.warmup, rounds=args.repeats, clock=args.clock)
        for label, m in got.items():
            note(label, T, shape.batch, m)
        fused, reference, kernel, inline, products = got.values()
        floor_ms = product_flops(T, heads, shape) / rate * 1000 / (2 if shape.causal else 1)
        bounds.append(
            {
                "attention": attention,
                "math_ms": reference.ms,
                "products_ms": products.ms,
                "floor_ms": floor_ms,
                "products_share_of_math": _ratio(products, reference),
                "largest_speedup": None if reference.ms is None else reference.ms / floor_ms,
                "measured_speedup": _ratio(reference, fused),
            }
        )
        found += [
            Target(
                f"{attention}: sdpa layer / sdpa alone",
                _ratio(fused, kernel),
                "<= 1.2",
                "layer includes its 4 projections",
            ),
            Target(f"{attention}: sdpa layer / projections + sdpa", _ratio(fused, inline), "<= 1.2", "like with like"),
            Target(f"{attention}: math / sdpa backend", _ratio(reference, fused), ">= 3", "speed-up of the fused path"),
        ]
    return found, bounds


def _local_targets(args: argparse.Namespace, shape: Shape, layer: Callable[..., Measurement]) -> list[Target]:
    """The local window's peak memory against soft attention's at the longest length, and its time exponent."""
    long = replace(shape, batch=args.long_batch)
    lengths = sorted(args.long_lengths)
    local_params = {"window": args.window, "mode": "monotonic"}
    local = [layer("local", "auto", t, local_params, on=long) for t in lengths]
    longest = lengths[-1]
    one_run = dict(warmup=0, repeats=1)  # the quadratic reference is for its memory; one timed run is enough
    soft_math = layer("soft", "math", longest, on=long, **one_run)
    soft_sdpa = layer("soft", "sdpa", longest, on=long, **one_run)
    ok = [(t, m.ms) for t, m in zip(lengths, local) if m.status == "ok"]
    exponent = loglog_slope(*map(list, zip(*ok))) if len(ok) >= 2 else None
    found = [
        Target(
            f"local w={args.window} / soft math: peak memory, T={longest}",
            _ratio(local[-1], soft_math, "peak_mb"),
            "<= 0.125",
            "banded kernel vs the T x T path",
        ),
        Target(
            f"local w={args.window} / soft sdpa: peak memory, T={longest}",
            _ratio(local[-1], soft_sdpa, "peak_mb"),
            "<= 0.125",
            "both linear in T on a flash kernel",
        ),
        Target(
            f"local w={args.window}: time exponent, T={lengths[0]}..{longest}",
            exponent,
            "<= 1.2",
            "slope of log time vs log T",
        ),
    ]
    return found


def _targets(args: argparse.Namespace, shape: Shape) -> int:
    timing = dict(warmup=args.warmup, repeats=args.repeats, max_seconds=args.max_seconds)
    measured: list[dict[str, Any]] = []  # every point, with its batch (the two groups of targets differ)

    def note(name: str, T: int, batch: int, m: Measurement) -> None:
        print(f"  {name} T={T} B={batch}: {_show(m)}")
        measured.append(
            {"name": name, "T": T, "batch": batch, "status": m.status, "ms": m.ms, "peak_mb": m.peak_mb, "runs": m.runs}
        )
        if args.out is not None:  # as it goes, so an interrupted run keeps what it measured
            write_json_atomic(
                args.out,
                {
                    "device": device_name(shape.device),
                    "torch": torch.__version__,
                    "measurements": measured,
                    "complete": False,
                },
            )

    print(
        f"device {device_name(shape.device)}, torch {torch.__version__}, d_model={shape.d_model}, "
        f"batch={shape.batch}, causal={shape.causal}, clock={args.clock}"
    )

    def layer(
        attention: str, backend: str, T: int, params: dict[str, Any] | None = None, *, on: Shape = shape, **kw
    ) -> Measurement:
        m, resolved = measure_point(attention, "none", backend, T, on, params or {}, {}, **(timing | kw))
        note(f"{attention}/{resolved}", T, on.batch, m)
        return m

    skipped = skipped_reason(shape)
    if skipped is None:
        return _report(args, shape, gpu_targets(args, shape, note, Target), measured, [], rate=None, skipped=None)

    T = args.length
    rate = gemm_rate(args.gemm_size, shape, args.repeats, args.clock)
    print(f"  matrix product {args.gemm_size}^2: {rate / 1e9:.1f} GFLOP/s")
    found, bounds = _global_targets(args, shape, rate, note)
    found += _local_targets(args, shape, layer)
    return _report(args, shape, found, measured, bounds, rate=rate, skipped=skipped, T=T, long_batch=args.long_batch)


def _report(
    args: argparse.Namespace,
    shape: Shape,
    found: list[Target],
    measured: list[dict[str, Any]],
    bounds: list[dict[str, Any]],
    *,
    rate: float | None,
    skipped: str | None,
    T: int | None = None,
    long_batch: int | None = None,
) -> int:
    print()
    print(f"{'target':58} {'value':>9} {'goal':>9}  verdict")
    for t in found:
        value = "n/a" if t.value is None else f"{t.value:.3f}"
        verdict = {True: "met", False: "MISSED", None: "not measured"}[t.met]
        print(f"{t.name:58} {value:>9} {t.goal:>9}  {verdict}  ({t.detail})")
    if skipped is not None:
        print(f"GPU targets (flex and flash, python -m experiments.bench targets --device cuda): skipped: {skipped}")
    print()
    causal = " (causal: about half the products)" if shape.causal else ""
    if rate is not None:
        print(f"bound on math / sdpa at T={T}: the math path's products at {rate / 1e9:.1f} GFLOP/s{causal}")
    for b in bounds:
        if b["largest_speedup"] is not None:
            print(
                f"  {b['attention']:10} math {b['math_ms']:.1f} ms, products alone {b['products_ms']:.1f} ms "
                f"({b['products_share_of_math']:.0%} of math), at the best rate {b['floor_ms']:.1f} ms: "
                f"no exact kernel beats {b['largest_speedup']:.2f}x; measured {b['measured_speedup']:.2f}x"
            )
    failed = nothing_measured(measured)
    if args.out is not None:
        data = {
            "device": device_name(shape.device),
            "torch": torch.__version__,
            "measurements": measured,
            "targets": [{"name": t.name, "value": t.value, "goal": t.goal, "met": t.met} for t in found],
            "gemm_flops_per_second": rate,
            "speedup_bounds": bounds,
            "gpu_targets_skipped": skipped,
            "settings": {
                "d_model": shape.d_model,
                "batch": shape.batch,
                "long_batch": long_batch,
                "causal": shape.causal,
                "clock": args.clock,
                "threads": torch.get_num_threads(),
                "window": args.window,
                "gemm_size": args.gemm_size,
            },
        }
        write_json_atomic(args.out, {**data, "complete": failed is None})
        print(f"wrote {args.out}")
    return 0 if failed is None else report_nothing_measured("targets", failed)


def _ratio(a: Measurement, b: Measurement, field: str = "ms") -> float | None:
    x, y = getattr(a, field), getattr(b, field)
    return None if x is None or y is None or y == 0 else x / y


def _show(m: Measurement) -> str:
    if m.status != "ok":
        return f"{m.status} ({m.error})"
    return f"{m.ms:.2f} ms, peak {m.peak_mb:.1f} MB ({m.runs} timed runs)"
