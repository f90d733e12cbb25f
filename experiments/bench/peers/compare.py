"""The comparisons of ``peers`` (seq2seq, decoder, generation), their ratios and the targets they are held to."""

from __future__ import annotations

import argparse
import importlib.util
import time
from typing import Any, Callable

import torch
from torch import Tensor, nn

from experiments.bench.generation import agreement, generation_cases, generation_model, random_prompt
from experiments.bench.peers.models import (
    Batch,
    Size,
    TorchSeq2Seq,
    attnlab_decoder,
    attnlab_seq2seq,
    lm_batches,
    seq2seq_batches,
    to_device,
    xtransformers_decoder,
)
from experiments.bench.peers.options import autocast_for
from experiments.bench.peers.step import TrainStep, alternate, profile, summarise
from experiments.model.compiling import compile_model
from experiments.model.transformer import count_parameters

# The targets: (comparison, ratio, bound, comparison operator).
TARGETS = (
    ("seq2seq", "attnlab / torch.nn.Transformer", 1.15, "<="),
    ("seq2seq", "attnlab compiled / torch.nn.Transformer", 1.0, "<"),
    ("generation", "recomputed / cached", 5.0, ">="),
)


# -- the comparisons -----------------------------------------------------------------------------------------
def compare_training(
    name: str,
    builders: dict[str, Callable[[], tuple[nn.Module, Callable[..., Tensor]]]],
    batches: list[Batch],
    args: argparse.Namespace,
    device: torch.device,
) -> dict[str, Any]:
    """Build each case from the same seed, time its training step, and record its size and final loss."""
    steps: dict[str, TrainStep] = {}
    params: dict[str, int] = {}
    for case, build in builders.items():
        torch.manual_seed(args.seed)
        model, call = build()
        model.to(device).train()
        params[case] = count_parameters(model)
        steps[case] = TrainStep(model, batches, autocast_for(args, device), call)
    print(
        f"[{name}] timing {', '.join(steps)} ({args.warmup} warm-up + {args.repeats} rounds of "
        f"{args.inner} steps each) ...",
        flush=True,
    )
    start = time.perf_counter()
    samples = alternate(
        steps, warmup=args.warmup, repeats=args.repeats, inner=args.inner, clock=args.clock, device=device
    )
    if args.profile:
        for case, step in steps.items():
            profile(f"{name} / {case}", step, args.profile, device)
    cases = {
        case: {**summarise(samples[case]), "params": params[case], "final_loss": steps[case].final_loss}
        for case in steps
    }
    return {"cases": cases, "seconds": time.perf_counter() - start}


def seq2seq_comparison(args: argparse.Namespace, size: Size, device: torch.device) -> dict[str, Any]:
    batches = to_device(seq2seq_batches(size, args.batches, torch.Generator().manual_seed(args.seed)), device)

    def attnlab() -> tuple[nn.Module, Callable[..., Tensor]]:
        model = attnlab_seq2seq(size, args.dropout)
        return model, model

    def compiled() -> tuple[nn.Module, Callable[..., Tensor]]:
        model = attnlab_seq2seq(size, args.dropout)
        compile_model(model, device.type)  # as model.compile=true does
        return model, model

    def peer() -> tuple[nn.Module, Callable[..., Tensor]]:
        model = TorchSeq2Seq(size, args.dropout)
        return model, model

    builders = {"attnlab": attnlab, "torch.nn.Transformer": peer}
    if args.compile:
        builders["attnlab compiled"] = compiled
    result = compare_training("seq2seq", builders, batches, args, device)
    result["ratios"] = ratios(result["cases"], "torch.nn.Transformer")
    result["model"] = f"seq2seq multihead sinusoidal, post-norm, dropout {args.dropout}"
    result["notes"] = [
        "torch.nn.Transformer adds a final LayerNorm to its encoder and decoder stacks; "
        "the suite's post-norm model has none (2 extra LayerNorms for the peer)"
    ]
    return result


def decoder_comparison(args: argparse.Namespace, size: Size, device: torch.device) -> dict[str, Any]:
    if importlib.util.find_spec("x_transformers") is None:
        message = "x-transformers is not installed (pip install 'attnlab[bench]'); decoder comparison skipped"
        print(f"[decoder] {message}")
        return {"skipped": message}
    batches = to_device(lm_batches(size, args.batches, torch.Generator().manual_seed(args.seed)), device)

    def attnlab() -> tuple[nn.Module, Callable[..., Tensor]]:
        model = attnlab_decoder(size)
        return model, lambda inputs: model(None, inputs)

    def compiled() -> tuple[nn.Module, Callable[..., Tensor]]:
        model = attnlab_decoder(size)
        compile_model(model, device.type)
        return model, lambda inputs: model(None, inputs)

    def peer() -> tuple[nn.Module, Callable[..., Tensor]]:
        model = xtransformers_decoder(size)
        return model, model

    builders = {"attnlab": attnlab, "x-transformers": peer}
    if args.compile:
        builders["attnlab compiled"] = compiled
    result = compare_training("decoder", builders, batches, args, device)
    result["ratios"] = ratios(result["cases"], "x-transformers")
    result["model"] = "decoder multihead learned, pre-norm, no dropout"
    result["notes"] = [
        "x-transformers: GELU feed-forward, no biases in attention, LayerNorm without "
        "affine parameters; the suite: ReLU, biases, affine LayerNorm"
    ]
    return result


def generation_comparison(args: argparse.Namespace, size: Size, device: torch.device) -> dict[str, Any]:
    torch.manual_seed(args.seed)
    model = generation_model(
        vocab=size.vocab,
        d_model=size.d_model,
        heads=size.heads,
        layers=size.layers,
        ffn=size.ffn,
        max_len=args.gen_prompt + args.gen_tokens,
        device=device,
    )
    prompt = random_prompt(
        args.gen_batch, args.gen_prompt, size.vocab, torch.Generator().manual_seed(args.seed), device
    )
    cases = generation_cases(model, prompt, args.gen_tokens, autocast_for(args, device))
    same = agreement(cases)  # also the warm-up of both cases
    print(
        f"[generation] timing cached vs recomputed, {args.gen_tokens} tokens after a {args.gen_prompt}-token "
        f"prompt, batch {args.gen_batch} ...",
        flush=True,
    )
    start = time.perf_counter()
    samples = alternate(cases, warmup=0, repeats=args.gen_repeats, inner=1, clock=args.clock, device=device)
    summary = {case: summarise(s) for case, s in samples.items()}
    for case in summary:
        summary[case]["tokens_per_second"] = args.gen_batch * args.gen_tokens / (summary[case]["median_ms"] / 1000)
    return {
        "model": "decoder multihead learned, pre-norm",
        "cases": summary,
        "ratios": {"recomputed / cached": summary["recomputed"]["median_ms"] / summary["cached"]["median_ms"]},
        "same_tokens": same,
        "settings": {"tokens": args.gen_tokens, "prompt": args.gen_prompt, "batch": args.gen_batch},
        "seconds": time.perf_counter() - start,
    }


def ratios(cases: dict[str, dict[str, Any]], reference: str) -> dict[str, float]:
    base = cases[reference]["median_ms"]
    return {f"{case} / {reference}": cases[case]["median_ms"] / base for case in cases if case != reference}


def check_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    checked = []
    for comparison, ratio, bound, op in TARGETS:
        value = results.get(comparison, {}).get("ratios", {}).get(ratio)
        met = None if value is None else {"<=": value <= bound, "<": value < bound, ">=": value >= bound}[op]
        checked.append(
            {"comparison": comparison, "ratio": ratio, "target": f"{op} {bound}", "value": value, "met": met}
        )
    return checked
