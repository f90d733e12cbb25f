"""ReLU and dropout for the model, with a compiled form that keeps no boolean tensors.

Eagerly these are ``F.relu`` and ``F.dropout``. Under ``torch.compile`` (Inductor,
CPU) the stock forms save boolean masks between the forward and the backward
pass: ``relu``'s backward becomes ``grad * (out > 0)`` and the partitioner moves the
comparison into the forward and saves its bool result; ``native_dropout`` returns
a bool mask. Inductor's vectorised C++ writes and reads bool tensors through a
slow generic path (storing ``x <= 0`` ran 23x slower compiled than eagerly; the
snippet is in docs/reference_runs.md), and the compiled training step of the
benchmark's seq2seq model was slower than the eager one. The compiled forms below compute
the same functions with float tensors only:

- ReLU's backward multiplies by ``sign(out)``, which for ``out >= 0`` is the 0/1
  indicator; what is saved is float;
- dropout keeps the elements where ``rand > p``, with the float mask
  ``clamp_min(sign(rand - p), 0)``.

``python -m experiments.bench peers`` measures the compiled step (docs/benchmarks.md, Compiled training).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from variants.checks import probability


class _ReLUSavingOutput(torch.autograd.Function):
    """max(x, 0), whose backward reads the (float) output instead of a saved bool mask."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        out = x.clamp_min(0)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        (out,) = ctx.saved_tensors
        return grad * torch.sign(out)  # sign(out) is 1 where x > 0 and 0 elsewhere, since out >= 0


def relu(x: Tensor) -> Tensor:
    if torch.compiler.is_compiling():
        return _ReLUSavingOutput.apply(x)
    return F.relu(x)


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    if not training or p == 0.0:
        return x
    if torch.compiler.is_compiling():
        # 1 where rand > p, else 0, with no comparison node: the partitioner would save a comparison's
        # bool output for the backward pass, and Inductor handles bool tensors slowly.
        keep = torch.sign(torch.rand_like(x) - p).clamp_min(0)  # float 0/1
        return x * keep * (1.0 / (1.0 - p))
    return F.dropout(x, p, training=True)


class ReLU(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return relu(x)


class Dropout(nn.Module):
    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = probability("dropout", p)

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
