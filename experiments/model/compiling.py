"""``model.compile=true``: the model through ``torch.compile``, set up the same way for training and benchmarks."""

from __future__ import annotations

from torch import nn

# Dynamo's own timers of compiling: capturing and compiling a forward graph, and the backward
# graph that AOT autograd compiles lazily on its first use.
_COMPILE_TIMERS = ("_compile.compile_inner", "backward._backward_impl")


def compile_model(model: nn.Module, device_type: str, mode: str = "default") -> None:
    """Compile ``model`` in place (``nn.Module.compile``); its ``forward`` is then the compiled one.

    On CPU, dropout's random numbers come from ATen's generator
    (``torch._inductor.config.fallback_random``): Inductor's own generator cost more
    than fusion saved in ``python -m experiments.bench peers``. ``mode`` is torch.compile's
    (``model.compile_mode``): ``reduce-overhead`` replays CUDA graphs, which is what lets a small
    model's step stop paying one kernel launch per operation; ``max-autotune`` also searches
    matmul kernels (minutes of compiling). The model's ReLU and
    dropout take their bool-free compiled forms (``experiments.model.elementwise``).
    """
    if device_type == "cpu":
        import torch._inductor.config as inductor_config

        inductor_config.fallback_random = True
    model.compile(mode=None if mode == "default" else mode)


def compile_seconds_so_far() -> float | None:
    """Seconds ``torch.compile`` has spent compiling in this process (None where torch keeps no such timers)."""
    try:
        from torch._dynamo.utils import compilation_time_metrics
    except ImportError:
        return None
    return float(sum(sum(compilation_time_metrics.get(name, [])) for name in _COMPILE_TIMERS))


def compiled_since(before: float | None) -> float | None:
    """Seconds of compiling since ``compile_seconds_so_far()`` returned ``before``."""
    now = compile_seconds_so_far()
    return None if before is None or now is None else now - before
