"""``decode``: cached decoding against recomputing the prefix, per attention variant and prompt length.

    python -m experiments.bench decode --variant linear multihead multihead:num_kv_heads=1 \\
        --prompts 256 2048 --tokens 32 --threads 1 --clock cpu --out bench_out/decode.json

Each variant is the suite's decoder (``experiments.bench.generation``) with that attention type;
``--tokens`` tokens are decoded greedily after a random prompt, once with the cache and once
re-running the whole sequence at every step, side by side in alternating rounds with the prompt
pass alone (``prefill``), so that the cached run less the prompt pass is the cost of the steps. A ``recurrent``
type's cache holds running sums whose size does not depend on the prefix, so its cached step
costs the same at any prompt length; a type that caches keys reads a prefix that grows. The
table gives ms per decoded token, ms per cached step after the prompt, the speed-up of the
cache, and the bytes the cache holds after the prompt.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import torch

from experiments.bench.generation import generation_model, random_prompt
from experiments.bench.measure import CLOCKS, side_by_side
from experiments.bench.options import BenchArgumentError, parse_params
from experiments.bench.registry import BENCHMARKS
from experiments.record.result import write_json_atomic
from variants import ATTENTION, KVCache


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    """``multihead:num_kv_heads=1,num_heads=4`` -> ("multihead", {"num_kv_heads": 1, "num_heads": 4})."""
    name, _, params = text.partition(":")
    ATTENTION.get(name)  # an unknown name lists the choices and the nearest one
    return name, parse_params([p for p in params.split(",") if p], "--variant")


def cache_bytes(caches: list[tuple[KVCache, KVCache]]) -> int:
    """Bytes of every tensor the self-attention caches hold."""
    total = 0
    for self_cache, _ in caches:
        tensors = [self_cache.k, self_cache.v]
        if self_cache.state is not None:
            tensors += [self_cache.state.kv, self_cache.state.k_sum]
        total += sum(t.numel() * t.element_size() for t in tensors if t is not None)
    return total


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--variant",
        nargs="+",
        default=["linear", "performer", "multihead", "multihead:num_kv_heads=1"],
        metavar="NAME[:KEY=VALUE,...]",
        help="attention type and parameters, one model each",
    )
    parser.add_argument("--prompts", type=int, nargs="+", default=[256, 2048], metavar="P")
    parser.add_argument("--tokens", type=int, default=32, help="tokens decoded after the prompt")
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3, help="alternating timed rounds; the median is reported")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)


@BENCHMARKS.register(
    "decode", help="cached decoding vs recomputing the prefix, per variant and prompt length", arguments=arguments
)
def decode(args: argparse.Namespace) -> int:
    for flag in ("tokens", "d_model", "heads", "layers", "rounds"):
        if getattr(args, flag) < 1:
            raise BenchArgumentError(
                f"--{flag.replace('_', '-')}={getattr(args, flag)} is not allowed; it must be >= 1"
            )
    if any(p < 1 for p in args.prompts):
        raise BenchArgumentError(f"--prompts={args.prompts} is not allowed; every prompt length must be >= 1")
    variants = [parse_variant(v) for v in args.variant]
    device = torch.device("cpu")
    threads = torch.get_num_threads()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    rows = []
    settings = {k: getattr(args, k) for k in ("tokens", "d_model", "heads", "layers", "rounds", "clock")}

    def save(complete: bool) -> None:  # after every row, so an interrupted run keeps what it measured
        if args.out is not None:
            write_json_atomic(
                args.out, {"rows": rows, "settings": settings, "threads": torch.get_num_threads(), "complete": complete}
            )

    try:
        for (name, params), label in zip(variants, args.variant):
            for prompt_len in args.prompts:
                rows.append(_measure(name, params, label, prompt_len, args, device))
                _print_row(rows[-1])
                save(complete=False)
        save(complete=True)
    finally:
        torch.set_num_threads(threads)
    if args.out is not None:
        print(f"wrote {args.out}")
    return 0


def _measure(
    name: str, params: dict[str, Any], label: str, prompt_len: int, args: argparse.Namespace, device: torch.device
) -> dict[str, Any]:
    torch.manual_seed(args.seed)
    model = generation_model(
        vocab=64,
        d_model=args.d_model,
        heads=args.heads,
        layers=args.layers,
        ffn=2 * args.d_model,
        max_len=prompt_len + args.tokens,
        device=device,
        attention=name,
        attention_params=params,
    )
    prompt = random_prompt(1, prompt_len, 64, torch.Generator().manual_seed(args.seed), device)
    with torch.no_grad():
        cached_tokens = model.generate(prompt, args.tokens, use_cache=True)
        same = float(cached_tokens.eq(model.generate(prompt, args.tokens, use_cache=False)).float().mean())
        caches = model.new_caches()
        model.decode(prompt, caches=caches)  # the cache a prompt leaves, before the first new token
        held = cache_bytes(caches)

    def run(use_cache: bool):
        def step() -> None:
            with torch.no_grad():
                model.generate(prompt, args.tokens, use_cache=use_cache)

        return step

    def prefill() -> None:
        with torch.no_grad():
            model.decode(prompt, caches=model.new_caches())

    m = side_by_side(
        {"cached": run(True), "recomputed": run(False), "prefill": prefill},
        device,
        warmup=0,
        rounds=args.rounds,
        clock=args.clock,
    )
    cached, recomputed = m["cached"].ms, m["recomputed"].ms
    return {
        "variant": label,
        "prompt": prompt_len,
        "tokens": args.tokens,
        "cached_ms_per_token": round(cached / args.tokens, 4),
        # the cached run less its prompt pass: what one more token costs at this prefix length
        "cached_step_ms": round(max(cached - m["prefill"].ms, 0.0) / max(args.tokens - 1, 1), 4),
        "recomputed_ms_per_token": round(recomputed / args.tokens, 4),
        "speedup": round(recomputed / cached, 2),
        "cache_kb_after_prompt": round(held / 1024, 1),
        "same_tokens": same,
    }


def _print_row(r: dict[str, Any]) -> None:
    print(
        f"{r['variant']:<28} prompt {r['prompt']:>6}: cached {r['cached_ms_per_token']:.2f} ms/token "
        f"({r['cached_step_ms']:.2f} ms per step after the prompt), "
        f"recomputed {r['recomputed_ms_per_token']:.2f} ms/token, speed-up {r['speedup']:.1f}x, "
        f"cache {r['cache_kb_after_prompt']:,.1f} KB, same tokens {r['same_tokens']:.2f}"
    )
