"""The FlexAttention part of ``python -m experiments.gpu_check``: every pair on ``flex`` against the math
path, and one timing row per encoding family.

- ``flex_cases``: every type with a flex backend (each of its variations that accepts flex) x every
  encoding variation x self / causal / cross call (keys padded), on ``backend='flex'`` against the
  fp32 math path, under ``gpu_check``'s tolerances: outputs and input gradients on CUDA (TF32 off
  for fp32; bf16 under autocast), outputs only on CPU, where flex has no backward. A pair without a
  flex form (an additive score, Shaw's value term) runs its fallback and is compared all the same.
- ``flex_timings``: per encoding with a score bias, and for the window, forward + backward of
  multihead (or local) on flex against SDPA (the dense bias; flash where there is none), timed side
  by side.
"""

from __future__ import annotations

from typing import Any

import torch

from experiments.bench.measure import side_by_side
from experiments.bench.point import Shape, make_step

CALLS = ("self", "causal", "cross")


def flex_run(layer, pos, call: str, device: torch.device, dtype: torch.dtype, seed: int = 1) -> list[torch.Tensor]:
    """One call pattern (element 1's last 5 keys padded, except in the causal call): the output and, on
    CUDA, the input's gradient, as fp32."""
    from experiments.diagnostics.kernel_compare import precision

    gen = torch.Generator().manual_seed(seed)
    B, T, S, D = 2, 150, 140, layer.w_q.in_features  # past one 128-row block, so block skipping shows
    grads = device.type == "cuda"
    x = torch.randn(B, T, D, generator=gen).to(device).requires_grad_(grads)
    memory = torch.randn(B, S, D, generator=gen).to(device)
    pad = torch.zeros(B, S if call == "cross" else T, dtype=torch.bool, device=device)
    if call != "causal":
        pad[1, -5:] = True
    with precision(device, dtype), torch.set_grad_enabled(grads):
        if call == "cross":
            out, _ = layer(x, memory, key_padding_mask=pad, position=pos)
        else:
            out, _ = layer(x, causal=call == "causal", key_padding_mask=pad if pad.any() else None, position=pos)
    if not grads:
        return [out.detach().float()]
    (out.float() * torch.randn(out.shape, generator=gen).to(device)).sum().backward()
    return [out.detach().float(), x.grad.float()]


def flex_cases(device: torch.device, dtype: torch.dtype, d_model: int = 64, heads: int = 4) -> dict[str, Any]:
    """Every flex pair against the fp32 math path: counts, failures, the largest error."""
    from experiments.diagnostics.kernel_compare import _params, first_line, judge
    from variants import ATTENTION, POSITION
    from variants.checks import VariantConfigError

    found: dict[str, Any] = {"counts": {"pass": 0, "fail": 0}, "failures": [], "worst": {}}
    previous_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference must be fp32
    try:
        for attention in [n for n in ATTENTION.names() if "flex" in ATTENTION.get(n).backends]:
            extra = {"window": 24} if "window" in ATTENTION.accepted_params(attention) else {}
            for a_params in ATTENTION.variations(attention):
                torch.manual_seed(0)
                try:
                    fast = ATTENTION.build(
                        attention, d_model=d_model, num_heads=heads, backend="flex", **a_params, **extra
                    )
                except VariantConfigError:  # e.g. predictive local: no flex form, refused by its own check
                    continue
                math = ATTENTION.build(attention, d_model=d_model, num_heads=heads, backend="math", **a_params, **extra)
                fast.load_state_dict(math.state_dict())
                math, fast = math.to(device).eval(), fast.to(device).eval()
                for position in POSITION.names():
                    for p_params in POSITION.variations(position):
                        torch.manual_seed(0)
                        pos = POSITION.build(position, d_model=d_model, num_heads=heads, **p_params).to(device)
                        for call in CALLS:
                            case = f"{attention}{_params(a_params)}+{position}{_params(p_params)}/{call}/flex"
                            try:
                                reference = flex_run(math, pos, call, device, torch.float32)
                                math_low = None if dtype == torch.float32 else flex_run(math, pos, call, device, dtype)
                                got = flex_run(fast, pos, call, device, dtype)
                            except Exception as err:  # noqa: BLE001 - a case that raises fails alone, by name
                                found["counts"]["fail"] += 1
                                found["failures"].append(f"{case}: raised {first_line(err)}")
                                continue
                            judge(found, case, got, reference, dtype, math_low)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous_tf32
    return found


def flex_timings(
    device: torch.device,
    dtype: torch.dtype,
    *,
    T: int = 2048,
    d_model: int = 1024,
    heads: int = 16,
    batch: int = 4,
    window: int = 256,
    rounds: int = 10,
) -> list[dict[str, Any]]:
    """One row per encoding family with a score_mod, and one for the window: flex ms, SDPA ms, their ratio."""
    from variants import ATTENTION, POSITION

    shape = Shape(d_model, heads, batch, True, device, dtype, "wall")
    rows = []
    families = [p for p in POSITION.names() if POSITION.build(p, d_model=d_model, num_heads=heads).has_score_mod]
    cases = [("multihead", p, {}) for p in families] + [("local", "none", {"window": window, "mode": "monotonic"})]
    for attention, position, params in cases:
        baseline = "banded" if "banded" in ATTENTION.get(attention).backends else "sdpa"
        steps = {b: make_step(attention, position, b, T, shape, params, {})[0] for b in ("flex", baseline)}
        for step in steps.values():
            step()  # compile and autotune outside the timing
        got = side_by_side(steps, device, warmup=1, rounds=rounds, clock="wall")
        flex, other = got["flex"], got[baseline]
        rows.append(
            {
                "family": f"{attention}+{position}",
                "T": T,
                "flex_ms": flex.ms,
                "baseline": baseline,
                "baseline_ms": other.ms,
                "flex_peak_mb": flex.peak_mb,
                "baseline_peak_mb": other.peak_mb,
                "speedup": None if not flex.ms or other.ms is None else other.ms / flex.ms,
                "status": flex.status if flex.status != "ok" else other.status,
            }
        )
    return rows


# -- the flex probe: python -m experiments.flex_check ------------------------------------------------------
#: lengths of the compile-count check: within two length buckets (variants.flex.bucket_length)
PROBE_LENGTHS = (9, 24, 60, 100, 130, 200)
#: compiles the compile-count check allows: one per (mask_mod, score_mod) signature of a seq2seq model
#: (encoder self, causal decoder self, cross) per grad mode, per length bucket
PROBE_SIGNATURES = 3


def quick_cells() -> list[tuple[str, str]]:
    """The (attention, position) cells of ``experiment=quick``, read from its sweep."""
    from pathlib import Path

    from omegaconf import OmegaConf

    params = OmegaConf.load(Path(__file__).resolve().parents[2] / "conf/experiment/quick.yaml").hydra.sweeper.params
    return [(a, p) for a in str(params.attention).split(",") for p in str(params.position).split(",")]


def _tiny_model(attention: str, position: str, device: torch.device, backend: str = "auto", **params):
    from experiments.config.roles import attention_defaults
    from experiments.model.transformer import ModelSpec, Transformer, VariantSpec

    defaults = {k: v for k, v in attention_defaults(attention).items() if k != "name"}
    spec = ModelSpec(
        arch="seq2seq",
        vocab_size=32,
        attention=VariantSpec(attention, {**defaults, **params}),
        position=VariantSpec(position),
        d_model=64,
        ffn_dim=128,
        encoder_layers=1,
        decoder_layers=1,
        dropout=0.0,
        backend=backend,
    )
    torch.manual_seed(0)
    return spec, Transformer(spec).to(device)


def _batch(spec, B: int, T: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.randint(4, spec.vocab_size, (B, T), device=device)
    src[1, T // 2 :] = spec.pad_id  # padding reaches the encoder and cross-attention masks
    return src, torch.randint(4, spec.vocab_size, (B, T + 1), device=device)


def _train_step(model, spec, device: torch.device, T: int) -> float:
    from variants.flex import choose_kernel_options

    dims = model.flex_head_dims(cuda=True)
    if dims:
        choose_kernel_options(device, torch.bfloat16, dims)  # as TransformerModule.on_fit_start does
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.train()
    src, tgt = _batch(spec, 4, T, device)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(src, tgt).float().logsumexp(-1).mean()
    loss.backward()
    optimiser.step()
    return float(loss)


def probe_plans(device: torch.device, deadline: float) -> list[dict[str, Any]]:
    """Every quick-grid cell as its plan says: one training step at T 150, a validation under inference_mode,
    one more training step (a validation mask must not reach it)."""
    import time

    rows = []
    for attention, position in quick_cells():
        row: dict[str, Any] = {"cell": f"{attention}+{position}"}
        if time.monotonic() > deadline:
            rows.append({**row, "status": "skipped (budget)"})
            continue
        try:
            spec, model = _tiny_model(attention, position, device)
            row["kernels"] = sorted(set(model.kernel_plan(cuda=True).values()))
            _train_step(model, spec, device, 150)
            model.eval()
            with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
                model(*_batch(spec, 4, 150, device))
            row["loss"] = _train_step(model, spec, device, 150)
            row["status"] = "ok"
        except Exception as err:  # noqa: BLE001 - one cell's failure is reported, the rest still run
            row["status"] = f"failed: {type(err).__name__}: {(str(err).splitlines() or [''])[0][:160]}"
        rows.append(row)
    return rows


def probe_compiles(device: torch.device) -> dict[str, Any]:
    """Dynamo compiles of multihead (2 heads of 32) + T5 on flex over what a Lightning fit does: at each
    length a training step (grad on), then validation under inference_mode (grad off), and a generation:
    within PROBE_SIGNATURES x grad modes x length buckets, and within flex's RECOMPILE_BUDGET."""
    from torch._dynamo.utils import counters

    from variants.flex import GRAD_MODES, RECOMPILE_BUDGET, bucket_length

    spec, model = _tiny_model("multihead", "t5", device, backend="flex", num_heads=2)
    before = counters["stats"]["unique_graphs"]
    for T in PROBE_LENGTHS:
        _train_step(model, spec, device, T)
        model.eval()
        with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
            model(*_batch(spec, 4, T, device))
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        model.generate(torch.full((4, 1), spec.bos_id, device=device), 6, src=_batch(spec, 4, 12, device)[0])
    buckets = len({bucket_length(T + extra) for T in PROBE_LENGTHS for extra in (0, 1)})
    # + the generation's calls, which differ from the fit's (no grad, one step over the cache): at most
    # PROBE_SIGNATURES; + the kernel-option probes of the first training step (forward, backward)
    bound = min(PROBE_SIGNATURES * (GRAD_MODES * buckets + 1) + 2, RECOMPILE_BUDGET)
    compiles = counters["stats"]["unique_graphs"] - before
    return {"compiles": compiles, "bound": bound, "status": "ok" if compiles <= bound else "over the bound"}


def probe_options(device: torch.device) -> dict[str, Any]:
    """The kernel options chosen for head dim 64 in bf16, and a training step of a model at that width."""
    from variants.flex import choose_kernel_options

    chosen = choose_kernel_options(device, torch.bfloat16, {64})
    spec, model = _tiny_model("multihead", "alibi", device, backend="flex", num_heads=1)
    loss = _train_step(model, spec, device, 300)
    return {**{k: str(v) for k, v in chosen.items()}, "train_step_loss": loss, "status": "ok"}


def build_parser():
    """The command line of ``python -m experiments.flex_check`` (a dry run of the device check parses with it)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m experiments.flex_check", description=main.__doc__)
    parser.add_argument("--budget", type=float, default=300.0, help="seconds for the quick-grid cells")
    parser.add_argument("--out", default=None, help="also write the results here as JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the three checks on CUDA, each failing alone, and print a one-screen summary (JSON with --out)."""
    import json
    import time

    args = build_parser().parse_args(argv)
    if not torch.cuda.is_available():
        print("flex_check: no CUDA device visible; the probe checks CUDA only")
        return 2
    device = torch.device("cuda", torch.cuda.current_device())
    started = time.monotonic()
    results: dict[str, Any] = {"device": torch.cuda.get_device_name(device), "torch": torch.__version__}
    for name, check in (
        ("options", lambda: probe_options(device)),
        ("compiles", lambda: probe_compiles(device)),
        ("plans", lambda: probe_plans(device, started + args.budget)),
    ):
        try:
            results[name] = check()
        except Exception as err:  # noqa: BLE001 - a failed check is reported; the others still run
            results[name] = {"status": f"failed: {type(err).__name__}: {(str(err).splitlines() or [''])[0][:200]}"}
    results["seconds"] = round(time.monotonic() - started, 1)
    print(f"flex_check on {results['device']} (torch {results['torch']}), {results['seconds']} s")
    print(f"options  {json.dumps(results['options'])}")
    print(f"compiles {json.dumps(results['compiles'])}")
    plans = results["plans"]
    for row in plans if isinstance(plans, list) else [plans]:
        print(f"  {row.get('cell', 'plans'):24} {row['status']:10} {', '.join(row.get('kernels', []))}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1, default=str)
    failed = [k for k in ("options", "compiles") if results[k].get("status") != "ok"]
    failed += (
        [r["cell"] for r in plans if isinstance(plans, list) and r["status"] != "ok"]
        if isinstance(plans, list)
        else ["plans"]
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
