"""``python -m experiments.diagnostics.plan_table``: the kernel each cell's self attention trains on, on CUDA,
by sequence length: flex, SDPA (the dense bias, or flash without one) or the banded window kernel.

Two presets: ``experiment=quick`` (its sweep's cells, width 64, each type at its group's heads; trained at
lengths up to 13 and evaluated up to 25) and a long-context one (``experiment=efficient_charlm``'s
decoder, width 64 with 4 heads where a type has heads, trained at contexts up to 1024 and read at 2048)
crossed with every encoding that adds a score bias, since charlm's own rope adds none. CUDA is mocked:
only the plan is asked for (``AttentionLayer.plan`` with the call's length), nothing runs.
"""

from __future__ import annotations

import argparse
from unittest import mock

import torch

#: the lengths of the table's columns: the quick grid's, charlm's contexts, the GPU targets'
LENGTHS = (16, 64, 256, 1024, 4096, 16384)
#: (attention, params) of the long-context preset's softmax types (efficient_charlm's decoder attention)
LONG_ATTENTION = (("soft", {}), ("multihead", {"num_heads": 4}), ("local", {"window": 8}))
D_MODEL = 64


def quick_rows() -> list[tuple[str, dict, str]]:
    """(attention, params, position) of ``experiment=quick``'s cells, each type at its group's heads."""
    from experiments.config.roles import attention_defaults
    from experiments.diagnostics.flex_check import quick_cells

    rows = []
    for attention, position in quick_cells():
        params = {k: v for k, v in attention_defaults(attention).items() if k != "name"}
        rows.append((attention, params, position))
    return rows


def long_rows() -> list[tuple[str, dict, str]]:
    from variants import POSITION

    biased = [p for p in POSITION.names() if POSITION.get(p).has_score_bias]
    return [(a, params, p) for a, params in LONG_ATTENTION for p in ["rope", *biased]]


def plan_row(attention: str, params: dict, position: str, lengths: tuple[int, ...]) -> list[str]:
    """The training plan of one cell's self attention at each length (grad on, as in a training step)."""
    from variants import ATTENTION, POSITION
    from variants.pairs import pair_problem

    with mock.patch.object(torch.cuda, "is_available", return_value=True):
        layer = ATTENTION.build(attention, d_model=D_MODEL, **params).train()
    encoding = POSITION.build(position, d_model=D_MODEL, num_heads=layer.num_heads)
    if pair_problem(layer, encoding) is not None:
        return ["—"] * len(lengths)
    return [layer.plan(encoding, cuda=True, keys=T) for T in lengths]


def table(rows: list[tuple[str, dict, str]], lengths: tuple[int, ...] = LENGTHS) -> str:
    """A Markdown table: a row per cell, a column per length."""
    head = ["| cell (head dim) | " + " | ".join(f"T {T}" for T in lengths) + " |", "|---|" + "---|" * len(lengths)]
    lines = []
    for attention, params, position in rows:
        heads = params.get("num_heads") or 1
        label = f"{attention}+{position} ({D_MODEL // heads})"
        lines.append(f"| {label} | " + " | ".join(plan_row(attention, params, position, lengths)) + " |")
    return "\n".join(head + lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.diagnostics.plan_table", description=__doc__)
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS))
    args = parser.parse_args(argv)
    lengths = tuple(args.lengths)
    print("experiment=quick\n\n" + table(quick_rows(), lengths))
    print("long context (efficient_charlm's decoder, each score-bias encoding)\n\n" + table(long_rows(), lengths))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
