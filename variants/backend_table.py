"""Which backend each (attention, position) pair runs on, on CPU and on CUDA, from the registries.

    python -m variants.backend_table

prints the Markdown table the README holds (a test keeps the two equal). Each type is built at its
defaults with ``backend=auto`` in training mode, and asked (``AttentionLayer.plan``) what a call with
each encoding would run; nothing here names a type or an encoding.
"""

from __future__ import annotations

from unittest import mock

import torch

from variants.pairs import pair_problem
from variants.registries import ATTENTION, POSITION

D_MODEL = 64


def _layer(attention: str, cuda: bool):
    # ``auto`` settles part of its choice at construction from the device torch reports.
    with mock.patch.object(torch.cuda, "is_available", return_value=cuda):
        return ATTENTION.build(attention, d_model=D_MODEL).train()


def backend_table() -> str:
    """A Markdown table: a row per attention type, a column per encoding, cells ``CPU / CUDA``."""
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
            cells.append(on_cpu if on_cpu == on_cuda else f"{on_cpu} / {on_cuda}")
        lines.append(f"| `{attention}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(backend_table(), end="")
