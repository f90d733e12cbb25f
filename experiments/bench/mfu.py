"""``mfu``: model FLOPs utilisation of the decoder training step on a GPU.

    python -m experiments.bench mfu --device cuda            # d 1024, 12 layers, T 2048, bf16
    python -m experiments.bench mfu --device cuda --compile

MFU = the analytic model FLOPs per second (6 N + 12 L T d per token) / the device's
peak for the precision; the step is the same ``TrainStep`` the ``peers`` comparisons time.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import asdict

import torch

from experiments.bench.options import BenchArgumentError
from experiments.bench.peers.models import Size, attnlab_decoder, lm_batches, to_device
from experiments.bench.peers.options import (
    autocast_for,
    describe_device,
    device_options,
    positive_options,
    setup_device,
    size_from,
)
from experiments.bench.peers.step import TrainStep, alternate
from experiments.bench.registry import BENCHMARKS
from experiments.model.compiling import compile_model
from experiments.model.transformer import Transformer, count_parameters
from experiments.record.result import environment, write_json_atomic

# Dense (no sparsity) bf16 tensor-core peaks from NVIDIA's data sheets, in TFLOP/s, matched against
# torch.cuda.get_device_name() in this order (the first name it contains wins, so specific first).
PEAK_BF16_TFLOPS = (
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.5),
    ("H200 NVL", 835.5),
    ("H100", 989.4),  # SXM ("NVIDIA H100 80GB HBM3")
    ("H200", 989.4),  # also GH200
    ("A100", 312.0),
)


# A CPU does well under a TFLOP/s: refuse shapes whose steps would take minutes there.
CPU_STEP_TFLOP = 1.0


def peak_tflops(device_name: str) -> float | None:
    for name, tflops in PEAK_BF16_TFLOPS:
        if name in device_name:
            return tflops
    return None


def flops_per_token(matmul_params: int, layers: int, length: int, d_model: int) -> float:
    """Training FLOPs per token: 6 N + 12 L T d (the PaLM paper's appendix B).

    6 N: each weight multiplies each token once forward (2 FLOPs) and twice backward
    (4). 12 L T d: the attention scores and the weighted sum, 2 T d FLOPs each forward
    per layer and token, times 3 for forward + backward; counted for the full T x T
    square, as is customary, though a causal kernel computes about half of it.
    """
    return 6 * matmul_params + 12 * layers * length * d_model


def matmul_parameters(model: Transformer) -> int:
    """Parameters that multiply activations: all but the position table (a lookup); the token table
    counts once, as the tied output projection (its input-side use is a lookup too)."""
    table = sum(p.numel() for p in model.decoder.position.parameters())
    untied = 0 if model.spec.tie_embeddings else model.embedding.weight.numel()
    return count_parameters(model) - table - untied


def mfu_arguments(parser: argparse.ArgumentParser) -> None:
    device_options(parser, None)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=2048)
    parser.add_argument("--vocab", type=int, default=32768)
    parser.add_argument("--d-model", type=int, default=1024)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--ffn", type=int, default=4096)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=10, help="timed steps; the median is reported")
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument(
        "--peak-tflops",
        type=float,
        default=None,
        help="the device's peak for the run's precision (default: the bf16 table, by GPU name)",
    )


def _report(
    args: argparse.Namespace,
    device: torch.device,
    size: Size,
    n: int,
    per_token: float,
    seconds: float,
    final_loss: float,
) -> None:
    """Print the step's throughput and utilisation, and write them with the run's settings to ``--out``."""
    tokens_per_second = size.batch * size.length / seconds
    achieved = per_token * tokens_per_second / 1e12
    peak = args.peak_tflops or (peak_tflops(torch.cuda.get_device_name(device)) if device.type == "cuda" else None)
    utilisation = achieved / peak if peak else None
    print(
        f"  FLOPs/token = 6 N + 12 L T d = 6 * {n:,} + 12 * {size.layers} * {size.length} * {size.d_model} "
        f"= {per_token:.4g}"
    )
    print(f"  step {seconds * 1000:.1f} ms, {tokens_per_second:,.0f} tokens/s, {achieved:.3g} TFLOP/s achieved")
    if utilisation is None:
        print("  MFU: unknown peak for this device; give --peak-tflops")
    else:
        print(f"  MFU = {achieved:.3g} / {peak:.4g} TFLOP/s = {100 * utilisation:.1f}%")
    if args.out is not None:
        write_json_atomic(
            args.out,
            {
                "benchmark": "mfu",
                "device": describe_device(device),
                "torch": torch.__version__,
                "size": asdict(size),
                "bf16": args.bf16,
                "compile": args.compile,
                "step_ms": seconds * 1000,
                "matmul_params": n,
                "flops_per_token": per_token,
                "formula": "6 N + 12 L T d",
                "tokens_per_second": tokens_per_second,
                "achieved_tflops": achieved,
                "peak_tflops": peak,
                "mfu": utilisation,
                "final_loss": final_loss,
                "env": environment(describe_device(device)),
            },
        )
        print(f"wrote {args.out}")


@BENCHMARKS.register(
    "mfu",
    help="model FLOPs utilisation of the decoder training step (default: d 1024, 12 layers, T 2048)",
    arguments=mfu_arguments,
)
def mfu(args: argparse.Namespace) -> int:
    if args.bf16 is None:
        args.bf16 = args.device in (None, "cuda") and torch.cuda.is_available()
    device = setup_device(args)
    positive_options(args, "repeats")
    size = size_from(args)
    torch.manual_seed(args.seed)
    model = attnlab_decoder(size)
    n = matmul_parameters(model)
    per_token = flops_per_token(n, size.layers, size.length, size.d_model)
    step_tflop = per_token * size.batch * size.length / 1e12
    if device.type == "cpu" and step_tflop > CPU_STEP_TFLOP:
        raise BenchArgumentError(
            f"--device='cpu' is not allowed with this shape ({step_tflop:.1f} TFLOP per step, minutes on a CPU); "
            "use --device cuda or shrink --d-model / --layers / --length / --batch"
        )
    model.to(device).train()
    if args.compile:
        compile_model(model, device.type)  # as model.compile=true does
    batches = to_device(lm_batches(size, 2, torch.Generator().manual_seed(args.seed)), device)
    step = TrainStep(model, batches, autocast_for(args, device), lambda inputs: model(None, inputs))
    print(
        f"[mfu] decoder multihead learned d={size.d_model} layers={size.layers} heads={size.heads} "
        f"T={size.length} batch={size.batch} {'bf16' if args.bf16 else 'fp32'} on {describe_device(device)}",
        flush=True,
    )
    seconds = statistics.median(
        alternate({"step": step}, warmup=args.warmup, repeats=args.repeats, inner=1, clock=args.clock, device=device)[
            "step"
        ]
    )
    _report(args, device, size, n, per_token, seconds, step.final_loss)
    return 0
