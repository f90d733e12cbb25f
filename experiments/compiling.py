"""``model.compile=true``: the model through ``torch.compile``, set up the same way for training and benchmarks."""
from __future__ import annotations

from torch import nn


def compile_model(model: nn.Module, device_type: str) -> None:
    """Compile ``model`` in place (``nn.Module.compile``); its ``forward`` is then the compiled one.

    On CPU, dropout's random numbers come from ATen's generator
    (``torch._inductor.config.fallback_random``): Inductor's own generator cost more
    than fusion saved in ``python -m experiments.bench peers``. The model's ReLU and
    dropout take their bool-free compiled forms (``experiments.elementwise``).
    """
    if device_type == "cpu":
        import torch._inductor.config as inductor_config

        inductor_config.fallback_random = True
    model.compile()
