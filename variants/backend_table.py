"""Which backend each (attention, position) pair runs on, on CPU and on CUDA, from the registries.

    python -m variants.backend_table

prints the Markdown table docs/variants.md holds (a test keeps the two equal). Each type is built at its
defaults with ``backend=auto`` in training mode, and asked (``AttentionLayer.plan``) what a call with
each encoding would run; nothing here names a type or an encoding. On CUDA the plan also depends on
the head width (flex's kernel needs 16 columns), so the table shows both where they differ.
"""

from __future__ import annotations

from unittest import mock

import torch

from variants.checks import VariantConfigError
from variants.flex import MIN_CUDA_HEAD_DIM
from variants.pairs import pair_problem
from variants.registries import ATTENTION, POSITION

D_MODEL = 64
#: the CUDA column is planned at each type's default heads and again at these head widths, so a
#: cell shows where the head width decides (flex's CUDA kernel needs 16, ``MIN_CUDA_HEAD_DIM``)
HEAD_DIMS = (8, MIN_CUDA_HEAD_DIM)


def _layer(attention: str, cuda: bool, num_heads: int | None = None):
    # ``auto`` settles part of its choice at construction from the device torch reports.
    with mock.patch.object(torch.cuda, "is_available", return_value=cuda):
        return ATTENTION.build(attention, d_model=D_MODEL, num_heads=num_heads).train()


def _cuda_plans(attention: str, position: str) -> dict[int, str]:
    """The CUDA plan of the pair at each head width the type can be built with: {head dim: backend}."""
    plans = {}
    for head_dim in HEAD_DIMS:
        try:
            layer = _layer(attention, True, D_MODEL // head_dim)
        except VariantConfigError:
            continue  # a type that fixes its heads
        encoding = POSITION.build(position, d_model=D_MODEL, num_heads=layer.num_heads)
        plans[head_dim] = layer.plan(encoding, cuda=True)
    return plans


def backend_table() -> str:
    """A Markdown table: a row per attention type, a column per encoding, cells ``CPU / CUDA``.

    The default CUDA plan is shown; where a narrower head changes it the cell adds
    ``(head dim < 16: ...)``."""
    positions = POSITION.names()
    lines = ["| attention | " + " | ".join(f"`{p}`" for p in positions) + " |", "|---|" + "---|" * len(positions)]
    for attention in ATTENTION.names():
        cpu, cuda = _layer(attention, False), _layer(attention, True)
        cells = []
        for position in positions:
            encoding = POSITION.build(position, d_model=D_MODEL, num_heads=cpu.num_heads)
            if pair_problem(cpu, encoding) is not None:
                cells.append("—")
                continue
            on_cpu, on_cuda = cpu.plan(encoding, cuda=False), cuda.plan(encoding, cuda=True)
            plans = _cuda_plans(attention, position)
            wide = plans.get(MIN_CUDA_HEAD_DIM, on_cuda)
            narrow = plans.get(min(HEAD_DIMS), wide)
            if cuda.head_dim < MIN_CUDA_HEAD_DIM:
                on_cuda = wide  # the default heads are narrow: the cell leads with the plan of wide heads
            cell = on_cpu if on_cpu == on_cuda else f"{on_cpu} / {on_cuda}"
            if narrow != wide:
                cell += f" (head dim < {MIN_CUDA_HEAD_DIM}: {narrow})"
            cells.append(cell)
        lines.append(f"| `{attention}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(backend_table(), end="")
