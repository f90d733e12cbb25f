"""One point of a layer benchmark: an attention layer with its position encoding, forward + backward at
one length, built for a ``Shape`` and timed by ``experiments.bench.measure``."""

from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import Any, Callable

import torch

from experiments.bench.measure import Measurement, is_out_of_memory, measure
from variants import ATTENTION, POSITION
from variants.kernels import xformers_available


@dataclass(frozen=True)
class Shape:
    d_model: int
    heads: int | None  # None: the attention type's own default, at most 4
    batch: int
    causal: bool
    device: torch.device
    dtype: torch.dtype
    clock: str = "wall"


def heads_for(attention: str, heads: int | None) -> int:
    return heads if heads is not None else min(ATTENTION.get(attention).default_heads, 4)


def backends_for(attention: str, wanted: list[str], device: torch.device) -> list[str]:
    """The backends of ``wanted`` that ``attention`` has and this device can run, ``all`` meaning every one."""
    supported = [b for b in ATTENTION.get(attention).backends if b != "auto"]
    chosen = supported if "all" in wanted else [b for b in wanted if b in supported or b == "auto"]
    runnable = [b for b in chosen if b != "xformers" or (device.type == "cuda" and xformers_available())]
    # scaling times forward + backward, and FlexAttention's backward has no CPU kernel (its forward on the CPU
    # is measured by `bench flex-memory`)
    runnable = [b for b in runnable if b != "flex" or device.type == "cuda"]
    return list(dict.fromkeys(runnable))


def only_accepted(registry, name: str, params: dict[str, Any]) -> dict[str, Any]:
    accepted = registry.accepted_params(name)
    return {k: v for k, v in params.items() if k in accepted}


def make_step(
    attention: str,
    position: str,
    backend: str,
    T: int,
    shape: Shape,
    attention_params: dict[str, Any],
    position_params: dict[str, Any],
    *,
    seed: int = 0,
) -> tuple[Callable[[], None], str]:
    """A closure running one forward + backward pass of the layer at length T, and the resolved backend."""
    torch.manual_seed(seed)
    heads = heads_for(attention, shape.heads)
    layer = ATTENTION.build(
        attention,
        d_model=shape.d_model,
        num_heads=heads,
        backend=backend,
        **only_accepted(ATTENTION, attention, attention_params),
    )
    pos_params = only_accepted(POSITION, position, position_params)
    if "max_len" in POSITION.accepted_params(position):
        pos_params.setdefault("max_len", T)
    pos = POSITION.build(position, d_model=shape.d_model, num_heads=heads, **pos_params)
    layer.to(shape.device, shape.dtype).train()
    pos.to(shape.device, shape.dtype)
    x = torch.randn(shape.batch, T, shape.d_model, device=shape.device, dtype=shape.dtype, requires_grad=True)
    grad = torch.randn_like(x)
    positions = torch.arange(T, device=shape.device)

    def step() -> None:
        layer.zero_grad(set_to_none=True)
        pos.zero_grad(set_to_none=True)
        x.grad = None
        out, _ = layer(pos.embed(x, positions), causal=shape.causal, position=pos)  # (B, T, d_model)
        out.backward(grad)

    return step, layer.backend


def measure_point(
    attention: str,
    position: str,
    backend: str,
    T: int,
    shape: Shape,
    attention_params: dict[str, Any],
    position_params: dict[str, Any],
    *,
    warmup: int,
    repeats: int,
    max_seconds: float,
) -> tuple[Measurement, str]:
    try:
        step, resolved = make_step(attention, position, backend, T, shape, attention_params, position_params)
    except Exception as err:  # noqa: BLE001  (e.g. out of memory while allocating the inputs)
        status = "oom" if is_out_of_memory(err) else "error"
        return Measurement(status=status, error=f"{type(err).__name__}: {err}"), backend
    result = measure(step, shape.device, warmup=warmup, repeats=repeats, max_seconds=max_seconds, clock=shape.clock)
    del step
    gc.collect()
    return result, resolved
