"""``python -m experiments.diagnostics.device_check.probes OUT``: targeted flex probes on CUDA, one row each,
each failing alone, the JSON rewritten after each (a cut run keeps the rows that finished). Each row says what it
expects; the last rows time the crossovers behind ``variants.flex_cost.FLEX_PAYS``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any, Callable

#: lengths at which flex is timed against the kernel that needs no compile (the cost table's crossovers)
CROSSOVER_LENGTHS = {"score_mod": (256, 512, 1024, 2048, 4096), "window": (128, 256, 512, 1024, 2048)}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m experiments.diagnostics.device_check.probes", description=__doc__)
    parser.add_argument("out", help="the JSON file to write")
    parser.add_argument("--budget", type=float, default=100.0, help="seconds; a probe past it is skipped")
    return parser


def _layer(attention: str, position: str, d: int, heads: int, **params):
    import torch

    from variants import ATTENTION, POSITION

    torch.manual_seed(0)
    device = torch.device("cuda", torch.cuda.current_device())
    layer = ATTENTION.build(attention, d_model=d, num_heads=heads, **params).to(device)
    return layer, POSITION.build(position, d_model=d, num_heads=heads).to(device)


def _step(layer, position, batch: int, T: int, grad: bool = True) -> None:
    import torch

    x = torch.randn(batch, T, layer.d_model, device="cuda", requires_grad=grad)
    with torch.autocast("cuda", dtype=torch.bfloat16), torch.set_grad_enabled(grad):
        y, _ = layer(x, causal=True, position=position)
    if grad:
        y.float().sum().backward()


def fit_start_options() -> str:
    """The options a fit chooses at its start for head dim 64 in bf16, and what the probes cost."""
    import torch

    from variants.flex import choose_kernel_options

    began = time.perf_counter()
    chosen = choose_kernel_options(torch.device("cuda", torch.cuda.current_device()), torch.bfloat16, {64})
    return f"{chosen} in {time.perf_counter() - began:.1f} s"


def fire_eval_with_grad() -> str:
    """eval() with a backward: the plan follows grad mode, so FIRE runs the dense bias and the backward runs."""
    layer, pos = _layer("multihead", "fire", 64, 4)
    layer.eval()
    plan = layer.plan(pos, cuda=True, keys=4096)
    _step(layer, pos, 2, 64)
    return f"plan at 4096 keys with grad: {plan}; backward ran"


def inference_mask_then_train() -> str:
    import torch

    from variants import flex

    layer, pos = _layer("multihead", "alibi", 256, 4, backend="flex")
    with torch.inference_mode():
        _step(layer.eval(), pos, 2, 300, grad=False)
    _step(layer.train(), pos, 2, 300)
    return f"block masks built {flex.BLOCK_MASKS.builds}"


def compiled_model_varying_lengths() -> str:
    """model.compile=true on a quick-like flex cell, lengths as a fit meets them: graphs and breaks."""
    import torch
    from torch._dynamo.utils import counters

    from experiments.diagnostics.flex_check import _tiny_model
    from variants import flex

    torch._dynamo.reset()
    device = torch.device("cuda", torch.cuda.current_device())
    _, model = _tiny_model("local", "relative", device, backend="flex", num_heads=1, window=8)
    model.train()
    flex.choose_kernel_options(device, torch.bfloat16, model.flex_head_dims(cuda=True))
    model.compile()
    before, began = counters["stats"].get("unique_graphs", 0), time.perf_counter()
    for S in (12, 12, 11, 12, 10, 13):
        src = torch.randint(4, 32, (32, S), device=device)
        tgt = torch.randint(4, 32, (32, S + 1), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            model(src, tgt).float().logsumexp(-1).mean().backward()
    graphs = counters["stats"].get("unique_graphs", 0) - before
    breaks = sum(counters["graph_break"].values())
    return f"{graphs} graphs, {breaks} graph breaks, {time.perf_counter() - began:.0f} s for 6 steps"


def crossover(family: str) -> str:
    """Forward + backward ms of flex against the compile-free kernel by length (bf16, B 4, 16 heads of 64):
    soft + ALiBi against SDPA's dense bias, or local (window 256) against the banded kernel."""
    import torch

    from experiments.bench.measure import side_by_side
    from experiments.bench.point import Shape, make_step

    device = torch.device("cuda", torch.cuda.current_device())
    shape = Shape(1024, 16, 4, True, device, torch.bfloat16, "wall")
    attention, position, other, params = {
        "score_mod": ("multihead", "alibi", "sdpa", {}),
        "window": ("local", "none", "banded", {"window": 256, "mode": "monotonic"}),
    }[family]
    cells = []
    for T in CROSSOVER_LENGTHS[family]:
        steps = {b: make_step(attention, position, b, T, shape, params, {})[0] for b in ("flex", other)}
        for step in steps.values():
            step()  # compiles outside the timing
        got = side_by_side(steps, device, warmup=1, rounds=5, clock="wall")
        flex_ms, other_ms = got["flex"].ms, got[other].ms
        ratio = f"{other_ms / flex_ms:.2f}x" if flex_ms and other_ms else "n/a"
        cells.append(f"T {T}: flex {flex_ms} ms, {other} {other_ms} ms ({ratio})")
    return "; ".join(cells)


PROBES: list[tuple[str, str, Callable[[], str]]] = [
    ("fit-start-options", "ok: forward defaults, backward bwd_num_stages=2 on Hopper", fit_start_options),
    ("fire-eval-with-grad", "ok: sdpa, backward ran (the hole is closed)", fire_eval_with_grad),
    ("inference-mask-then-train", "ok", inference_mask_then_train),
    ("model-compile-flex-varying-lengths", "ok, one graph set per length bucket", compiled_model_varying_lengths),
    ("crossover-score-mod", "info: where flex beats the dense bias", lambda: crossover("score_mod")),
    ("crossover-window", "info: where flex beats the banded kernel", lambda: crossover("window")),
]


def main(argv: list[str] | None = None) -> int:
    import torch

    args = build_parser().parse_args(argv)
    began, rows = time.monotonic(), []
    for name, expect, probe in PROBES:
        row: dict[str, Any] = {"case": name, "expect": expect}
        if time.monotonic() - began > args.budget:
            rows.append({**row, "status": "skipped (budget)"})
            continue
        start = time.perf_counter()
        try:
            row.update(status="ok", detail=probe())
        except Exception as err:  # noqa: BLE001 - a probe that raises fails alone, by name
            lines = [line.strip() for line in str(err).splitlines() if line.strip()]
            row.update(status="raised", detail=f"{type(err).__name__}: {' | '.join(lines[:3])[:500]}")
        row["seconds"] = round(time.perf_counter() - start, 1)
        rows.append(row)
        print(f"[probe] {name}: {row['status']} (expect {expect}) {row.get('detail', '')}", flush=True)
        with open(args.out + ".tmp", "w") as f:
            json.dump(rows, f, indent=1)
        os.replace(args.out + ".tmp", args.out)
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
