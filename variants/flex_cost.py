"""Where flex pays: the compiled FlexAttention kernel against the kernel that needs no compile.

A layer that *can* run on flex (``AttentionLayer.flex_problem`` is None) runs there only where the
one table below expects it to beat the path that needs no compile: SDPA with the dense
(1, H, Tq, Tk) bias for a global layer's score bias, the banded kernel for local attention's window.
Flex costs a compile per call signature (tens of seconds on a GPU, minutes on a small CPU) and
nothing per step; the dense bias costs O(T^2) memory traffic per step and no compile; the banded
kernel costs a host read and about ten small kernels per block of queries per step.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

#: the two places flex competes, and the kernel each falls back to below its threshold
FAMILIES = {"score_mod": "sdpa", "window": "banded"}


@dataclass(frozen=True)
class Crossover:
    """Flex from ``min_keys`` keys (the longer of a call's query and key lengths) and heads of at least
    ``min_head_dim`` columns; below either, ``against``."""

    min_keys: int
    min_head_dim: int

    def describe(self, family: str, dtype: str) -> str:
        return (
            f"flex pays from {self.min_keys} keys and head dim {self.min_head_dim} in {dtype} "
            f"(variants.flex_cost.FLEX_PAYS[{family!r}][{dtype!r}]), {FAMILIES[family]} below"
        )


# The one table. Figures it comes from (one H200, torch 2.11, bf16, B 4, 16 heads of 64, forward +
# backward; ../shared/gpu/README.md and issue #47):
# - T <= 64 (experiment=quick): a flex cell spent 60-170 s compiling before its first step against
#   about 2.4 s of training for 100 steps (24 ms/step); the dense bias there is at most 64 x 64 per head.
# - T = 4096: flex with an ALiBi score_mod ran at 0.64x causal flash's speed, SDPA with the dense ALiBi
#   bias at 0.13x: flex 4.9x faster per step.
# - T = 16384, window 256 / 64: flex's window kernel at 0.14x causal flash's time, the banded kernel at
#   161 ms against flash's 1.8 ms (89x): flex hundreds of times faster.
# - head dim 64 is the only width measured; below 16 Inductor's CUDA kernel does not build at all.
# Between T 64 and 4096 nothing is measured: the score_mod threshold sits where a (1, 16, T, T) bf16
# bias reaches 32 MB (T 1024), the window's where the banded kernel splits a call into more than
# two blocks of its default 64 queries and flex's block mask skips a first block (2 x 128 keys).
# ``python -m experiments.device_check A`` measures both crossovers (its ``crossover`` group); a pass
# that does replaces these rows with what it measured.
FLEX_PAYS: dict[str, dict[str, Crossover]] = {
    "score_mod": {
        "bfloat16": Crossover(min_keys=1024, min_head_dim=16),
        "float16": Crossover(min_keys=1024, min_head_dim=16),
        "float32": Crossover(min_keys=1024, min_head_dim=16),
    },
    "window": {
        "bfloat16": Crossover(min_keys=256, min_head_dim=16),
        "float16": Crossover(min_keys=256, min_head_dim=16),
        "float32": Crossover(min_keys=256, min_head_dim=16),
    },
}

#: the dtype a plan made before any call assumes: what ``trainer=gpu`` trains in (bf16 autocast)
PLANNING_DTYPE = torch.bfloat16


def crossover(family: str, dtype: torch.dtype | None) -> tuple[Crossover, str]:
    """The row of ``FLEX_PAYS`` for ``family`` and ``dtype`` (``PLANNING_DTYPE`` when None), and its dtype name."""
    if family not in FLEX_PAYS:
        raise ValueError(f"flex cost family={family!r} is unknown; choose one of {sorted(FLEX_PAYS)}")
    name = str(dtype or PLANNING_DTYPE).removeprefix("torch.")
    rows = FLEX_PAYS[family]
    if name not in rows:
        raise ValueError(f"no flex cost row for dtype={name!r} in FLEX_PAYS[{family!r}]; rows: {sorted(rows)}")
    return rows[name], name


def flex_loses(family: str, *, keys: int | None, head_dim: int, dtype: torch.dtype | None) -> str | None:
    """Why flex is not expected to pay for a call of ``keys`` keys (None: the whole run, whose length is not
    known, so only the head width decides), or None where it is."""
    row, name = crossover(family, dtype)
    if head_dim < row.min_head_dim:
        return f"head dim {head_dim} < {row.min_head_dim}: {row.describe(family, name)}"
    if keys is not None and keys < row.min_keys:
        return f"{keys} keys < {row.min_keys}: {row.describe(family, name)}"
    return None
