"""The GPU targets of ``targets --device cuda``: score biases and windows on FlexAttention against flash.

A GPU-sized shape (``--gpu-*`` options: d_model 1024, 16 heads of 64, batch 4, causal,
T 4096 and 16384, bfloat16), forward + backward, each comparison timed side by side in interleaved rounds.
The dtype is ``--gpu-dtype``, never ``--dtype``: SDPA runs its flash kernel in bfloat16 or float16 only, so
in float32 the "flash" side would be another kernel and every ratio below a different comparison.

- local attention (window ``--gpu-window``) on flex against soft attention over every key on
  SDPA's flash kernel, at the longest T: local at most 0.2x soft's time; once for the whole layer and
  once for the attention call alone (``kernel_only``: the projections, alike in both, left out);
- multihead + ALiBi on flex against plain causal multihead on flash, at the shortest T: at least
  0.6x flash's speed (flash ms / flex ms);
- t5 and relative (learned tables) on flex against the same pair on SDPA with the dense
  (1, H, T, T) bias, at the shortest T: at least as fast (dense ms / flex ms >= 1);
- the peak memory of every flex case at both lengths: its exponent in T at most 1.2 (linear),
  where the dense bias grows as T^2.

On CPU these are skipped, with the reason: flex has no backward there and the shape is a GPU's.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from typing import Any, Callable

from experiments.bench.kernel_only import kernel_steps
from experiments.bench.measure import Measurement, side_by_side
from experiments.bench.options import DTYPES
from experiments.bench.point import Shape, make_step

#: the dtypes SDPA's flash kernel takes: the only ones in which "against flash" is what is measured
FLASH_DTYPES = ("bfloat16", "float16")

#: (label, attention, position, attention params) of every flex case whose memory is tracked
FLEX_CASES = (
    ("multihead+alibi/flex", "multihead", "alibi", {}),
    ("multihead+t5/flex", "multihead", "t5", {}),
    ("multihead+relative/flex", "multihead", "relative", {}),
    ("local/flex", "local", "none", {"mode": "monotonic"}),
)


def gpu_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gpu-d-model", type=int, default=1024, help="GPU targets: model width")
    parser.add_argument("--gpu-heads", type=int, default=16, help="GPU targets: heads (head dim = width / heads)")
    parser.add_argument("--gpu-batch", type=int, default=4, help="GPU targets: batch")
    parser.add_argument(
        "--gpu-lengths",
        type=int,
        nargs=2,
        default=[4096, 16384],
        metavar=("SHORT", "LONG"),
        help="GPU targets: T for the bias comparisons and T for the window one",
    )
    parser.add_argument("--gpu-window", type=int, default=256, help="GPU targets: local attention's window")
    parser.add_argument(
        "--gpu-dtype",
        default="bfloat16",
        help=f"GPU targets: the dtype, one of {', '.join(FLASH_DTYPES)} (flash's); --dtype is the CPU points'",
    )


def gpu_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the ``--gpu-*`` options, in one line naming the option and the allowed values."""
    if args.gpu_dtype not in FLASH_DTYPES:
        return (
            f"--gpu-dtype={args.gpu_dtype} is not allowed; choose one of {', '.join(FLASH_DTYPES)} "
            "(SDPA's flash kernel, the targets' reference, runs in no other)"
        )
    return None


def skipped_reason(shape: Shape) -> str | None:
    if shape.device.type != "cuda":
        return (
            f"needs a CUDA device (this run is on {shape.device.type}): flex has no backward on CPU, "
            "and the shape is a GPU's"
        )
    return None


def _ratio(a: Measurement, b: Measurement, field: str = "ms") -> float | None:
    x, y = getattr(a, field), getattr(b, field)
    return None if x is None or y is None or y == 0 else x / y


def _steps(
    cases: dict[str, tuple[str, str, str, dict]],
    T: int,
    gpu: Shape,
    note: Callable[[str, int, int, Measurement], None],
    rounds: dict[str, Any],
) -> dict[str, Measurement]:
    """Time ``cases`` (label -> attention, position, backend, parameters) side by side at length ``T``."""
    built = {label: make_step(a, p, b, T, gpu, params, {})[0] for label, (a, p, b, params) in cases.items()}
    for step in built.values():
        step()  # compile (flex) and autotune before the memory run, which would otherwise count them
    got = side_by_side(built, gpu.device, **rounds)
    for label, m in got.items():
        note(label, T, gpu.batch, m)
    return got


def _time_targets(
    args: argparse.Namespace,
    gpu: Shape,
    lengths: tuple[int, int],
    at_long: dict[str, Measurement],
    at_short: dict[str, Measurement],
    kernels: dict[str, Measurement],
    target: Callable[..., Any],
) -> list:
    """The targets on time: the local window against flash, and the score biases on flex against their peers."""
    short, long = lengths
    head_dim = args.gpu_d_model // args.gpu_heads  # gpu.heads is args.gpu_heads, never None
    found = [
        target(
            f"local w={args.gpu_window} flex / soft flash: time, T={long}",
            _ratio(at_long["local/flex"], at_long["soft/sdpa (flash)"]),
            "<= 0.2",
            "both causal",
        ),
        target(
            f"local w={args.gpu_window} flex / causal flash: the attention call alone, T={long}",
            _ratio(kernels["local/flex kernel"], kernels["causal/flash kernel"]),
            "<= 0.2",
            f"(B, H, T, D) = ({gpu.batch}, {gpu.heads}, {long}, {head_dim}), no projections",
        ),
        target(
            f"alibi on flex: flash ms / flex ms, T={short}",
            _ratio(at_short["multihead/sdpa (flash)"], at_short["multihead+alibi/flex"]),
            ">= 0.6",
            "speed relative to plain causal flash",
        ),
    ]
    for name in ("t5", "relative"):
        found.append(
            target(
                f"{name}: dense-bias sdpa ms / flex ms, T={short}",
                _ratio(at_short[f"multihead+{name}/sdpa (dense bias)"], at_short[f"multihead+{name}/flex"]),
                ">= 1",
                "learned table on flex vs today's dense bias",
            )
        )
    return found


def _memory_targets(
    by_length: dict[str, tuple[Measurement, Measurement]], lengths: tuple[int, int], target: Callable[..., Any]
) -> list:
    """Each flex path's peak memory exponent between the two lengths: linear in T, not quadratic."""
    short, long = lengths
    found = []
    for label, (small, big) in by_length.items():
        exponent = None
        if small.peak_mb and big.peak_mb:
            exponent = math.log(big.peak_mb / small.peak_mb) / math.log(long / short)
        found.append(
            target(
                f"{label}: peak memory exponent, T={short}..{long}",
                exponent,
                "<= 1.2",
                f"peak {big.peak_mb if big.peak_mb is not None else 'n/a'} MB at T={long}",
            )
        )
    return found


def gpu_targets(
    args: argparse.Namespace,
    shape: Shape,
    note: Callable[[str, int, int, Measurement], None],
    target: Callable[..., Any],
) -> list:
    """Measure the GPU targets on ``shape``'s device; ``note`` records a point, ``target`` makes a Target."""
    gpu = replace(
        shape,
        d_model=args.gpu_d_model,
        heads=args.gpu_heads,
        batch=args.gpu_batch,
        causal=True,
        dtype=DTYPES[args.gpu_dtype],
    )
    short, long = sorted(args.gpu_lengths)
    window = {"window": args.gpu_window, "mode": "monotonic"}
    rounds = dict(warmup=args.warmup, rounds=args.repeats, clock="wall")
    print(
        f"GPU targets: d_model={gpu.d_model}, heads={gpu.heads}, batch={gpu.batch}, causal, dtype={gpu.dtype}, "
        f"T={short} and {long}, window={args.gpu_window}"
    )
    at_long = _steps(
        {"local/flex": ("local", "none", "flex", window), "soft/sdpa (flash)": ("soft", "none", "sdpa", {})},
        long,
        gpu,
        note,
        rounds,
    )
    at_short = _steps(
        {
            "multihead/sdpa (flash)": ("multihead", "none", "sdpa", {}),
            "multihead+alibi/flex": ("multihead", "alibi", "flex", {}),
            "multihead+t5/flex": ("multihead", "t5", "flex", {}),
            "multihead+t5/sdpa (dense bias)": ("multihead", "t5", "sdpa", {}),
            "multihead+relative/flex": ("multihead", "relative", "flex", {}),
            "multihead+relative/sdpa (dense bias)": ("multihead", "relative", "sdpa", {}),
        },
        short,
        gpu,
        note,
        rounds,
    )
    flex_cases = {label: (a, p, "flex", params) for label, a, p, params in FLEX_CASES if a != "local"}
    flex_long = _steps(flex_cases, long, gpu, note, rounds)
    local_short = _steps({"local/flex": ("local", "none", "flex", window)}, short, gpu, note, rounds)
    head_dim = args.gpu_d_model // args.gpu_heads  # gpu.heads is args.gpu_heads, never None
    calls = kernel_steps(gpu.batch, gpu.heads, long, head_dim, args.gpu_window, gpu.device, gpu.dtype)
    for step in calls.values():
        step()  # compile flex before timing
    kernels = side_by_side(calls, gpu.device, **rounds)
    for label, m in kernels.items():
        note(label, long, gpu.batch, m)
    by_length = {
        **{k: (v, flex_long[k]) for k, v in at_short.items() if k in flex_long},
        "local/flex": (local_short["local/flex"], at_long["local/flex"]),
    }
    found = _time_targets(args, gpu, (short, long), at_long, at_short, kernels, target)
    return found + _memory_targets(by_length, (short, long), target)
