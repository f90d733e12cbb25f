"""``scaling``: time and peak memory of forward + backward for each variant as T grows.

    python -m experiments.bench scaling --attention soft local --backend all \\
        --lengths 512 1024 2048 4096 8192 16384 --attention-param window=64 \\
        --out bench_out/scaling.json --figure bench_out/scaling.png

Each (attention, position, backend) series grows T until a point runs out of
memory, or takes longer than ``--max-seconds`` (the memory run, warm-up and
timed runs together), or is predicted from the points before it to need more
than that even for one timed run; the larger T are then recorded as ``skipped``. The exponent
is the least-squares slope of log time against log T over the last
``--fit-points`` points measured: about 1 for a linear kernel, 2 for a quadratic one.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any, Callable

import torch

from experiments.bench.measure import Measurement, loglog_slope
from experiments.bench.options import BenchArgumentError, check_names, configured, parse_params, shared_arguments
from experiments.bench.outcome import nothing_measured, report_nothing_measured
from experiments.bench.point import Shape, backends_for, measure_point
from experiments.bench.registry import BENCHMARKS
from experiments.record.result import write_json_atomic
from variants import ATTENTION, POSITION
from variants.kernels import BACKENDS

DEFAULT_LENGTHS = [128, 256, 512, 1024, 2048, 4096, 8192, 16384]


# -- a series: one variant, growing T --------------------------------------------------------------------------
def record(attention: str, position: str, backend: str, T: int, batch: int, m: Measurement) -> dict[str, Any]:
    ok = m.status == "ok"
    out = {
        "attention": attention,
        "position": position,
        "backend": backend,
        "T": T,
        "status": m.status,
        "ms": round(m.ms, 4) if ok else None,
        "tokens_per_second": round(batch * T / (m.ms / 1000), 1) if ok else None,
        "peak_mb": round(m.peak_mb, 3) if ok else None,
    }
    if m.error:  # why a point was not measured, kept with it in the JSON
        out["error"] = m.error
    return out


def run_series(
    attention: str,
    position: str,
    backend: str,
    lengths: list[int],
    shape: Shape,
    attention_params: dict[str, Any],
    position_params: dict[str, Any],
    *,
    warmup: int,
    repeats: int,
    max_seconds: float,
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    measured: list[tuple[int, float]] = []  # (T, ms) of the points that ran
    stop_reason = None
    for T in sorted(lengths):
        if stop_reason is None and measured:
            # The fewest runs a point makes: the memory run, the warm-up, one timed run.
            predicted = _predicted_seconds(measured, T) * (2 + warmup)
            if predicted > max_seconds:
                stop_reason = f"predicted {predicted:.0f}s for the point > --max-seconds {max_seconds:g}"
        if stop_reason is not None:
            records.append(record(attention, position, backend, T, shape.batch, Measurement(status="skipped")))
            log(f"  {attention}/{position}/{backend} T={T}: skipped ({stop_reason})")
            continue
        m, resolved = measure_point(
            attention,
            position,
            backend,
            T,
            shape,
            attention_params,
            position_params,
            warmup=warmup,
            repeats=repeats,
            max_seconds=max_seconds,
        )
        records.append(record(attention, position, resolved, T, shape.batch, m))
        log("  " + _describe(records[-1], m))
        if m.status != "ok":
            stop_reason = f"T={T} was {m.status}"
            continue
        measured.append((T, m.ms))
        if m.seconds > max_seconds:
            stop_reason = f"T={T} took {m.seconds:.0f}s > --max-seconds {max_seconds:g}"
    return records


def _predicted_seconds(measured: list[tuple[int, float]], T: int) -> float:
    """One run at T, extrapolated from the last points with their own slope (between 1 and 2)."""
    slope = 2.0
    if len(measured) >= 2:
        (t0, ms0), (t1, ms1) = measured[-2], measured[-1]
        slope = min(max(math.log(ms1 / ms0) / math.log(t1 / t0), 1.0), 2.0)
    t_last, ms_last = measured[-1]
    return ms_last / 1000 * (T / t_last) ** slope


def _describe(rec: dict[str, Any], m: Measurement) -> str:
    name = f"{rec['attention']}/{rec['position']}/{rec['backend']} T={rec['T']}"
    if rec["status"] != "ok":
        return f"{name}: {rec['status']} ({m.error})"
    return (
        f"{name}: {rec['ms']:.2f} ms, {rec['tokens_per_second']:,.0f} tokens/s, "
        f"peak {rec['peak_mb']:.1f} MB ({m.runs} timed runs)"
    )


def exponents(records: list[dict[str, Any]], fit_points: int) -> list[dict[str, Any]]:
    """Slope of log time vs log T over the last ``fit_points`` ok points of each series (needs 2)."""
    out = []
    series: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
    for r in records:
        if r["status"] == "ok":
            series.setdefault((r["attention"], r["position"], r["backend"]), []).append((r["T"], r["ms"]))
    for (attention, position, backend), points in series.items():
        points = sorted(points)[-fit_points:]
        if len(points) >= 2:
            lengths, times = zip(*points)
            out.append(
                {
                    "attention": attention,
                    "position": position,
                    "backend": backend,
                    "exponent": round(loglog_slope(list(lengths), list(times)), 4),
                    "T_range": [lengths[0], lengths[-1]],
                }
            )
    return out


# -- output --------------------------------------------------------------------------------------------------
def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return f"cpu ({torch.get_num_threads()} threads)"


def write_json(
    path: Path,
    device: torch.device,
    records: list[dict[str, Any]],
    exps: list[dict[str, Any]],
    settings: dict[str, Any],
    complete: bool = True,
) -> None:
    """Atomically; called after every series, so an interrupted run keeps what it measured (complete: false)."""
    data = {
        "device": device_name(device),
        "torch": torch.__version__,
        "records": records,
        "exponents": exps,
        "settings": settings,
        "complete": complete,
    }
    write_json_atomic(path, data)


def plot(records: list[dict[str, Any]], path: Path, title: str) -> None:
    """Log–log time and peak memory against T, one line per (attention, position, backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_time, ax_mem) = plt.subplots(1, 2, figsize=(11, 4.2))
    series: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r["status"] == "ok":
            series.setdefault(f"{r['attention']}+{r['position']} ({r['backend']})", []).append(r)
    for label, points in sorted(series.items()):
        points.sort(key=lambda r: r["T"])
        lengths = [r["T"] for r in points]
        ax_time.plot(lengths, [r["ms"] for r in points], marker="o", label=label)
        ax_mem.plot(lengths, [max(r["peak_mb"], 1e-3) for r in points], marker="o", label=label)
    for ax, ylabel in ((ax_time, "ms per forward + backward"), (ax_mem, "peak memory (MB)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length T")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    ax_time.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--attention",
        nargs="+",
        default=ATTENTION.names(),
        metavar="NAME",
        help=f"attention types (default: all of {ATTENTION.names()})",
    )
    parser.add_argument(
        "--position", nargs="+", default=["none"], metavar="NAME", help=f"position encodings, from {POSITION.names()}"
    )
    parser.add_argument(
        "--backend",
        nargs="+",
        default=["all"],
        metavar="NAME",
        help=f"from {list(BACKENDS)} or 'all' (every backend each type has and this device runs)",
    )
    parser.add_argument("--lengths", type=int, nargs="+", default=DEFAULT_LENGTHS, metavar="T")
    parser.add_argument(
        "--attention-param",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="constructor parameters, given to each type that accepts them (e.g. window=64)",
    )
    parser.add_argument("--position-param", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--fit-points", type=int, default=4, help="largest points used for the exponent")
    parser.add_argument("--out", type=Path, default=None, help="JSON file for the records and exponents")
    parser.add_argument("--figure", type=Path, default=None, help="PNG file for the log–log figure")
    shared_arguments(parser)


@BENCHMARKS.register(
    "scaling", help="time and peak memory of forward + backward vs sequence length", arguments=arguments
)
def scaling(args: argparse.Namespace) -> int:
    with configured(args) as shape:
        return _scaling(args, shape)


def _checked_params(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """(attention, position) constructor parameters, after every name and backend is checked."""
    check_names(ATTENTION, args.attention)
    check_names(POSITION, args.position)
    for b in args.backend:
        if b != "all" and b not in BACKENDS:
            raise BenchArgumentError(f"--backend={b!r} is not allowed; choose from {list(BACKENDS) + ['all']}")
    attention_params = parse_params(args.attention_param, "--attention-param")
    position_params = parse_params(args.position_param, "--position-param")
    unused = [k for k in attention_params if not any(k in ATTENTION.accepted_params(a) for a in args.attention)]
    if unused:
        raise BenchArgumentError(f"--attention-param {unused} is accepted by none of {args.attention}")
    return attention_params, position_params


def _settings(
    args: argparse.Namespace, shape: Shape, attention_params: dict[str, Any], position_params: dict[str, Any]
) -> dict[str, Any]:
    """What the JSON records of how every point was measured."""
    return {
        "d_model": shape.d_model,
        "heads": args.heads,
        "batch": shape.batch,
        "causal": shape.causal,
        "dtype": args.dtype,
        "repeats": args.repeats,
        "warmup": args.warmup,
        "attention_params": attention_params,
        "position_params": position_params,
        "threads": torch.get_num_threads() if shape.device.type == "cpu" else None,
        "time": f"median {args.clock} ms of forward + backward",
        "peak_mb": (
            "torch.cuda.max_memory_allocated above the start"
            if shape.device.type == "cuda"
            else "peak bytes of live tensors created during forward + backward (TorchDispatchMode)"
        ),
    }


def _scaling(args: argparse.Namespace, shape: Shape) -> int:
    attention_params, position_params = _checked_params(args)
    settings = _settings(args, shape, attention_params, position_params)
    records: list[dict[str, Any]] = []
    print(
        f"device {device_name(shape.device)}, torch {torch.__version__}, d_model={shape.d_model}, "
        f"batch={shape.batch}, causal={shape.causal}, dtype={args.dtype}"
    )
    for attention in args.attention:
        backends = backends_for(attention, args.backend, shape.device)
        if not backends:
            print(f"{attention}: none of {args.backend} runs here; it has {list(ATTENTION.get(attention).backends)}")
        for position in args.position:
            for backend in backends:
                records += run_series(
                    attention,
                    position,
                    backend,
                    args.lengths,
                    shape,
                    attention_params,
                    position_params,
                    warmup=args.warmup,
                    repeats=args.repeats,
                    max_seconds=args.max_seconds,
                )
                if args.out is not None:
                    write_json(
                        args.out, shape.device, records, exponents(records, args.fit_points), settings, complete=False
                    )
    exps = exponents(records, args.fit_points)
    for e in exps:
        print(
            f"exponent {e['attention']}/{e['position']}/{e['backend']}: {e['exponent']:.2f} "
            f"over T={e['T_range'][0]}..{e['T_range'][1]}"
        )
    failed = nothing_measured(records)
    if args.out is not None:
        write_json(args.out, shape.device, records, exps, settings, complete=failed is None)
        print(f"wrote {args.out}")
    if failed is not None:
        return report_nothing_measured("scaling", failed)
    if args.figure is not None:
        plot(records, args.figure, f"{device_name(shape.device)}, d_model={shape.d_model}, batch={shape.batch}")
        print(f"wrote {args.figure}")
    return 0
