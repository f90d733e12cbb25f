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
from experiments.bench.scaling import Shape, make_step

CALLS = ("self", "causal", "cross")


def flex_run(layer, pos, call: str, device: torch.device, dtype: torch.dtype, seed: int = 1) -> list[torch.Tensor]:
    """One call pattern (element 1's last 5 keys padded, except in the causal call): the output and, on
    CUDA, the input's gradient, as fp32."""
    from experiments.kernel_compare import precision

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
    from experiments.kernel_compare import _params, first_line, judge
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
