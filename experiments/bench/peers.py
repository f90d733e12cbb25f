"""``peers``: the suite's training speed against other implementations, in one run.

    python -m experiments.bench peers --out peers.json
    python -m experiments.bench peers --threads 1 --clock cpu    # steadier on a shared CPU machine
    python -m experiments.bench peers --device cuda --bf16

``peers`` runs every comparison in one process on the same shapes and the same
batches. The cases of a comparison take turns (A, B, B, A, A, B, ...: alternating,
and each case leads every other round, so a slow drift of a shared machine hits all
cases alike) after untimed warm-up steps, which also absorb ``torch.compile``'s
compilation; each reports the median over its rounds.

1. ``seq2seq``: a training step (forward, cross-entropy, backward, AdamW step) of the
   suite's seq2seq multihead + sinusoidal Transformer against ``torch.nn.Transformer``
   wrapped in the same embedding, sinusoidal encoding and tied output projection;
   also the suite's model compiled exactly as ``model.compile=true`` compiles it
   (``experiments.model.compiling.compile_model``).
   Targets: eager <= 1.15x torch.nn.Transformer; compiled faster than it (< 1x).
2. ``decoder``: the suite's decoder-only multihead + learned model against
   x-transformers' ``TransformerWrapper(Decoder)`` of the same width, depth and heads
   (the optional ``bench`` extra; skipped with a message when it is missing).
3. ``generation``: greedy decoding with the key/value cache against recomputing the
   prefix at every step. Target: the cache >= 5x faster.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import itertools
import math
import os
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from experiments.bench import command
from experiments.bench.generation import agreement, generation_cases, generation_model, random_prompt
from experiments.bench.measure import CLOCKS
from experiments.bench.options import BenchArgumentError
from experiments.bench.outcome import nothing_measured, report_nothing_measured
from experiments.model.compiling import compile_model
from experiments.model.transformer import ModelSpec, Transformer, VariantSpec, count_parameters
from experiments.record.result import environment, write_json_atomic
from experiments.tasks.base import BOS_ID, FIRST_SYMBOL_ID, PAD_ID
from experiments.tasks.batches import IGNORE, lm_io, seq2seq_io
from variants import POSITION

COMPARISONS = ("seq2seq", "decoder", "generation")
# The targets: (comparison, ratio, bound, comparison operator).
TARGETS = (
    ("seq2seq", "attnlab / torch.nn.Transformer", 1.15, "<="),
    ("seq2seq", "attnlab compiled / torch.nn.Transformer", 1.0, "<"),
    ("generation", "recomputed / cached", 5.0, ">="),
)


@dataclass(frozen=True)
class Size:
    batch: int
    length: int
    vocab: int
    d_model: int
    heads: int
    layers: int
    ffn: int


# -- the models ----------------------------------------------------------------------------------------------
def attnlab_seq2seq(size: Size, dropout: float) -> Transformer:
    return Transformer(
        ModelSpec(
            arch="seq2seq",
            vocab_size=size.vocab,
            attention=VariantSpec("multihead", {"num_heads": size.heads}),
            position=VariantSpec("sinusoidal"),
            d_model=size.d_model,
            encoder_layers=size.layers,
            decoder_layers=size.layers,
            ffn_dim=size.ffn,
            dropout=dropout,
        )
    )


class TorchSeq2Seq(nn.Module):
    """``torch.nn.Transformer`` inside the suite's own embedding, sinusoidal encoding and tied output
    projection, so the two models differ only in the encoder-decoder stack."""

    def __init__(self, size: Size, dropout: float) -> None:
        super().__init__()
        d = size.d_model
        self.embedding = nn.Embedding(size.vocab, d, padding_idx=PAD_ID)
        nn.init.normal_(self.embedding.weight, std=d**-0.5)
        self.scale = math.sqrt(d)
        self.position = POSITION.build("sinusoidal", d_model=d)
        self.drop = nn.Dropout(dropout)
        self.transformer = nn.Transformer(
            d_model=d,
            nhead=size.heads,
            num_encoder_layers=size.layers,
            num_decoder_layers=size.layers,
            dim_feedforward=size.ffn,
            dropout=dropout,
            batch_first=True,
        )
        self.lm_head = nn.Linear(d, size.vocab, bias=False)
        self.lm_head.weight = self.embedding.weight
        self._causal: dict[tuple[int, str], Tensor] = {}

    def embed(self, tokens: Tensor) -> Tensor:
        x = self.embedding(tokens) * self.scale  # (B, T, d)
        return self.drop(self.position.embed(x, torch.arange(tokens.shape[1], device=tokens.device)))

    def causal_mask(self, length: int, device: torch.device) -> Tensor:
        # Built once per length, as a user of nn.Transformer would keep it.
        key = (length, str(device))
        if key not in self._causal:
            self._causal[key] = nn.Transformer.generate_square_subsequent_mask(length, device=device)  # (T, T)
        return self._causal[key]

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        src_pad = src.eq(PAD_ID)  # (B, S); decoder inputs are right-padded, so causality alone suffices
        h = self.transformer(
            self.embed(src),
            self.embed(tgt_in),
            tgt_mask=self.causal_mask(tgt_in.shape[1], tgt_in.device),
            tgt_is_causal=True,
            src_key_padding_mask=src_pad,
            memory_key_padding_mask=src_pad,
        )  # (B, T, d)
        return self.lm_head(h)  # (B, T, V)


def attnlab_decoder(size: Size) -> Transformer:
    # Pre-norm and no dropout: the suite's decoder LM recipe (experiment=shakespeare_char), and
    # x-transformers' defaults.
    return Transformer(
        ModelSpec(
            arch="decoder",
            vocab_size=size.vocab,
            attention=VariantSpec("multihead", {"num_heads": size.heads}),
            position=VariantSpec("learned", {"max_len": size.length}),
            d_model=size.d_model,
            decoder_layers=size.layers,
            ffn_dim=size.ffn,
            dropout=0.0,
            norm="pre",
        )
    )


def xtransformers_decoder(size: Size) -> nn.Module:
    from x_transformers import Decoder, TransformerWrapper  # optional: the ``bench`` extra

    # dim_head = d / heads keeps the attention width at d (x-transformers' default head is 64 wide);
    # flash routes attention through scaled_dot_product_attention, the kernel the suite uses.
    return TransformerWrapper(
        num_tokens=size.vocab,
        max_seq_len=size.length,
        tie_embedding=True,
        attn_layers=Decoder(
            dim=size.d_model,
            depth=size.layers,
            heads=size.heads,
            attn_dim_head=size.d_model // size.heads,
            ff_mult=size.ffn / size.d_model,
            attn_flash=True,
        ),
    )


# -- batches -------------------------------------------------------------------------------------------------
Batch = tuple[tuple[Tensor, ...], Tensor]  # (model inputs, targets)


def seq2seq_batches(size: Size, count: int, generator: torch.Generator) -> list[Batch]:
    """Random sentence pairs, right-padded to ``length``, each side 1/2 to all of it long."""

    def side() -> Tensor:
        tokens = torch.randint(FIRST_SYMBOL_ID, size.vocab, (size.batch, size.length), generator=generator)
        lengths = torch.randint(max(1, size.length // 2), size.length + 1, (size.batch, 1), generator=generator)
        return tokens.masked_fill(torch.arange(size.length)[None] >= lengths, PAD_ID)  # (B, T)

    batches = []
    for _ in range(count):
        src, tgt = side(), side()
        tgt_in, targets = seq2seq_io(tgt, BOS_ID, PAD_ID)
        batches.append(((src, tgt_in), targets))
    return batches


def lm_batches(size: Size, count: int, generator: torch.Generator) -> list[Batch]:
    batches = []
    for _ in range(count):
        tokens = torch.randint(FIRST_SYMBOL_ID, size.vocab, (size.batch, size.length + 1), generator=generator)
        inputs, targets = lm_io(tokens)  # (B, T), (B, T)
        batches.append(((inputs,), targets))
    return batches


def to_device(batches: list[Batch], device: torch.device) -> list[Batch]:
    return [(tuple(t.to(device) for t in inputs), targets.to(device)) for inputs, targets in batches]


# -- one training step ---------------------------------------------------------------------------------------
class TrainStep:
    """Forward on the next batch, cross-entropy, backward and an AdamW step: what the training loop does."""

    def __init__(
        self,
        model: nn.Module,
        batches: list[Batch],
        autocast: Callable[[], Any],
        call: Callable[..., Tensor] | None = None,
    ) -> None:
        self.model, self.call = model, (call if call is not None else model)
        self.batches = itertools.cycle(batches)
        self.autocast = autocast
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        self.loss: Tensor | None = None

    def __call__(self) -> None:
        inputs, targets = next(self.batches)
        with self.autocast():
            logits = self.call(*inputs)  # (B, T, V)
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=IGNORE)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        self.loss = loss.detach()  # read once at the end: no device sync inside the timed loop

    @property
    def final_loss(self) -> float:
        return float(self.loss) if self.loss is not None else math.nan


# -- timing --------------------------------------------------------------------------------------------------
def alternate(
    cases: dict[str, Callable[[], Any]], *, warmup: int, repeats: int, inner: int, clock: str, device: torch.device
) -> dict[str, list[float]]:
    """Seconds per call of each case, one sample per round; the cases take turns within each round."""
    tick = CLOCKS[clock]

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for run in cases.values():
        for _ in range(warmup):
            run()
    samples: dict[str, list[float]] = {name: [] for name in cases}
    order = list(cases)
    for round_ in range(repeats):
        for name in order if round_ % 2 == 0 else order[::-1]:
            sync()
            start = tick()
            for _ in range(inner):
                cases[name]()
            sync()
            samples[name].append((tick() - start) / inner)
    return samples


def summarise(samples: list[float]) -> dict[str, Any]:
    ms = [s * 1000 for s in samples]
    return {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms), "rounds": len(ms)}


def profile(name: str, run: Callable[[], Any], rows: int, device: torch.device) -> None:
    """Print the operators that cost most over three calls of ``run`` (after the timed rounds)."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(3):
            run()
    sort = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(f"\n-- profile: {name} (3 calls, sorted by {sort}) --")
    print(prof.key_averages().table(sort_by=sort, row_limit=rows))


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


# -- options -------------------------------------------------------------------------------------------------
def device_options(parser: argparse.ArgumentParser, default_device: str | None) -> None:
    parser.add_argument("--device", default=default_device, help="cpu or cuda")
    parser.add_argument(
        "--bf16",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="CUDA only: run forward passes under torch.autocast(dtype=bfloat16)",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads on CPU (default: torch's)")
    parser.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="wall: elapsed time; cpu: CPU time of this process, steadier on a shared machine",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")


def peers_arguments(parser: argparse.ArgumentParser) -> None:
    device_options(parser, "cpu")
    parser.add_argument(
        "--only", nargs="+", choices=COMPARISONS, default=list(COMPARISONS), help="comparisons to run (default: all)"
    )
    shape = parser.add_argument_group("shape (the issue's: batch 64, length 16, width 64, 4 heads, 2+2 layers)")
    shape.add_argument("--batch", type=int, default=64)
    shape.add_argument("--length", type=int, default=16)
    shape.add_argument("--vocab", type=int, default=1000)
    shape.add_argument("--d-model", type=int, default=64)
    shape.add_argument("--heads", type=int, default=4)
    shape.add_argument("--layers", type=int, default=2, help="layers per stack")
    shape.add_argument("--ffn", type=int, default=256)
    shape.add_argument("--dropout", type=float, default=0.1, help="dropout of the seq2seq comparison")
    timing = parser.add_argument_group("timing")
    timing.add_argument("--warmup", type=int, default=5, help="untimed steps per case (compilation happens here)")
    timing.add_argument("--repeats", type=int, default=15, help="timed rounds per case; the median is reported")
    timing.add_argument("--inner", type=int, default=5, help="steps per timed round")
    timing.add_argument("--batches", type=int, default=8, help="distinct batches, cycled through by every case")
    timing.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time the suite's model through torch.compile",
    )
    timing.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="ROWS",
        help="after timing, print the ROWS costliest operators of each training case",
    )
    gen = parser.add_argument_group("generation")
    gen.add_argument("--gen-tokens", type=int, default=256)
    gen.add_argument("--gen-prompt", type=int, default=16)
    gen.add_argument("--gen-batch", type=int, default=8)
    gen.add_argument("--gen-repeats", type=int, default=5)


def setup_device(args: argparse.Namespace) -> torch.device:
    """Validate the device options, set the threads; ``args.bf16`` becomes a bool."""
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type not in ("cpu", "cuda"):
        raise BenchArgumentError(f"--device={args.device!r} is not allowed; allowed: ['cpu', 'cuda']")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise BenchArgumentError("--device='cuda' is not allowed here; no CUDA device is visible (use cpu)")
    if args.bf16 and device.type != "cuda":
        raise BenchArgumentError("--bf16 is not allowed with --device='cpu'; it needs --device cuda")
    if args.clock == "cpu" and device.type == "cuda":
        raise BenchArgumentError("--clock='cpu' is not allowed with --device='cuda'; GPU work needs 'wall'")
    args.bf16 = bool(args.bf16)
    if args.threads is not None:
        positive_options(args, "threads")
        torch.set_num_threads(args.threads)
    return device


def positive_options(args: argparse.Namespace, *names: str) -> None:
    for name in names:
        value = getattr(args, name)
        if value < 1:
            raise BenchArgumentError(f"--{name.replace('_', '-')}={value} is not allowed; it must be >= 1")


def size_from(args: argparse.Namespace) -> Size:
    positive_options(args, "batch", "length", "d_model", "heads", "layers", "ffn")
    size = Size(args.batch, args.length, args.vocab, args.d_model, args.heads, args.layers, args.ffn)
    if size.d_model % size.heads:
        raise BenchArgumentError(
            f"--heads={size.heads} is not allowed with --d-model={size.d_model}; the heads must divide the width"
        )
    if size.vocab <= FIRST_SYMBOL_ID:
        raise BenchArgumentError(
            f"--vocab={size.vocab} is not allowed; it must be > {FIRST_SYMBOL_ID} (ids below are the specials)"
        )
    return size


def autocast_for(args: argparse.Namespace, device: torch.device) -> Callable[[], Any]:
    if args.bf16:
        return lambda: torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return f"cpu ({torch.get_num_threads()} threads, {os.cpu_count()} cores)"


def load() -> list[float] | None:
    """The 1, 5 and 15 minute load averages: how busy a shared machine was."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


# -- the commands --------------------------------------------------------------------------------------------
@command(
    "peers",
    help="training step and generation speed against torch.nn.Transformer and x-transformers",
    arguments=peers_arguments,
)
def peers(args: argparse.Namespace) -> int:
    device = setup_device(args)
    positive_options(args, "repeats", "inner", "batches", "gen_tokens", "gen_prompt", "gen_batch", "gen_repeats")
    if args.warmup < 0:
        raise BenchArgumentError(f"--warmup={args.warmup} is not allowed; it must be >= 0")
    if not 0 <= args.dropout < 1:
        raise BenchArgumentError(f"--dropout={args.dropout} is not allowed; it must be in [0, 1)")
    size = size_from(args)
    load_before = load()
    results: dict[str, Any] = {}
    failed: str | None = None
    run = {"seq2seq": seq2seq_comparison, "decoder": decoder_comparison, "generation": generation_comparison}

    def report(targets: list[dict[str, Any]] | None) -> dict[str, Any]:
        return {
            "benchmark": "peers",
            "device": describe_device(device),
            "torch": torch.__version__,
            "settings": {
                **{k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in ("command",)},
                "size": asdict(size),
            },
            "load_average": {"before": load_before, "after": load()},
            "comparisons": results,
            "targets": targets,
            "env": environment(describe_device(device)),
            "complete": targets is not None and failed is None,
        }

    for name in COMPARISONS:
        if name in args.only:
            results[name] = run[name](args, size, device)
            print_comparison(name, results[name])
            if args.out is not None:  # as it goes, so an interrupted run keeps what it measured
                write_json_atomic(args.out, report(None))
    targets = check_targets(results)
    print_targets(targets)
    # a comparison that was skipped (its peer not installed) measured nothing
    failed = nothing_measured(
        [{"status": "skipped", "error": r["skipped"]} if "skipped" in r else {"status": "ok"} for r in results.values()]
    )
    if args.out is not None:
        write_json_atomic(args.out, report(targets))
        print(f"wrote {args.out}")
    return 0 if failed is None else report_nothing_measured("peers", failed)


def print_comparison(name: str, result: dict[str, Any]) -> None:
    if "skipped" in result:
        return
    print(f"\n{name}: {result.get('model', '')}")
    for case, row in result["cases"].items():
        extra = f"  params {row['params']:,}  final loss {row['final_loss']:.3f}" if "params" in row else ""
        print(f"  {case:<26} {row['median_ms']:9.2f} ms  (min {row['min_ms']:.2f}, max {row['max_ms']:.2f}){extra}")
    for ratio, value in result["ratios"].items():
        print(f"  {ratio:<50} {value:6.3f}x")
    if "same_tokens" in result:
        print(f"  cached and recomputed tokens agree on {100 * result['same_tokens']:.1f}%")


def print_targets(targets: list[dict[str, Any]]) -> None:
    print("\ntargets:")
    for t in targets:
        shown = "not run" if t["value"] is None else f"{t['value']:.3f}  {'met' if t['met'] else 'MISSED'}"
        print(f"  {t['ratio']:<45} {t['target']:<7} {shown}")
