"""``loop``: attnlab's whole training loop against a hand-written torch loop, as ratios measured in one process.

    python -m experiments.bench loop                          # the shakespeare_char preset, 2,000 steps
    python -m experiments.bench loop --steps 240 --val-every 120 --max-step-ratio 1.10   # the CI check

attnlab's side is the real entry (``experiments.run``, what ``python -m experiments.train`` runs) on
``experiment=shakespeare_char``: the Lightning module, its callbacks, loggers (CSV and offline W&B),
checkpoints, validation, the test phase and result files. The plain side (``_loop_plain.py``) trains the
same ``Transformer`` on the same text with the same optimiser and schedule, nanoGPT's way. The two take
turns in blocks of ``--block`` steps (``_loop_probe.py``), one intra-op thread each by default, so a
machine that slows down meanwhile slows both; each side's step is the median over its blocks, the first
block of each left out (warm-up). Times are elapsed (``--clock wall``) or the process's CPU time
(``--clock cpu``: what a loaded machine disturbs least; W&B's service process is not in it). Reported as
attnlab / plain:
- step: median milliseconds per training step (every hook, log line, data fetch and checkpoint inside);
- evaluation: median seconds of a validation during training, against the plain loop's on the same windows;
- start-up: from the call to the first step (config, data, model, loggers, Trainer), against the plain
  loop's data, model and optimiser;
- test phase: from the fit's end to the result (final validation, test, attention statistics and maps,
  result files), against the plain loop's final validation and held-out loss at every test context;
- whole run: start to result, without the other side's turns.
``--max-step-ratio R`` makes the command exit 1 when the step ratio exceeds R; ``--attempts N`` measures
again (a new run beside a new plain loop) while it does, and exits 1 only when all N attempts exceed R: a
change that slows the step fails every attempt, while a loaded machine's noise (docs/benchmarks.md) seldom
puts two in a row above R. The text is ``--data``
(tiny Shakespeare beside the repository, ``../shared/data/tinyshakespeare/input.txt``); without that file
a generated corpus of the same alphabet size stands in, so the check never needs ``../shared``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any, cast

from experiments.bench.registry import BENCHMARKS

# beside the repository, where the bench runs from (as conf/experiment/shakespeare_char.yaml is given it)
SHAKESPEARE = Path("../shared/data/tinyshakespeare/input.txt")


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=SHAKESPEARE, help="a UTF-8 text file (absent: generated)")
    parser.add_argument("--steps", type=int, default=None, help="training steps (default: the preset's 2,000)")
    parser.add_argument("--block", type=int, default=25, help="steps per turn of each loop")
    parser.add_argument("--val-every", type=int, default=None, help="steps between validations (default: preset's)")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads, both loops")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="wall: elapsed time; cpu: the process's CPU time, far steadier while other jobs share the cores",
    )
    parser.add_argument("--max-step-ratio", type=float, default=None, help="exit 1 above this step ratio")
    parser.add_argument(
        "--attempts",
        type=int,
        default=1,
        help="with --max-step-ratio: measure again while above it, this many times in all; exit 1 if every one is",
    )
    parser.add_argument(
        "--aa",
        action="store_true",
        help="two identical plain loops take turns instead: the step ratio's noise floor on this machine",
    )
    parser.add_argument("--work", type=Path, default=None, help="folder for attnlab's run (default: a temporary one)")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    parser.add_argument("overrides", nargs="*", help="more overrides for attnlab's run (and the plain model)")


def generated_corpus(path: Path, characters: int = 400_000, seed: int = 0) -> Path:
    """A text of ``characters`` from a seeded generator: words of 65 symbols' alphabet in lines, so the
    model, vocabulary and step cost match tiny Shakespeare's without the file."""
    import numpy as np

    rng = np.random.default_rng(seed)
    alphabet = np.array(list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!$&',-.3:;?"))
    words = ["".join(rng.choice(alphabet, size=rng.integers(1, 9))) for _ in range(3000)]
    text, size = [], 0
    while size < characters:
        line = " ".join(rng.choice(words, size=rng.integers(3, 12)))
        text.append(line)
        size += len(line) + 1
    path.write_text("\n".join(text)[:characters], encoding="utf-8")
    return path


def _median_after_first(values: list[float]) -> float | None:
    """The median without the first value (warm-up), when there are at least two."""
    kept = values[1:] if len(values) > 1 else values
    return statistics.median(kept) if kept else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _check(args: argparse.Namespace) -> None:
    for name in ("block", "val_every", "attempts"):  # --steps and --threads: experiments.bench.check_arguments
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')}={value} is not allowed; it must be >= 1")
    if args.aa and args.max_step_ratio is not None:
        raise ValueError(
            "--max-step-ratio is not allowed with --aa: two identical loops have no step to hold to a limit"
        )
    if args.aa and args.val_every is not None:
        raise ValueError("--val-every is not allowed with --aa: the two plain loops only take training turns")
    if args.max_step_ratio is not None and not args.max_step_ratio > 0:
        raise ValueError(f"--max-step-ratio={args.max_step_ratio} is not allowed; it must be > 0")


@BENCHMARKS.register(
    "loop", help="attnlab's whole training loop against a plain torch loop, ratios in one process", arguments=arguments
)
def loop(args: argparse.Namespace) -> int:
    _check(args)
    os.environ.setdefault("WANDB_MODE", "offline")  # the preset's W&B logger, never the network
    os.environ.setdefault("WANDB_SILENT", "true")
    import torch

    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    if cuda and not torch.cuda.is_available():
        raise ValueError("--device=cuda is not allowed here; torch sees no CUDA device (choose auto or cpu)")
    torch.set_num_threads(args.threads)
    attempts = []
    with tempfile.TemporaryDirectory(prefix="bench_loop_") as scratch:
        data = args.data if args.data.is_file() else generated_corpus(Path(scratch) / "corpus.txt")
        if args.aa:
            noise = measure_noise(args, data, (args.work or Path(scratch)) / "aa", cuda)
            _print_noise(noise)
            if args.out:
                args.out.write_text(json.dumps(noise, indent=2) + "\n")
            return 0
        for attempt in range(args.attempts):
            figures = measure_once(args, data, (args.work or Path(scratch)) / f"attempt{attempt + 1}", cuda)
            if figures is None:
                return 1
            attempts.append(figures)
            _print(figures)
            if args.max_step_ratio is None or _within(figures, args.max_step_ratio):
                break
            print(f"attempt {attempt + 1}: the step ratio is above {args.max_step_ratio}", file=sys.stderr)
    if args.out:
        args.out.write_text(json.dumps(attempts[-1] if len(attempts) == 1 else attempts, indent=2) + "\n")
    if args.max_step_ratio is not None and not _within(attempts[-1], args.max_step_ratio):
        ratios = ", ".join(_num(f["ratios"]["step"], 0, 3) for f in attempts)
        print(
            f"FAIL: attnlab's step is {ratios}x the plain loop's in {len(attempts)} attempt(s) "
            f"(allowed: {args.max_step_ratio}x)",
            file=sys.stderr,
        )
        return 1
    return 0


def _within(figures: dict[str, Any], limit: float) -> bool:
    ratio = figures["ratios"]["step"]
    return ratio is not None and ratio <= limit


def _overrides(args: argparse.Namespace, data: Path, cuda: bool) -> list[str]:
    """The preset's command line with the bench's data, threads, device and budget."""
    return [
        "experiment=shakespeare_char",
        f"task.path={data}",
        f"num_threads={args.threads}",
        *(["trainer=gpu"] if cuda else []),
        *([f"trainer.max_steps={args.steps}"] if args.steps else []),
        *([f"trainer.val_check_interval={args.val_every}"] if args.val_every else []),
        *args.overrides,
    ]


def _plain_loops(
    args: argparse.Namespace, data: Path, work: Path, cuda: bool, count: int = 1
) -> tuple[list[Any], Any, list[str]]:
    """``count`` plain loops of the preset's run (the same model spec, text, windows, optimiser and seed, each
    with a model of its own), the composed config and the run's overrides; composed and read once."""
    import torch
    from omegaconf import OmegaConf

    from experiments.app import api
    from experiments.bench._loop_plain import PlainLoop
    from experiments.bench.measure import CLOCKS
    from experiments.config.schema import OptimConf
    from experiments.config.spec import build_spec
    from experiments.training import build

    overrides = _overrides(args, data, cuda)
    cfg = api.compose(overrides)
    spec = build_spec(cfg)  # the roles expanded in ``cfg`` too
    work.mkdir(parents=True, exist_ok=True)
    datamodule = build.build_datamodule(spec, work)
    optim = cast(OptimConf, OmegaConf.to_object(cfg.optim))  # the schema's node (experiments/config/schema.py)
    model_spec = build.model_spec(spec, datamodule)
    loops = [
        PlainLoop(
            Path(data),
            model_spec,
            optim,
            context=cfg.task.context,
            batch_size=cfg.task.batch_size,
            val_fraction=cfg.task.val_fraction,
            val_windows=cfg.task.val_windows,
            test_windows=cfg.task.get("test_windows"),
            eval_contexts=list(cfg.task.eval_contexts),
            max_steps=cfg.trainer.max_steps,
            device=torch.device("cuda" if cuda else "cpu"),
            seed=cfg.seed,
            clock=CLOCKS[args.clock],
        )
        for _ in range(count)
    ]
    return loops, cfg, overrides


def _setup(args: argparse.Namespace, cuda: bool, steps: int) -> dict[str, Any]:
    return {
        "device": "cuda" if cuda else "cpu",
        "clock": args.clock,
        "threads": args.threads,
        "steps": steps,
        "block": args.block,
        "data": str(args.data) if args.data.is_file() else "generated",
        "load_average": os.getloadavg(),
    }


def measure_once(args: argparse.Namespace, data: Path, work: Path, cuda: bool) -> dict[str, Any] | None:
    """One attnlab run beside one plain loop, taking turns; their figures (None: attnlab's run failed)."""
    from experiments.app import api
    from experiments.bench import _loop_probe
    from experiments.bench.measure import CLOCKS

    (plain,), cfg, overrides = _plain_loops(args, data, work, cuda)
    _loop_probe.PLAIN = plain
    probe = [
        f"+callbacks.loop_probe._target_={_loop_probe.LoopProbe.__module__}.{_loop_probe.LoopProbe.__qualname__}",
        f"+callbacks.loop_probe.block={args.block}",
    ]
    began = CLOCKS[args.clock]()
    result = api.run(overrides + probe, run_dir=work / "attnlab")
    ended = CLOCKS[args.clock]()
    _loop_probe.PLAIN = None
    plain_metrics = plain.finish()
    if result.get("status") != "completed":
        print(f"attnlab's run did not complete: {result.get('status')} {result.get('error')}", file=sys.stderr)
        return None
    figures = _figures(_loop_probe.LAST, plain, began, ended, cfg.trainer.max_steps)
    figures["val_loss"] = {"attnlab": result["metrics"].get("val/loss"), "plain": plain_metrics["val/loss"]}
    figures["setup"] = _setup(args, cuda, cfg.trainer.max_steps)
    return figures


def measure_noise(args: argparse.Namespace, data: Path, work: Path, cuda: bool) -> dict[str, Any]:
    """Two identical plain loops (one spec, text and seed) taking turns as attnlab's run and the plain loop do,
    the first always before the second: the step ratio when the two sides differ in nothing, which is the noise
    floor (and any first-mover bias) of the bench's ``ratios.step`` on this machine."""
    (first, second), cfg, _ = _plain_loops(args, data, work, cuda, count=2)
    figures = noise_figures(first, second, cfg.trainer.max_steps, args.block)
    figures["setup"] = _setup(args, cuda, cfg.trainer.max_steps)
    return figures


def noise_figures(first: Any, second: Any, steps: int, block: int) -> dict[str, Any]:
    """``steps`` steps of each loop in turns of ``block`` (a last part-block left out, as the bench's plain loop
    runs whole blocks only); each side's step is the median of its blocks after the first, as in ``_figures``."""
    for _ in range(max(steps // block, 1)):
        first.block(block)
        second.block(block)
    a, b = first.times.steps_ms, second.times.steps_ms
    step = {"first": _median_after_first(a), "second": _median_after_first(b)}
    return {
        "step_ms": step,
        "blocks": len(a),
        "block_step_ms": {"first": a, "second": b},
        "paired_step_ratio": _paired_spread(a, b),
        "ratios": {"step": _ratio(step["first"], step["second"])},
    }


def _paired_spread(a: list[float], b: list[float]) -> dict[str, float | None]:
    """Median, least and largest of the block-by-block ratios a / b, the first (warm-up) pair left out: how much
    one pair of turns varies on this machine."""
    paired = [x / y for x, y in zip(a[1:], b[1:])]
    return {
        "median": statistics.median(paired) if paired else None,
        "min": min(paired) if paired else None,
        "max": max(paired) if paired else None,
    }


def _figures(fit: Any, plain: Any, began: float, ended: float, steps: int) -> dict[str, Any]:
    """Seconds and milliseconds of each phase on both sides, and their ratios (attnlab / plain)."""
    step = {"attnlab": _median_after_first(fit.steps_ms), "plain": _median_after_first(plain.times.steps_ms)}
    evaluation = {"attnlab": _median_after_first(fit.evals), "plain": _median_after_first(plain.times.evals)}
    startup = {"attnlab": fit.first_step - began, "plain": plain.times.startup}
    test = {"attnlab": ended - fit.train_end, "plain": plain.times.final}
    # the plain loop runs whole blocks only (none after the fit's last boundary): its training time is its mean
    # step over the fit's number of steps, and it evaluates as often as the fit validated
    plain_train = statistics.fmean(plain.times.steps_ms) * steps / 1000 if plain.times.steps_ms else 0.0
    plain_whole = plain.times.startup + plain_train + sum(plain.times.evals) + plain.times.final
    whole = {"attnlab": ended - began - fit.plain_seconds, "plain": plain_whole}
    return {
        "step_ms": step,
        "evaluation_s": evaluation,
        "startup_s": startup,
        "test_phase_s": test,
        "whole_run_s": whole,
        "blocks": {"attnlab": len(fit.steps_ms), "plain": len(plain.times.steps_ms)},
        "block_step_ms": {"attnlab": fit.steps_ms, "plain": plain.times.steps_ms},
        # the spread of block-by-block ratios: how much one pair of turns varies on this machine
        "paired_step_ratio": _paired_spread(fit.steps_ms, plain.times.steps_ms),
        "ratios": {
            "step": _ratio(step["attnlab"], step["plain"]),
            "evaluation": _ratio(evaluation["attnlab"], evaluation["plain"]),
            "startup": _ratio(startup["attnlab"], startup["plain"]),
            "test_phase": _ratio(test["attnlab"], test["plain"]),
            "whole_run": _ratio(whole["attnlab"], whole["plain"]),
        },
    }


def _print(figures: dict[str, Any]) -> None:
    setup = figures["setup"]
    print(f"loop bench: {_setup_text(setup)}")
    rows = [
        ("step (ms)", figures["step_ms"], "step"),
        ("evaluation (s)", figures["evaluation_s"], "evaluation"),
        ("start-up (s)", figures["startup_s"], "startup"),
        ("test phase (s)", figures["test_phase_s"], "test_phase"),
        ("whole run (s)", figures["whole_run_s"], "whole_run"),
    ]
    print(f"{'':16} {'attnlab':>10} {'plain':>10} {'ratio':>8}")
    for name, pair, key in rows:
        ratio = figures["ratios"][key]
        print(f"{name:16} {_num(pair['attnlab'])} {_num(pair['plain'])} {_num(ratio, 8, 3)}")
    print(_spread_text(figures["paired_step_ratio"], figures["blocks"]["plain"]))
    loss = figures["val_loss"]
    print(f"validation loss: attnlab {_num(loss['attnlab'], 0, 4)}, plain {_num(loss['plain'], 0, 4)}")


def _print_noise(figures: dict[str, Any]) -> None:
    step = figures["step_ms"]
    print(f"loop bench, A/A: two identical plain loops taking turns, {_setup_text(figures['setup'])}")
    print(f"{'':16} {'first':>10} {'second':>10} {'ratio':>8}")
    print(f"{'step (ms)':16} {_num(step['first'])} {_num(step['second'])} {_num(figures['ratios']['step'], 8, 3)}")
    print(_spread_text(figures["paired_step_ratio"], figures["blocks"]))


def _setup_text(setup: dict[str, Any]) -> str:
    return (
        f"{setup['steps']} steps on {setup['device']}, {setup['threads']} thread(s), {setup['clock']} clock, "
        f"blocks of {setup['block']}, data {setup['data']}, "
        f"load average {' '.join(f'{v:.2f}' for v in setup['load_average'])}"
    )


def _spread_text(spread: dict[str, float | None], blocks: int) -> str:
    return (
        f"step ratio of paired blocks: median {_num(spread['median'], 0, 3)}, "
        f"range {_num(spread['min'], 0, 3)}-{_num(spread['max'], 0, 3)} over {blocks} blocks"
    )


def _num(value: float | None, width: int = 10, digits: int = 2) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.{digits}f}"
